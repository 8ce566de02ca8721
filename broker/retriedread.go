package broker

import (
	"context"
	"sync/atomic"
)

// retriedRead is a read of what the agent keeps from the controller (the
// cluster state, the finalized feature levels): done when a control
// request calls for it, bounded by the request timeout, and, when it
// failed, done again in the background at the next heartbeat, one attempt
// at a time, until it succeeds.
type retriedRead struct {
	what     string                      // what is read, for the logs
	read     func(context.Context) error // the read a retry does
	stale    atomic.Bool
	retrying atomic.Bool
}

// now does read (the retry's, or one that asks for more); a failure is
// logged and retried at the next heartbeat.
func (r *retriedRead) now(ctx context.Context, a *Agent, read func(context.Context) error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	err := read(ctx)
	r.stale.Store(err != nil)
	if err != nil {
		a.log.Warn("reading "+r.what+" from the controller failed; retrying at the next heartbeat", "error", err)
	}
}

// retry reads again in the background if the last read failed.
func (r *retriedRead) retry(a *Agent) {
	if !r.stale.Load() || !r.retrying.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer r.retrying.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), a.cfg.RequestTimeout)
		defer cancel()
		if err := r.read(ctx); err != nil {
			a.log.Debug("reading "+r.what+" from the controller failed again", "error", err)
			return
		}
		r.stale.Store(false)
		a.log.Info("read " + r.what + " from the controller again")
	}()
}
