package controller

import (
	"context"
	"fmt"
	"time"
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
	a.managers = newManagers(c.cfg.NodeID, c.cfg.SessionTimeout)
	a.managers.replication.stateChanges = stateChangeLog{log: c.log.Named("state.change"), invalid: &c.invalidStateChanges}
	a.managers.features.bootstrapLevel = c.cfg.BootstrapLevel
	a.managers.quorum.clusterID = c.cfg.ClusterID
	ev := c.newEvent("activate", func(m *managers, w *work) (eventOutcome, error) {
		// A new cluster's level is finalized in its first activation,
		// decided on the image before this activation's epoch.
		if err := m.features.bootstrap(w); err != nil {
			return eventOutcome{}, err
		}
		epoch, err := m.quorum.activate(w)
		if err != nil {
			return eventOutcome{}, err
		}
		if err := m.quorum.recordClusterID(w); err != nil {
			return eventOutcome{}, err
		}
		res := m.cluster.activate(w)
		res.epoch = epoch.epoch
		return respond(res, nil)
	})
	if _, err := c.runRound(a, []*event{ev}); err != nil {
		return err
	}
	r := <-ev.done
	if r.err != nil {
		return r.err
	}
	a.managers.cluster.activated(r.index)
	stats := ActivationStats{Epoch: a.epoch, Started: a.started, Ready: c.cfg.Clock.Now(), Brokers: r.value.(int)}
	c.mu.Lock()
	c.lastStats = stats
	c.mu.Unlock()
	c.log.Info("active controller", "epoch", a.epoch, "index", r.index, "live_brokers", stats.Brokers,
		"took", stats.Ready.Sub(stats.Started).String())
	// Resumption runs as the first ordinary event, after the node is ready.
	select {
	case a.events <- c.newEvent("resume", computeResume):
	default:
		c.log.Warn("event queue full: work in progress resumes with the next session check")
	}
	return nil
}

// computeResume finishes what the log shows in progress (see
// replicationManager.resume).
func computeResume(m *managers, w *work) (eventOutcome, error) {
	return answer(nil, m.replication.resume(w))
}
