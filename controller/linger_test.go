package controller

import (
	"testing"
	"time"
)

// TestLinger checks when the loop waits for more events before a round:
// only after a round of at least lingerAfter events, only while fewer
// than half as many are pending, and never past RoundLinger or a stop.
func TestLinger(t *testing.T) {
	newAct := func() *activation {
		return &activation{events: make(chan *event, 64), stop: make(chan struct{})}
	}
	evs := func(n int) []*event {
		out := make([]*event, n)
		for i := range out {
			out[i] = &event{name: "e"}
		}
		return out
	}
	hour := New(Config{RoundLinger: time.Hour})

	t.Run("waits for half the last round", func(t *testing.T) {
		a := newAct()
		for _, ev := range evs(20) {
			a.events <- ev
		}
		got := hour.linger(a, evs(1), 32)
		if len(got) != 16 {
			t.Fatalf("lingered until %d events were pending, want 16", len(got))
		}
		if len(a.events) != 5 {
			t.Fatalf("%d events left queued, want 5", len(a.events))
		}
	})
	t.Run("not after a small round", func(t *testing.T) {
		a := newAct()
		a.events <- &event{}
		if got := hour.linger(a, evs(1), lingerAfter-1); len(got) != 1 {
			t.Fatalf("took %d events after a small round, want the 1 pending", len(got))
		}
	})
	t.Run("not when enough are pending", func(t *testing.T) {
		a := newAct()
		a.events <- &event{}
		if got := hour.linger(a, evs(20), 32); len(got) != 20 {
			t.Fatalf("took %d events, want the 20 pending", len(got))
		}
	})
	t.Run("turned off", func(t *testing.T) {
		off := New(Config{RoundLinger: -1})
		a := newAct()
		a.events <- &event{}
		if got := off.linger(a, evs(1), 64); len(got) != 1 {
			t.Fatalf("took %d events with lingering off, want 1", len(got))
		}
	})
	t.Run("gives up at the deadline", func(t *testing.T) {
		short := New(Config{RoundLinger: time.Millisecond})
		if got := short.linger(newAct(), evs(1), 64); len(got) != 1 {
			t.Fatalf("got %d events, want 1", len(got))
		}
	})
	t.Run("gives up on stop", func(t *testing.T) {
		a := newAct()
		close(a.stop)
		if got := hour.linger(a, evs(1), 64); len(got) != 1 {
			t.Fatalf("got %d events, want 1", len(got))
		}
	})
}
