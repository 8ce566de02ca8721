package metrics

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctrlquorum/ctrlquorum/voter/votertest"
)

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nopSnapshot{}, nil }
func (nopFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type nopSnapshot struct{}

func (nopSnapshot) Persist(s raft.SnapshotSink) error { return s.Close() }
func (nopSnapshot) Release()                          {}

// TestQuorumCollector reads the voter count and a refused change back
// from a registry, under KIP-853's names.
func TestQuorumCollector(t *testing.T) {
	c := votertest.NewCluster(t, 3, func(string) raft.FSM { return nopFSM{} })
	leader := c.Leader(10 * time.Second)
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewQuorumCollector(leader))
	if err := leader.RemoveVoter(context.Background(), "9", ""); err == nil {
		t.Fatal("removing an unknown voter succeeded")
	}
	want := map[string]float64{
		"kafka_raft_number_of_voters":         3,
		"kafka_raft_number_of_observers":      0,
		"kafka_raft_uncommitted_voter_change": 0,
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range want {
		got := -1.0
		for _, mf := range mfs {
			if mf.GetName() == name && len(mf.Metric) == 1 {
				got = mf.Metric[0].GetGauge().GetValue()
			}
		}
		if got != v {
			t.Errorf("%s = %v, want %v", name, got, v)
		}
	}
	failed := -1.0
	for _, mf := range mfs {
		if mf.GetName() != "kafka_raft_voter_changes_total" {
			continue
		}
		for _, m := range mf.Metric {
			if m.Label[0].GetValue() == "failed" {
				failed = m.GetCounter().GetValue()
			}
		}
	}
	if failed != 1 {
		t.Errorf(`kafka_raft_voter_changes_total{outcome="failed"} = %v, want 1`, failed)
	}
}
