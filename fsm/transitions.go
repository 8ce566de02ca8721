package fsm

import (
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// replicaPrev lists, for each target replica state, the states it may be
// entered from (DESIGN §4).
var replicaPrev = map[rl.ReplicaState][]rl.ReplicaState{
	rl.NewReplica:                {rl.NonExistentReplica},
	rl.OnlineReplica:             {rl.NewReplica, rl.OnlineReplica, rl.OfflineReplica, rl.ReplicaDeletionIneligible},
	rl.OfflineReplica:            {rl.NewReplica, rl.OnlineReplica, rl.OfflineReplica, rl.ReplicaDeletionIneligible},
	rl.ReplicaDeletionStarted:    {rl.OfflineReplica},
	rl.ReplicaDeletionSuccessful: {rl.ReplicaDeletionStarted},
	rl.ReplicaDeletionIneligible: {rl.OfflineReplica, rl.ReplicaDeletionStarted},
	rl.NonExistentReplica:        {rl.ReplicaDeletionSuccessful},
}

// partitionPrev lists, for each target partition state, the states it may
// be entered from (DESIGN §5).
var partitionPrev = map[rl.PartitionState][]rl.PartitionState{
	rl.NewPartition:         {rl.NonExistentPartition},
	rl.OnlinePartition:      {rl.NewPartition, rl.OnlinePartition, rl.OfflinePartition},
	rl.OfflinePartition:     {rl.NewPartition, rl.OnlinePartition, rl.OfflinePartition},
	rl.NonExistentPartition: {rl.OfflinePartition},
}

// ValidReplicaTransition reports whether a replica may move from one state
// to another.
func ValidReplicaTransition(from, to rl.ReplicaState) bool {
	for _, s := range replicaPrev[to] {
		if s == from {
			return true
		}
	}
	return false
}

// ValidPartitionTransition reports whether a partition may move from one
// state to another.
func ValidPartitionTransition(from, to rl.PartitionState) bool {
	for _, s := range partitionPrev[to] {
		if s == from {
			return true
		}
	}
	return false
}
