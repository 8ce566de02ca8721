package integration

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBenchQuick runs `ctrlnode bench --quick --json`: every scenario
// reports a positive figure next to a positive raw raft floor measured in
// the same run, and progress lines go to standard error.
func TestBenchQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	// Raft's warnings (elections, lost leadership, failed heartbeats) go
	// to stderr with the progress lines, printed if the run fails.
	r := ctl(t, nil, "bench", "--quick", "--json", "--log-level", "warn")
	if r.code != 0 {
		t.Fatalf("ctrlnode bench --quick: %v", r)
	}
	var rep struct {
		CPUs    int `json:"cpus"`
		Results []struct {
			Scenario   string  `json:"scenario"`
			Partitions int     `json:"partitions"`
			Value      float64 `json:"value"`
			Unit       string  `json:"unit"`
			FloorMs    float64 `json:"raft_floor_ms"`
			Ratio      float64 `json:"floor_ratio"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("bench --json output: %v\n%s", err, r.stdout)
	}
	want := map[string]bool{
		"topic creation via the Kafka listener": false,
		"controlled shutdown":                   false,
		"broker failure (fence round)":          false,
		"failover: new leader known -> ready":   false,
		"  raft election (apart)":               false,
	}
	for _, res := range rep.Results {
		if _, ok := want[res.Scenario]; !ok {
			t.Errorf("unexpected scenario %q", res.Scenario)
			continue
		}
		want[res.Scenario] = true
		if res.Value <= 0 || res.FloorMs <= 0 || res.Ratio <= 0 {
			t.Errorf("%s: value %v, floor %v ms, ratio %v: want all positive", res.Scenario, res.Value, res.FloorMs, res.Ratio)
		}
		if res.Scenario != "topic creation via the Kafka listener" && res.Partitions != 1000 {
			t.Errorf("%s ran at %d partitions, want 1000", res.Scenario, res.Partitions)
		}
	}
	for s, seen := range want {
		if !seen {
			t.Errorf("no result for %q", s)
		}
	}
	if rep.CPUs < 1 {
		t.Errorf("report gives %d CPUs", rep.CPUs)
	}
	for _, p := range []string{"raw raft floor", "controlled shutdown of a leader", "failover 1/2"} {
		if !strings.Contains(r.stderr, p) {
			t.Errorf("no progress line with %q on stderr:\n%s", p, r.stderr)
		}
	}
}
