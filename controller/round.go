package controller

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// round is one group commit of the event loop: events computed into one
// Txn, proposed as log entries, and finished once those have committed
// (callers answered, requests sent).
//
// While a round commits, the loop computes the events that arrive into
// the next round, over the committing round's Txn: raft writes and
// replicates while the controller computes, and every event that arrives
// during a commit goes out with the next one. The next round is proposed
// only once the one before it has committed, and is rebased onto the
// image then. Its callers are answered only after its own commit, so no
// answer ever rests on a change that did not commit: if the round below
// fails, the events computed over it fail with NOT_CONTROLLER or are
// computed again.
type round struct {
	batch []*event
	spans []eventSpan // one per event of batch
	// afterCommit lists, in batch order, the events with effects to
	// apply once the round has committed.
	afterCommit []afterCommit
	// queued is how long each event of batch waited before its compute.
	queued []time.Duration
	txn    *fsm.Txn
	plan   *plan
	// over is the round in flight that txn was opened over, until it
	// commits and txn is rebased onto the image; base is the image's
	// applied index under txn from then on.
	over *round
	base uint64
	// overlapped: part of the round was computed while the round before
	// it committed.
	overlapped bool
	// endRound: an event asked that nothing more be computed in or over
	// this round before it commits (a broker's epoch is its entry's index).
	endRound bool
	compute  time.Duration
	// epoch is the controller epoch the round's requests go out under:
	// the activation's when the round was last computed into (an import
	// may raise it in a later round, computed while this one commits).
	epoch int32

	// Set by proposeRound; the rest once done is closed.
	proposed  time.Time
	done      chan struct{}
	records   []rl.Record
	staged    int // records as Txn.Len counts them
	indexes   []uint64
	rejected  []globalRejection
	err       error
	committed time.Time
}

// eventSpan is where an event's records sit in its round.
type eventSpan struct {
	ok         bool
	start, end int
	value      any
	err        error
}

// afterCommit is an event's session changes to apply once its records
// have committed (effects.committed): few events have any.
type afterCommit struct {
	span    int // the event's index in batch and spans
	changes []sessionChange
}

func newRound(over *round) *round {
	return &round{plan: newPlan(), over: over, overlapped: over != nil}
}

// compute computes events into r in order, until one asks to end the
// round or the round is full, and returns how many it took. Over a round
// in flight it takes none once the image has moved past that round's
// base (the round has started to apply): they wait for its commit.
func (c *Controller) compute(a *activation, r *round, events []*event) int {
	if r.endRound || (r.over != nil && r.over.endRound) {
		return 0
	}
	if room := c.cfg.MaxEventsPerRound - len(r.batch); len(events) > room {
		events = events[:max(room, 0)]
	}
	if len(events) == 0 {
		return 0
	}
	start := time.Now()
	now := c.cfg.Clock.Now()
	// Over a round in flight, each event takes the image's read lock on
	// its own: that round's apply, which waits for the write lock, gets
	// in between two events instead of waiting for all of them.
	step := len(events)
	if r.over != nil {
		step = 1
	}
	n := 0
	for n < len(events) && !r.endRound {
		took := 0
		c.cfg.FSM.View(func(im *fsm.Image) { took = c.computeIn(a, r, im, events[n:min(n+step, len(events))], now) })
		if took == 0 {
			break
		}
		n += took
	}
	r.batch = append(r.batch, events[:n]...)
	r.compute += time.Since(start)
	if n > 0 {
		r.epoch = a.epoch
		if c.computed != nil {
			c.computed(events[:n], r.over != nil)
		}
	}
	return n
}

// computeIn computes events into r under the image's read lock, and
// returns how many it took: none over a round in flight once the image
// has moved past that round's base.
func (c *Controller) computeIn(a *activation, r *round, im *fsm.Image, events []*event, now time.Time) int {
	if r.over != nil && im.AppliedIndex() != r.over.base {
		return 0
	}
	open := func() {
		if r.over != nil {
			r.txn = r.over.txn.Child()
		} else {
			r.txn, r.base = fsm.NewTxn(im, im.AppliedIndex()+1), im.AppliedIndex()
		}
	}
	if r.txn == nil {
		open()
	}
	n := 0
	for _, ev := range events {
		// The round's first event stages straight into the round's Txn
		// (a failure then just opens it again): large events come alone,
		// and one Txn level fewer halves their lookups.
		first := r.txn.Empty()
		child := r.txn
		if !first {
			child = r.txn.Child()
		}
		w := newWork(child, now, c.log)
		w.static = c.cfg.StaticConfigs
		before := child.Len()
		w.stageCause(ev.name)
		out, err := safeCompute(ev, a.managers, w)
		sp := eventSpan{value: out.value, err: err}
		if !first {
			sp.start = r.txn.Len()
		}
		// An event that staged nothing but its cause writes nothing.
		bare := err == nil && w.onlyCause(before)
		switch {
		case err == nil && first:
			if bare {
				open()
			}
			r.plan.merge(w.plan)
			sp.ok = true
		case err == nil:
			if !bare {
				r.txn.Merge(child)
			}
			r.plan.merge(w.plan)
			sp.ok = true
		case first:
			open()
		}
		sp.end = r.txn.Len()
		if sp.ok {
			// The event is in the round: so are the changes to state
			// outside the image it asked for.
			c.applyEffects(a, out.effects)
			if len(out.committed) > 0 {
				r.afterCommit = append(r.afterCommit, afterCommit{span: len(r.spans), changes: out.committed})
			}
		}
		r.spans = append(r.spans, sp)
		r.queued = append(r.queued, max(now.Sub(ev.enqueued), 0))
		n++
		if sp.ok && out.endRound {
			r.endRound = true
			break
		}
	}
	return n
}

// proposeRound hands the round's records to the log and returns at once;
// r.done is closed once they have committed and applied, or failed. A
// round with nothing to write is done at once.
func (c *Controller) proposeRound(r *round) {
	r.done = make(chan struct{})
	r.proposed = time.Now()
	if r.txn != nil {
		r.records, r.staged = r.txn.Records(), r.txn.Len()
	}
	if len(r.records) == 0 {
		r.committed = r.proposed
		close(r.done)
		return
	}
	// A packed record applies all or none: it must not hold the changes
	// of two events, whose outcomes are reported apart.
	var starts []int
	for _, sp := range r.spans {
		if sp.ok && sp.end > sp.start {
			starts = append(starts, sp.start)
		}
	}
	go func() {
		r.indexes, r.rejected, r.err = c.propose(r.records, starts)
		r.committed = time.Now()
		close(r.done)
	}()
}

// rebase stands r on the image once the round it was computed over has
// committed, the image then holding exactly that round's changes. It
// reports false when it cannot (that round failed or had a record
// refused, or something else was applied too): r's events must then be
// computed again.
func (c *Controller) rebase(r *round) bool {
	over := r.over
	if over.err != nil || len(over.rejected) > 0 {
		return false
	}
	// The image must hold over's entries right after over's base and
	// nothing else: an entry of anyone else's in between, and r was
	// computed over a state the log never had.
	for i, idx := range over.indexes {
		if idx != over.base+1+uint64(i) {
			return false
		}
	}
	want := over.base + uint64(len(over.indexes))
	ok := false
	c.cfg.FSM.View(func(im *fsm.Image) {
		if im.AppliedIndex() != want {
			return
		}
		if r.txn != nil {
			r.txn.Rebase(im)
		}
		r.over, r.base, ok = nil, want, true
	})
	return ok
}

// applyEffects applies what an event that joined its round asked for
// beyond its records and requests: its session changes, and the
// controller epoch the round's requests go out under.
func (c *Controller) applyEffects(a *activation, e effects) {
	if len(e.sessions) > 0 {
		a.managers.cluster.sessions.apply(e.sessions)
	}
	if e.epoch > 0 {
		c.mu.Lock()
		a.epoch = e.epoch
		c.mu.Unlock()
	}
}

// finish answers the callers of a round that is done, applies the
// effects its events left for after the commit, and sends the requests it
// planned. It returns the events that answered events call for next (see
// event.then) and the round's error: a failed round's events are answered
// with NOT_CONTROLLER.
func (c *Controller) finish(a *activation, r *round) ([]*event, error) {
	var next []*event
	reply := func(ev *event, res eventResult) {
		ev.done <- res
		if ev.then != nil {
			if n := ev.then(res); n != nil {
				next = append(next, n)
			}
		}
	}
	if r.err != nil {
		for i, sp := range r.spans {
			switch {
			case !sp.ok:
				reply(r.batch[i], eventResult{err: sp.err})
			case sp.end > sp.start && !errors.Is(r.err, raft.ErrNotLeader):
				// Its records went to raft, which lost the leadership
				// before they committed: the next leader may commit
				// them yet. NOT_CONTROLLER would tell the client that
				// nothing happened, and its retry would then meet
				// its own change (TOPIC_ALREADY_EXISTS to a creation,
				// UNKNOWN_TOPIC_OR_PARTITION to a deletion).
				reply(r.batch[i], eventResult{err: kafkaErr(kerr.RequestTimedOut,
					"this controller lost its leadership while the change was being committed; the next one may still apply it (%v)", r.err)})
			default:
				reply(r.batch[i], eventResult{err: fmt.Errorf("%w (%v)", ErrNotController, r.err)})
			}
		}
		return next, r.err
	}
	c.observeRound(r)
	last := c.cfg.FSM.AppliedIndex()
	if n := len(r.indexes); n > 0 {
		last = r.indexes[n-1]
	}
	sent := time.Now()
	if !r.plan.empty() {
		c.send(a, r.plan, r.epoch, last)
	}
	if len(r.records) > 0 && c.log.IsDebug() {
		c.log.Debug("round committed", "events", len(r.spans), "records", r.staged, "entries", len(r.indexes),
			"overlapped", r.overlapped, "compute", r.compute.String(), "commit", r.committed.Sub(r.proposed).String(),
			"send", time.Since(sent).String())
	}
	after := r.afterCommit
	for i, sp := range r.spans {
		ev := r.batch[i]
		for len(after) > 0 && after[0].span < i {
			after = after[1:]
		}
		if !sp.ok {
			reply(ev, eventResult{err: sp.err})
			continue
		}
		if rj := rejectedIn(r.rejected, sp.start, sp.end); rj != nil {
			c.log.Error("the FSM rejected a record the controller had staged", "event", ev.name, "error", rj)
			reply(ev, eventResult{err: kafkaErr(unknownServerError, "%v", rj)})
			continue
		}
		if len(after) > 0 && after[0].span == i {
			a.managers.cluster.sessions.apply(after[0].changes)
		}
		idx := last
		if sp.end > sp.start {
			idx = r.indexes[sp.start/c.cfg.MaxRecordsPerEntry]
		}
		v := sp.value
		if ev.finish != nil {
			v = ev.finish(v, idx)
		}
		reply(ev, eventResult{value: v, index: idx})
	}
	return next, nil
}
