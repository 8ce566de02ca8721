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

// The tables above as lookup arrays, indexed [from][to]; states past the
// last known one are never valid.
var (
	replicaValid   [8][8]bool
	partitionValid [8][8]bool
)

func init() {
	for to, froms := range replicaPrev {
		for _, from := range froms {
			replicaValid[from][to] = true
		}
	}
	for to, froms := range partitionPrev {
		for _, from := range froms {
			partitionValid[from][to] = true
		}
	}
}

// ValidReplicaTransition reports whether a replica may move from one state
// to another.
func ValidReplicaTransition(from, to rl.ReplicaState) bool {
	return int(from) < len(replicaValid) && int(to) < len(replicaValid) && replicaValid[from][to]
}

// ValidPartitionTransition reports whether a partition may move from one
// state to another.
func ValidPartitionTransition(from, to rl.PartitionState) bool {
	return int(from) < len(partitionValid) && int(to) < len(partitionValid) && partitionValid[from][to]
}
