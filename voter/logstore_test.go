package voter_test

import (
	"slices"
	"testing"

	"github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/voter"
	"github.com/ctrlquorum/ctrlquorum/voter/votertest"
)

// TestEveryLogStore runs a cluster on each log store through what the
// stores see of raft: a follower that lags past the leader's compacted log
// and comes back through its snapshot (the log cleared and continued past
// a gap), then every voter restarted from its files.
func TestEveryLogStore(t *testing.T) {
	for _, store := range []raftlog.LogStore{raftlog.LogStoreSegments, raftlog.LogStoreWAL, raftlog.LogStoreBolt} {
		t.Run(string(store), func(t *testing.T) {
			c := votertest.NewCluster(t, 3, newListFSM, func(cfg *voter.Config) {
				cfg.SnapshotThreshold = 8
				cfg.TrailingLogs = 4
				cfg.Store.LogStore = store
				// Compaction frees whole raft-wal segments: small ones (an
				// append or two each), so that what the follower missed is
				// gone from the leader's log.
				cfg.Store.WALSegmentBytes = 256
			})
			applyRange(t, c, 0, 10)
			waitConverged(t, c, all(c), 10)

			c.Leader(waitTimeout)
			lagging := c.Index(c.Followers()[0])
			c.Stop(lagging)
			applyRange(t, c, 10, 40)
			up := c.Running()
			waitConverged(t, c, up, 40)
			for _, i := range up {
				if err := c.Voter(i).Raft().Snapshot().Error(); err != nil {
					t.Fatalf("snapshot on node %d: %v", i, err)
				}
			}
			c.Restart(lagging)
			waitConverged(t, c, all(c), 40)
			if r := fsmOf(c, lagging).Restores(); !slices.Contains(r, 40) {
				t.Fatalf("lagging node restores loaded %v entries, want a restore of the leader's 40", r)
			}
			applyRange(t, c, 40, 50)
			waitConverged(t, c, all(c), 50)
			before := fsmOf(c, 0).Hash()

			for i := range c.Size() {
				c.Stop(i)
			}
			for i := range c.Size() {
				c.Restart(i)
			}
			c.Leader(waitTimeout)
			waitConverged(t, c, all(c), 50)
			if fsmOf(c, 0).Hash() != before {
				t.Fatal("state after restart differs from state before")
			}
			applyRange(t, c, 50, 51)
			waitConverged(t, c, all(c), 51)
		})
	}
}
