package benchkit

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunMembershipSmall adds and removes a voter at a tiny size: both
// figures are positive and the table names them.
func TestRunMembershipSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four voters")
	}
	rep, err := RunMembership(context.Background(), Config{Partitions: []int{300}, Brokers: 3, FloorSamples: 5, SessionTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 {
		t.Fatalf("%d results, want 2: %+v", len(rep.Results), rep.Results)
	}
	for _, r := range rep.Results {
		if r.Value <= 0 || r.FloorMs <= 0 || len(r.Samples) != 1 {
			t.Errorf("%s: %+v", r.Scenario, r)
		}
	}
	var b bytes.Buffer
	rep.WriteTable(&b)
	for _, w := range []string{"add a voter", "remove a voter"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, b.String())
		}
	}
}
