package fsm

import (
	"errors"
	"slices"
	"testing"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// StagePartitionChange packs runs of one topic's changes in ascending
// partition order, counts each change in Len, rejects what Stage would
// reject, and the packed records commit to the same state as the changes
// one by one.
func TestTxnStagePartitionChangePacksRuns(t *testing.T) {
	tf := newTestFSM(t)
	a := tf.seed(3, 1, 2, 3)
	b := topicID(2)
	tf.mustCommit(&rl.Topic{TopicID: b, Name: "b"})
	for p := int32(0); p < 3; p++ {
		tf.mustCommit(&rl.Partition{TopicID: b, Partition: p, Replicas: []int32{1, 2, 3}})
	}
	for p := int32(1); p < 4; p++ {
		tf.mustCommit(&rl.Partition{TopicID: a, Partition: p, Replicas: []int32{1, 2, 3}})
	}
	isr := func(id rl.TopicID, p int32, s ...int32) rl.PartitionDelta {
		return rl.PartitionDelta{Partition: p, PartitionEpoch: tf.partition(id, p).PartitionEpoch, Set: rl.ChangeISR | rl.ChangeLeader, Leader: s[0], ISR: s}
	}
	steps := []struct {
		id rl.TopicID
		d  rl.PartitionDelta
	}{
		{a, isr(a, 0, 1, 2)}, {a, isr(a, 2, 2)}, {a, isr(a, 3, 3, 1)}, // one pack
		{b, isr(b, 1, 2)},                    // another topic
		{b, isr(b, 0, 1)},                    // not ascending: a new pack
		{a, isr(a, 1, 1)}, {b, isr(b, 2, 3)}, // single changes
	}
	var plain, packed []rl.Record
	tf.View(func(im *Image) {
		tx := NewTxn(im, im.AppliedIndex()+1)
		for i, s := range steps {
			if err := tx.StagePartitionChange(s.id, s.d); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			d := s.d
			plain = append(plain, &rl.PartitionChange{TopicID: s.id, Partition: d.Partition, PartitionEpoch: d.PartitionEpoch, Set: d.Set, Leader: d.Leader, ISR: d.ISR})
		}
		// A stale change is rejected as Stage rejects it, at the next position.
		err := tx.StagePartitionChange(a, isr(a, 0, 1))
		var rj *Rejection
		if !errors.Is(err, ErrStalePartitionEpoch) || !errors.As(err, &rj) || rj.Record != len(steps) || rj.Type != rl.TypePartitionChange {
			t.Fatalf("stale change: %v", err)
		}
		if tx.Len() != len(steps) {
			t.Fatalf("Len = %d, want %d", tx.Len(), len(steps))
		}
		var sizes []int32
		for _, r := range tx.Records() {
			pcs, ok := r.(*rl.PartitionChanges)
			if !ok {
				t.Fatalf("record %T", r)
			}
			sizes = append(sizes, int32(len(pcs.Changes)))
		}
		if want := []int32{3, 1, 1, 1, 1}; !slices.Equal(sizes, want) {
			t.Fatalf("packs of %v changes, want %v", sizes, want)
		}
		// A record staged in between closes the pack.
		if err := tx.Stage(&rl.FenceBroker{BrokerID: 3, BrokerEpoch: im.Broker(3).Epoch}); err != nil {
			t.Fatal(err)
		}
		if err := tx.StagePartitionChange(b, isr(b, 2, 3)); !errors.Is(err, ErrStalePartitionEpoch) {
			t.Fatalf("b-2 was staged already: %v", err)
		}
		tx.records = tx.records[:len(tx.records)-1] // keep the fence out of the comparison
		packed = tx.Records()
	})
	twin := newTestFSM(t)
	twin.seed(3, 1, 2, 3)
	twin.mustCommit(&rl.Topic{TopicID: b, Name: "b"})
	for p := int32(0); p < 3; p++ {
		twin.mustCommit(&rl.Partition{TopicID: b, Partition: p, Replicas: []int32{1, 2, 3}})
	}
	for p := int32(1); p < 4; p++ {
		twin.mustCommit(&rl.Partition{TopicID: a, Partition: p, Replicas: []int32{1, 2, 3}})
	}
	twin.mustCommit(plain...)
	tf.mustCommit(packed...)
	want, _ := twin.StateHash()
	if got, _ := tf.StateHash(); got != want {
		t.Fatal("packed changes committed to another state than the changes one by one")
	}
}

// A Txn stages a partition of a topic with many partitions without a slot
// for each, and still finds what it staged past the first slots.
func TestTxnStagesPartitionsOfALargeTopic(t *testing.T) {
	tf := newTestFSM(t)
	id := tf.seed(3, 1, 2, 3)
	for p := int32(1); p < 3000; p++ {
		tf.mustCommit(&rl.Partition{TopicID: id, Partition: p, Replicas: []int32{1, 2, 3}})
	}
	tf.View(func(im *Image) {
		tx := NewTxn(im, im.AppliedIndex()+1)
		for i, p := range []int32{5, 2999, 1500} {
			if err := tx.StagePartitionChange(id, rl.PartitionDelta{Partition: p, Set: rl.ChangeLeader, Leader: 2}); err != nil {
				t.Fatal(err)
			}
			if n := cap(tx.stages[id].parts); i == 0 && n > 1024 {
				t.Fatalf("one staged partition took %d slots", n)
			}
		}
		for _, p := range []int32{5, 1500, 2999} {
			if got := tx.Partition(id, p); got.Leader != 2 || got.PartitionEpoch != 1 {
				t.Fatalf("partition %d: %+v", p, got)
			}
		}
		if got := tx.Partition(id, 6); got.Leader != rl.NoLeader {
			t.Fatalf("partition 6: %+v", got)
		}
	})
}
