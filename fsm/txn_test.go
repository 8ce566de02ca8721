package fsm

import (
	"errors"
	"reflect"
	"testing"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

func TestTxnStagesWithoutTouchingTheBase(t *testing.T) {
	tf := newTestFSM(t)
	id := tf.seed(4, 1, 2, 3)
	before, _ := tf.StateHash()
	newID := topicID(50)
	recs := []rl.Record{
		&rl.PartitionChange{TopicID: id, PartitionEpoch: 1, Set: rl.ChangeISR, ISR: []int32{1, 2}},
		&rl.Topic{TopicID: newID, Name: "fresh"},
		&rl.Partition{TopicID: newID, Partition: 0, Replicas: []int32{4, 1}},
		&rl.Partition{TopicID: newID, Partition: 1, Replicas: []int32{1, 4}},
		&rl.FenceBroker{BrokerID: 3, BrokerEpoch: 5},
	}
	tf.View(func(im *Image) {
		tx := NewTxn(im, im.AppliedIndex()+1)
		// A partition change computed from the staged epoch, not the base's.
		if err := tx.Apply(recs[0]); err != nil {
			t.Fatal(err)
		}
		if p := tx.Partition(id, 0); p.PartitionEpoch != 2 || len(p.ISR) != 2 {
			t.Fatalf("txn view of the partition: %+v", p)
		}
		if err := tx.Apply(&rl.PartitionChange{TopicID: id, PartitionEpoch: 1, Set: rl.ChangeLeader, Leader: 2}); !errors.Is(err, ErrStalePartitionEpoch) {
			t.Fatalf("stale epoch against the txn: %v", err)
		}
		if err := tx.Apply(recs[1:]...); err != nil {
			t.Fatal(err)
		}
		if tx.TopicByName("fresh") == nil || tx.PartitionCount(newID) != 2 || tx.NumPartitions() != 3 {
			t.Fatalf("staged topic not visible: %v %d %d", tx.TopicByName("fresh"), tx.PartitionCount(newID), tx.NumPartitions())
		}
		if !tx.Broker(3).Fenced || im.Broker(3).Fenced {
			t.Fatal("fence staged wrongly")
		}
		if im.TopicByName("fresh") != nil || im.Partition(id, 0).PartitionEpoch != 1 {
			t.Fatal("txn leaked into the base image")
		}
		if got := tx.Records(); !reflect.DeepEqual(got, recs) {
			t.Fatalf("records = %v", got)
		}
		// All or none: the second record clashes with the first.
		n := tx.Len()
		err := tx.Apply(&rl.Topic{TopicID: topicID(51), Name: "x"}, &rl.Topic{TopicID: topicID(52), Name: "x"})
		if !errors.Is(err, ErrTopicExists) || tx.TopicByName("x") != nil || tx.Len() != n {
			t.Fatalf("half an event was staged: err=%v", err)
		}
	})
	if after, _ := tf.StateHash(); after != before {
		t.Fatal("txn changed the image")
	}
	// The FSM accepts exactly what the txn accepted, with the same outcome.
	tf.mustCommit(recs...)
	tf.View(func(im *Image) {
		if p := im.Partition(newID, 1); p == nil || p.Replicas[0] != 1 {
			t.Fatalf("committed partition: %+v", p)
		}
		if !im.Broker(3).Fenced {
			t.Fatal("fence not committed")
		}
	})
}

func TestTxnChildMergeAndDiscard(t *testing.T) {
	tf := newTestFSM(t)
	id := tf.seed(3, 1, 2, 3)
	tf.View(func(im *Image) {
		round := NewTxn(im, im.AppliedIndex()+1)
		kept := round.Child()
		if err := kept.Apply(&rl.BeginDeleteTopic{TopicID: id}); err != nil {
			t.Fatal(err)
		}
		dropped := round.Child()
		if err := dropped.Apply(&rl.ControllerEpoch{Epoch: 1, NodeID: 9}); err != nil {
			t.Fatal(err)
		}
		round.Merge(kept)
		if !round.Topic(id).Deleting {
			t.Fatal("merged child not visible")
		}
		if e, _ := round.ControllerEpoch(); e != 0 {
			t.Fatal("discarded child visible")
		}
		if im.Topic(id).Deleting {
			t.Fatal("base changed")
		}
		// Deleting the topic in the txn hides its partitions there.
		walk := []rl.Record{
			&rl.PartitionChange{TopicID: id, PartitionEpoch: 1, Set: rl.ChangeLeader, Leader: rl.NoLeader},
			&rl.PartitionStateChange{TopicID: id, State: rl.OfflinePartition, Partitions: []int32{0}},
		}
		all := []rl.ReplicaRef{{Broker: 1}, {Broker: 2}, {Broker: 3}}
		for _, s := range []rl.ReplicaState{rl.OfflineReplica, rl.ReplicaDeletionStarted, rl.ReplicaDeletionSuccessful, rl.NonExistentReplica} {
			walk = append(walk, &rl.ReplicaStateChange{TopicID: id, State: s, Replicas: all})
		}
		walk = append(walk, &rl.RemoveTopic{TopicID: id})
		if err := round.Apply(walk...); err != nil {
			t.Fatal(err)
		}
		if round.TopicByName("t") != nil || round.Partition(id, 0) != nil || round.NumPartitions() != 0 {
			t.Fatal("removed topic still visible in the txn")
		}
		count := 0
		round.ForEachTopic(func(*Topic) bool { count++; return true })
		if count != 0 {
			t.Fatalf("ForEachTopic saw %d topics", count)
		}
	})
}

// TestTxnRebase: a Txn computed over a parent Txn stands on the image
// alone once the parent's records are applied: its own changes stay, the
// parent's are read from the image, counted once.
func TestTxnRebase(t *testing.T) {
	tf := newTestFSM(t)
	id := tf.seed(4, 1, 2, 3)
	fresh := topicID(60)
	var parentRecs []rl.Record
	var child *Txn
	tf.View(func(im *Image) {
		parent := NewTxn(im, im.AppliedIndex()+1)
		if err := parent.Apply(&rl.Topic{TopicID: fresh, Name: "fresh"}, &rl.Partition{TopicID: fresh, Partition: 0, Replicas: []int32{1, 2}}); err != nil {
			t.Fatal(err)
		}
		parentRecs = parent.Records()
		child = parent.Child()
		if err := child.Apply(&rl.Partition{TopicID: fresh, Partition: 1, Replicas: []int32{2, 3}},
			&rl.PartitionChange{TopicID: id, PartitionEpoch: 1, Set: rl.ChangeISR, ISR: []int32{1, 2}}); err != nil {
			t.Fatal(err)
		}
		if n := child.NumPartitions(); n != 3 {
			t.Fatalf("child over its parent counts %d partitions, want 3", n)
		}
	})
	tf.mustCommit(parentRecs...)
	tf.View(func(im *Image) {
		child.Rebase(im)
		if n := child.NumPartitions(); n != 3 {
			t.Fatalf("rebased child counts %d partitions, want 3 (the parent's counted once)", n)
		}
		if child.PartitionCount(fresh) != 2 || child.Partition(fresh, 0) == nil || child.Partition(fresh, 1) == nil {
			t.Fatal("rebased child lost a partition of the parent's topic")
		}
		if p := child.Partition(id, 0); p.PartitionEpoch != 2 || len(p.ISR) != 2 {
			t.Fatalf("rebased child lost its own change: %+v", p)
		}
		// What it stages next is checked against the image.
		if err := child.Apply(&rl.PartitionChange{TopicID: id, PartitionEpoch: 2, Set: rl.ChangeLeader, Leader: 2}); err != nil {
			t.Fatalf("staging over the rebased child: %v", err)
		}
	})
	if tf.partition(id, 0).PartitionEpoch != 1 {
		t.Fatal("the child's changes reached the image")
	}
}
