package check

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

func TestLinearizableLifecycle(t *testing.T) {
	var h hist
	h.absent(0, "a", 0, 5)
	h.create(0, "a", 10, 20, "aaaa")
	h.present(1, "a", 25, 30, "aaaa")
	fail(h.create(1, "a", 35, 40, ""), kerr.TopicAlreadyExists)
	h.delete(0, "a", 45, 50)
	h.absent(1, "a", 55, 60)
	// The deletion may still be finishing: the name stays taken a while.
	fail(h.create(0, "a", 65, 70, ""), kerr.TopicAlreadyExists)
	h.create(0, "a", 75, 80, "bbbb")
	h.present(1, "a", 85, 90, "bbbb")
	r := lin(t, h.ops)
	wantValid(t, r)
	if !strings.Contains(r.Checked, "9 ops in 1 topics") {
		t.Errorf("checked = %q", r.Checked)
	}
}

func TestLinearizableConcurrentReadSeesEitherSide(t *testing.T) {
	for _, sawIt := range []bool{true, false} {
		var h hist
		h.create(0, "a", 10, 50, "aaaa")
		if sawIt {
			h.present(1, "a", 20, 30, "aaaa")
		} else {
			h.absent(1, "a", 20, 30)
		}
		h.present(1, "a", 60, 70, "aaaa")
		wantValid(t, lin(t, h.ops))
	}
}

func TestNonLinearizableReadMissesAcknowledgedCreate(t *testing.T) {
	var h hist
	h.create(0, "a", 0, 10, "aaaa")
	h.absent(1, "a", 20, 30) // must have seen it
	r := lin(t, h.ops)
	wantViolation(t, r, 1, `topic "a" is not linearizable`, "#2 c1 describe a")
	if r.Violations[0].Topic != "a" || len(r.Violations[0].Ops) == 0 || r.Violations[0].Ops[0] != 2 {
		t.Errorf("violation = %+v, want topic a, op 2 first", r.Violations[0])
	}
}

func TestNonLinearizableStaleReadAfterDelete(t *testing.T) {
	var h hist
	h.create(0, "a", 0, 10, "aaaa")
	h.delete(0, "a", 20, 30)
	h.present(1, "a", 40, 50, "aaaa") // a deleting topic is hidden from reads
	wantViolation(t, lin(t, h.ops), 1, `topic "a"`)
}

func TestNonLinearizableReadGoesBackInTime(t *testing.T) {
	// Two reads in sequence: the second sees an older state than the first.
	var h hist
	h.create(0, "a", 0, 100, "aaaa")
	h.present(1, "a", 10, 20, "aaaa")
	h.absent(2, "a", 30, 40)
	wantViolation(t, lin(t, h.ops), 1, `topic "a"`, "#3 c2 describe a")
}

func TestNonLinearizableDoubleCreate(t *testing.T) {
	var h hist
	h.create(0, "a", 0, 10, "aaaa")
	h.create(1, "a", 20, 30, "bbbb")
	wantViolation(t, lin(t, h.ops), 1, `topic "a"`)
}

func TestNonLinearizableWrongTopicID(t *testing.T) {
	var h hist
	h.create(0, "a", 0, 10, "aaaa")
	h.present(1, "a", 20, 30, "cccc")
	wantViolation(t, lin(t, h.ops), 1, `topic "a"`)
}

func TestPartitionCount(t *testing.T) {
	var h hist
	h.create(0, "a", 0, 10, "aaaa") // 3 partitions
	h.add(0, history.CreatePartitions, "a", 20, 30, history.Args{Partitions: 5})
	op := h.present(1, "a", 40, 50, "aaaa")
	op.Result.Partitions = 5
	wantValid(t, lin(t, h.ops))

	h.present(1, "a", 60, 70, "aaaa") // 3 partitions: gone back
	wantViolation(t, lin(t, h.ops), 1, `topic "a"`)
}

func TestUnknownOutcomeMayTakeEffectLaterOrNever(t *testing.T) {
	// An unanswered create may take effect any time after it was invoked.
	var h hist
	unknown(h.create(0, "a", 0, 0, ""))
	h.absent(1, "a", 10, 20)
	h.present(1, "a", 30, 40, "aaaa")
	h.present(1, "a", 50, 60, "aaaa")
	wantValid(t, lin(t, h.ops))

	// …or never.
	var never hist
	unknown(never.create(0, "a", 0, 0, ""))
	never.absent(1, "a", 10, 20)
	never.absent(1, "a", 30, 40)
	wantValid(t, lin(t, never.ops))

	// But it takes effect once: present, then absent, with no delete, is
	// not linearizable.
	var once hist
	unknown(once.create(0, "a", 0, 0, ""))
	once.present(1, "a", 10, 20, "aaaa")
	once.absent(1, "a", 30, 40)
	wantViolation(t, lin(t, once.ops), 1, `topic "a"`)
}

func TestIndeterminateErrorCodeIsUnknown(t *testing.T) {
	// NOT_CONTROLLER from a controller deposed mid-request does not say
	// whether the entry it proposed commits under the next one.
	var h hist
	fail(h.create(0, "a", 0, 10, ""), kerr.NotController)
	h.present(1, "a", 20, 30, "aaaa")
	wantValid(t, lin(t, h.ops))

	// TOPIC_ALREADY_EXISTS does say: the topic existed.
	var h2 hist
	fail(h2.create(0, "a", 0, 10, ""), kerr.TopicAlreadyExists)
	wantViolation(t, lin(t, h2.ops), 1, `topic "a"`)
}

func TestElectionsSayTheTopicExists(t *testing.T) {
	var h hist
	h.create(0, "a", 0, 10, "aaaa")
	h.add(1, history.Elect, "a", 20, 30, history.Args{Partition: 1, Election: "preferred"})
	fail(h.add(1, history.Elect, "a", 40, 50, history.Args{Partition: 2}), kerr.ElectionNotNeeded)
	fail(h.add(1, history.Elect, "a", 60, 70, history.Args{Partition: 7}), kerr.UnknownTopicOrPartition) // past the count
	fail(h.add(1, history.Elect, "a", 60, 70, history.Args{Partition: 0}), kerr.NotController)           // says nothing
	wantValid(t, lin(t, h.ops))

	var bad hist
	bad.add(1, history.Reassign, "a", 0, 10, history.Args{Partition: 0, Replicas: []int32{1, 2}})
	wantViolation(t, lin(t, bad.ops), 1, `topic "a"`, "reassign")
}

func TestListIsSplitByTopic(t *testing.T) {
	var h hist
	h.create(0, "a", 0, 10, "aaaa")
	h.create(0, "b", 20, 30, "bbbb")
	l := h.add(1, history.List, "", 40, 50, history.Args{})
	l.Result = &history.Result{Topics: []history.TopicInfo{{Name: "a", TopicID: "aaaa", Partitions: 3}}}
	r := lin(t, h.ops)
	// b is missing from the list; a is fine.
	wantViolation(t, r, 1, `topic "b"`, "list")
	if r.Violations[0].Topic != "b" {
		t.Errorf("violation topic = %q, want b", r.Violations[0].Topic)
	}
}

func TestViolationsArePerTopic(t *testing.T) {
	var h hist
	for i, topic := range []string{"a", "b", "c"} {
		h.create(i, topic, 0, 10, topic+topic)
		h.present(i, topic, 20, 30, topic+topic)
	}
	h.absent(3, "b", 40, 50)
	r := lin(t, h.ops)
	wantViolation(t, r, 1, `topic "b"`)
}

func TestLinearizabilityWritesVisualization(t *testing.T) {
	var h hist
	h.create(0, "viz-topic", 0, 10, "aaaa")
	h.absent(1, "viz-topic", 20, 30)
	path := filepath.Join(t.TempDir(), "report", "linearizability.html")
	faults := []history.FaultEvent{
		{Fault: 1, Kind: "kill", Phase: history.Start, Time: at(5), Nodes: []int{2}, Detail: "kill -9 voter 2"},
		{Fault: 1, Kind: "kill", Phase: history.Heal, Time: at(25), Nodes: []int{2}},
	}
	r := Linearizability(h.ops, LinearizabilityOptions{Timeout: 30 * time.Second, HTMLPath: path, Faults: faults})
	wantViolation(t, r, 1, "viz-topic")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	for _, want := range []string{"<html", "#1 create(p=3)", "#2 describe", "1 kill [2]", "kill -9 voter 2"} {
		if !strings.Contains(html, want) {
			t.Errorf("visualization does not contain %q", want)
		}
	}
}

// TestLinearizabilityWithoutVerdictFails: a check that runs out of time
// is not a pass.
func TestLinearizabilityWithoutVerdictFails(t *testing.T) {
	ops := randomHistory(rand.New(rand.NewPCG(3, 7)), 40)
	r := Linearizability(ops, LinearizabilityOptions{Timeout: time.Nanosecond})
	if r.Valid || r.Inconclusive == "" {
		t.Fatalf("a check with a 1ns budget passed:\n%s", r)
	}
	wantViolation(t, r, 1, "no verdict", "within the 1ns budget", "fails")

	// Many calls with no outcome, all concurrent with a read that no order
	// can explain: porcupine would have to try every subset of them. The
	// segment search places each call with no outcome once, at its
	// invocation, and finds the violation; porcupine runs out of time and
	// the search's verdict stands.
	var h hist
	h.create(0, "a", 0, 10, "aaaa")
	for i := range 40 {
		if i%2 == 0 {
			unknown(h.create(i+1, "a", 20, 0, ""))
		} else {
			unknown(h.delete(i+1, "a", 20, 0))
		}
	}
	h.present(100, "a", 30, 40, "").Result.Partitions = 7 // every create asked for 3
	began := time.Now()
	r = Linearizability(h.ops, LinearizabilityOptions{Timeout: 200 * time.Millisecond})
	t.Log(r)
	wantViolation(t, r, 1, `topic "a" is not linearizable`)
	if d := time.Since(began); d > 20*time.Second {
		t.Errorf("the check took %s despite its 200ms timeout", d)
	}
}

// TestRandomSequentialHistoriesAreLinearizable generates histories from a
// correct topic store run sequentially, with each call's interval drawn
// around its linearization point (so calls overlap) and some outcomes
// lost; every one must check as linearizable.
func TestRandomSequentialHistoriesAreLinearizable(t *testing.T) {
	n := 150
	if testing.Short() || raceEnabled {
		n = 30
	}
	for seed := range uint64(n) {
		ops := randomHistory(rand.New(rand.NewPCG(seed, 7)), 40)
		r := Linearizability(ops, LinearizabilityOptions{Timeout: time.Minute})
		if !r.Valid || r.Inconclusive != "" {
			for _, op := range ops {
				t.Log(op)
			}
			t.Fatalf("seed %d: a valid history was reported:\n%s", seed, r)
		}
	}
}

// TestRandomHistoriesWithAFlippedReadAreCaught flips one read per random
// history (present becomes absent) and expects the checker to catch a good
// share of them: a flipped read concurrent with the call that changed the
// topic is still linearizable, so not all are.
func TestRandomHistoriesWithAFlippedReadAreCaught(t *testing.T) {
	flipped, caught := 0, 0
	for seed := range uint64(60) {
		cfg := smallSim(40)
		cfg.Lost = 0 // a call with no answer can explain many reads
		ops := simulate(rand.New(rand.NewPCG(seed, 7)), cfg)
		for i := len(ops) - 1; i >= 0; i-- {
			if ops[i].Kind == history.Describe && ops[i].Outcome == history.OK {
				ops[i].Outcome, ops[i].Code, ops[i].Result = history.Fail, kerr.UnknownTopicOrPartition.Code, nil
				flipped++
				break
			}
		}
		if r := Linearizability(ops, LinearizabilityOptions{Timeout: time.Minute}); !r.Valid {
			caught++
		}
	}
	t.Logf("%d of %d flipped reads caught", caught, flipped)
	if flipped < 30 || caught*2 < flipped {
		t.Fatalf("only %d of %d flipped reads were caught", caught, flipped)
	}
}

// randomHistory is a short simulated run (sim_test.go) of about n calls
// per client on two topic names, with faults: valid by construction.
func randomHistory(rng *rand.Rand, n int) []history.Op {
	return simulate(rng, smallSim(n))
}

// TestRetriedCallMayHaveTakenEffectTwice: a create answered on its second
// write may also have created the topic on its first (a controller that
// committed it and died before answering), under an id the call never
// reports; someone deletes that one before the retry creates the topic
// again. Linearizable only because the history says the request was
// written twice.
func TestRetriedCallMayHaveTakenEffectTwice(t *testing.T) {
	build := func(writes int) []history.Op {
		var h hist
		retried := h.create(0, "a", 0, 100, "bbbb")
		retried.Writes = writes
		h.present(1, "a", 5, 20, "aaaa") // the first write's topic
		h.delete(2, "a", 30, 35)
		h.absent(3, "a", 40, 45)
		h.present(1, "a", 101, 102, "bbbb")
		return h.ops
	}
	if r := lin(t, build(2)); len(r.Violations) != 0 {
		t.Fatalf("a create written twice cannot explain the topic its first write made: %+v", r.Violations)
	}
	wantViolation(t, lin(t, build(1)), 1, `topic "a" is not linearizable`)
}
