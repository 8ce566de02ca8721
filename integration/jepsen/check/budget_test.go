package check

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLinearizabilityBudget checks simulated runs of the jepsen test's
// shape (sim_test.go: four clients, the sliding window of topic names,
// faults that slow calls down and lose answers) within a fraction of the
// budget the harness gives a run of that length (a fifth of the
// duration, at least a minute). The 45 s run is what `make test` runs;
// a 10-minute one runs too unless -short or the race detector (which
// slows the check down tenfold) is on; JEPSEN_BUDGET_LONG=30m adds a
// run of that length.
func TestLinearizabilityBudget(t *testing.T) {
	durations := []time.Duration{45 * time.Second}
	if !testing.Short() && !raceEnabled {
		durations = append(durations, 10*time.Minute)
	}
	if d, err := time.ParseDuration(os.Getenv("JEPSEN_BUDGET_LONG")); err == nil {
		durations = append(durations, d)
	}
	for _, d := range durations {
		ops := simulate(rand.New(rand.NewPCG(uint64(d), 7)), runLike(d))
		budget := max(time.Minute, d/5)
		began := time.Now()
		r := Linearizability(ops, LinearizabilityOptions{Timeout: budget, HTMLPath: filepath.Join(t.TempDir(), "linearizability.html")})
		took := time.Since(began)
		t.Logf("%s run: %d calls checked in %s of a %s budget\n%s", d, len(ops), took.Round(time.Millisecond), budget, r)
		wantValid(t, r)
		if limit := budget / 4; !raceEnabled && took > limit {
			t.Errorf("%s run: the check took %s, more than a quarter of its %s budget", d, took, budget)
		}
	}
}
