package check

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

// LinearizabilityOptions tune Linearizability.
type LinearizabilityOptions struct {
	// Timeout bounds the whole check (NP-hard in general). 0 means one
	// minute. A check that runs out of time has no verdict, and that
	// fails it.
	Timeout time.Duration
	// SegmentCalls is the fewest calls a segment of a topic's history
	// gets before it may be cut (see segments); 0 means 64.
	SegmentCalls int
	// HTMLPath, when set, is where porcupine's visualization is written:
	// every segment of every topic's history, its linearization (or the
	// longest partial ones and the call that could not be placed), with
	// the faults of Faults as annotations.
	HTMLPath string
	// Faults are drawn on the visualization.
	Faults []history.FaultEvent
}

// Linearizability checks the topic operations (create, delete, describe,
// list, create-partitions, elections, reassignments and their
// cancellation) against the per-topic model of model.go. Each topic's
// history is cut into segments (see segments), each checked from the
// states the one before can end in, and porcupine checks every segment of
// every topic again, as one partition each, for the verdict and the
// visualization. A check that does not finish within opt.Timeout fails:
// a run must get a verdict.
func Linearizability(ops []history.Op, opt LinearizabilityOptions) Result {
	res := newResult("linearizability")
	if opt.Timeout <= 0 {
		opt.Timeout = time.Minute
	}
	if opt.SegmentCalls <= 0 {
		opt.SegmentCalls = 64
	}
	began := time.Now()
	deadline := began.Add(opt.Timeout)
	pops, skipped := linOps(ops)
	topics, by := splitByTopic(pops)

	// Segments, topic by topic, in parallel.
	plans := make([]topicPlan, len(topics))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(topics), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				plans[i] = planTopic(topics[i], by[topics[i]], opt.SegmentCalls, deadline)
			}
		}()
	}
	for i := range topics {
		next <- i
	}
	close(next)
	wg.Wait()
	searched := time.Since(began)

	var all []porcupine.Operation
	var segs []segment
	largest := 0
	var unsettled []string
	dropped := 0
	for i, p := range plans {
		dropped += p.dropped
		if p.outcome == searchTimeout {
			unsettled = append(unsettled, topics[i])
		}
		for _, sg := range p.segs {
			id := len(segs)
			segs = append(segs, sg)
			largest = max(largest, len(sg.ops))
			first := sg.ops[0]
			all = append(all, porcupine.Operation{ClientId: first.ClientId, Input: linInput{Topic: sg.topic, Seg: id, Start: sg.start},
				Call: first.Call - 1, Output: linOutput{}, Return: first.Call - 1, Metadata: "segment start"})
			for _, op := range sg.ops {
				in := op.Input.(linInput)
				in.Seg = id
				op.Input = in
				all = append(all, op)
			}
		}
	}
	res.Checked = fmt.Sprintf("%d ops in %d topics, %d segments of up to %d calls (%d calls carry no information about a topic and were left out, %d list observations repeat the one before)",
		len(pops)-dropped, len(topics), len(segs), largest, skipped, dropped)
	res.Notes = append(res.Notes, fmt.Sprintf("segment search: %s", searched.Round(time.Millisecond)))
	model := topicModel()

	var verdict porcupine.CheckResult = porcupine.Unknown
	var info porcupine.LinearizationInfo
	if left := time.Until(deadline); left > 0 && len(unsettled) == 0 {
		pb := time.Now()
		verdict, info = porcupine.CheckOperationsVerbose(model, all, left)
		res.Notes = append(res.Notes, fmt.Sprintf("porcupine: %s in %s", verdict, time.Since(pb).Round(time.Millisecond)))
	}
	elapsed := time.Since(began)

	// Violations: a segment the search found no order for, described
	// from porcupine's longest partial linearization when porcupine
	// agrees, and any segment porcupine alone rejects.
	var partials [][][]porcupine.Operation
	if verdict == porcupine.Illegal {
		partials = info.PartialLinearizationsOperations()
	}
	illegal := map[string]bool{}
	for i, p := range plans {
		if p.outcome == searchIllegal {
			illegal[topics[i]] = true
		}
	}
	reported := map[string]bool{}
	for i, sg := range segs {
		if reported[sg.topic] {
			continue
		}
		var best []porcupine.Operation
		for _, p := range partialsOf(partials, i) {
			if len(p) > len(best) {
				best = p
			}
		}
		rejected := partials != nil && len(best) < len(sg.ops)+1
		last := i+1 == len(segs) || segs[i+1].topic != sg.topic
		switch {
		case rejected:
			reported[sg.topic] = true
			res.add(illegalSegment(sg, best))
			if !illegal[sg.topic] {
				res.Notes = append(res.Notes, fmt.Sprintf("topic %q: porcupine found no order for a segment the segment search had found one for (a bug in the checker)", sg.topic))
			}
		case illegal[sg.topic] && last:
			reported[sg.topic] = true
			res.add(searchViolation(sg))
			if verdict == porcupine.Ok {
				res.Notes = append(res.Notes, fmt.Sprintf("topic %q: porcupine found an order for a segment the segment search had found none for (a bug in the checker)", sg.topic))
			}
		}
	}
	switch {
	case len(unsettled) > 0:
		res.Inconclusive = fmt.Sprintf("the segment search did not finish for %d topics (%s) within the %s budget",
			len(unsettled), strings.Join(unsettled[:min(len(unsettled), 5)], ", "), opt.Timeout)
	case verdict == porcupine.Unknown && len(illegal) == 0:
		res.Inconclusive = fmt.Sprintf("porcupine did not finish within the %s budget", opt.Timeout)
	case verdict == porcupine.Illegal && res.Valid:
		// Porcupine said illegal but no segment stands out (it should
		// not happen): report it whole rather than drop it.
		res.add(Violation{Partition: -1, Description: "porcupine found the history not linearizable"})
	}
	if res.Inconclusive != "" {
		res.add(Violation{Partition: -1, Description: fmt.Sprintf("no verdict: %s (%s spent); a run whose history cannot be checked fails",
			res.Inconclusive, elapsed.Round(time.Millisecond))})
	}

	if opt.HTMLPath != "" && verdict != porcupine.Unknown {
		info.AddAnnotations(faultAnnotations(opt.Faults))
		if err := os.MkdirAll(filepath.Dir(opt.HTMLPath), 0o755); err == nil {
			err = porcupine.VisualizePath(model, info, opt.HTMLPath)
			if err != nil {
				res.Notes = append(res.Notes, "visualization not written: "+err.Error())
			}
		} else {
			res.Notes = append(res.Notes, "visualization not written: "+err.Error())
		}
	}
	return res
}

func partialsOf(p [][][]porcupine.Operation, i int) [][]porcupine.Operation {
	if i < len(p) {
		return p[i]
	}
	return nil
}

// searchViolation describes a segment the segment search found no order
// for, when porcupine did not say more.
func searchViolation(sg segment) Violation {
	v := Violation{Topic: sg.topic, Partition: -1, Time: time.Unix(0, sg.ops[0].Call)}
	for _, op := range sg.ops {
		v.Ops = append(v.Ops, op.Input.(linInput).Op)
	}
	var st []string
	for _, s := range sg.start {
		st = append(st, s.String())
	}
	v.Description = fmt.Sprintf("topic %q is not linearizable: no order places its %d calls from %s on, starting from %s",
		sg.topic, len(sg.ops), sg.ops[0].Metadata, strings.Join(st, " or "))
	return v
}

// A segment is a stretch of one topic's history, checked from the states
// the stretch before it can end in.
//
// Why cutting is sound: a topic's calls are cut only at a point where no
// call of the topic is in flight — every call before it has returned, every
// call after it is invoked later. Real-time order then puts every call
// before the cut ahead of every call after it in any linearization, so the
// whole history is linearizable exactly when the calls before the cut have
// an order that ends in some state s and the calls after it have one that
// starts in s. The segment search computes every state s the calls before
// a cut can end in (all their orders, not just one), and the next segment
// starts from that set: nothing is lost and nothing is added. What could
// still be in flight at a cut is taken care of by the model itself: a call
// with no definite outcome is not an open interval but a pending effect
// the state carries from its invocation on (it may take effect before any
// later step, in any later segment), and whatever may happen without a
// call (a deletion finishing, a reassignment completing, a leader moving)
// is part of the states too. So every point between two calls of a topic
// is a candidate cut; cuts are made once a segment has opt.SegmentCalls
// calls, which keeps each search small whatever the length of the run.
type segment struct {
	topic string
	start []*topicState
	ops   []porcupine.Operation
}

type searchOutcome int

const (
	searchOK searchOutcome = iota
	searchIllegal
	searchTimeout
)

// topicPlan is one topic's segments. When the search found no order for a
// segment, or ran out of time, that segment and every later one are the
// last segment, for porcupine to report on.
type topicPlan struct {
	segs    []segment
	outcome searchOutcome
	// dropped counts the list observations dropped as repeats.
	dropped int
}

func planTopic(topic string, ops []porcupine.Operation, minCalls int, deadline time.Time) topicPlan {
	sort.SliceStable(ops, func(i, j int) bool {
		if ops[i].Call != ops[j].Call {
			return ops[i].Call < ops[j].Call
		}
		return ops[i].Input.(linInput).Op < ops[j].Input.(linInput).Op
	})
	kept := dropRepeatedReads(ops)
	dropped := len(ops) - len(kept)
	ops = kept
	// After the last call that looks at partitions has returned, what the
	// model knows of them no longer matters (forgetParts).
	last := int64(math.MinInt64)
	for _, op := range ops {
		in := op.Input.(linInput)
		if in.Kind == history.Elect || in.Kind == history.Reassign || in.Kind == history.CancelReassign ||
			(in.Kind == history.Describe && op.Output.(linOutput).Parts != nil) {
			last = max(last, op.Return)
		}
	}
	for i, op := range ops {
		if op.Call > last {
			in := op.Input.(linInput)
			in.Forget = true
			ops[i].Input = in
		}
	}
	cuts := segments(ops, minCalls)
	states := []*topicState{(&topicState{St: absent}).seal()}
	plan := topicPlan{dropped: dropped}
	for i, c := range cuts {
		ends, outcome := endStates(states, c, deadline)
		if outcome != searchOK {
			var rest []porcupine.Operation
			for _, r := range cuts[i:] {
				rest = append(rest, r...)
			}
			plan.segs = append(plan.segs, segment{topic: topic, start: states, ops: rest})
			plan.outcome = outcome
			return plan
		}
		plan.segs = append(plan.segs, segment{topic: topic, start: states, ops: c})
		states = ends
	}
	return plan
}

// dropRepeatedReads drops, from a topic's calls sorted by invocation, a
// list's observation that repeats the one before it when both came alone:
// every call invoked before each of them had returned, and nothing of the
// topic was invoked between them. It adds nothing: any order of the other
// calls can place it right after the first one (they are next to each
// other in real time), where the state is the one the first saw, and
// whatever a pending call or a deletion did in between can as well happen
// after it. In a long run every list observes every topic ever used; this
// keeps the stretches where nothing happens to a topic from growing its
// history.
func dropRepeatedReads(ops []porcupine.Operation) []porcupine.Operation {
	out := ops[:0:0]
	maxRet := int64(math.MinInt64)
	prevAlone := false
	for i, op := range ops {
		alone := maxRet < op.Call
		maxRet = max(maxRet, op.Return)
		if i > 0 && alone && prevAlone && sameListRead(ops[i-1], op) {
			continue // ops[i-1] is kept or repeats one kept: same output
		}
		out = append(out, op)
		prevAlone = alone
	}
	return out
}

func sameListRead(a, b porcupine.Operation) bool {
	ai, bi := a.Input.(linInput), b.Input.(linInput)
	if !ai.FromList || !bi.FromList {
		return false
	}
	ao, bo := a.Output.(linOutput), b.Output.(linOutput)
	return ao.Present == bo.Present && ao.Absent == bo.Absent && ao.ID == bo.ID && ao.Partitions == bo.Partitions
}

// segments cuts a topic's calls, sorted by invocation, where no call is in
// flight, into stretches of at least minCalls calls.
func segments(ops []porcupine.Operation, minCalls int) [][]porcupine.Operation {
	var out [][]porcupine.Operation
	start := 0
	maxRet := int64(math.MinInt64)
	for i, op := range ops {
		if i-start >= minCalls && maxRet < op.Call {
			out = append(out, ops[start:i])
			start = i
		}
		maxRet = max(maxRet, op.Return)
	}
	if start < len(ops) {
		out = append(out, ops[start:])
	}
	return out
}

// endStates returns every state the calls of a segment can end in, over
// every order linearizability allows, from any of the start states: none
// when there is no such order.
func endStates(start []*topicState, ops []porcupine.Operation, deadline time.Time) ([]*topicState, searchOutcome) {
	n := len(ops)
	done := make([]uint64, (n+63)/64)
	isDone := func(j int) bool { return done[j/64]&(1<<(j%64)) != 0 }
	visited := map[string]struct{}{}
	finals := map[string]*topicState{}
	timedOut := false
	var keyBuf []byte
	var rec func(states []*topicState, ndone, first int)
	rec = func(states []*topicState, ndone, first int) {
		if timedOut {
			return
		}
		if ndone == n {
			for _, s := range states {
				finals[s.key] = s
			}
			return
		}
		keyBuf = keyBuf[:0]
		for _, w := range done {
			keyBuf = binary.LittleEndian.AppendUint64(keyBuf, w)
		}
		for _, s := range states {
			keyBuf = append(keyBuf, 0)
			keyBuf = append(keyBuf, s.key...)
		}
		if _, ok := visited[string(keyBuf)]; ok {
			return
		}
		visited[string(keyBuf)] = struct{}{}
		for first < n && isDone(first) {
			first++
		}
		// The calls that can go next: those invoked before every call
		// not yet placed returned.
		minRet := int64(math.MaxInt64)
		for j := first; j < n && ops[j].Call <= minRet; j++ {
			if !isDone(j) {
				minRet = min(minRet, ops[j].Return)
			}
		}
		// A call with no definite outcome only registers its effect as
		// pending: placing it as early as it can go allows everything a
		// later place would, so that is the only place tried.
		only := -1
		for j := first; j < n && ops[j].Call <= minRet; j++ {
			if !isDone(j) && ops[j].Input.(linInput).Register {
				only = j
				break
			}
		}
		for j := first; j < n && ops[j].Call <= minRet; j++ {
			if isDone(j) || (only >= 0 && j != only) {
				continue
			}
			if time.Now().After(deadline) {
				timedOut = true
				return
			}
			next := stepAll(states, ops[j].Input.(linInput), ops[j].Output.(linOutput))
			if len(next) == 0 {
				continue
			}
			done[j/64] |= 1 << (j % 64)
			rec(next, ndone+1, first)
			done[j/64] &^= 1 << (j % 64)
		}
	}
	rec(start, 0, 0)
	if timedOut {
		return nil, searchTimeout
	}
	if len(finals) == 0 {
		return nil, searchIllegal
	}
	return prune(finals), searchOK
}

// illegalSegment describes a segment whose calls porcupine could not
// linearize: the calls left out of the longest linearizable prefix, the
// earliest first, and the model's states after that prefix.
func illegalSegment(sg segment, best []porcupine.Operation) Violation {
	placed := map[int64]bool{}
	states := []*topicState{(&topicState{St: unset}).seal()}
	placedCalls := 0
	for _, op := range best {
		in := op.Input.(linInput)
		states = stepAll(states, in, op.Output.(linOutput))
		if in.Start == nil {
			placed[in.Op] = true
			placedCalls++
		}
	}
	var left []porcupine.Operation
	for _, op := range sg.ops {
		if !placed[op.Input.(linInput).Op] {
			left = append(left, op)
		}
	}
	sort.SliceStable(left, func(i, j int) bool { return left[i].Call < left[j].Call })
	v := Violation{Topic: sg.topic, Partition: -1}
	var descs []string
	for i, op := range left {
		id := op.Input.(linInput).Op
		v.Ops = append(v.Ops, id)
		if i < 3 {
			descs = append(descs, op.Metadata.(string))
		}
	}
	if len(left) > 0 {
		v.Time = time.Unix(0, left[0].Call)
	}
	var st []string
	for _, s := range states {
		st = append(st, s.String())
	}
	more := ""
	if len(left) > 3 {
		more = fmt.Sprintf(" and %d more", len(left)-3)
	}
	from := ""
	if len(sg.ops) > 0 {
		from = fmt.Sprintf(" from #%d on", sg.ops[0].Input.(linInput).Op)
	}
	v.Description = fmt.Sprintf("topic %q is not linearizable%s: after the longest linearizable prefix (%d of %d calls; state %s) no order places %s%s",
		sg.topic, from, placedCalls, len(sg.ops), strings.Join(st, " or "), strings.Join(descs, "; "), more)
	return v
}

// splitByTopic groups porcupine operations by topic, returning the topics
// in name order.
func splitByTopic(ops []porcupine.Operation) ([]string, map[string][]porcupine.Operation) {
	return groupOps(ops, func(in linInput) string { return in.Topic })
}

// groupOps groups porcupine operations by a key of their input, and
// returns the keys in order.
func groupOps[K cmp.Ordered](ops []porcupine.Operation, key func(linInput) K) ([]K, map[K][]porcupine.Operation) {
	by := map[K][]porcupine.Operation{}
	for _, op := range ops {
		k := key(op.Input.(linInput))
		by[k] = append(by[k], op)
	}
	return slices.Sorted(maps.Keys(by)), by
}

// faultAnnotations turns the fault timeline into porcupine annotations: one
// bar per fault from its start to its heal.
func faultAnnotations(events []history.FaultEvent) []porcupine.Annotation {
	type span struct {
		start, end history.FaultEvent
		healed     bool
	}
	spans := map[int]*span{}
	var order []int
	for _, e := range events {
		s := spans[e.Fault]
		if s == nil {
			s = &span{start: e}
			spans[e.Fault] = s
			order = append(order, e.Fault)
		}
		if e.Phase == history.Heal {
			s.end, s.healed = e, true
		}
	}
	var out []porcupine.Annotation
	for _, id := range order {
		s := spans[id]
		end := s.start.Time
		if s.healed {
			end = s.end.Time
		}
		desc := fmt.Sprintf("%d %s %v", id, s.start.Kind, s.start.Nodes)
		out = append(out, porcupine.Annotation{
			Tag:             "nemesis",
			Start:           s.start.Time.UnixNano(),
			End:             end.UnixNano(),
			Description:     desc,
			Details:         s.start.Detail,
			BackgroundColor: "#f7d8d8",
		})
	}
	return out
}
