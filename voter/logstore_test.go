package voter_test

import (
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
			catchUpFromSnapshot(t, c)
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
