package controller

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// runLoop is the active controller: activation first, then rounds of
// events until stopped or leadership is lost.
func (c *Controller) runLoop(a *activation) {
	defer close(a.done)
	if err := c.activate(a); err != nil {
		a.failed = err
		close(a.ready)
		c.log.Warn("activation failed", "error", err)
		c.failQueued(a)
		return
	}
	close(a.ready)
	tick := time.NewTicker(c.tickInterval())
	defer tick.Stop()
	bal, _ := c.balance()
	balance := newBalanceTicker(bal.cfg.Interval)
	defer func() { balance.stop() }()
	// balancing: an automatic rebalance is under way (see balanceEvents).
	balancing := false
	var pending []*event
	// inflight is the round being committed; next is computed over it
	// meanwhile, and proposed once it has committed.
	var inflight, next *round
	for {
		if len(pending) > 0 {
			if next == nil {
				next = newRound(inflight)
			}
			pending = pending[c.compute(a, next, pending):]
		}
		if inflight == nil && next != nil {
			inflight, next = next, nil
			c.proposeRound(inflight)
			continue
		}
		var committed <-chan struct{}
		if inflight != nil {
			committed = inflight.done
		}
		// Events the next round cannot take yet stay in the queue, which
		// then fills and holds callers back (QueueSize), rather than
		// piling up here.
		events, ticks, balanceTicks := a.events, tick.C, balance.c()
		if len(pending) >= c.cfg.MaxEventsPerRound {
			events, ticks, balanceTicks = nil, nil, nil
		}
		select {
		case <-a.stop:
			if inflight != nil {
				<-inflight.done
				c.finish(a, inflight)
			}
			if next != nil {
				pending = append(next.batch, pending...)
			}
			c.abandon(a, pending)
			return
		case ev := <-events:
			pending = append(pending, ev)
		drain:
			for len(pending) < c.cfg.MaxEventsPerRound {
				select {
				case ev := <-a.events:
					pending = append(pending, ev)
				default:
					break drain
				}
			}
		case <-ticks:
			pending = append(pending, c.newEvent("session-check", computeCheckSessions))
			// The configs may have changed the rebalance: a committed
			// BrokerConfig record, a snapshot restored. Reading them is a
			// few lookups, so the session tick looks (at most 1 s late).
			if now, _ := c.balance(); now.cfg.Interval != bal.cfg.Interval {
				balance.stop()
				balance = newBalanceTicker(now.cfg.Interval)
				c.log.Info("automatic leader rebalance interval", "interval", now.cfg.Interval.String(), "enabled", now.enabled)
				bal = now
			}
		case <-balanceTicks:
			c.balanceChecks.Add(1)
			bal, _ = c.balance()
			if bal.enabled && !balancing {
				balancing = true
				pending = append(pending, c.balanceEvents(bal.cfg, func() { balancing = false }))
			}
		case <-c.balanceChanged:
			bal, _ = c.balance()
			balance.stop()
			balance = newBalanceTicker(bal.cfg.Interval)
		case <-committed:
			r := inflight
			inflight = nil
			followUps, err := c.finish(a, r)
			pending = append(pending, followUps...)
			if next != nil && next.over == r && !c.rebase(next) {
				// Computed over changes that did not all commit: its
				// events go back to the front of the queue, to be
				// computed again over the image (or failed below).
				pending = append(next.batch[:len(next.batch):len(next.batch)], pending...)
				next = nil
			}
			if errors.Is(err, errLeadershipLost) {
				c.log.Warn("leadership lost: active controller stopping", "epoch", a.epoch, "error", err)
				c.abandon(a, pending)
				c.mu.Lock()
				if c.active == a {
					c.active = nil
				}
				c.mu.Unlock()
				return
			}
		}
	}
}

func (c *Controller) tickInterval() time.Duration {
	d := c.cfg.SessionTimeout / 8
	if d < 10*time.Millisecond {
		d = 10 * time.Millisecond
	}
	if d > time.Second {
		d = time.Second
	}
	return d
}

// balanceTicker is the loop's timer of the automatic rebalance: none when
// the interval is zero.
type balanceTicker struct{ t *time.Ticker }

func newBalanceTicker(interval time.Duration) balanceTicker {
	if interval <= 0 {
		return balanceTicker{}
	}
	return balanceTicker{t: time.NewTicker(interval)}
}

func (b balanceTicker) c() <-chan time.Time {
	if b.t == nil {
		return nil
	}
	return b.t.C
}

func (b balanceTicker) stop() {
	if b.t != nil {
		b.t.Stop()
	}
}

// balanceEvents is the automatic rebalance of one balance tick, as a chain
// of events the loop runs one after the other: the reassignment check
// first, then the rebalance's runs (see RebalanceLeaders) with the
// settings of the tick, each queued once the one before it has been
// answered. done is called when the chain ends: after its last run, on a
// failed run (logged), or once SetBalance has been called. A failed
// reassignment check (logged) still lets the rebalance run.
func (c *Controller) balanceEvents(cfg BalanceConfig, done func()) *event {
	sets := func() uint64 { c.mu.Lock(); defer c.mu.Unlock(); return c.balanceSets }
	set := sets()
	changed := func() bool { return sets() != set }
	var total BalanceResult
	var run func(first bool, carried []partRef) *event
	run = func(first bool, carried []partRef) *event {
		ev := c.newEvent("rebalance-leaders", computeRebalanceRun(cfg, first, carried))
		ev.then = func(r eventResult) *event {
			if r.err != nil {
				c.log.Debug("leader rebalance failed", "error", r.err)
				done()
				return nil
			}
			next, more := total.add(r.value.(balanceRun), first)
			if !more || changed() {
				done()
				return nil
			}
			return run(false, next)
		}
		return ev
	}
	check := c.newEvent("check-reassignments", computeCheckReassignments)
	check.then = func(r eventResult) *event {
		if r.err != nil {
			c.log.Debug("reassignment check failed", "error", r.err)
		}
		if changed() {
			done()
			return nil
		}
		return run(true, nil)
	}
	return check
}

// abandon answers the events the loop holds, and every queued one, with
// NOT_CONTROLLER.
func (c *Controller) abandon(a *activation, held []*event) {
	for _, ev := range held {
		ev.done <- eventResult{err: ErrNotController}
	}
	c.failQueued(a)
}

// failQueued answers every queued event with NOT_CONTROLLER.
func (c *Controller) failQueued(a *activation) {
	for {
		select {
		case ev := <-a.events:
			ev.done <- eventResult{err: ErrNotController}
		default:
			return
		}
	}
}

// runRound computes events against the image until one asks to end the
// round, proposes their records, and once they have committed sends the
// planned requests and answers the callers. It returns the events it did
// not get to.
func (c *Controller) runRound(a *activation, batch []*event) ([]*event, error) {
	r := newRound(nil)
	n := c.compute(a, r, batch)
	c.proposeRound(r)
	<-r.done
	_, err := c.finish(a, r)
	return batch[n:], err
}

func safeCompute(ev *event, m *managers, w *work) (out eventOutcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			w.log.Error("event failed with a panic", "event", ev.name, "panic", r)
			err = kafkaErr(unknownServerError, "internal error handling %s", ev.name)
		}
	}()
	return ev.compute(m, w)
}

type globalRejection struct {
	offset int
	err    error
}

func rejectedIn(rj []globalRejection, start, end int) error {
	i := sort.Search(len(rj), func(i int) bool { return rj[i].offset >= start })
	if i < len(rj) && rj[i].offset < end {
		return rj[i].err
	}
	return nil
}

// propose writes records as log entries of at most MaxRecordsPerEntry
// records each, all in flight at once, and waits for them to commit and
// apply. It returns each entry's index, and any record the FSM rejected.
// Positions count records as fsm.Txn.Len does (a PartitionChanges one per
// change; one is cut in two where an entry ends). starts lists, in
// ascending order, the positions where an event's records begin: no
// packed record spans one.
func (c *Controller) propose(records []rl.Record, starts []int) ([]uint64, []globalRejection, error) {
	if len(records) == 0 {
		return nil, nil, nil
	}
	per := c.cfg.MaxRecordsPerEntry
	var futures []raft.ApplyFuture
	var origins [][]int
	var chunk []rl.Record
	var pos []int
	flat := 0
	var carry *rl.PartitionChanges // the rest of a record cut at an entry's end
	for i := 0; i < len(records) || carry != nil; {
		limit := flat + per
		chunk, pos = chunk[:0], pos[:0]
		for flat < limit && (carry != nil || i < len(records)) {
			var r rl.Record
			if carry != nil {
				r, carry = carry, nil
			} else {
				r = records[i]
				i++
			}
			w := fsm.Weight(r)
			if pcs, ok := r.(*rl.PartitionChanges); ok && flat+w > limit {
				k := limit - flat
				carry = &rl.PartitionChanges{TopicID: pcs.TopicID, Changes: pcs.Changes[k:]}
				r, w = &rl.PartitionChanges{TopicID: pcs.TopicID, Changes: pcs.Changes[:k:k]}, k
			}
			chunk = append(chunk, r)
			pos = append(pos, flat)
			flat += w
		}
		entry, origin := coalesce(chunk, pos, starts)
		data, err := rl.EncodeBatch(entry)
		if err != nil {
			return nil, nil, fmt.Errorf("encode: %w", err)
		}
		futures = append(futures, c.cfg.Log.Apply(data, c.cfg.ApplyTimeout))
		origins = append(origins, origin)
	}
	indexes := make([]uint64, len(futures))
	var rejected []globalRejection
	var firstErr error
	for i, f := range futures {
		if err := f.Error(); err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("%w: %w", errLeadershipLost, err)
			}
			continue
		}
		indexes[i] = f.Index()
		switch res := f.Response().(type) {
		case *fsm.ApplyResult:
			for _, r := range res.Rejected {
				off := i * per
				if r.Record >= 0 && r.Record < len(origins[i]) {
					off = origins[i][r.Record]
				}
				rejected = append(rejected, globalRejection{offset: off, err: r.Err})
			}
		case error:
			if firstErr == nil {
				firstErr = fmt.Errorf("%w: %v", errLeadershipLost, res)
			}
		}
	}
	if firstErr != nil {
		return nil, nil, firstErr
	}
	return indexes, rejected, nil
}

// send materializes the plan from the committed image and hands each
// broker its requests.
func (c *Controller) send(a *activation, p *plan, epoch int32, offset uint64) {
	hdr := Header{ControllerID: c.cfg.NodeID, ControllerEpoch: epoch, MetadataOffset: offset}
	var reqs []Requests
	c.cfg.FSM.View(func(im *fsm.Image) { reqs = p.materialize(im, hdr, a.managers.cluster.sessions.awaitingCatchUp) })
	for _, r := range reqs {
		c.cfg.Sender.Send(r)
	}
}

// coalesce writes each run of PartitionChange records of one topic, for
// partitions in ascending order, as one PartitionChanges record: the same
// changes, which the FSM applies the same way, in a fraction of the bytes
// and decoding work. A PartitionChanges record (packed as it was staged)
// is written as it is, or as a PartitionChange if it holds one change.
// pos[i] is the position of records[i] in the round (counted as
// fsm.Txn.Len counts), whose events begin at the ascending positions
// starts: a run stops at each. origin[i] is the position of the first
// record that out[i] stands for.
func coalesce(records []rl.Record, pos []int, starts []int) (out []rl.Record, origin []int) {
	out = make([]rl.Record, 0, len(records))
	origin = make([]int, 0, len(records))
	next := 0 // the first event start after records[i]
	for i := 0; i < len(records); {
		for next < len(starts) && starts[next] <= pos[i] {
			next++
		}
		origin = append(origin, pos[i])
		if pcs, ok := records[i].(*rl.PartitionChanges); ok && len(pcs.Changes) == 1 {
			d := &pcs.Changes[0]
			out = append(out, &rl.PartitionChange{TopicID: pcs.TopicID, Partition: d.Partition, PartitionEpoch: d.PartitionEpoch,
				Set: d.Set, Leader: d.Leader, ISR: d.ISR, Replicas: d.Replicas, Adding: d.Adding, Removing: d.Removing})
			i++
			continue
		}
		first, ok := records[i].(*rl.PartitionChange)
		j := i + 1
		if ok {
			last := first.Partition
			for ; j < len(records) && (next >= len(starts) || pos[j] < starts[next]); j++ {
				pc, ok := records[j].(*rl.PartitionChange)
				if !ok || pc.TopicID != first.TopicID || pc.Partition <= last {
					break
				}
				last = pc.Partition
			}
		}
		if j-i < 2 {
			out = append(out, records[i])
			i = j
			continue
		}
		rec := &rl.PartitionChanges{TopicID: first.TopicID, Changes: make([]rl.PartitionDelta, 0, j-i)}
		for _, r := range records[i:j] {
			rec.Changes = append(rec.Changes, r.(*rl.PartitionChange).Delta())
		}
		out = append(out, rec)
		i = j
	}
	return out, origin
}
