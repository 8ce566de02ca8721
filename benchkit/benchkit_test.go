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
	events := 0
	for _, r := range rep.Results {
		if r.Value <= 0 || r.FloorMs <= 0 || len(r.Samples) != 1 || len(r.LoadAvg) != 1 {
			t.Errorf("%s: %+v", r.Scenario, r)
		}
		if r.Scenario == "controlled shutdown" || r.Scenario == "broker failure (fence round)" {
			// The event's own floor, and its replay ending in the
			// image the active voter had.
			events++
			if r.ApplyFloorMs <= 0 || r.CommitFloorMs <= 0 || r.EventRatio <= 0 || r.HashChecked != 1 || r.HashMatched != 1 {
				t.Errorf("%s: floor apply %v ms, commit %v ms, ratio %v, hash %d of %d", r.Scenario, r.ApplyFloorMs, r.CommitFloorMs, r.EventRatio, r.HashMatched, r.HashChecked)
			}
		}
	}
	if events != 2 {
		t.Errorf("%d broker events in the report, want 2", events)
	}
	// The heap figures of a 300-partition image are within the noise of
	// the voters' own allocations (the difference of two live heaps can
	// come out negative): only the snapshot's size is checked here.
	if len(rep.Images) != 1 || rep.Images[0].Partitions != 300 || rep.Images[0].Brokers != 4 || rep.Images[0].SnapshotPerPart <= 0 || rep.Images[0].SnapshotBytes <= 0 {
		t.Errorf("image figures: %+v", rep.Images)
	}
	var b bytes.Buffer
	rep.WriteTable(&b)
	for _, w := range []string{"raw raft floor", "controlled shutdown", "broker failure", "failover", "topics/s", "event floor: apply", "HEAP/PARTITION"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, b.String())
		}
	}
	if len(progress) < 5 {
		t.Errorf("only %d progress lines: %v", len(progress), progress)
	}
}
