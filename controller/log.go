package controller

import (
	"time"

	"github.com/hashicorp/raft"
)

// Log is what the controller needs of the replicated log: *raft.Raft
// satisfies it. Apply's future must resolve only once the entry is
// committed and applied to the local FSM, with the FSM's response.
type Log interface {
	Apply(data []byte, timeout time.Duration) raft.ApplyFuture
	Barrier(timeout time.Duration) raft.Future
}

// Clock tells the time. Sessions are the only thing the controller times,
// and only on the active node: the FSM never sees a clock.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
