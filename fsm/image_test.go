package fsm

import (
	"bytes"
	"io"
	"slices"
	"testing"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// TestBrokersStayInIDOrder: the image's broker list follows registrations,
// changes and removals in id order, a list handed out earlier does not
// change under its reader, and a restored image lists the same brokers.
func TestBrokersStayInIDOrder(t *testing.T) {
	tf := newTestFSM(t)
	ids := func() []int32 {
		var out []int32
		tf.View(func(im *Image) {
			for _, b := range im.Brokers() {
				if im.Broker(b.ID) != b {
					t.Fatalf("listed broker %d is not the image's", b.ID)
				}
				out = append(out, b.ID)
			}
		})
		return out
	}
	epochs := map[int32]int64{}
	for _, id := range []int32{7, 2, 9, 4} {
		tf.mustCommit(&rl.RegisterBroker{BrokerID: id, IncarnationID: rl.IncarnationID{byte(id)}})
		epochs[id] = int64(tf.index)
	}
	if got := ids(); !slices.Equal(got, []int32{2, 4, 7, 9}) {
		t.Fatalf("brokers %v, want 2 4 7 9", got)
	}
	var held []*Broker
	tf.View(func(im *Image) { held = im.Brokers() })

	tf.mustCommit(&rl.UnfenceBroker{BrokerID: 4, BrokerEpoch: epochs[4]},
		&rl.UnregisterBroker{BrokerID: 7, BrokerEpoch: epochs[7]},
		&rl.RegisterBroker{BrokerID: 1, IncarnationID: rl.IncarnationID{1}})
	if got := ids(); !slices.Equal(got, []int32{1, 2, 4, 9}) {
		t.Fatalf("brokers %v, want 1 2 4 9", got)
	}
	tf.View(func(im *Image) {
		if im.Brokers()[2].Fenced {
			t.Fatal("the list holds broker 4 from before its unfence")
		}
	})
	if len(held) != 4 || held[2].ID != 7 || !held[1].Fenced {
		t.Fatalf("a list handed out before changed under its reader: %+v", held)
	}

	var buf bytes.Buffer
	if err := tf.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	restored := newTestFSM(t)
	if err := restored.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	var got []int32
	restored.View(func(im *Image) {
		for _, b := range im.Brokers() {
			got = append(got, b.ID)
		}
	})
	if !slices.Equal(got, []int32{1, 2, 4, 9}) {
		t.Fatalf("restored image lists brokers %v, want 1 2 4 9", got)
	}
}

// TestPartitionArraysTrimmed: a topic created whole in one entry keeps an
// array of exactly its partitions, not the room append left, and one that
// grows later (partitions added) is trimmed again after that entry; the
// image is the same as one restored from its snapshot.
func TestPartitionArraysTrimmed(t *testing.T) {
	f := buildLargeImage(t, 300) // three topics of 100 partitions
	im := f.img
	for tn := 0; tn < 3; tn++ {
		tp := im.Topic(topicID(tn))
		if len(tp.parts) != 100 || cap(tp.parts) != 100 {
			t.Fatalf("topic %d: %d partitions in an array of %d", tn, len(tp.parts), cap(tp.parts))
		}
	}
	id := topicID(0)
	var recs []rl.Record
	for p := int32(100); p < 137; p++ {
		recs = append(recs, &rl.Partition{TopicID: id, Partition: p, Replicas: []int32{1, 2, 3}})
	}
	if res := im.applyBatch(im.appliedIndex+1, recs, nil); res.Err() != nil {
		t.Fatal(res.Err())
	}
	if tp := im.Topic(id); len(tp.parts) != 137 || cap(tp.parts)-137 > 137/16 {
		t.Fatalf("after adding partitions: %d in an array of %d", len(tp.parts), cap(tp.parts))
	}
	if len(im.grown) != 0 {
		t.Fatalf("%d topics still listed as grown after the entry", len(im.grown))
	}
	snap, _ := f.Snapshot()
	var buf bytes.Buffer
	if err := snap.(*snapshot).fr.writeTo(&buf); err != nil {
		t.Fatal(err)
	}
	g := New(Options{})
	if err := g.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	h1, _ := f.StateHash()
	if h2, _ := g.StateHash(); h1 != h2 {
		t.Fatal("restored image hashes differently")
	}
	if got := g.img.Topic(id).parts; !slices.EqualFunc(got, im.Topic(id).parts, func(a, b Partition) bool {
		return slices.Equal(a.Replicas, b.Replicas) && a.Leader == b.Leader && a.PartitionEpoch == b.PartitionEpoch
	}) {
		t.Fatal("restored partitions differ")
	}
}
