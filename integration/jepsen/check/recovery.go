package check

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

// StateHashes checks that every voter ended with the same state hash at
// the same raft index. Voters at different indexes cannot be compared:
// that is reported too, since the harness waits for them to catch up
// before it asks.
func StateHashes(hashes map[string]history.VoterHash) Result {
	res := newResult("state-hashes")
	nodes := make([]string, 0, len(hashes))
	for n := range hashes {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	res.Checked = fmt.Sprintf("%d voters", len(nodes))
	if len(nodes) == 0 {
		res.add(Violation{Partition: -1, Description: "no voter reported a state hash"})
		return res
	}
	list := func() string {
		s := ""
		for i, n := range nodes {
			if i > 0 {
				s += ", "
			}
			s += fmt.Sprintf("%s: %s at index %d", n, hashes[n].Hash, hashes[n].Index)
		}
		return s
	}
	first := hashes[nodes[0]]
	sameIndex, sameHash := true, true
	for _, n := range nodes[1:] {
		h := hashes[n]
		if h.Index != first.Index {
			sameIndex = false
		} else if h.Hash != first.Hash {
			sameHash = false
		}
	}
	switch {
	case !sameHash:
		res.add(Violation{Partition: -1, Description: "voters diverged: different state hashes at the same index (" + list() + ")"})
	case !sameIndex:
		res.add(Violation{Partition: -1, Description: "voters did not reach the same index, so their hashes cannot be compared (" + list() + ")"})
	}
	return res
}

// RecoveryOptions tune Recovery.
type RecoveryOptions struct {
	// Kinds are the calls whose success shows the cluster answering again.
	// Default: the mutating ones, which need the active controller (a
	// describe may be answered from any voter's image).
	Kinds []history.Kind
	// Max, when set, makes a recovery slower than this a violation.
	Max time.Duration
	// End is when the run stopped watching; a heal not recovered from by
	// then is a violation. Default: the last op's or sample's time.
	End time.Time
}

// Recovery is how long the cluster took to recover after one heal.
type Recovery struct {
	Fault int       `json:"fault"`
	Kind  string    `json:"kind"`
	Heal  time.Time `json:"heal"`
	// Admin is the time from the heal to the first successful call (one of
	// RecoveryOptions.Kinds) that completed after it; AdminOp is that call.
	Admin   time.Duration `json:"admin_ns"`
	AdminOp int64         `json:"admin_op,omitempty"`
	// Led is the time from the heal to the first sample in which every
	// partition with a live ISR member had a live leader.
	Led time.Duration `json:"led_ns"`
	// AdminRecovered and LedRecovered say whether each happened before the
	// next fault started (or the run ended).
	AdminRecovered bool `json:"admin_recovered"`
	LedRecovered   bool `json:"led_recovered"`
	// Interrupted: the next fault started before the cluster recovered,
	// so this heal's recovery was not measured to the end.
	Interrupted bool `json:"interrupted,omitempty"`
	// NoSamples: there was no leadership sample after the heal.
	NoSamples bool `json:"no_samples,omitempty"`
}

func (r Recovery) String() string {
	s := fmt.Sprintf("fault %d (%s) healed at %s:", r.Fault, r.Kind, r.Heal.Format("15:04:05.000"))
	if r.AdminRecovered {
		s += fmt.Sprintf(" first successful call after %s (#%d);", r.Admin.Round(time.Millisecond), r.AdminOp)
	} else {
		s += " no successful call;"
	}
	switch {
	case r.NoSamples:
		s += " no leadership samples"
	case r.LedRecovered:
		s += fmt.Sprintf(" all leadable partitions led after %s", r.Led.Round(time.Millisecond))
	default:
		s += " partitions not all led again"
	}
	if r.Interrupted {
		s += " (the next fault came first)"
	}
	return s
}

// led reports whether every partition of the sample that has a live ISR
// member has a live leader.
func led(s history.ClusterSample) bool {
	for _, p := range s.Partitions {
		leadable := false
		for _, b := range p.ISR {
			if slices.Contains(s.Live, b) {
				leadable = true
				break
			}
		}
		if leadable && (p.Leader < 0 || !slices.Contains(s.Live, p.Leader)) {
			return false
		}
	}
	return true
}

// RecoveryTimes measures, for every heal in the fault timeline, the time
// until the first successful admin call completed after it and the time
// until every partition that could be led (a live ISR member) was led
// again, from the samples. A heal not recovered from before the next
// fault starts is marked interrupted; one not recovered from by the end of
// the run is a violation, as is a fault that was never healed and a
// recovery slower than opt.Max.
func RecoveryTimes(faults []history.FaultEvent, ops []history.Op, samples []history.ClusterSample, opt RecoveryOptions) (Result, []Recovery) {
	res := newResult("recovery")
	kinds := opt.Kinds
	if len(kinds) == 0 {
		kinds = []history.Kind{history.Create, history.Delete, history.CreatePartitions, history.Elect, history.Reassign, history.CancelReassign}
	}
	end := opt.End
	if end.IsZero() {
		for _, op := range ops {
			end = later(end, op.Invoke)
			end = later(end, op.Complete)
		}
		for _, s := range samples {
			end = later(end, s.Time)
		}
	}
	var okOps []history.Op
	for _, op := range ops {
		if op.Outcome == history.OK && slices.Contains(kinds, op.Kind) {
			okOps = append(okOps, op)
		}
	}
	sort.Slice(okOps, func(i, j int) bool { return okOps[i].Complete.Before(okOps[j].Complete) })
	smp := append([]history.ClusterSample(nil), samples...)
	sort.Slice(smp, func(i, j int) bool { return smp[i].Time.Before(smp[j].Time) })

	evs := append([]history.FaultEvent(nil), faults...)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Time.Before(evs[j].Time) })
	started := map[int]history.FaultEvent{}
	healed := map[int]bool{}
	var out []Recovery
	for i, e := range evs {
		switch e.Phase {
		case history.Start:
			if _, ok := started[e.Fault]; !ok {
				started[e.Fault] = e
			}
			continue
		case history.Heal:
		default:
			continue
		}
		if healed[e.Fault] {
			continue
		}
		healed[e.Fault] = true
		// The window ends when the next fault starts, or the run ends.
		until, interruptedBy := end, 0
		for _, n := range evs[i+1:] {
			if n.Phase == history.Start && n.Fault != e.Fault {
				until, interruptedBy = n.Time, n.Fault
				break
			}
		}
		r := Recovery{Fault: e.Fault, Kind: e.Kind, Heal: e.Time}
		for _, op := range okOps {
			if !op.Complete.After(e.Time) {
				continue
			}
			if !op.Complete.After(until) {
				r.Admin, r.AdminOp, r.AdminRecovered = op.Complete.Sub(e.Time), op.ID, true
			}
			break
		}
		r.NoSamples = true
		for _, s := range smp {
			if s.Time.Before(e.Time) {
				continue
			}
			r.NoSamples = false
			if s.Time.After(until) {
				break
			}
			if led(s) {
				r.Led, r.LedRecovered = s.Time.Sub(e.Time), true
				break
			}
		}
		if len(samples) == 0 {
			r.NoSamples = true
		}
		done := r.AdminRecovered && (r.LedRecovered || r.NoSamples)
		if !done && interruptedBy != 0 {
			r.Interrupted = true
		}
		if !done && interruptedBy == 0 {
			what := "no successful admin call"
			if r.AdminRecovered {
				what = "partitions that could be led were not all led again"
			}
			res.add(Violation{Partition: -1, Time: e.Time,
				Description: fmt.Sprintf("no recovery after the heal of fault %d (%s) at %s: %s by the end of the run (%s later)",
					e.Fault, e.Kind, e.Time.Format("15:04:05.000"), what, end.Sub(e.Time).Round(time.Millisecond))})
		}
		if opt.Max > 0 {
			if r.AdminRecovered && r.Admin > opt.Max {
				res.add(Violation{Partition: -1, Time: e.Time, Ops: []int64{r.AdminOp},
					Description: fmt.Sprintf("slow recovery after fault %d (%s): first successful call %s after the heal, over the %s limit", e.Fault, e.Kind, r.Admin.Round(time.Millisecond), opt.Max)})
			}
			if r.LedRecovered && r.Led > opt.Max {
				res.add(Violation{Partition: -1, Time: e.Time,
					Description: fmt.Sprintf("slow recovery after fault %d (%s): partitions led again %s after the heal, over the %s limit", e.Fault, e.Kind, r.Led.Round(time.Millisecond), opt.Max)})
			}
		}
		out = append(out, r)
	}
	ids := make([]int, 0, len(started))
	for id := range started {
		if !healed[id] {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	for _, id := range ids {
		e := started[id]
		res.add(Violation{Partition: -1, Time: e.Time,
			Description: fmt.Sprintf("fault %d (%s, started %s) was never healed", id, e.Kind, e.Time.Format("15:04:05.000"))})
	}
	res.Checked = fmt.Sprintf("%d heals", len(out))
	if len(out) > 0 {
		var admin, lead []time.Duration
		for _, r := range out {
			if r.AdminRecovered {
				admin = append(admin, r.Admin)
			}
			if r.LedRecovered {
				lead = append(lead, r.Led)
			}
		}
		if len(admin) > 0 {
			res.Notes = append(res.Notes, "first successful call after a heal: "+spread(admin))
		}
		if len(lead) > 0 {
			res.Notes = append(res.Notes, "all leadable partitions led after a heal: "+spread(lead))
		}
	}
	return res, out
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// spread is "median X, max Y over N".
func spread(ds []time.Duration) string {
	s := append([]time.Duration(nil), ds...)
	slices.Sort(s)
	return fmt.Sprintf("median %s, max %s over %d heals", s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), len(s))
}

// DefaultDeletionBound is how long a deletion may take once the faults
// are over (DeletionsFinish).
const DefaultDeletionBound = 30 * time.Second

// DeletionsFinish checks that deletions finish once the faults are over:
// no topic may still be being deleted at the final deletion probe more
// than bound (DefaultDeletionBound when 0) after the last fault event (its
// heal), or after the last call that tried to delete it when that came
// later. Every broker is back then, and the deletion needs nothing more
// than each replica's broker confirming it. A run with no probe, or whose
// last probe found a deletion still running before its bound was up,
// cannot tell, and fails too: the harness probes until every deletion
// finished or had its bound.
func DeletionsFinish(ops []history.Op, faults []history.FaultEvent, final FinalRead, bound time.Duration) Result {
	res := newResult("deletions-finish")
	if bound <= 0 {
		bound = DefaultDeletionBound
	}
	var lastHeal time.Time
	for _, e := range faults {
		lastHeal = later(lastHeal, e.Time)
	}
	if final.Probed.IsZero() {
		res.add(Violation{Partition: -1, Description: "no deletion probe was made after the last heal: whether deletions finish cannot be told"})
		return res
	}
	lastDelete := map[string]history.Op{}
	for _, op := range ops {
		if op.Kind == history.Delete && !op.Invoke.After(final.Probed) && op.Invoke.After(lastDelete[op.Topic].Invoke) {
			lastDelete[op.Topic] = op
		}
	}
	since := func(at time.Time) string {
		if at.IsZero() {
			return "the start of the run"
		}
		return fmt.Sprintf("%s (%s before the probe)", at.Format("15:04:05.000"), final.Probed.Sub(at).Round(time.Millisecond))
	}
	for _, topic := range final.Deleting {
		from, why := lastHeal, "the last heal"
		v := Violation{Topic: topic, Partition: -1, Time: final.Probed}
		if d, ok := lastDelete[topic]; ok {
			v.Ops = []int64{d.ID}
			if d.Invoke.After(from) {
				from, why = d.Invoke, fmt.Sprintf("the last call deleting it (#%d)", d.ID)
			}
		}
		if final.Probed.Sub(from) > bound {
			v.Description = fmt.Sprintf("topic %q is still being deleted at the final probe (%s), more than %s after %s at %s",
				topic, final.Probed.Format("15:04:05.000"), bound, why, since(from))
		} else {
			v.Description = fmt.Sprintf("topic %q is still being deleted at the final probe (%s), but the probe came only %s after %s: the run stopped probing before the %s bound, so it cannot tell",
				topic, final.Probed.Format("15:04:05.000"), final.Probed.Sub(from).Round(time.Millisecond), why, bound)
		}
		res.add(v)
	}
	res.Checked = fmt.Sprintf("%d topics still being deleted at the final probe, %s after the last fault event (bound %s)",
		len(final.Deleting), final.Probed.Sub(lastHeal).Round(time.Millisecond), bound)
	if lastHeal.IsZero() {
		res.Checked = fmt.Sprintf("%d topics still being deleted at the final probe (no faults; bound %s)", len(final.Deleting), bound)
	}
	return res
}
