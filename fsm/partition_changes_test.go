package fsm

import (
	"errors"
	"testing"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// seedPartitions adds partitions 1..n-1 to the seeded topic, online with
// leader 1 and ISR 1,2,3.
func seedPartitions(tf *testFSM, id rl.TopicID, n int32) {
	tf.t.Helper()
	for p := int32(1); p < n; p++ {
		refs := []rl.ReplicaRef{{Partition: p, Broker: 1}, {Partition: p, Broker: 2}, {Partition: p, Broker: 3}}
		tf.mustCommit(
			&rl.Partition{TopicID: id, Partition: p, Replicas: []int32{1, 2, 3}},
			&rl.ReplicaStateChange{TopicID: id, State: rl.NewReplica, Replicas: refs},
			&rl.PartitionChange{TopicID: id, Partition: p, Set: rl.ChangeLeader | rl.ChangeISR, Leader: 1, ISR: []int32{1, 2, 3}},
			&rl.PartitionStateChange{TopicID: id, State: rl.OnlinePartition, Partitions: []int32{p}},
			&rl.ReplicaStateChange{TopicID: id, State: rl.OnlineReplica, Replicas: refs},
		)
	}
}

func TestPartitionChangesApplyAsSeparateChanges(t *testing.T) {
	deltas := []rl.PartitionDelta{
		{Partition: 0, PartitionEpoch: 1, Set: rl.ChangeLeader | rl.ChangeISR, Leader: 2, ISR: []int32{2, 3}},
		{Partition: 2, PartitionEpoch: 1, Set: rl.ChangeISR, ISR: []int32{1}},
		{Partition: 1, PartitionEpoch: 1, Set: rl.ChangeReplicas | rl.ChangeReassignment, Replicas: []int32{1, 2, 3, 4}, Adding: []int32{4}},
		{Partition: 3, PartitionEpoch: 1, Set: rl.ChangeLeader, Leader: rl.NoLeader},
	}
	var separate []rl.Record
	for _, d := range deltas {
		separate = append(separate, &rl.PartitionChange{TopicID: topicID(1), Partition: d.Partition, PartitionEpoch: d.PartitionEpoch,
			Set: d.Set, Leader: d.Leader, ISR: d.ISR, Replicas: d.Replicas, Adding: d.Adding, Removing: d.Removing})
	}
	one, many := newTestFSM(t), newTestFSM(t)
	for _, tf := range []*testFSM{one, many} {
		seedPartitions(tf, tf.seed(4, 1, 2, 3), 4)
	}
	one.mustCommit(&rl.PartitionChanges{TopicID: topicID(1), Changes: deltas})
	many.mustCommit(separate...)
	h1, _ := one.StateHash()
	h2, _ := many.StateHash()
	if h1 != h2 {
		t.Fatal("a PartitionChanges record and the same PartitionChange records leave different images")
	}
	// A Txn stages it the same way.
	one.View(func(im *Image) {
		tx := NewTxn(im, im.AppliedIndex()+1)
		if err := tx.Apply(&rl.PartitionChanges{TopicID: topicID(1), Changes: []rl.PartitionDelta{
			{Partition: 0, PartitionEpoch: 2, Set: rl.ChangeLeader, Leader: 3}}}); err != nil {
			t.Fatal(err)
		}
		if p := tx.Partition(topicID(1), 0); p.Leader != 3 || p.LeaderEpoch != im.Partition(topicID(1), 0).LeaderEpoch+1 {
			t.Fatalf("staged partition: %+v", p)
		}
	})
}

func TestPartitionChangesAllOrNone(t *testing.T) {
	tf := newTestFSM(t)
	id := tf.seed(3, 1, 2, 3)
	seedPartitions(tf, id, 3)
	before, _ := tf.StateHash()
	cases := []struct {
		name    string
		changes []rl.PartitionDelta
		want    error
	}{
		{"stale epoch in the second change", []rl.PartitionDelta{
			{Partition: 0, PartitionEpoch: 1, Set: rl.ChangeLeader, Leader: 2},
			{Partition: 1, PartitionEpoch: 7, Set: rl.ChangeLeader, Leader: 2}}, ErrStalePartitionEpoch},
		{"a partition twice", []rl.PartitionDelta{
			{Partition: 0, PartitionEpoch: 1, Set: rl.ChangeLeader, Leader: 2},
			{Partition: 0, PartitionEpoch: 2, Set: rl.ChangeLeader, Leader: 3}}, ErrInvalidRecord},
		{"no such partition", []rl.PartitionDelta{
			{Partition: 0, PartitionEpoch: 1, Set: rl.ChangeLeader, Leader: 2},
			{Partition: 9, PartitionEpoch: 1, Set: rl.ChangeLeader, Leader: 2}}, ErrUnknownPartition},
		{"leader outside the replicas", []rl.PartitionDelta{
			{Partition: 0, PartitionEpoch: 1, Set: rl.ChangeLeader, Leader: 2},
			{Partition: 2, PartitionEpoch: 1, Set: rl.ChangeLeader, Leader: 7}}, ErrInvalidRecord},
		{"empty", nil, ErrInvalidRecord},
	}
	for _, c := range cases {
		res := tf.commit(&rl.PartitionChanges{TopicID: id, Changes: c.changes})
		if len(res.Rejected) != 1 || !errors.Is(res.Rejected[0].Err, c.want) {
			t.Fatalf("%s: rejected %+v, want %v", c.name, res.Rejected, c.want)
		}
		if h, _ := tf.StateHash(); h != before {
			t.Fatalf("%s: a rejected record changed the image", c.name)
		}
	}
	if res := tf.commit(&rl.PartitionChanges{TopicID: topicID(99), Changes: []rl.PartitionDelta{{Partition: 0}}}); len(res.Rejected) != 1 || !errors.Is(res.Rejected[0].Err, ErrUnknownTopic) {
		t.Fatalf("unknown topic: %+v", res.Rejected)
	}
}

func TestPartitionChangesManyDistinct(t *testing.T) {
	tf := newTestFSM(t)
	id := tf.seed(3, 1, 2, 3)
	seedPartitions(tf, id, 40)
	var deltas []rl.PartitionDelta
	for p := int32(39); p >= 0; p-- {
		deltas = append(deltas, rl.PartitionDelta{Partition: p, PartitionEpoch: 1, Set: rl.ChangeISR, ISR: []int32{1, 2}})
	}
	tf.mustCommit(&rl.PartitionChanges{TopicID: id, Changes: deltas})
	if p := tf.partition(id, 17); len(p.ISR) != 2 || p.PartitionEpoch != 2 {
		t.Fatalf("partition 17: %+v", p)
	}
	deltas = append(deltas[:20:20], rl.PartitionDelta{Partition: 25, PartitionEpoch: 2, Set: rl.ChangeISR, ISR: []int32{1}})
	if res := tf.commit(&rl.PartitionChanges{TopicID: id, Changes: deltas}); len(res.Rejected) != 1 || !errors.Is(res.Rejected[0].Err, ErrInvalidRecord) {
		t.Fatalf("a repeated partition among many: %+v", res.Rejected)
	}
}

func TestStateChangesRefuseRepeats(t *testing.T) {
	tf := newTestFSM(t)
	id := tf.seed(3, 1, 2, 3)
	seedPartitions(tf, id, 4)
	before, _ := tf.StateHash()
	for _, c := range []struct {
		name string
		rec  rl.Record
	}{
		{"partitions in order", &rl.PartitionStateChange{TopicID: id, State: rl.OfflinePartition, Partitions: []int32{0, 1, 1, 2}}},
		{"partitions out of order", &rl.PartitionStateChange{TopicID: id, State: rl.OfflinePartition, Partitions: []int32{2, 0, 3, 0}}},
		{"replicas mixing orders", &rl.ReplicaStateChange{TopicID: id, State: rl.OfflineReplica,
			Replicas: []rl.ReplicaRef{{Partition: 1, Broker: 1}, {Partition: 0, Broker: 2}, {Partition: 1, Broker: 1}}}},
		{"replicas out of order", &rl.ReplicaStateChange{TopicID: id, State: rl.OfflineReplica,
			Replicas: []rl.ReplicaRef{{Partition: 3, Broker: 2}, {Partition: 0, Broker: 1}, {Partition: 3, Broker: 2}}}},
		{"changes out of order", &rl.PartitionChanges{TopicID: id, Changes: []rl.PartitionDelta{
			{Partition: 3, PartitionEpoch: 1, Set: rl.ChangeLeader, Leader: 2},
			{Partition: 1, PartitionEpoch: 1, Set: rl.ChangeLeader, Leader: 2},
			{Partition: 3, PartitionEpoch: 1, Set: rl.ChangeLeader, Leader: 3}}}},
	} {
		res := tf.commit(c.rec)
		if len(res.Rejected) != 1 || !errors.Is(res.Rejected[0].Err, ErrInvalidRecord) {
			t.Fatalf("%s: rejected %+v, want a repeat refused", c.name, res.Rejected)
		}
	}
	if h, _ := tf.StateHash(); h != before {
		t.Fatal("a rejected record changed the image")
	}
	// Lists in either order, and out of order without repeats, apply.
	tf.mustCommit(&rl.PartitionStateChange{TopicID: id, State: rl.OfflinePartition, Partitions: []int32{3, 0, 2}},
		&rl.ReplicaStateChange{TopicID: id, State: rl.OfflineReplica,
			Replicas: []rl.ReplicaRef{{Partition: 0, Broker: 1}, {Partition: 1, Broker: 1}, {Partition: 0, Broker: 2}}},
		&rl.ReplicaStateChange{TopicID: id, State: rl.OfflineReplica,
			Replicas: []rl.ReplicaRef{{Partition: 2, Broker: 3}, {Partition: 2, Broker: 1}, {Partition: 3, Broker: 1}}})
}
