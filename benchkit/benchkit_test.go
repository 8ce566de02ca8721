package benchkit

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunSmall runs every scenario at a tiny size: each yields a positive
// figure and floor, and the table names them.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three voters")
	}
	var progress []string
	rep, err := Run(context.Background(), Config{Partitions: []int{300}, Brokers: 4, Topics: 40, TopicsPerRequest: 10,
		InFlight: 2, FailoverRounds: 1, FloorSamples: 5, SessionTimeout: 2 * time.Second,
		Progress: func(s string) { progress = append(progress, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 5 {
		t.Fatalf("%d results, want 5: %+v", len(rep.Results), rep.Results)
	}
	for _, r := range rep.Results {
		if r.Value <= 0 || r.FloorMs <= 0 || len(r.Samples) != 1 {
			t.Errorf("%s: %+v", r.Scenario, r)
		}
	}
	var b bytes.Buffer
	rep.WriteTable(&b)
	for _, w := range []string{"raw raft floor", "controlled shutdown", "broker failure", "failover", "topics/s"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, b.String())
		}
	}
	if len(progress) < 5 {
		t.Errorf("only %d progress lines: %v", len(progress), progress)
	}
}
