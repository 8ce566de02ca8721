package controller

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// BrokerRegistration is a broker asking to join.
type BrokerRegistration struct {
	BrokerID      int32
	IncarnationID rl.IncarnationID
	Endpoints     []rl.Endpoint
	Rack          string
}

// RegisterBroker registers a broker and returns its broker epoch. The same
// incarnation registering again gets its epoch back. A new incarnation
// replaces the old one (whose epoch every later request then fails with)
// unless the old one still has a live session: then the id is in use
// (DUPLICATE_BROKER_REGISTRATION) until that session ends.
func (c *Controller) RegisterBroker(ctx context.Context, req BrokerRegistration) (int64, error) {
	if req.BrokerID < 0 {
		return 0, kafkaErr(kerr.InvalidRequest, "broker id %d is negative", req.BrokerID)
	}
	v, _, err := c.submit(ctx, "register-broker", func(ec *eventCtx) (any, error) {
		old := ec.img().Broker(req.BrokerID)
		if old != nil && old.Incarnation == req.IncarnationID {
			ec.act.sessions.touch(req.BrokerID, ec.now.Add(c.cfg.SessionTimeout))
			return old.Epoch, nil
		}
		if old != nil && !old.Fenced && ec.act.sessions.alive(req.BrokerID, ec.now) {
			return nil, kafkaErr(kerr.DuplicateBrokerRegistration, "broker %d is registered with incarnation %s and its session is live", req.BrokerID, old.Incarnation)
		}
		if err := ec.stageEach(&rl.RegisterBroker{BrokerID: req.BrokerID, IncarnationID: req.IncarnationID, Endpoints: req.Endpoints, Rack: req.Rack}); err != nil {
			return nil, err
		}
		if old != nil {
			ec.log.Info("broker registered a new incarnation: fencing the old one", "broker", req.BrokerID, "old_epoch", old.Epoch)
			if err := ec.offlineBrokerReplicas(req.BrokerID); err != nil {
				return nil, err
			}
		} else {
			ec.log.Info("broker registered", "broker", req.BrokerID, "rack", req.Rack)
		}
		ec.act.sessions.touch(req.BrokerID, ec.now.Add(c.cfg.SessionTimeout))
		ec.act.sessions.needCatchUp[req.BrokerID] = false
		if old != nil && !old.Fenced {
			ec.plan.updateMetadataToAll = true // a live broker left the list
		}
		ec.endRound = true
		return int64(-1), nil
	}, func(v any, index uint64) any {
		if e := v.(int64); e >= 0 {
			return e
		}
		return int64(index)
	})
	if err != nil {
		return 0, err
	}
	return v.(int64), nil
}

// Heartbeat is a broker's periodic report.
type Heartbeat struct {
	BrokerID    int32
	BrokerEpoch int64
	// MetadataOffset is the highest control-request offset the broker applied.
	MetadataOffset uint64
	WantFence      bool
	WantShutDown   bool
}

// HeartbeatResponse tells a broker where it stands.
type HeartbeatResponse struct {
	IsCaughtUp     bool
	IsFenced       bool
	ShouldShutDown bool
}

// Heartbeat renews a broker's session. A fenced broker that has caught up
// (applied at least up to its own registration) is unfenced and its
// replicas come back online; one that asks to shut down is moved out of
// every leadership first and told it may stop once it leads nothing.
func (c *Controller) Heartbeat(ctx context.Context, hb Heartbeat) (HeartbeatResponse, error) {
	// A broker's first heartbeat since activation plans its catch-up;
	// the mark goes once the round that sends it has committed, so a
	// heartbeat computed again (its round's base was not what the log
	// holds) plans it again.
	var caughtUp *sessions
	v, _, err := c.submit(ctx, "heartbeat", func(ec *eventCtx) (any, error) {
		caughtUp = nil
		if ec.act.sessions.needCatchUp[hb.BrokerID] {
			caughtUp = ec.act.sessions
		}
		return ec.heartbeat(hb)
	}, func(v any, _ uint64) any {
		if caughtUp != nil {
			caughtUp.needCatchUp[hb.BrokerID] = false
		}
		return v
	})
	if err != nil {
		return HeartbeatResponse{}, err
	}
	return v.(HeartbeatResponse), nil
}

func (ec *eventCtx) checkBrokerEpoch(id int32, epoch int64) (*fsm.Broker, error) {
	b := ec.img().Broker(id)
	if b == nil {
		return nil, kafkaErr(kerr.BrokerIDNotRegistered, "broker %d", id)
	}
	if b.Epoch != epoch {
		return nil, kafkaErr(kerr.StaleBrokerEpoch, "broker %d has epoch %d, request carries %d", id, b.Epoch, epoch)
	}
	return b, nil
}

func (ec *eventCtx) heartbeat(hb Heartbeat) (any, error) {
	b, err := ec.checkBrokerEpoch(hb.BrokerID, hb.BrokerEpoch)
	if err != nil {
		return nil, err
	}
	s := ec.act.sessions
	s.touch(b.ID, ec.now.Add(ec.c.cfg.SessionTimeout))
	s.offset[b.ID] = hb.MetadataOffset
	if s.needCatchUp[b.ID] && hb.MetadataOffset < ec.act.catchUpBelow {
		ec.plan.catchUpFrom(b.ID, hb.MetadataOffset, false)
	}
	caughtUp := hb.MetadataOffset >= uint64(b.Epoch)
	stillLeads := false
	switch {
	case hb.WantFence && !b.Fenced:
		ec.log.Info("broker asked to be fenced", "broker", b.ID)
		if err := ec.fenceBroker(b); err != nil {
			return nil, err
		}
	case hb.WantShutDown:
		leads, err := ec.controlledShutdown(b)
		if err != nil {
			return nil, err
		}
		stillLeads = leads
	case b.Fenced && caughtUp && !hb.WantFence:
		if err := ec.unfenceBroker(b, hb.MetadataOffset); err != nil {
			return nil, err
		}
	}
	now := ec.img().Broker(b.ID)
	resp := HeartbeatResponse{IsCaughtUp: caughtUp, IsFenced: now.Fenced}
	if hb.WantShutDown {
		resp.ShouldShutDown = !stillLeads
	}
	return resp, nil
}

// sessionCheckEvent fences every broker whose session expired.
func (c *Controller) sessionCheckEvent() *event {
	return c.newEvent("session-check", func(ec *eventCtx) (any, error) {
		return nil, ec.expireSessions()
	})
}

// CheckSessions runs a session check now (the loop also runs one on a
// timer). It returns once the resulting fences committed.
func (c *Controller) CheckSessions(ctx context.Context) error {
	_, _, err := c.submit(ctx, "session-check", func(ec *eventCtx) (any, error) { return nil, ec.expireSessions() }, nil)
	return err
}

func (ec *eventCtx) expireSessions() error {
	for _, id := range ec.act.sessions.expired(ec.now) {
		b := ec.img().Broker(id)
		if b == nil {
			ec.act.sessions.forget(id)
			continue
		}
		if b.Fenced {
			continue
		}
		ec.log.Warn("broker session expired: fencing", "broker", id, "epoch", b.Epoch)
		if err := ec.fenceBroker(b); err != nil {
			return err
		}
	}
	return nil
}

// fenceBroker stages the fence and its effects: partitions the broker led
// go offline and are re-elected, then its replicas go OfflineReplica.
func (ec *eventCtx) fenceBroker(b *fsm.Broker) error {
	if err := ec.stageEach(&rl.FenceBroker{BrokerID: b.ID, BrokerEpoch: b.Epoch}); err != nil {
		return err
	}
	ec.plan.updateMetadataToAll = true
	return ec.offlineBrokerReplicas(b.ID)
}

// offlineBrokerReplicas runs the broker-failure transitions for a broker
// that is fenced in the event's view (Kafka's onBrokerFailure): partitions
// it leads go OfflinePartition and then OnlinePartition with the Offline
// strategy, and its replicas not yet offline go OfflineReplica. Replicas
// of topics being deleted go ReplicaDeletionIneligible instead once
// offline. It is idempotent, which is what lets a new controller finish a
// fence that an old one did not.
func (ec *eventCtx) offlineBrokerReplicas(id int32) error {
	led, hosted := ec.partitionsOf(id)
	ec.reserveBrokerWork(len(led), len(hosted))
	if len(hosted) > 0 {
		ec.plan.reserveStop(id, len(hosted)) // emptied again if none is stopped
	}
	return eachBrokerSlice(led, hosted, func(led, hosted []partRef) error {
		if len(led) > 0 {
			if _, err := ec.handlePartitionStateChanges(led, rl.OfflinePartition, 0, nil); err != nil {
				return err
			}
			if _, err := ec.handlePartitionStateChanges(led, rl.OnlinePartition, OfflineElection, ec.uncleanAllowed); err != nil {
				return err
			}
		}
		// The replicas not yet offline, and those offline but still
		// leading or in a shared ISR, are picked as their turn comes,
		// not in a pass of their own: on a large image each lookup is a
		// cache miss.
		toOffline := make([]replica, len(hosted))
		for i, ref := range hosted {
			toOffline[i] = replica{ref: ref, broker: id}
		}
		_, err := ec.handleReplicaStateChangesIf(toOffline, rl.OfflineReplica, func(p *fsm.Partition) bool {
			switch p.ReplicaState(id) {
			case rl.NewReplica, rl.OnlineReplica:
				return true
			case rl.OfflineReplica:
				// Already offline, but a failover may have cut the ISR
				// shrink short: offline again is valid and idempotent.
				return p.Leader == id || (p.InISR(id) && len(p.ISR) > 1)
			}
			return false
		})
		return err
	})
}

// brokerSlice is how many of a broker's partitions go through all their
// transitions before the next ones start. The records of one partition
// keep their order; those of different partitions are independent. A
// slice's partitions stay in the processor cache from the first
// transition to the last, here and in every voter's FSM, which applies
// the records in the same order: a pass over all of a large broker's
// partitions per transition would miss the cache on each of them.
var brokerSlice = 1024

// eachBrokerSlice calls fn with consecutive slices of hosted (in ref
// order) and the part of led (a subset of hosted, in the same order) that
// falls in each.
func eachBrokerSlice(led, hosted []partRef, fn func(led, hosted []partRef) error) error {
	li := 0
	for lo := 0; lo < len(hosted); lo += brokerSlice {
		hi := min(lo+brokerSlice, len(hosted))
		lj := li
		for lj < len(led) && compareRef(led[lj], hosted[hi-1]) <= 0 {
			lj++
		}
		if err := fn(led[li:lj:lj], hosted[lo:hi:hi]); err != nil {
			return err
		}
		li = lj
	}
	return nil
}

// reserveBrokerWork makes room, once, for what the transitions of a
// broker's partitions stage and plan slice by slice.
func (ec *eventCtx) reserveBrokerWork(led, hosted int) {
	ec.plan.reserve(hosted)
	ec.txn.Grow(led + hosted)
}

// unfenceBroker brings a caught-up broker back: its replicas come online,
// and partitions without a leader that it can lead are elected.
func (ec *eventCtx) unfenceBroker(b *fsm.Broker, offset uint64) error {
	if err := ec.stageEach(&rl.UnfenceBroker{BrokerID: b.ID, BrokerEpoch: b.Epoch}); err != nil {
		return err
	}
	ec.log.Info("broker caught up: unfenced", "broker", b.ID, "epoch", b.Epoch)
	ec.plan.updateMetadataToAll = true
	// A broker that has applied nothing past its own registration is a
	// new incarnation with an empty cache: it gets the whole image, as
	// Kafka sends a starting broker a full UpdateMetadata. One that comes
	// back with a cache gets what changed since.
	if offset <= uint64(b.Epoch) {
		offset = 0
	}
	ec.plan.catchUpFrom(b.ID, offset, false)
	ec.brokerReturned(b.ID)
	_, hosted := ec.partitionsOf(b.ID)
	toOnline := make([]replica, 0, len(hosted))
	var leaderless []partRef
	for _, ref := range hosted {
		if t := ec.img().Topic(ref.id); t != nil && t.Deleting {
			continue
		}
		p := ec.img().Partition(ref.id, ref.part)
		switch p.ReplicaState(b.ID) {
		case rl.NewReplica, rl.OfflineReplica, rl.ReplicaDeletionIneligible:
			toOnline = append(toOnline, replica{ref: ref, broker: b.ID})
		}
		if p.Leader == rl.NoLeader {
			leaderless = append(leaderless, ref)
		}
	}
	if len(toOnline) > 0 {
		// A replica created while its broker was fenced was never told
		// about: NewReplica -> OnlineReplica sends nothing by itself.
		for _, r := range toOnline {
			if p := ec.img().Partition(r.ref.id, r.ref.part); p.ReplicaState(b.ID) == rl.NewReplica && p.Leader != rl.NoLeader {
				ec.plan.leaderAndIsr(r.ref, []int32{b.ID}, true)
			}
		}
		if _, err := ec.handleReplicaStateChanges(toOnline, rl.OnlineReplica); err != nil {
			return err
		}
	}
	if len(leaderless) > 0 {
		if _, err := ec.handlePartitionStateChanges(leaderless, rl.OnlinePartition, OfflineElection, ec.uncleanAllowed); err != nil {
			return err
		}
	}
	return nil
}

// controlledShutdown moves leadership off a broker that asked to stop
// (ControlledShutdown strategy) and takes its follower replicas offline.
// A partition no other ISR member can lead is left with no leader and its
// ISR kept, so the broker leads nothing and may stop.
func (ec *eventCtx) controlledShutdown(b *fsm.Broker) (stillLeads bool, err error) {
	if !b.ShuttingDown {
		if err := ec.stageEach(&rl.BrokerShutdown{BrokerID: b.ID, BrokerEpoch: b.Epoch}); err != nil {
			return false, err
		}
		ec.log.Info("controlled shutdown requested", "broker", b.ID)
		ec.plan.updateMetadataToAll = true
	}
	led, hosted := ec.partitionsOf(b.ID)
	ec.reserveBrokerWork(len(led), len(hosted))
	err = eachBrokerSlice(led, hosted, func(led, hosted []partRef) error {
		if len(led) > 0 {
			failed, err := ec.handlePartitionStateChanges(led, rl.OnlinePartition, ControlledShutdownElection, nil)
			if err != nil {
				return err
			}
			if len(failed) > 0 {
				stuck := make([]partRef, 0, len(failed))
				for ref := range failed {
					stuck = append(stuck, ref)
				}
				if err := ec.dropLeadership(stuck); err != nil {
					return err
				}
			}
		}
		var followers []replica
		for _, ref := range hosted {
			p := ec.img().Partition(ref.id, ref.part)
			if p.Leader != b.ID && p.InISR(b.ID) && len(p.ISR) > 1 {
				switch p.ReplicaState(b.ID) {
				case rl.NewReplica, rl.OnlineReplica, rl.OfflineReplica, rl.ReplicaDeletionIneligible:
					followers = append(followers, replica{ref: ref, broker: b.ID})
				}
			}
		}
		if len(followers) > 0 {
			if _, err := ec.handleReplicaStateChanges(followers, rl.OfflineReplica); err != nil {
				return err
			}
		}
		for _, ref := range led {
			if p := ec.img().Partition(ref.id, ref.part); p != nil && p.Leader == b.ID {
				stillLeads = true
				break
			}
		}
		return nil
	})
	return stillLeads, err
}

// dropLeadership sets leader -1 (ISR kept) on partitions whose leader must
// step down with nobody to take over, and marks them offline.
func (ec *eventCtx) dropLeadership(refs []partRef) error {
	var off []partRef
	for _, ref := range sortRefs(refs) {
		p := ec.img().Partition(ref.id, ref.part)
		if p == nil || p.Leader == rl.NoLeader {
			continue
		}
		if err := ec.stageChange(rl.PartitionChange{TopicID: ref.id, Partition: ref.part, PartitionEpoch: p.PartitionEpoch,
			Set: rl.ChangeLeader, Leader: rl.NoLeader}); err != nil {
			return err
		}
		// The old leader must hear that it leads no more.
		live, _ := ec.liveSet()
		var to []int32
		for _, r := range p.Replicas {
			if live.Has(r) {
				to = append(to, r)
			}
		}
		ec.plan.leaderAndIsr(ref, to, false)
		off = append(off, ref)
	}
	if len(off) > 0 {
		_, err := ec.handlePartitionStateChanges(off, rl.OfflinePartition, 0, nil)
		return err
	}
	return nil
}

// partitionsOf scans the image for the partitions a broker leads and those
// it hosts a replica of, both in (topic id, partition) order.
func (ec *eventCtx) partitionsOf(id int32) (led, hosted []partRef) {
	im := ec.img()
	// A broker of a large cluster hosts hundreds of thousands of
	// replicas: collect them in chunks and copy once, rather than grow
	// one slice through many copies.
	var ledC, hostedC chunks[partRef]
	for _, t := range sortedTopics(im) {
		im.EachPartition(t.ID, func(i int32, p *fsm.Partition) bool {
			if indexOf(p.Replicas, id) < 0 {
				return true
			}
			ref := partRef{id: t.ID, name: t.Name, part: i}
			hostedC.add(ref)
			if p.Leader == id {
				ledC.add(ref)
			}
			return true
		})
	}
	return ledC.slice(), hostedC.slice()
}

// chunks collects values in chunks of bounded size; slice returns them
// as one slice of exactly their length.
type chunks[T any] struct {
	full [][]T
	cur  []T
	n    int
}

func (c *chunks[T]) add(v T) {
	if len(c.cur) == cap(c.cur) {
		if c.cur != nil {
			c.full = append(c.full, c.cur)
		}
		c.cur = make([]T, 0, min(max(c.n, 256), 1<<15))
	}
	c.cur = append(c.cur, v)
	c.n++
}

func (c *chunks[T]) slice() []T {
	if len(c.full) == 0 {
		return c.cur
	}
	out := make([]T, 0, c.n)
	for _, f := range c.full {
		out = append(out, f...)
	}
	return append(out, c.cur...)
}

// sortedTopics returns every topic in id order.
func sortedTopics(im fsm.Reader) []*fsm.Topic {
	var out []*fsm.Topic
	im.ForEachTopic(func(t *fsm.Topic) bool { out = append(out, t); return true })
	slices.SortFunc(out, func(a, b *fsm.Topic) int { return compareIDs(a.ID, b.ID) })
	return out
}

// uncleanAllowed reads the topic's unclean.leader.election.enable.
func (ec *eventCtx) uncleanAllowed(ref partRef) bool {
	t := ec.img().Topic(ref.id)
	if t == nil {
		return false
	}
	v, _ := t.Config("unclean.leader.election.enable")
	return v == "true"
}

func sortRefs(refs []partRef) []partRef {
	m := make(map[partRef]struct{}, len(refs))
	for _, r := range refs {
		m[r] = struct{}{}
	}
	return sortedRefs(m)
}
