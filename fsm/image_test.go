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
