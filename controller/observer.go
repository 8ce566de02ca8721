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
}

// Observer is told about the event loop's work, for metrics. It is called
// on the loop's goroutine after each round commits and must not block.
type Observer interface {
	RoundCommitted(RoundStats)
}

// observeRound reports a committed round to the configured observer.
func (c *Controller) observeRound(batch []*event, roundStart time.Time, computeStart, proposeStart, committed time.Time, records, entries int) {
	o := c.cfg.Observer
	if o == nil {
		return
	}
	qt := make([]time.Duration, len(batch))
	for i, ev := range batch {
		if ev.enqueued.IsZero() {
			continue
		}
		if d := roundStart.Sub(ev.enqueued); d > 0 {
			qt[i] = d
		}
	}
	st := RoundStats{Events: len(batch), Records: records, Entries: entries, QueueTimes: qt,
		Compute: proposeStart.Sub(computeStart)}
	if records > 0 {
		st.Commit = committed.Sub(proposeStart)
	}
	o.RoundCommitted(st)
}
