package sender_test

import (
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/transport/sender"
)

// TestDeliveryMarks: Marks names a broker while a set handed to it is not
// acknowledged, and the broker reaches the mark only once the agent has
// applied it (its metadata offset shows it), with Progress waking the
// waiter; a broker with nothing outstanding has no mark; sets for a
// broker that cannot be resolved are dropped and count as reached, as
// everything does once the pool closes.
func TestDeliveryMarks(t *testing.T) {
	g := newGate()
	a := startAgent(t, broker.Config{BrokerID: 1, Host: g})
	idle := startAgent(t, broker.Config{BrokerID: 2})
	bk := newBook()
	bk.set(1, a.Addr())
	bk.set(2, idle.Addr())
	p := newPool(t, bk, sender.Config{})
	live := []controller.LiveBroker{{ID: 1, Endpoints: endpoint(a.Addr())}, {ID: 2, Endpoints: endpoint(idle.Addr())}}
	parts := []controller.PartitionState{ps("t", topicID, 0, 1, 1, 1, 2)}

	p.Send(set(2, hdr(1, 3), live, nil))
	waitFor(t, "broker 2 to acknowledge its set", func() bool { return len(p.Marks([]int32{2})) == 0 })
	if idle.Status().MetadataOffset != 3 {
		t.Fatalf("broker 2 is at offset %d with no mark left", idle.Status().MetadataOffset)
	}

	p.Send(set(1, hdr(1, 5), live, parts))
	<-g.entered // the LeaderAndIsr is held in the host
	p.Send(set(1, hdr(1, 6), live, parts))
	marks := p.Marks([]int32{1, 2, 3})
	m, ok := marks[1]
	if !ok || len(marks) != 1 {
		t.Fatalf("marks %v with broker 1 held: want broker 1 alone", marks)
	}
	progress := p.Progress()
	if p.Reached(1, m) {
		t.Fatal("broker 1 reached its mark while its first request is held")
	}
	g.release()
	select {
	case <-progress:
	case <-time.After(30 * time.Second):
		t.Fatal("no progress after the broker was released")
	}
	waitFor(t, "broker 1 to reach its mark", func() bool { return p.Reached(1, m) })
	if got := a.Status().MetadataOffset; got != 6 {
		t.Fatalf("broker 1 reached its mark at metadata offset %d, want 6", got)
	}

	// A broker that cannot be resolved has its sets dropped: nothing
	// will ever be delivered to it, so it is not waited for.
	p.Send(set(9, hdr(1, 7), live, parts))
	m9 := p.Marks([]int32{9})[9]
	waitFor(t, "the set of an unknown broker to be dropped", func() bool { return p.Reached(9, m9) })

	hung := blackhole(t)
	bk.set(4, hung)
	p.Send(set(4, hdr(1, 8), live, parts))
	m4, ok := p.Marks([]int32{4})[4]
	if !ok || p.Reached(4, m4) {
		t.Fatalf("broker 4, which never answers, has mark %d (%v) already reached", m4, ok)
	}
	closed := p.Progress()
	p.Close()
	<-closed
	if !p.Reached(4, m4) {
		t.Fatal("a mark is still waited for after Close")
	}
}
