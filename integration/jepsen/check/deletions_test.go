package check

import (
	"strings"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

func TestDeletionsFinish(t *testing.T) {
	faults := []history.FaultEvent{
		{Fault: 1, Kind: "kill", Phase: history.Start, Time: at(1000)},
		{Fault: 1, Kind: "kill", Phase: history.Heal, Time: at(5000)},
	}
	var h hist
	h.create(0, "a", 0, 10, "aa")
	h.delete(0, "a", 2000, 2010)
	h.create(0, "b", 0, 10, "bb")
	h.delete(0, "b", 40000, 40010) // after the heal: its bound runs from here
	probe := func(ms int, deleting ...string) FinalRead {
		f := final(ms)
		f.Deleting, f.Probed = deleting, at(ms)
		return f
	}

	wantValid(t, DeletionsFinish(h.ops, faults, probe(60000), 0))

	// A topic stuck in deletion 55 s after the last heal.
	r := DeletionsFinish(h.ops, faults, probe(60000, "a"), 0)
	wantViolation(t, r, 1, `topic "a" is still being deleted`, "more than 30s after the last heal")
	if v := r.Violations[0]; v.Topic != "a" || len(v.Ops) != 1 || v.Ops[0] != 2 {
		t.Errorf("violation = %+v", v)
	}
	// The bound is configurable.
	wantValid(t, DeletionsFinish(h.ops, faults, probe(30000), time.Minute))
	wantViolation(t, DeletionsFinish(h.ops, faults, probe(30000, "a"), 20*time.Second), 1, "more than 20s after the last heal")

	// A deletion asked for after the heal has its bound from the call.
	wantViolation(t, DeletionsFinish(h.ops, faults, probe(60000, "b"), 0), 1, "cannot tell", "the last call deleting it (#4)")
	wantViolation(t, DeletionsFinish(h.ops, faults, probe(80000, "b"), 0), 1, "more than 30s after the last call deleting it (#4)")

	// No probe: no verdict, which fails.
	r = DeletionsFinish(h.ops, faults, final(60000), 0)
	wantViolation(t, r, 1, "no deletion probe")
	if !strings.Contains(DeletionsFinish(h.ops, nil, probe(60000), 0).Checked, "no faults") {
		t.Error("a run without faults is not described as such")
	}
}
