package benchkit

import (
	"bytes"
	"strings"
	"testing"
)

// TestTargets: the targets are judged from the sizes they are stated at
// (1M over 10 brokers, 10M over 100, 1k for failover), and a target
// whose size the run lacks is reported as not measured.
func TestTargets(t *testing.T) {
	rep := Report{
		BrokersPerSize: []int{100, 10, 100},
		Results: []Result{
			{Scenario: "controlled shutdown", Partitions: 1_000_000, Brokers: 10, Value: 280, Min: 250, Max: 300, ApplyFloorMs: 90, CommitFloorMs: 50, EventRatio: 2},
			{Scenario: "broker failure (fence round)", Partitions: 1_000_000, Brokers: 10, Value: 320},
			{Scenario: "controlled shutdown", Partitions: 10_000_000, Brokers: 100, Value: 300},
			{Scenario: "broker failure (fence round)", Partitions: 10_000_000, Brokers: 100, Value: 400},
			{Scenario: "failover: new leader known -> ready", Partitions: 1000, Brokers: 100, Value: 2},
			{Scenario: "failover: new leader known -> ready", Partitions: 10_000_000, Brokers: 100, Value: 2.1},
			// A 1M run over 100 brokers is not the 1M target's size.
			{Scenario: "controlled shutdown", Partitions: 1_000_000, Brokers: 100, Value: 1},
		},
		Images: []ImageResult{{Partitions: 10_000_000, Brokers: 100, HeapPerPartition: 160, SnapshotPerPart: 19.9, SnapshotWriteMs: 2500, SnapshotRestoreMs: 3100}},
	}
	got := map[string]string{}
	for _, tg := range targets(rep) {
		got[tg.Name] = tg.Status
	}
	want := map[string]string{
		"1M partitions / 10 brokers: controlled shutdown of a broker leading 100k": targetMet,
		"1M partitions / 10 brokers: fence of a broker leading 100k":               targetNotMet,
		"10M / 100 brokers: heap per partition per voter":                          targetNotMet,
		"10M / 100 brokers: snapshot per partition":                                targetMet,
		"10M / 100 brokers: snapshot written":                                      targetMet,
		"10M / 100 brokers: snapshot restored":                                     targetNotMet,
		"10M / 100 brokers: controlled shutdown of a broker leading 100k":          targetMet, // 300 vs 280: 1.07x
		"10M / 100 brokers: fence of a broker leading 100k":                        targetNotMet,
		"failover at 10M / 100 brokers":                                            targetMet,
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %q, want %q", name, got[name], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d targets, want %d: %v", len(got), len(want), got)
	}
	var b bytes.Buffer
	writeTargets(&b, targets(rep))
	if !strings.Contains(b.String(), "2.00x its floor of 140.0 ms") {
		t.Errorf("the shutdown target lacks its floor:\n%s", b.String())
	}

	for _, tg := range targets(Report{}) {
		if tg.Status != targetNotMeasured {
			t.Errorf("an empty report: %s is %q", tg.Name, tg.Status)
		}
	}
	b.Reset()
	writeTargets(&b, targets(Report{}))
	if b.Len() != 0 {
		t.Errorf("targets printed for a report that measured none:\n%s", b.String())
	}
}
