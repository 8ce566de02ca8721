package controller

import "time"

// RoundStats describes one committed round of the event loop.
type RoundStats struct {
	// Events is how many events the round computed (including ones that
	// failed), Records and Entries what it proposed.
	Events, Records, Entries int
	// QueueTimes holds, per event, how long it waited in the queue before
	// its round started computing. The slice is reused: copy what you keep.
	QueueTimes []time.Duration
	// Compute is the time spent computing the round's events; Commit the
	// time from proposing its entries to their having committed and
	// applied locally (zero when the round proposed nothing).
	Compute, Commit time.Duration
	// FirstIndex and LastIndex are the raft indexes of the round's first
	// and last entries (zero when it proposed nothing).
	FirstIndex, LastIndex uint64
}

// Observer is told about the event loop's work, for metrics. It is called
// on the loop's goroutine after each round commits and must not block.
type Observer interface {
	RoundCommitted(RoundStats)
}

// observeRound reports a committed round to the configured observer.
func (c *Controller) observeRound(r *round) {
	o := c.cfg.Observer
	if o == nil {
		return
	}
	st := RoundStats{Events: len(r.batch), Records: r.staged, Entries: len(r.indexes), QueueTimes: r.queued,
		Compute: r.compute}
	if r.staged > 0 {
		st.Commit = r.committed.Sub(r.proposed)
	}
	if n := len(r.indexes); n > 0 {
		st.FirstIndex, st.LastIndex = r.indexes[0], r.indexes[n-1]
	}
	o.RoundCommitted(st)
}
