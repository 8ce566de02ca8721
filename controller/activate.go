package controller

import (
	"context"
	"fmt"
	"time"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// ActivationStats describes the last activation, for logs and benchmarks.
type ActivationStats struct {
	Epoch int32
	// Started is when Activate was called; Ready when the ControllerEpoch
	// record had committed and the catch-up requests were queued.
	Started, Ready time.Time
	// Brokers is how many live brokers were sent UpdateMetadata.
	Brokers int
}

// Activate makes this node the active controller: call it when raft makes
// this voter leader. It returns at once; WaitReady waits for the outcome.
// Activation waits on a barrier (raft's LeaderCh fires before the new
// leader's entries commit), commits the next ControllerEpoch, gives every
// unfenced broker a fresh session, sends every live broker a full
// UpdateMetadata under the new epoch (the brokers and the names of the
// topics, no partition states), and queues the resumption of work the
// image shows in progress. It reads nothing but the local image: there is
// nothing to rebuild, so its cost does not grow with the number of
// partitions.
func (c *Controller) Activate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.active != nil {
		return
	}
	a := &activation{events: make(chan *event, c.cfg.QueueSize), stop: make(chan struct{}), done: make(chan struct{}),
		ready: make(chan struct{}), started: c.cfg.Clock.Now()}
	c.active = a
	go c.runLoop(a)
}

// Deactivate stops the active controller, if any: the event loop stops
// after the round in flight, and queued and later calls fail with
// NOT_CONTROLLER. Call it when raft reports this voter is no longer leader.
func (c *Controller) Deactivate() {
	c.mu.Lock()
	a := c.active
	c.active = nil
	c.mu.Unlock()
	if a == nil {
		return
	}
	close(a.stop)
	<-a.done
	c.log.Info("no longer the active controller", "epoch", a.epoch)
}

// WaitReady waits until activation finished and reports its outcome.
func (c *Controller) WaitReady(ctx context.Context) error {
	c.mu.Lock()
	a := c.active
	c.mu.Unlock()
	if a == nil {
		return ErrNotController
	}
	select {
	case <-a.ready:
		return a.failed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// LastActivation returns the stats of the current or last activation.
func (c *Controller) LastActivation() ActivationStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastStats
}

func (c *Controller) activate(a *activation) error {
	if err := c.cfg.Log.Barrier(c.cfg.ApplyTimeout).Error(); err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	a.sessions = newSessions()
	ev := c.newEvent("activate", nil)
	ev.compute = func(ec *eventCtx) (any, error) {
		cur, _ := ec.img().ControllerEpoch()
		if err := ec.stageEach(&rl.ControllerEpoch{Epoch: cur + 1, NodeID: c.cfg.NodeID}); err != nil {
			return nil, err
		}
		a.epoch = cur + 1
		n := 0
		for _, b := range ec.img().Brokers() {
			if !b.Fenced {
				a.sessions.touch(b.ID, ec.now.Add(c.cfg.SessionTimeout))
				a.sessions.needCatchUp[b.ID] = true
				n++
			}
		}
		// A full UpdateMetadata: it names every topic, so a broker that
		// missed a deletion under the previous controller forgets the
		// topic (a broker's own catch-up may never come: this request
		// already brings its metadata offset past the activation).
		ec.plan.updateMetadataToAll, ec.plan.fullUpdateMetadata = true, true
		return n, nil
	}
	if _, err := c.runRound(a, []*event{ev}); err != nil {
		return err
	}
	r := <-ev.done
	if r.err != nil {
		return r.err
	}
	a.catchUpBelow = r.index
	stats := ActivationStats{Epoch: a.epoch, Started: a.started, Ready: c.cfg.Clock.Now(), Brokers: r.value.(int)}
	c.mu.Lock()
	c.lastStats = stats
	c.mu.Unlock()
	c.log.Info("active controller", "epoch", a.epoch, "index", r.index, "live_brokers", stats.Brokers,
		"took", stats.Ready.Sub(stats.Started).String())
	// Resumption runs as the first ordinary event, after the node is ready.
	select {
	case a.events <- c.resumeEvent():
	default:
		c.log.Warn("event queue full: work in progress resumes with the next session check")
	}
	return nil
}

// resumeEvent finishes what the log shows in progress (see reconcile) and
// then runs the resumers of multi-step work such as deletions.
func (c *Controller) resumeEvent() *event {
	return c.newEvent("resume", func(ec *eventCtx) (any, error) {
		if err := ec.reconcile(); err != nil {
			return nil, err
		}
		for _, r := range c.resumers {
			if err := r(ec); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
}
