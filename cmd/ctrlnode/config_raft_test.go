package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/voter"
)

// TestRaftSnapshotSettings: raft's snapshot settings default to
// hashicorp/raft's defaults, are taken from a file, the environment or a
// flag into server.Config, and a bad value is refused naming the setting
// and where it was set.
func TestRaftSnapshotSettings(t *testing.T) {
	_, nc, err := buildFrom(t, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := nc.Config; c.RaftSnapshotThreshold != voter.DefaultSnapshotThreshold || c.RaftSnapshotInterval != voter.DefaultSnapshotInterval ||
		c.RaftTrailingLogs != voter.DefaultTrailingLogs {
		t.Errorf("defaults: threshold %d, interval %v, trailing logs %d; want raft's %d, %v, %d", c.RaftSnapshotThreshold,
			c.RaftSnapshotInterval, c.RaftTrailingLogs, voter.DefaultSnapshotThreshold, voter.DefaultSnapshotInterval, voter.DefaultTrailingLogs)
	}

	_, nc, err = buildFrom(t, "raft.snapshot.threshold = 512\nraft.trailing.logs = 9\n",
		[]string{"CTRLNODE_RAFT_SNAPSHOT_INTERVAL=2500", "CTRLNODE_RAFT_TRAILING_LOGS=128"}, map[string]string{"raft.snapshot.interval": "3s"})
	if err != nil {
		t.Fatal(err)
	}
	if c := nc.Config; c.RaftSnapshotThreshold != 512 || c.RaftSnapshotInterval != 3*time.Second || c.RaftTrailingLogs != 128 {
		t.Errorf("threshold %d (want 512 from the file), interval %v (want 3s from the flag), trailing logs %d (want 128 from the environment)",
			c.RaftSnapshotThreshold, c.RaftSnapshotInterval, c.RaftTrailingLogs)
	}

	for _, tc := range []struct {
		file string
		env  []string
		want string
	}{
		{"raft.snapshot.threshold = -1\n", nil, `raft.snapshot.threshold (from n.conf line 1): "-1" is not positive`},
		{"", []string{"CTRLNODE_RAFT_SNAPSHOT_INTERVAL=soon"}, `raft.snapshot.interval (from env CTRLNODE_RAFT_SNAPSHOT_INTERVAL): "soon" is not a duration`},
		{"", []string{"CTRLNODE_RAFT_SNAPSHOT_INTERVAL=2ms"}, `raft.snapshot.interval (from env CTRLNODE_RAFT_SNAPSHOT_INTERVAL): 2ms is below 5ms`},
		{"\nraft.trailing.logs = 0\n", nil, `raft.trailing.logs (from n.conf line 2): "0" is not positive`},
	} {
		_, _, err := buildFrom(t, tc.file, tc.env, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("file %q env %q: err = %v, want %q", tc.file, tc.env, err, tc.want)
		}
	}
}
