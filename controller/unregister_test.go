package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

func urRegistered(h *harness, id int32) bool {
	var ok bool
	h.fsm.View(func(im *fsm.Image) { ok = im.Broker(id) != nil })
	return ok
}

// urHasSession reports whether the loop still tracks a session for id.
func urHasSession(h *harness, id int32) bool {
	h.t.Helper()
	var ok bool
	admRun(h, func(m *managers, w *work) error {
		_, ok = m.cluster.sessions.deadline[id]
		return nil
	})
	return ok
}

func TestUnregisterBroker(t *testing.T) {
	cases := []struct {
		name  string
		setup func(h *harness)
		id    int32
		err   *kerr.Error
	}{
		{name: "unknown broker", id: 9, err: kerr.BrokerIDNotRegistered},
		{name: "live broker that leads", id: 1},
		{name: "broker fenced already", setup: func(h *harness) { admFence(h, 1) }, id: 1},
		{name: "live broker whose session ran out", setup: func(h *harness) {
			h.clock.Advance(2 * time.Hour)
			h.heartbeat(2)
			h.heartbeat(3)
		}, id: 1},
		{name: "broker in controlled shutdown", setup: func(h *harness) { admShutdown(h, 1) }, id: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			for id := int32(1); id <= 3; id++ {
				h.register(id, "")
			}
			admTopic(h, "t", []int32{1, 2, 3}, []int32{2, 1, 3})
			admTopic(h, "s", []int32{1})
			if tc.setup != nil {
				tc.setup(h)
			}
			before := admSnap(h)
			err := h.c.UnregisterBroker(h.ctx, tc.id)
			admCode(t, "unregister", err, tc.err)
			if tc.err != nil {
				admUnchanged(t, h, before)
				return
			}
			if urRegistered(h, tc.id) {
				t.Fatalf("broker %d still registered", tc.id)
			}
			if urHasSession(h, tc.id) {
				t.Fatalf("broker %d still has a session", tc.id)
			}
			// Nothing is led by the broker that is gone, and it is in no
			// ISR but as a last member kept for a leaderless partition.
			for _, tp := range []TopicPartition{{"t", 0}, {"t", 1}, {"s", 0}} {
				q := h.partition(tp.Topic, tp.Partition)
				if q.Leader == tc.id {
					t.Fatalf("%v still led by %d: %+v", tp, tc.id, q)
				}
				if q.InISR(tc.id) && (q.Leader != rl.NoLeader || len(q.ISR) > 1) {
					t.Fatalf("%v ISR %v still holds %d", tp, q.ISR, tc.id)
				}
				if s := q.ReplicaState(tc.id); s != rl.OfflineReplica {
					t.Fatalf("%v replica on %d is %s", tp, tc.id, s)
				}
			}
			if q := h.partition("t", 0); q.Leader != 2 || !slices.Equal(q.ISR, []int32{2, 3}) {
				t.Fatalf("t-0 not re-elected: %+v", q)
			}
			if q := h.partition("s", 0); q.Leader != rl.NoLeader || !slices.Equal(q.ISR, []int32{1}) {
				t.Fatalf("s-0 with its only replica gone: %+v", q)
			}
			// Its old epoch is refused from now on.
			_, err = h.c.Heartbeat(h.ctx, Heartbeat{BrokerID: tc.id, BrokerEpoch: h.epochs[tc.id]})
			admCode(t, "heartbeat after unregister", err, kerr.BrokerIDNotRegistered)
			// Unregistering twice is an unknown broker.
			err = h.c.UnregisterBroker(h.ctx, tc.id)
			admCode(t, "second unregister", err, kerr.BrokerIDNotRegistered)
		})
	}
}

// The id can be registered again, and its returning replica leads the
// partition it was the last ISR member of.
func TestUnregisterThenRegisterAgain(t *testing.T) {
	h := newHarness(t)
	h.register(1, "")
	h.register(2, "")
	admTopic(h, "t", []int32{1})
	if err := h.c.UnregisterBroker(h.ctx, 1); err != nil {
		t.Fatal(err)
	}
	if live := h.sender.Sent(2); len(live) == 0 || live[len(live)-1].UpdateMetadata == nil {
		t.Fatal("the remaining broker was not told the broker list changed")
	} else {
		for _, b := range live[len(live)-1].UpdateMetadata.LiveBrokers {
			if b.ID == 1 {
				t.Fatalf("unregistered broker still listed live: %+v", b)
			}
		}
	}
	old := h.epochs[1]
	h.register(1, "")
	if h.epochs[1] == old || h.broker(1).Fenced {
		t.Fatalf("re-registration: epoch %d (was %d), fenced %v", h.epochs[1], old, h.broker(1).Fenced)
	}
	if p := h.partition("t", 0); p.Leader != 1 {
		t.Fatalf("returning broker does not lead its partition: %+v", p)
	}
}

func TestUnregisterNotController(t *testing.T) {
	h := newHarness(t)
	h.register(1, "")
	h.c.Deactivate()
	before := admSnap(h)
	admCode(t, "inactive", h.c.UnregisterBroker(h.ctx, 1), kerr.NotController)
	admUnchanged(t, h, before)
}
