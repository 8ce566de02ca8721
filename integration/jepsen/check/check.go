// Package check holds the checkers of a jepsen-style run. Each reads parts
// of the history (package history) and returns a Result: valid or not, with
// one Violation per thing that went wrong, described so that a reader can
// find it in the history without the code at hand.
//
//   - Linearizability: the topic operations against a per-topic model
//     (existence, partition count, replicas and leaders), each topic's
//     history cut into segments at quiescent points, with porcupine, within
//     a budget (a check that does not finish fails); writes porcupine's
//     HTML visualization.
//   - LostWrites: every acknowledged creation and deletion is still
//     visible in a final read taken after the cluster healed.
//   - OneLeaderPerEpoch: no two brokers ever saw two different leaders for
//     the same partition and leader epoch.
//   - ControllerEpochFencing and EpochsMonotonic: no agent accepted a
//     request from a controller epoch lower than one it had accepted, and
//     leader and partition epochs never went back in what it accepted.
//   - StateHashes: all voters end with the same state hash.
//   - Recovery: how long after each heal the cluster answered again and
//     led every partition it could lead.
//   - DeletionsFinish: no topic is still being deleted at the end of the
//     run, a bound after the last heal.
//   - DataAcknowledged, DataReplicasAgree, DataNoPhantoms, DataReadsStable:
//     the data workload's records (data.go).
//   - RefusalFences: no broker was fenced for a refused listener while its
//     process was alive; the time from each broker crash to its fence
//     (fences.go).
package check

import (
	"fmt"
	"strings"
	"time"
)

// Violation is one thing a checker found wrong.
type Violation struct {
	Checker string `json:"checker"`
	// Description is a readable sentence or two naming what, where, when.
	Description string `json:"description"`
	Topic       string `json:"topic,omitempty"`
	// Partition is -1 when the violation is not about one partition.
	Partition int32     `json:"partition"`
	Time      time.Time `json:"time,omitzero"`
	// Ops are the ids of the history ops involved.
	Ops []int64 `json:"ops,omitempty"`
	// Brokers are the agents involved.
	Brokers []int32 `json:"brokers,omitempty"`
}

func (v Violation) String() string { return v.Checker + ": " + v.Description }

// Result is one checker's verdict.
type Result struct {
	Checker string `json:"checker"`
	// Valid is true when the checker found nothing wrong. Inconclusive
	// says why a check could not decide (it ran out of time); such a
	// check is not valid: it reports that as a violation.
	Valid        bool   `json:"valid"`
	Inconclusive string `json:"inconclusive,omitempty"`
	// Checked says how much was looked at ("412 ops in 37 topics").
	Checked    string      `json:"checked,omitempty"`
	Violations []Violation `json:"violations,omitempty"`
	// Notes are facts worth reading that are not violations.
	Notes []string `json:"notes,omitempty"`
}

func newResult(name string) Result { return Result{Checker: name, Valid: true} }

func (r *Result) add(v Violation) {
	v.Checker = r.Checker
	r.Valid = false
	r.Violations = append(r.Violations, v)
}

func (r Result) String() string {
	var b strings.Builder
	verdict := "ok"
	switch {
	case !r.Valid:
		verdict = fmt.Sprintf("FAILED (%d violations)", len(r.Violations))
	case r.Inconclusive != "":
		verdict = "inconclusive: " + r.Inconclusive
	}
	fmt.Fprintf(&b, "%s: %s", r.Checker, verdict)
	if r.Checked != "" {
		fmt.Fprintf(&b, " — %s", r.Checked)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "\n  - %s", v.Description)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\n  · %s", n)
	}
	return b.String()
}

// Valid reports whether every result is valid.
func Valid(results []Result) bool {
	for _, r := range results {
		if !r.Valid {
			return false
		}
	}
	return true
}
