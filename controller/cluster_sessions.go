package controller

import (
	"sort"
	"time"
)

// sessions holds broker liveness on the active node: the cluster
// manager's own state. It is not in the log: deadlines are wall-clock and
// local, and a new active controller starts every unfenced broker with a
// fresh one (docs/statemachines.md, broker lifecycle and failover).
// Handlers read it; only the loop changes it, by applying the
// sessionChanges handlers return.
type sessions struct {
	deadline map[int32]time.Time
	// needCatchUp marks brokers whose first heartbeat since activation
	// has not come yet.
	needCatchUp map[int32]bool
}

func newSessions() *sessions {
	return &sessions{deadline: map[int32]time.Time{}, needCatchUp: map[int32]bool{}}
}

func (s *sessions) alive(id int32, now time.Time) bool {
	d, ok := s.deadline[id]
	return ok && now.Before(d)
}

// expired returns the brokers whose deadline passed, in id order.
func (s *sessions) expired(now time.Time) []int32 {
	var out []int32
	for id, d := range s.deadline {
		if !now.Before(d) {
			out = append(out, id)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// sessionChange is one change to a broker's session that a cluster
// handler returns (see effects): a renewal with its new deadline, which
// may also set or clear the broker's catch-up mark, a catch-up done, or
// the session forgotten.
type sessionChange struct {
	broker   int32
	op       sessionOp
	deadline time.Time
}

type sessionOp uint8

const (
	// renew sets the deadline and leaves the catch-up mark.
	renew sessionOp = iota
	// renewAwaitingCatchUp sets the deadline and marks the broker as one
	// whose first heartbeat is still to come: it is then sent what it
	// missed.
	renewAwaitingCatchUp
	// renewCaughtUp sets the deadline and clears the mark.
	renewCaughtUp
	// caughtUp clears the mark.
	caughtUp
	// forget drops the session.
	forget
)

func renewal(id int32, deadline time.Time, op sessionOp) sessionChange {
	return sessionChange{broker: id, op: op, deadline: deadline}
}

// awaitingCatchUp reports whether broker has not been caught up by this
// controller yet.
func (s *sessions) awaitingCatchUp(broker int32) bool { return s.needCatchUp[broker] }

// apply makes the changes, in order.
func (s *sessions) apply(changes []sessionChange) {
	for _, ch := range changes {
		switch ch.op {
		case renew, renewAwaitingCatchUp, renewCaughtUp:
			s.deadline[ch.broker] = ch.deadline
			switch ch.op {
			case renewAwaitingCatchUp:
				s.needCatchUp[ch.broker] = true
			case renewCaughtUp:
				s.needCatchUp[ch.broker] = false
			}
		case caughtUp:
			s.needCatchUp[ch.broker] = false
		case forget:
			delete(s.deadline, ch.broker)
			delete(s.needCatchUp, ch.broker)
		}
	}
}
