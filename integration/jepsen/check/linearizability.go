package check

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

// LinearizabilityOptions tune Linearizability.
type LinearizabilityOptions struct {
	// Timeout bounds porcupine's search (NP-hard in general). 0 means one
	// minute. A check that runs out of time is inconclusive, not failed.
	Timeout time.Duration
	// HTMLPath, when set, is where porcupine's visualization is written:
	// every topic's history, its linearization (or the longest partial
	// ones and the call that could not be placed), with the faults of
	// Faults as annotations.
	HTMLPath string
	// Faults are drawn on the visualization.
	Faults []history.FaultEvent
}

// Linearizability checks the topic operations (create, delete, describe,
// list, create-partitions, and what elections and reassignments say about
// a topic's existence) against the per-topic model, one porcupine
// partition per topic. A call with no definite outcome (Unknown, or an
// error code such as NOT_CONTROLLER that does not say whether it took
// effect) is given an infinite return time: it may take effect at any
// point after its invocation, or never.
func Linearizability(ops []history.Op, opt LinearizabilityOptions) Result {
	res := newResult("linearizability")
	if opt.Timeout <= 0 {
		opt.Timeout = time.Minute
	}
	pops, skipped := linOps(ops)
	topics, by := splitByTopic(pops)
	res.Checked = fmt.Sprintf("%d ops in %d topics (%d calls carry no information about a topic and were left out)", len(pops), len(topics), skipped)
	model := topicModel()

	began := time.Now()
	verdict, info := porcupine.CheckOperationsVerbose(model, pops, opt.Timeout)
	elapsed := time.Since(began)
	timedOut := elapsed >= opt.Timeout
	res.Notes = append(res.Notes, fmt.Sprintf("porcupine: %s in %s", verdict, elapsed.Round(time.Millisecond)))

	switch verdict {
	case porcupine.Unknown:
		res.Inconclusive = fmt.Sprintf("porcupine found no violation within its %s timeout but did not finish", opt.Timeout)
	case porcupine.Illegal:
		partials := info.PartialLinearizationsOperations()
		for i, topic := range topics {
			if i >= len(partials) {
				break
			}
			longest := 0
			var best []porcupine.Operation
			for _, p := range partials[i] {
				if len(p) > longest {
					longest, best = len(p), p
				}
			}
			if longest == len(by[topic]) {
				continue
			}
			res.add(illegalTopic(topic, by[topic], best, timedOut))
		}
		if res.Valid {
			// Porcupine said illegal but no partition stands out (it
			// should not happen): report it whole rather than drop it.
			res.add(Violation{Partition: -1, Description: "porcupine found the history not linearizable"})
		}
	}

	if opt.HTMLPath != "" {
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

// illegalTopic describes a topic whose history porcupine could not
// linearize: the calls left out of the longest linearizable prefix, the
// earliest first, and the model's state after that prefix.
func illegalTopic(topic string, all, best []porcupine.Operation, timedOut bool) Violation {
	placed := map[int64]bool{}
	states := []topicState{{St: absent}}
	for _, op := range best {
		in := op.Input.(linInput)
		placed[in.Op] = true
		var next []topicState
		for _, s := range states {
			for _, n := range step(s, op.Input, op.Output) {
				next = appendUnique(next, n.(topicState))
			}
		}
		states = next
	}
	var left []porcupine.Operation
	for _, op := range all {
		if !placed[op.Input.(linInput).Op] {
			left = append(left, op)
		}
	}
	sort.SliceStable(left, func(i, j int) bool { return left[i].Call < left[j].Call })
	v := Violation{Topic: topic, Partition: -1}
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
	v.Description = fmt.Sprintf("topic %q is not linearizable: after the longest linearizable prefix (%d of %d calls; state %s) no order places %s%s",
		topic, len(best), len(all), strings.Join(st, " or "), strings.Join(descs, "; "), more)
	if timedOut {
		v.Description += " (the check hit its timeout, so this topic may only have been cut short)"
	}
	return v
}

func appendUnique(list []topicState, s topicState) []topicState {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// splitByTopic groups porcupine operations by topic, returning the topics
// in name order.
func splitByTopic(ops []porcupine.Operation) ([]string, map[string][]porcupine.Operation) {
	by := map[string][]porcupine.Operation{}
	for _, op := range ops {
		t := op.Input.(linInput).Topic
		by[t] = append(by[t], op)
	}
	topics := make([]string, 0, len(by))
	for t := range by {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	return topics, by
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
