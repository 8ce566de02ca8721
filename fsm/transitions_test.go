package fsm

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// The replica and partition transition tables (docs/statemachines.md,
// replica states and partition states), written out again here as the
// pairs that are allowed, so a mistake in transitions.go cannot hide
// behind itself.
var allowedReplica = map[string]bool{
	"NonExistentReplica>NewReplica":                    true,
	"NewReplica>OnlineReplica":                         true,
	"OnlineReplica>OnlineReplica":                      true,
	"OfflineReplica>OnlineReplica":                     true,
	"ReplicaDeletionIneligible>OnlineReplica":          true,
	"NewReplica>OfflineReplica":                        true,
	"OnlineReplica>OfflineReplica":                     true,
	"OfflineReplica>OfflineReplica":                    true,
	"ReplicaDeletionIneligible>OfflineReplica":         true,
	"OfflineReplica>ReplicaDeletionStarted":            true,
	"ReplicaDeletionStarted>ReplicaDeletionSuccessful": true,
	"OfflineReplica>ReplicaDeletionIneligible":         true,
	"ReplicaDeletionStarted>ReplicaDeletionIneligible": true,
	"ReplicaDeletionSuccessful>NonExistentReplica":     true,
}

var allowedPartition = map[string]bool{
	"NonExistentPartition>NewPartition":     true,
	"NewPartition>OnlinePartition":          true,
	"OnlinePartition>OnlinePartition":       true,
	"OfflinePartition>OnlinePartition":      true,
	"NewPartition>OfflinePartition":         true,
	"OnlinePartition>OfflinePartition":      true,
	"OfflinePartition>OfflinePartition":     true,
	"OfflinePartition>NonExistentPartition": true,
}

// replicaPath is a valid way from NonExistentReplica to each state.
var replicaPath = map[rl.ReplicaState][]rl.ReplicaState{
	rl.NonExistentReplica:        nil,
	rl.NewReplica:                {rl.NewReplica},
	rl.OnlineReplica:             {rl.NewReplica, rl.OnlineReplica},
	rl.OfflineReplica:            {rl.NewReplica, rl.OfflineReplica},
	rl.ReplicaDeletionStarted:    {rl.NewReplica, rl.OfflineReplica, rl.ReplicaDeletionStarted},
	rl.ReplicaDeletionSuccessful: {rl.NewReplica, rl.OfflineReplica, rl.ReplicaDeletionStarted, rl.ReplicaDeletionSuccessful},
	rl.ReplicaDeletionIneligible: {rl.NewReplica, rl.OfflineReplica, rl.ReplicaDeletionIneligible},
}

func TestReplicaTransitionsAll49(t *testing.T) {
	for _, from := range rl.AllReplicaStates() {
		for _, to := range rl.AllReplicaStates() {
			name := fmt.Sprintf("%s>%s", from, to)
			t.Run(name, func(t *testing.T) {
				want := allowedReplica[name]
				if got := ValidReplicaTransition(from, to); got != want {
					t.Fatalf("ValidReplicaTransition = %v, want %v", got, want)
				}
				// And through the FSM: broker 2's replica of a partition
				// of replicas [1 2 3] led by broker 1, with nothing but a
				// NewReplica record in between for the fresh partition.
				tf := newTestFSM(t)
				id := topicID(7)
				tf.mustCommit(&rl.Topic{TopicID: id, Name: "x"}, &rl.Partition{TopicID: id, Replicas: []int32{1, 2, 3}})
				ref := []rl.ReplicaRef{{Partition: 0, Broker: 2}}
				for _, s := range replicaPath[from] {
					tf.mustCommit(&rl.ReplicaStateChange{TopicID: id, State: s, Replicas: ref})
				}
				before, _ := tf.StateHash()
				res := tf.commit(&rl.ReplicaStateChange{TopicID: id, State: to, Replicas: ref})
				after, _ := tf.StateHash()
				if want {
					if err := res.Err(); err != nil {
						t.Fatalf("valid transition rejected: %v", err)
					}
					p := tf.partition(id, 0)
					if got := p.ReplicaState(2); got != to {
						t.Fatalf("state = %s, want %s", got, to)
					}
					if to == rl.NonExistentReplica && slices.Index(p.Replicas, 2) >= 0 {
						t.Fatalf("NonExistentReplica left broker 2 in the assignment %v", p.Replicas)
					}
					return
				}
				if !errors.Is(res.Err(), ErrInvalidTransition) {
					t.Fatalf("invalid transition: err = %v, want ErrInvalidTransition", res.Err())
				}
				if before != after {
					t.Fatal("a rejected record changed the image")
				}
			})
		}
	}
}

// partitionPath drives partition 0 of a fresh topic to a state.
func partitionPath(tf *testFSM, id rl.TopicID, s rl.PartitionState) {
	ps := func(st rl.PartitionState) {
		tf.mustCommit(&rl.PartitionStateChange{TopicID: id, State: st, Partitions: []int32{0}})
	}
	tf.mustCommit(&rl.Partition{TopicID: id, Replicas: []int32{1}})
	switch s {
	case rl.OnlinePartition:
		ps(rl.OnlinePartition)
	case rl.OfflinePartition:
		ps(rl.OfflinePartition)
	case rl.NonExistentPartition:
		ps(rl.OfflinePartition)
		ps(rl.NonExistentPartition)
	}
}

func TestPartitionTransitionsAll16(t *testing.T) {
	for _, from := range rl.AllPartitionStates() {
		for _, to := range rl.AllPartitionStates() {
			name := fmt.Sprintf("%s>%s", from, to)
			t.Run(name, func(t *testing.T) {
				want := allowedPartition[name]
				if got := ValidPartitionTransition(from, to); got != want {
					t.Fatalf("ValidPartitionTransition = %v, want %v", got, want)
				}
				tf := newTestFSM(t)
				id := topicID(3)
				tf.mustCommit(&rl.Topic{TopicID: id, Name: "p"})
				if from == rl.NonExistentPartition && to == rl.NewPartition {
					// Entering NewPartition is what a Partition record does.
					tf.mustCommit(&rl.Partition{TopicID: id, Replicas: []int32{1}})
					if got := tf.partition(id, 0).State; got != rl.NewPartition {
						t.Fatalf("state = %s", got)
					}
					return
				}
				partitionPath(tf, id, from)
				before, _ := tf.StateHash()
				res := tf.commit(&rl.PartitionStateChange{TopicID: id, State: to, Partitions: []int32{0}})
				after, _ := tf.StateHash()
				if want {
					if err := res.Err(); err != nil {
						t.Fatalf("valid transition rejected: %v", err)
					}
					var exists bool
					var n int
					tf.View(func(im *Image) { exists = im.Partition(id, 0) != nil; n = im.NumPartitions() })
					if to == rl.NonExistentPartition {
						if exists || n != 0 {
							t.Fatalf("NonExistentPartition left the partition (exists=%v, count=%d)", exists, n)
						}
					} else if got := tf.partition(id, 0).State; got != to {
						t.Fatalf("state = %s, want %s", got, to)
					}
					return
				}
				if res.Err() == nil {
					t.Fatal("invalid transition accepted")
				}
				if from == rl.NonExistentPartition {
					if !errors.Is(res.Err(), ErrUnknownPartition) {
						t.Fatalf("err = %v, want ErrUnknownPartition", res.Err())
					}
				} else if !errors.Is(res.Err(), ErrInvalidTransition) {
					t.Fatalf("err = %v, want ErrInvalidTransition", res.Err())
				}
				if before != after {
					t.Fatal("a rejected record changed the image")
				}
			})
		}
	}
}

func TestLeaderCannotBecomeNewOrNonExistent(t *testing.T) {
	tf := newTestFSM(t)
	id := tf.seed(3, 1, 2, 3)
	res := tf.commit(&rl.ReplicaStateChange{TopicID: id, State: rl.OfflineReplica, Replicas: []rl.ReplicaRef{{Broker: 1}}})
	if res.Err() != nil {
		t.Fatal(res.Err())
	}
	for _, s := range []rl.ReplicaState{rl.ReplicaDeletionStarted, rl.ReplicaDeletionSuccessful} {
		tf.mustCommit(&rl.ReplicaStateChange{TopicID: id, State: s, Replicas: []rl.ReplicaRef{{Broker: 1}}})
	}
	// Broker 1 still leads: it may not leave the image.
	if err := tf.commit(&rl.ReplicaStateChange{TopicID: id, State: rl.NonExistentReplica, Replicas: []rl.ReplicaRef{{Broker: 1}}}).Err(); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("err = %v", err)
	}
}

func TestReplicaOutsideAssignmentIsRefused(t *testing.T) {
	tf := newTestFSM(t)
	id := tf.seed(4, 1, 2, 3)
	err := tf.commit(&rl.ReplicaStateChange{TopicID: id, State: rl.NewReplica, Replicas: []rl.ReplicaRef{{Broker: 4}}}).Err()
	if !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("err = %v", err)
	}
}

func TestRecordIsAllOrNothing(t *testing.T) {
	tf := newTestFSM(t)
	id := tf.seed(3, 1, 2, 3)
	before, _ := tf.StateHash()
	// Broker 2's replica may go offline, broker 3's may not be deleted
	// while online: neither changes.
	err := tf.commit(&rl.ReplicaStateChange{TopicID: id, State: rl.OfflineReplica,
		Replicas: []rl.ReplicaRef{{Broker: 2}, {Broker: 9}}}).Err()
	if err == nil {
		t.Fatal("record with an unknown replica accepted")
	}
	after, _ := tf.StateHash()
	if before != after {
		t.Fatal("half a record was applied")
	}
}

func TestSharedStatesEqualTheirInput(t *testing.T) {
	all := rl.AllReplicaStates()
	for size := 0; size <= sharedStatesMax+1; size++ {
		s := make([]rl.ReplicaState, size)
		for k := 0; k < 500; k++ {
			for i := range s {
				s[i] = all[(k*7+i*3+k/(i+1))%len(all)]
			}
			got := sharedStates(s)
			if len(got) != len(s) || got == nil {
				t.Fatalf("sharedStates(%v) = %v", s, got)
			}
			for i := range s {
				if got[i] != s[i] {
					t.Fatalf("sharedStates(%v) = %v", s, got)
				}
			}
			if size <= sharedStatesMax && cap(got) != len(got) {
				t.Fatalf("shared list %v has room to grow into its neighbour", got)
			}
		}
	}
	// A state past the known ones is copied, not looked up.
	odd := []rl.ReplicaState{1, 200}
	if got := sharedStates(odd); got[1] != 200 || &got[0] == &odd[0] {
		t.Fatalf("sharedStates(%v) = %v", odd, got)
	}
}
