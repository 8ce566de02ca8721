package fsm

import (
	"slices"
	"testing"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// TestStateChangesOfAnEntry checks the transitions an FSM with a history
// reports: from-states read before each record, to-states after, a
// rejected record's left out, and the controller that wrote each entry.
func TestStateChangesOfAnEntry(t *testing.T) {
	var got []EntryChanges
	tf := &testFSM{t: t}
	tf.FSM = New(Options{Halt: func(err error) { t.Fatal(err) }, OnStateChanges: func(e EntryChanges) { got = append(got, e) }})
	tf.mustCommit(&rl.ControllerEpoch{Epoch: 1, NodeID: 1002})
	id := tf.seed(3, 1, 2, 3)
	got = nil

	res := tf.commit(
		&rl.FenceBroker{BrokerID: 1, BrokerEpoch: 2},
		&rl.PartitionChange{TopicID: id, Partition: 0, PartitionEpoch: 1, Set: rl.ChangeLeader | rl.ChangeISR, Leader: 2, ISR: []int32{2, 3}},
		&rl.ReplicaStateChange{TopicID: id, State: rl.OfflineReplica, Replicas: []rl.ReplicaRef{{Partition: 0, Broker: 1}}},
		// Rejected: OnlineReplica cannot become ReplicaDeletionSuccessful.
		&rl.ReplicaStateChange{TopicID: id, State: rl.ReplicaDeletionSuccessful, Replicas: []rl.ReplicaRef{{Partition: 0, Broker: 2}}},
	)
	if len(res.Rejected) != 1 || res.Rejected[0].Record != 3 {
		t.Fatalf("rejections %+v, want record 3 only", res.Rejected)
	}
	if len(got) != 1 {
		t.Fatalf("%d entries reported, want 1", len(got))
	}
	e := got[0]
	if e.Index != tf.index || e.Term != 1 || e.ControllerEpoch != 1 || e.ControllerNode != 1002 {
		t.Fatalf("entry header %+v", e)
	}
	var lines []string
	for _, ch := range e.Changes {
		lines = append(lines, ch.Describe())
	}
	want := []string{
		"broker 1 fenced",
		"partition t-0: OnlinePartition -> OnlinePartition leader 1 -> 2 leader_epoch 1 -> 2 isr [1,2,3] -> [2,3]",
		"replica t-0 on broker 1: OnlineReplica -> OfflineReplica",
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("changes:\n%q\nwant:\n%q", lines, want)
	}
}

// TestStateChangesOfATopicsLife follows a topic from creation to removal.
func TestStateChangesOfATopicsLife(t *testing.T) {
	var lines []string
	tf := &testFSM{t: t}
	tf.FSM = New(Options{Halt: func(err error) { t.Fatal(err) }, OnStateChanges: func(e EntryChanges) {
		for _, ch := range e.Changes {
			lines = append(lines, ch.Describe())
		}
	}})
	id := tf.seed(1, 1)
	ref := []rl.ReplicaRef{{Partition: 0, Broker: 1}}
	tf.mustCommit(&rl.BeginDeleteTopic{TopicID: id},
		&rl.PartitionChange{TopicID: id, Partition: 0, PartitionEpoch: 1, Set: rl.ChangeLeader, Leader: rl.NoLeader},
		&rl.PartitionStateChange{TopicID: id, State: rl.OfflinePartition, Partitions: []int32{0}},
		&rl.ReplicaStateChange{TopicID: id, State: rl.OfflineReplica, Replicas: ref},
		&rl.ReplicaStateChange{TopicID: id, State: rl.ReplicaDeletionStarted, Replicas: ref})
	tf.mustCommit(&rl.ReplicaStateChange{TopicID: id, State: rl.ReplicaDeletionSuccessful, Replicas: ref},
		&rl.ReplicaStateChange{TopicID: id, State: rl.NonExistentReplica, Replicas: ref},
		&rl.PartitionStateChange{TopicID: id, State: rl.NonExistentPartition, Partitions: []int32{0}},
		&rl.RemoveTopic{TopicID: id})
	want := []string{
		"broker 1 registered",
		"broker 1 unfenced",
		"topic t created",
		"partition t-0: NonExistentPartition -> NewPartition leader -1 -> -1 leader_epoch 0 -> 0 isr []",
		"replica t-0 on broker 1: NonExistentReplica -> NewReplica",
		"partition t-0: NewPartition -> NewPartition leader -1 -> 1 leader_epoch 0 -> 1 isr [] -> [1]",
		"partition t-0: NewPartition -> OnlinePartition leader 1 -> 1 leader_epoch 1 -> 1 isr [1]",
		"replica t-0 on broker 1: NewReplica -> OnlineReplica",
		"topic t deleting",
		"partition t-0: OnlinePartition -> OnlinePartition leader 1 -> -1 leader_epoch 1 -> 2 isr [1]",
		"partition t-0: OnlinePartition -> OfflinePartition leader -1 -> -1 leader_epoch 2 -> 2 isr [1]",
		"replica t-0 on broker 1: OnlineReplica -> OfflineReplica",
		"replica t-0 on broker 1: OfflineReplica -> ReplicaDeletionStarted",
		"replica t-0 on broker 1: ReplicaDeletionStarted -> ReplicaDeletionSuccessful",
		"replica t-0 on broker 1: ReplicaDeletionSuccessful -> NonExistentReplica",
		"partition t-0: OfflinePartition -> NonExistentPartition leader -1 -> -1 leader_epoch 2 -> 2 isr []",
		"topic t removed",
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("changes:\n%q\nwant:\n%q", lines, want)
	}
}

// TestStateChangeCauses: a StateChangeCause names the cause of the
// changes after it in its entry, until the next one; the next entry starts
// without one; at level 1 the record is refused and names nothing.
func TestStateChangeCauses(t *testing.T) {
	var got []StateChange
	tf := &testFSM{t: t}
	tf.FSM = New(Options{Halt: func(err error) { t.Fatal(err) }, OnStateChanges: func(e EntryChanges) { got = append(got, e.Changes...) }})
	if res := tf.commit(&rl.StateChangeCause{Text: "too early"}, &rl.RegisterBroker{BrokerID: 1}); len(res.Rejected) != 1 || res.Rejected[0].Record != 0 {
		t.Fatalf("a cause at level 1: rejections %+v, want the cause's", res.Rejected)
	}
	tf.mustCommit(&rl.FeatureLevel{Name: rl.FeatureMetadataVersion, Level: rl.Level2})
	tf.mustCommit(&rl.StateChangeCause{Text: "registration of broker 2"}, &rl.RegisterBroker{BrokerID: 2},
		&rl.StateChangeCause{Text: "registration of broker 3"}, &rl.RegisterBroker{BrokerID: 3})
	tf.mustCommit(&rl.RegisterBroker{BrokerID: 4})
	var causes []string
	for _, ch := range got {
		causes = append(causes, ch.Describe()+" / "+ch.Cause)
	}
	want := []string{"broker 1 registered / ", "broker 2 registered / registration of broker 2", "broker 3 registered / registration of broker 3", "broker 4 registered / "}
	if !slices.Equal(causes, want) {
		t.Fatalf("causes %q, want %q", causes, want)
	}
	if res := tf.commit(&rl.StateChangeCause{Text: string(make([]byte, rl.MaxCauseBytes+1))}); len(res.Rejected) != 1 {
		t.Fatalf("a cause over the limit was applied")
	}
}
