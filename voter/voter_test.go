package voter_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/voter"
	"github.com/ctrlquorum/ctrlquorum/voter/votertest"
)

const (
	waitTimeout  = 10 * time.Second
	applyTimeout = 5 * time.Second
)

func fsmOf(c *votertest.Cluster, i int) *listFSM { return c.FSM(i).(*listFSM) }

func payload(i int) string { return fmt.Sprintf("entry-%03d", i) }

func payloads(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = payload(i)
	}
	return out
}

// applyRange proposes entries [from, to) on v, pipelined, and checks that
// each one committed and that the FSM answered with its list position.
func applyRange(t *testing.T, v *voter.Voter, from, to int) {
	t.Helper()
	futures := make([]raft.ApplyFuture, 0, to-from)
	for i := from; i < to; i++ {
		futures = append(futures, v.Apply([]byte(payload(i)), applyTimeout))
	}
	for k, f := range futures {
		if err := f.Error(); err != nil {
			t.Fatalf("apply %s on voter %s: %v", payload(from+k), v.ID(), err)
		}
		if got, want := f.Response(), from+k+1; got != want {
			t.Fatalf("apply %s: FSM response %v, want position %d", payload(from+k), got, want)
		}
	}
}

// waitConverged waits until every listed node has applied exactly the first
// n payloads, in order.
func waitConverged(t *testing.T, c *votertest.Cluster, nodes []int, n int) {
	t.Helper()
	votertest.WaitFor(t, waitTimeout, fmt.Sprintf("nodes %v to apply %d entries", nodes, n), func() bool {
		for _, i := range nodes {
			if fsmOf(c, i).Len() != n {
				return false
			}
		}
		return true
	})
	want := payloads(n)
	for _, i := range nodes {
		if got := fsmOf(c, i).Entries(); !slices.Equal(got, want) {
			t.Fatalf("node %d applied %v, want %v", i, got, want)
		}
	}
	h := fsmOf(c, nodes[0]).Hash()
	for _, i := range nodes[1:] {
		if fsmOf(c, i).Hash() != h {
			t.Fatalf("node %d hash differs from node %d", i, nodes[0])
		}
	}
}

func all(c *votertest.Cluster) []int {
	out := make([]int, c.Size())
	for i := range out {
		out[i] = i
	}
	return out
}

// nextEvent reads one leadership event or fails after waitTimeout.
func nextEvent(t *testing.T, v *voter.Voter) (value, open bool) {
	t.Helper()
	select {
	case value, open = <-v.LeaderEvents():
		return value, open
	case <-time.After(waitTimeout):
		t.Fatalf("no leadership event from voter %s", v.ID())
		return false, false
	}
}

func TestThreeVotersApplyTheSameEntries(t *testing.T) {
	c := votertest.NewCluster(t, 3, newListFSM)
	leader := c.Leader(waitTimeout)

	if v, open := nextEvent(t, leader); !v || !open {
		t.Fatalf("leader's LeaderEvents gave (%v, open=%v), want true", v, open)
	}
	for _, f := range c.Followers() {
		if err := f.Apply([]byte("x"), applyTimeout).Error(); !errors.Is(err, raft.ErrNotLeader) {
			t.Fatalf("apply on follower %s: err %v, want ErrNotLeader", f.ID(), err)
		}
		if addr, id := f.LeaderID(); id != leader.ID() || addr != leader.Addr() {
			t.Fatalf("follower %s sees leader %s@%s, want %s@%s", f.ID(), id, addr, leader.ID(), leader.Addr())
		}
	}

	applyRange(t, leader, 0, 50)
	waitConverged(t, c, all(c), 50)
}

func TestLeaderLossElectsNewLeaderWithSameData(t *testing.T) {
	c := votertest.NewCluster(t, 3, newListFSM)
	old := c.Leader(waitTimeout)
	applyRange(t, old, 0, 20)
	waitConverged(t, c, all(c), 20)

	oi := c.Index(old)
	c.Stop(oi)
	// The stopped leader's last word is "not leader", then the channel closes.
	if v, open := nextEvent(t, old); v || !open {
		t.Fatalf("stopped leader's last event (%v, open=%v), want false", v, open)
	}
	if _, open := nextEvent(t, old); open {
		t.Fatal("LeaderEvents still open after Shutdown")
	}
	if err := old.Shutdown(); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}

	leader := c.Leader(waitTimeout)
	if leader.ID() == old.ID() {
		t.Fatalf("leader is still %s after it stopped", old.ID())
	}
	survivors := c.Running()
	waitConverged(t, c, survivors, 20)

	applyRange(t, leader, 20, 40)
	waitConverged(t, c, survivors, 40)

	c.Restart(oi)
	waitConverged(t, c, all(c), 40)
}

func TestRestartAllFromDisk(t *testing.T) {
	c := votertest.NewCluster(t, 3, newListFSM)
	applyRange(t, c.Leader(waitTimeout), 0, 30)
	waitConverged(t, c, all(c), 30)
	before := fsmOf(c, 0).Hash()

	for i := range c.Size() {
		c.Stop(i)
	}
	for i := range c.Size() {
		c.Restart(i)
		if n := fsmOf(c, i).Len(); n != 0 {
			t.Fatalf("node %d: fresh FSM has %d entries before raft replays", i, n)
		}
	}

	leader := c.Leader(waitTimeout)
	waitConverged(t, c, all(c), 30)
	if fsmOf(c, 0).Hash() != before {
		t.Fatal("state after restart differs from state before")
	}
	cfg := leader.Raft().GetConfiguration()
	if err := cfg.Error(); err != nil {
		t.Fatal(err)
	}
	if n := len(cfg.Configuration().Servers); n != 3 {
		t.Fatalf("configuration after restart has %d servers, want 3", n)
	}
	applyRange(t, leader, 30, 31)
	waitConverged(t, c, all(c), 31)
}

func TestLaggingFollowerCatchesUpFromSnapshot(t *testing.T) {
	c := votertest.NewCluster(t, 3, newListFSM, func(cfg *voter.Config) {
		cfg.SnapshotThreshold = 8
		cfg.TrailingLogs = 4
	})
	leader := c.Leader(waitTimeout)
	applyRange(t, leader, 0, 10)
	waitConverged(t, c, all(c), 10)

	lagging := c.Index(c.Followers()[0])
	c.Stop(lagging)
	applyRange(t, leader, 10, 40)
	if err := leader.Raft().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot on leader: %v", err)
	}

	c.Restart(lagging)
	waitConverged(t, c, all(c), 40)

	// The lagging node held 10 entries; a restore of all 40 can only be the
	// leader's snapshot, since the leader compacted the log it missed.
	if r := fsmOf(c, lagging).Restores(); !slices.Contains(r, 40) {
		t.Fatalf("lagging node restores loaded %v entries, want a restore of the leader's 40", r)
	}
}

func TestTransferLeadershipHandsOver(t *testing.T) {
	c := votertest.NewCluster(t, 3, newListFSM)
	old := c.Leader(waitTimeout)
	applyRange(t, old, 0, 5)

	if err := c.Followers()[0].TransferLeadership(); err != nil {
		t.Fatalf("TransferLeadership on a follower: %v, want nil", err)
	}
	if err := old.TransferLeadership(); err != nil {
		t.Fatalf("TransferLeadership: %v", err)
	}
	leader := c.Leader(waitTimeout)
	if leader.ID() == old.ID() {
		t.Fatalf("leadership stayed on %s", old.ID())
	}
	applyRange(t, leader, 5, 10)
	waitConverged(t, c, all(c), 10)
}
