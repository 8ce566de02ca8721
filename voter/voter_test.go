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

// applyRange proposes entries [from, to) on the cluster's leader,
// pipelined, and checks that each one committed and that the FSM answered
// with its list position. If leadership moves meanwhile (a loaded machine
// can miss a heartbeat), the entries from the first failed one on are
// proposed again, one at a time, on whichever voter leads then; listFSM
// ignores a payload it already holds, so an entry that did commit before the
// change is not applied twice.
func applyRange(t *testing.T, c *votertest.Cluster, from, to int) {
	t.Helper()
	leader := c.Leader(waitTimeout)
	futures := make([]raft.ApplyFuture, 0, to-from)
	for i := from; i < to; i++ {
		futures = append(futures, leader.Apply([]byte(payload(i)), applyTimeout))
	}
	for k, f := range futures {
		err := f.Error()
		if leadershipMoved(err) {
			t.Logf("leadership moved while applying %s (%v); proposing the rest again", payload(from+k), err)
			for i := from + k; i < to; i++ {
				applyOne(t, c, i)
			}
			return
		}
		checkApplied(t, f, err, from+k)
	}
}

// applyOne proposes entry i until a leader commits it.
func applyOne(t *testing.T, c *votertest.Cluster, i int) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		f := c.Leader(waitTimeout).Apply([]byte(payload(i)), applyTimeout)
		err := f.Error()
		if leadershipMoved(err) && time.Now().Before(deadline) {
			continue
		}
		checkApplied(t, f, err, i)
		return
	}
}

func leadershipMoved(err error) bool {
	return errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
		errors.Is(err, raft.ErrLeadershipTransferInProgress)
}

func checkApplied(t *testing.T, f raft.ApplyFuture, err error, i int) {
	t.Helper()
	if err != nil {
		t.Fatalf("apply %s: %v", payload(i), err)
	}
	if got, want := f.Response(), i+1; got != want {
		t.Fatalf("apply %s: FSM response %v, want position %d", payload(i), got, want)
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

// waitLeaderEvent reads v's leadership events until one equals want.
func waitLeaderEvent(t *testing.T, v *voter.Voter, want bool) {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		select {
		case got, open := <-v.LeaderEvents():
			if !open {
				t.Fatalf("voter %s: LeaderEvents closed before %v", v.ID(), want)
			}
			if got == want {
				return
			}
		case <-timeout:
			t.Fatalf("voter %s: no LeaderEvents value %v within %s", v.ID(), want, waitTimeout)
		}
	}
}

// lastEvent reads v's leadership events until the channel closes, which it
// must do after Shutdown, and returns the last value (false if none).
func lastEvent(t *testing.T, v *voter.Voter) bool {
	t.Helper()
	last := false
	timeout := time.After(waitTimeout)
	for {
		select {
		case got, open := <-v.LeaderEvents():
			if !open {
				return last
			}
			last = got
		case <-timeout:
			t.Fatalf("voter %s: LeaderEvents still open %s after Shutdown", v.ID(), waitTimeout)
		}
	}
}

func TestThreeVotersApplyTheSameEntries(t *testing.T) {
	c := votertest.NewCluster(t, 3, newListFSM)
	leader := c.Leader(waitTimeout)
	waitLeaderEvent(t, leader, true)
	for _, f := range c.Followers() {
		if err := f.Apply([]byte("x"), applyTimeout).Error(); !errors.Is(err, raft.ErrNotLeader) {
			t.Fatalf("apply on follower %s: err %v, want ErrNotLeader", f.ID(), err)
		}
		if addr, id := f.LeaderID(); id != leader.ID() || addr != leader.Addr() {
			t.Fatalf("follower %s sees leader %s@%s, want %s@%s", f.ID(), id, addr, leader.ID(), leader.Addr())
		}
	}

	applyRange(t, c, 0, 50)
	waitConverged(t, c, all(c), 50)
}

func TestLeaderLossElectsNewLeaderWithSameData(t *testing.T) {
	c := votertest.NewCluster(t, 3, newListFSM)
	applyRange(t, c, 0, 20)
	waitConverged(t, c, all(c), 20)

	old := c.Leader(waitTimeout)
	oi := c.Index(old)
	c.Stop(oi)
	// The stopped leader's last word is "not leader", then the channel closes.
	if last := lastEvent(t, old); last {
		t.Fatal("stopped leader's last LeaderEvents value is true, want false")
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

	applyRange(t, c, 20, 40)
	waitConverged(t, c, survivors, 40)

	c.Restart(oi)
	waitConverged(t, c, all(c), 40)
}

func TestRestartAllFromDisk(t *testing.T) {
	c := votertest.NewCluster(t, 3, newListFSM)
	applyRange(t, c, 0, 30)
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
	applyRange(t, c, 30, 31)
	waitConverged(t, c, all(c), 31)
}

func TestLaggingFollowerCatchesUpFromSnapshot(t *testing.T) {
	c := votertest.NewCluster(t, 3, newListFSM, func(cfg *voter.Config) {
		cfg.SnapshotThreshold = 8
		cfg.TrailingLogs = 4
	})
	catchUpFromSnapshot(t, c)
}

// catchUpFromSnapshot commits entries 0–10, stops a follower, commits
// 10–40 and snapshots the others, restarts the follower and checks that it
// caught up through the leader's snapshot. The cluster must snapshot and
// compact its log within 40 entries.
func catchUpFromSnapshot(t *testing.T, c *votertest.Cluster) {
	t.Helper()
	applyRange(t, c, 0, 10)
	waitConverged(t, c, all(c), 10)

	c.Leader(waitTimeout)
	lagging := c.Index(c.Followers()[0])
	c.Stop(lagging)
	applyRange(t, c, 10, 40)

	// Snapshot every running voter, not only the current leader: whichever
	// of them leads when the lagging node returns must have compacted away
	// the entries it missed, so only a snapshot can bring it up to date.
	up := c.Running()
	waitConverged(t, c, up, 40)
	for _, i := range up {
		if err := c.Voter(i).Raft().Snapshot().Error(); err != nil {
			t.Fatalf("snapshot on node %d: %v", i, err)
		}
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
	applyRange(t, c, 0, 5)

	old := c.Leader(waitTimeout)
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
	applyRange(t, c, 5, 10)
	waitConverged(t, c, all(c), 10)
}
