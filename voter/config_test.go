package voter

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

func TestRaftConfigDefaults(t *testing.T) {
	notify := make(chan bool)
	rc := (&Config{NodeID: "7"}).raftConfig(hclog.NewNullLogger(), notify)
	if err := raft.ValidateConfig(rc); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	if rc.LocalID != "7" || !rc.BatchApplyCh || rc.NoSnapshotRestoreOnStart || rc.NotifyCh == nil {
		t.Fatalf("id/batching/restore/notify not set as required: %+v", rc)
	}
	if rc.MaxAppendEntries < 64 {
		t.Fatalf("MaxAppendEntries %d, want at least 64", rc.MaxAppendEntries)
	}
	if rc.HeartbeatTimeout != DefaultHeartbeatTimeout || rc.TrailingLogs != DefaultTrailingLogs ||
		rc.SnapshotThreshold != DefaultSnapshotThreshold {
		t.Fatalf("defaults not applied: %+v", rc)
	}
}

func TestRaftConfigDerivesFromHeartbeat(t *testing.T) {
	for _, hb := range []time.Duration{50 * time.Millisecond, 3 * time.Second} {
		rc := (&Config{NodeID: "1", HeartbeatTimeout: hb}).raftConfig(hclog.NewNullLogger(), nil)
		if err := raft.ValidateConfig(rc); err != nil {
			t.Fatalf("heartbeat %s alone: %v", hb, err)
		}
	}
	c := Config{NodeID: "1"}
	FastTimeouts(&c)
	if err := raft.ValidateConfig(c.raftConfig(hclog.NewNullLogger(), nil)); err != nil {
		t.Fatalf("FastTimeouts: %v", err)
	}
	if c.ElectionTimeout >= DefaultElectionTimeout {
		t.Fatalf("FastTimeouts election timeout %s is not faster than the default", c.ElectionTimeout)
	}
}

func TestRaftConfigSnapshotSettings(t *testing.T) {
	c := Config{NodeID: "1", SnapshotThreshold: 256, SnapshotInterval: 2 * time.Second, TrailingLogs: 64}
	rc := c.raftConfig(hclog.NewNullLogger(), nil)
	if err := raft.ValidateConfig(rc); err != nil {
		t.Fatal(err)
	}
	if rc.SnapshotThreshold != 256 || rc.SnapshotInterval != 2*time.Second || rc.TrailingLogs != 64 {
		t.Fatalf("threshold %d, interval %v, trailing logs %d; want 256, 2s, 64", rc.SnapshotThreshold, rc.SnapshotInterval, rc.TrailingLogs)
	}
	if def := raft.DefaultConfig(); DefaultSnapshotThreshold != def.SnapshotThreshold || DefaultSnapshotInterval != def.SnapshotInterval ||
		DefaultTrailingLogs != def.TrailingLogs {
		t.Fatalf("the voter's snapshot defaults %d, %v, %d are not raft's %d, %v, %d", DefaultSnapshotThreshold, DefaultSnapshotInterval,
			DefaultTrailingLogs, def.SnapshotThreshold, def.SnapshotInterval, def.TrailingLogs)
	}
}
