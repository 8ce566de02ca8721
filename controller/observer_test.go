package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/fsm"
)

type queueTimes struct {
	mu    sync.Mutex
	times []time.Duration
}

func (q *queueTimes) RoundCommitted(st RoundStats) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.times = append(q.times, st.QueueTimes...)
}

// Every event the loop makes for itself (activation, resume, session
// checks, broker responses) is stamped when queued like a caller's, so the
// queue time an observer sees is a real wait and not the age of the zero
// time.
func TestObserverSeesRealQueueTimesForTheLoopsOwnEvents(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	f := fsm.New(fsm.Options{Halt: func(err error) { t.Errorf("fsm halted: %v", err) }})
	obs := &queueTimes{}
	c := New(Config{NodeID: 1, FSM: f, Log: NewMemLog(f), Sender: NewRecordingSender(), Clock: clock,
		Logger: hclog.NewNullLogger(), SessionTimeout: time.Hour, Observer: obs})
	c.Activate()
	defer c.Deactivate()
	ctx := context.Background()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckSessions(ctx); err != nil {
		t.Fatal(err)
	}
	c.Deactivate()

	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.times) < 3 {
		t.Fatalf("%d events observed, want the activation, the resume and the session check", len(obs.times))
	}
	for i, d := range obs.times {
		if d > time.Minute {
			t.Fatalf("event %d of %d waited %v in a test whose clock never moved", i, len(obs.times), d)
		}
	}
}
