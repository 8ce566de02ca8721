package controller

import (
	"sort"
	"time"
)

// sessions holds broker liveness on the active node. It is not in the log:
// deadlines are wall-clock and local, and a new active controller starts
// every unfenced broker with a fresh one (DESIGN §8). Only the event loop
// touches it.
type sessions struct {
	deadline map[int32]time.Time
	// needCatchUp marks brokers whose first heartbeat since activation
	// has not come yet.
	needCatchUp map[int32]bool
	offset      map[int32]uint64
}

func newSessions() *sessions {
	return &sessions{deadline: map[int32]time.Time{}, needCatchUp: map[int32]bool{}, offset: map[int32]uint64{}}
}

func (s *sessions) touch(id int32, deadline time.Time) { s.deadline[id] = deadline }

func (s *sessions) alive(id int32, now time.Time) bool {
	d, ok := s.deadline[id]
	return ok && now.Before(d)
}

func (s *sessions) forget(id int32) {
	delete(s.deadline, id)
	delete(s.needCatchUp, id)
	delete(s.offset, id)
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
