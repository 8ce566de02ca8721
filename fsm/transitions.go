package fsm

import (
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// replicaPrev lists, for each target replica state, the states it may be
// entered from (docs/statemachines.md, replica states, says what each
// transition does).
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
// be entered from (docs/statemachines.md, partition states).
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

// Replica state lists of up to sharedStatesMax replicas are shared: a
// partition's list is never changed in place, so every partition whose
// replicas are in the same states can hold the same slice. That spares an
// allocation per replica state change, and the garbage collector a small
// object per partition.
const sharedStatesMax = 4

// sharedStateLists[n] holds every list of n states, indexed by the states
// read as digits of base numReplicaStates (first state least significant).
var sharedStateLists [sharedStatesMax + 1][][]rl.ReplicaState

var (
	numReplicaStates = len(rl.AllReplicaStates())
	noStates         = []rl.ReplicaState{}
)

func init() {
	n := numReplicaStates
	for size := 1; size <= sharedStatesMax; size++ {
		count := 1
		for i := 0; i < size; i++ {
			count *= n
		}
		backing := make([]rl.ReplicaState, count*size)
		lists := make([][]rl.ReplicaState, count)
		for key := range lists {
			l := backing[key*size : (key+1)*size : (key+1)*size]
			for i, k := 0, key; i < size; i, k = i+1, k/n {
				l[i] = rl.ReplicaState(k % n)
			}
			lists[key] = l
		}
		sharedStateLists[size] = lists
	}
}

// sharedStates returns a list equal to s that the caller may keep: the
// shared one if there is one, else a copy of s.
func sharedStates(s []rl.ReplicaState) []rl.ReplicaState {
	if len(s) == 0 {
		return noStates
	}
	if len(s) > sharedStatesMax {
		return append([]rl.ReplicaState(nil), s...)
	}
	n := numReplicaStates
	key := 0
	for i := len(s) - 1; i >= 0; i-- {
		if int(s[i]) >= n {
			return append([]rl.ReplicaState(nil), s...)
		}
		key = key*n + int(s[i])
	}
	return sharedStateLists[len(s)][key]
}
