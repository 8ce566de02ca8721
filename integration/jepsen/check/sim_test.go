package check

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

// A simulated cluster for the generator of valid histories: a correct
// topic store with the controller's rules — asynchronous deletion,
// reassignments kept as the controller keeps them (target first, then the
// replicas on their way out, which disappear one by one once deleted;
// completion at a moment of its own), leader epochs that rise on every
// leader change, leaders that faults move, describes that hide a leader
// the client cannot reach — driven by concurrent clients whose calls take
// effect at a random point within their interval, or, for calls whose
// answer is lost or says nothing, at any later point or never.

type simPart struct {
	replicas         []int32
	adding, removing []int32 // the reassignment record
	marked           bool
	doomed           []int32 // replicas being deleted
	leader, epoch    int32
}

type simTopic struct {
	st    status
	id    string
	parts []*simPart
	gen   int
}

// simView is a partition's reassignment as the controller reads it.
type simView struct {
	doomed, adding, original, target []int32
	inProgress                       bool
}

func (p *simPart) view() simView {
	var v simView
	v.doomed = idsIn(p.replicas, p.doomed)
	v.adding = idsMinus(idsIn(p.replicas, p.adding), v.doomed)
	v.original = idsMinus(idsMinus(p.replicas, p.adding), v.doomed)
	v.target = idsMinus(idsMinus(p.replicas, p.removing), v.doomed)
	v.inProgress = p.marked && (len(v.adding) > 0 || len(idsMinus(v.original, v.target)) > 0)
	return v
}

func (p *simPart) setLeader(l int32) {
	if l != p.leader {
		p.leader, p.epoch = l, p.epoch+1
	}
}

// setTarget is the controller's setReassignmentTarget.
func (p *simPart) setTarget(target []int32) {
	v := p.view()
	dropped := idsMinus(v.adding, target)
	kept := append(slices.Clone(target), idsMinus(v.original, target)...)
	doomed := append(slices.Clone(v.doomed), dropped...)
	replicas := append(slices.Clone(kept), doomed...)
	adding := idsMinus(target, v.original)
	removing := append(idsMinus(v.original, target), doomed...)
	if slices.Equal(replicas, p.replicas) && slices.Equal(adding, p.adding) && slices.Equal(removing, p.removing) {
		return
	}
	if idsHas(dropped, p.leader) {
		p.setLeader(kept[0])
	}
	p.replicas, p.adding, p.removing = replicas, adding, removing
	p.doomed = append(idsMinus(p.doomed, dropped), dropped...)
	p.marked = len(adding) > 0 || len(removing) > 0
}

// complete is the controller's maybeCompleteReassignment, once the target
// replicas caught up.
func (p *simPart) complete() {
	v := p.view()
	if !v.inProgress {
		return
	}
	if !idsHas(v.target, p.leader) {
		p.setLeader(v.target[0])
	}
	leaving := idsMinus(v.original, v.target)
	p.doomed = append(idsMinus(p.doomed, leaving), leaving...)
	p.adding = nil
	p.removing = idsIn(p.replicas, append(slices.Clone(leaving), v.doomed...))
	p.marked = len(p.removing) > 0
}

// confirm is a broker confirming the deletion of replica b.
func (p *simPart) confirm(b int32) {
	if p.leader == b {
		return
	}
	p.replicas = idsMinus(p.replicas, []int32{b})
	p.doomed = idsMinus(p.doomed, []int32{b})
	if !p.marked {
		return
	}
	v := p.view()
	leaving := idsMinus(v.original, v.target)
	p.adding = v.adding
	p.removing = idsIn(p.replicas, append(slices.Clone(leaving), v.doomed...))
	p.marked = len(p.adding) > 0 || len(p.removing) > 0
}

type simCluster struct {
	rng     *rand.Rand
	brokers []int32
	topics  map[string]*simTopic
}

func (c *simCluster) topic(name string) *simTopic {
	t := c.topics[name]
	if t == nil {
		t = &simTopic{}
		c.topics[name] = t
	}
	return t
}

func (c *simCluster) pick(n int) []int32 {
	perm := c.rng.Perm(len(c.brokers))
	var out []int32
	for _, i := range perm[:n] {
		out = append(out, c.brokers[i])
	}
	return out
}

func (c *simCluster) newPart(rf int) *simPart {
	r := c.pick(rf)
	return &simPart{replicas: r, leader: r[0]}
}

// spontaneous is something that happens without a call: a deletion
// finishes, a reassignment completes, a deleted replica is confirmed, a
// leader moves (more often during faults).
func (c *simCluster) spontaneous(name string, fault bool) {
	t := c.topics[name]
	if t == nil {
		return
	}
	switch t.st {
	case deleting:
		if c.rng.IntN(3) == 0 {
			t.st, t.parts = absent, nil
		}
		return
	case absent:
		return
	}
	p := t.parts[c.rng.IntN(len(t.parts))]
	switch x := c.rng.IntN(10); {
	case x < 3:
		p.complete()
	case x < 6:
		if d := idsIn(p.replicas, p.doomed); len(d) > 0 {
			p.confirm(d[c.rng.IntN(len(d))])
		}
	case fault || x == 9:
		kept := idsMinus(p.replicas, p.doomed)
		switch c.rng.IntN(4) {
		case 0:
			p.setLeader(-1)
		default:
			p.setLeader(kept[c.rng.IntN(len(kept))])
		}
	}
}

// do applies one call at its linearization point and returns its outcome.
func (c *simCluster) do(op *history.Op) {
	t := c.topic(op.Topic)
	ok := func(r *history.Result) { op.Outcome, op.Code, op.Result = history.OK, 0, r }
	fail := func(e *kerr.Error) { op.Outcome, op.Code, op.Result = history.Fail, e.Code, nil }
	part := func() *simPart {
		if t.st != present || op.Args.Partition >= int32(len(t.parts)) {
			return nil
		}
		return t.parts[op.Args.Partition]
	}
	switch op.Kind {
	case history.Create:
		if t.st != absent {
			fail(kerr.TopicAlreadyExists)
			return
		}
		t.gen++
		t.st, t.id, t.parts = present, fmt.Sprintf("%s-%d", op.Topic, t.gen), nil
		for range op.Args.Partitions {
			t.parts = append(t.parts, c.newPart(int(op.Args.ReplicationFactor)))
		}
		ok(&history.Result{TopicID: t.id, Partitions: op.Args.Partitions})
	case history.Delete:
		if t.st == absent {
			fail(kerr.UnknownTopicOrPartition)
			return
		}
		t.st, t.parts = deleting, nil
		ok(nil)
	case history.CreatePartitions:
		switch {
		case t.st != present:
			fail(kerr.UnknownTopicOrPartition)
		case op.Args.Partitions <= int32(len(t.parts)):
			fail(kerr.InvalidPartitions)
		default:
			rf := len(t.parts[0].view().target)
			for int32(len(t.parts)) < op.Args.Partitions {
				t.parts = append(t.parts, c.newPart(rf))
			}
			ok(nil)
		}
	case history.Elect:
		p := part()
		switch {
		case p == nil:
			fail(kerr.UnknownTopicOrPartition)
		case op.Args.Election == "unclean" && p.leader >= 0:
			fail(kerr.ElectionNotNeeded)
		case op.Args.Election == "unclean":
			kept := idsMinus(p.replicas, p.doomed)
			p.setLeader(kept[c.rng.IntN(len(kept))])
			ok(nil)
		case p.leader == p.replicas[0]:
			fail(kerr.ElectionNotNeeded)
		case c.rng.IntN(5) == 0:
			fail(kerr.PreferredLeaderNotAvailable)
		default:
			p.setLeader(p.replicas[0])
			ok(nil)
		}
	case history.Reassign:
		p := part()
		switch {
		case p == nil:
			fail(kerr.UnknownTopicOrPartition)
		case len(idsIn(op.Args.Replicas, idsIn(p.replicas, p.doomed))) > 0:
			fail(kerr.ReassignmentInProgress)
		default:
			p.setTarget(op.Args.Replicas)
			if c.rng.IntN(2) == 0 {
				p.complete()
			}
			ok(nil)
		}
	case history.CancelReassign:
		p := part()
		switch {
		case p == nil:
			fail(kerr.UnknownTopicOrPartition)
		case !p.view().inProgress:
			fail(kerr.NoReassignmentInProgress)
		default:
			p.setTarget(p.view().original)
			ok(nil)
		}
	case history.Describe:
		if t.st != present {
			fail(kerr.UnknownTopicOrPartition)
			return
		}
		r := &history.Result{TopicID: t.id, Partitions: int32(len(t.parts))}
		for i, p := range t.parts {
			leader := p.leader
			if c.rng.IntN(20) == 0 {
				leader = -1 // not reachable from the client
			}
			r.Parts = append(r.Parts, history.PartitionInfo{Partition: int32(i), Leader: leader, LeaderEpoch: p.epoch, Replicas: slices.Clone(p.replicas)})
		}
		ok(r)
	case history.List:
		r := &history.Result{Topics: []history.TopicInfo{}}
		names := make([]string, 0, len(c.topics))
		for n := range c.topics {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if tp := c.topics[n]; tp.st == present {
				r.Topics = append(r.Topics, history.TopicInfo{Name: n, TopicID: tp.id, Partitions: int32(len(tp.parts))})
			}
		}
		ok(r)
	}
}

// simConfig shapes a simulated run.
type simConfig struct {
	Duration time.Duration
	Clients  int
	// Topic names: Width in use at a time, Step new ones every Every (the
	// workload's sliding window).
	Width, Step int
	Every       time.Duration
	// Faults: one of FaultLen every FaultEvery; during a fault calls are
	// slow and lose their answers more often, and leaders move.
	FaultEvery, FaultLen time.Duration
	// Lost is the share of calls (in thousandths) whose answer is lost
	// outside faults; during faults it is ten times as much.
	Lost int
}

// smallSim is a short run of heavy contention: few names, many faults.
func smallSim(calls int) simConfig {
	return simConfig{Duration: time.Duration(calls) * 40 * time.Millisecond, Clients: 4, Width: 2, Step: 1, Every: time.Hour,
		FaultEvery: 1500 * time.Millisecond, FaultLen: 700 * time.Millisecond, Lost: 15}
}

// runLike is a run of the jepsen test's shape and length.
func runLike(d time.Duration) simConfig {
	return simConfig{Duration: d, Clients: 4, Width: 6, Step: 2, Every: 10 * time.Second,
		FaultEvery: 9 * time.Second, FaultLen: 5 * time.Second, Lost: 5}
}

type simCall struct {
	op    history.Op
	point time.Time // when it takes effect
	apply bool      // whether it takes effect at all
}

// simulate runs cfg against a simulated cluster and returns the history,
// valid by construction.
func simulate(rng *rand.Rand, cfg simConfig) []history.Op {
	inFault := func(d time.Duration) bool { return d%cfg.FaultEvery < cfg.FaultLen }
	var calls []simCall
	for client := range cfg.Clients {
		now := time.Duration(rng.IntN(50)) * time.Millisecond
		for now < cfg.Duration {
			fault := inFault(now)
			op := history.Op{Client: client, Invoke: t0.Add(now)}
			slot := int(now / cfg.Every)
			op.Topic = fmt.Sprintf("jt-%04d", slot*cfg.Step+rng.IntN(cfg.Width))
			switch x := rng.IntN(100); {
			case x < 24:
				op.Kind, op.Args = history.Create, history.Args{Partitions: 1 + rng.Int32N(3), ReplicationFactor: int16(1 + rng.IntN(3))}
			case x < 42:
				op.Kind = history.Delete
			case x < 66:
				op.Kind = history.Describe
			case x < 72:
				op.Kind, op.Topic = history.List, ""
			case x < 80:
				op.Kind, op.Args = history.CreatePartitions, history.Args{Partitions: 2 + rng.Int32N(4)}
			case x < 89:
				op.Kind, op.Args = history.Elect, history.Args{Partition: rng.Int32N(3), Election: "preferred"}
				if rng.IntN(4) == 0 {
					op.Args.Election = "unclean"
				}
			case x < 97:
				op.Kind, op.Args = history.Reassign, history.Args{Partition: rng.Int32N(3)}
				for _, i := range rng.Perm(6)[:1+rng.IntN(3)] {
					op.Args.Replicas = append(op.Args.Replicas, int32(i+1))
				}
			default:
				op.Kind, op.Args = history.CancelReassign, history.Args{Partition: rng.Int32N(3)}
			}
			took := time.Duration(1+rng.IntN(15)) * time.Millisecond
			if fault && rng.IntN(20) == 0 {
				took = time.Duration(rng.IntN(6000)) * time.Millisecond
			}
			op.Complete = op.Invoke.Add(took)
			sc := simCall{op: op, apply: true}
			sc.point = op.Invoke.Add(time.Duration(rng.Int64N(int64(took) + 1)))
			lost := cfg.Lost
			if fault {
				lost *= 10
			}
			if op.Kind != history.Describe && op.Kind != history.List && rng.IntN(1000) < lost {
				// No definite answer: it takes effect at any point
				// after its invocation, or never.
				sc.point = op.Invoke.Add(time.Duration(rng.Int64N(int64(3 * time.Second))))
				sc.apply = rng.IntN(3) > 0
				switch rng.IntN(3) {
				case 0:
					sc.op.Outcome, sc.op.Code = history.Fail, kerr.RequestTimedOut.Code
				case 1:
					sc.op.Outcome, sc.op.Code = history.Fail, kerr.NotController.Code
				default:
					sc.op.Outcome, sc.op.Complete = history.Unknown, time.Time{}
				}
			} else if op.Kind.Mutating() && rng.IntN(100) == 0 {
				// A standby's refusal: nothing happened.
				sc.apply = false
				sc.op.Outcome, sc.op.Code, sc.op.Refused = history.Fail, kerr.NotController.Code, true
			}
			calls = append(calls, sc)
			now += took + time.Duration(20+rng.IntN(80))*time.Millisecond
		}
	}
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].op.Invoke.Before(calls[j].op.Invoke) })
	for i := range calls {
		calls[i].op.ID = int64(i + 1)
	}
	// Apply the calls in the order they take effect, with spontaneous
	// changes in between.
	order := make([]int, len(calls))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return calls[order[a]].point.Before(calls[order[b]].point) })
	c := &simCluster{rng: rng, brokers: []int32{1, 2, 3, 4, 5, 6}, topics: map[string]*simTopic{}}
	for _, i := range order {
		sc := &calls[i]
		for range 2 {
			if name := calls[order[rng.IntN(len(order))]].op.Topic; name != "" {
				c.spontaneous(name, inFault(sc.point.Sub(t0)))
			}
		}
		if !sc.apply {
			continue
		}
		recorded := sc.op
		c.do(&sc.op)
		if recorded.Outcome != "" {
			// The answer was lost or said nothing: keep it so.
			sc.op.Outcome, sc.op.Code, sc.op.Result, sc.op.Complete, sc.op.Refused =
				recorded.Outcome, recorded.Code, nil, recorded.Complete, recorded.Refused
		} else if sc.op.Outcome == history.OK && sc.op.Kind.Mutating() && rng.IntN(30) == 0 {
			sc.op.Writes = 2 // answered on a retry; the first write did nothing
		}
	}
	ops := make([]history.Op, len(calls))
	for i, sc := range calls {
		ops[i] = sc.op
		if ops[i].Outcome == "" {
			// Never applied and never answered.
			ops[i].Outcome, ops[i].Complete = history.Unknown, time.Time{}
		}
		if ops[i].Outcome == history.Unknown {
			ops[i].Error = "i/o timeout"
		}
	}
	return ops
}
