package voter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
	"github.com/ctrlquorum/ctrlquorum/voter"
	"github.com/ctrlquorum/ctrlquorum/voter/votertest"
)

// joiner is a voter started outside the cluster, with no raft state and
// no peers: it waits to be added.
type joiner struct {
	v    *voter.Voter
	fsm  *listFSM
	logs *testkit.Log
	addr string
	dir  string
}

func startJoiner(t *testing.T, id, bind, dir string) *joiner {
	t.Helper()
	j, err := tryJoiner(t, id, bind, dir)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func tryJoiner(t *testing.T, id, bind, dir string) (*joiner, error) {
	j := &joiner{fsm: newListFSM(id).(*listFSM), logs: &testkit.Log{}, dir: dir}
	cfg := voter.Config{NodeID: id, BindAddr: bind, DataDir: t.TempDir(), DirectoryID: dir, FSM: j.fsm,
		Logger: hclog.New(&hclog.LoggerOptions{Name: "voter-" + id, Level: hclog.Info, Output: j.logs})}
	voter.FastTimeouts(&cfg)
	v, err := voter.Start(cfg)
	if err != nil {
		return nil, err
	}
	j.v, j.addr = v, v.Addr()
	t.Cleanup(func() { j.stop() })
	return j, nil
}

func (j *joiner) stop() {
	if j.v != nil {
		_ = j.v.Shutdown()
		j.v = nil
	}
}

func (j *joiner) address() raftnet.PeerAddress {
	return raftnet.PeerAddress{HostPort: j.addr, DirectoryID: j.dir}
}

func (j *joiner) request(id string) voter.AddVoterRequest {
	return voter.AddVoterRequest{ID: id, Address: j.address(), PollInterval: 10 * time.Millisecond,
		LogEnd: func(context.Context) (uint64, error) {
			if j.v == nil {
				return 0, errors.New("stopped")
			}
			return j.v.Raft().LastIndex(), nil
		}}
}

func voterIDs(t *testing.T, v *voter.Voter) (voters, nonvoters []string) {
	t.Helper()
	ms, _, err := v.Members()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Voter {
			voters = append(voters, m.ID)
		} else {
			nonvoters = append(nonvoters, m.ID)
		}
	}
	return voters, nonvoters
}

func changeCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// TestAddVoterCatchesUpFirst: a node joins as a non-voter, is promoted
// once its log reaches the commit index, and then holds every entry; a
// second change while the first runs is refused, as is adding a voter
// that is one already.
func TestAddVoterCatchesUpFirst(t *testing.T) {
	c := votertest.NewCluster(t, 3, newListFSM)
	applyRange(t, c, 0, 40)
	j := startJoiner(t, "4", "127.0.0.1:0", "joinerDirectoryAAAAAAA")
	leader := c.Leader(waitTimeout)

	req := j.request("4")
	asked := make(chan struct{})
	release := make(chan struct{})
	ask := req.LogEnd
	first := true
	req.LogEnd = func(ctx context.Context) (uint64, error) {
		if first {
			first = false
			close(asked)
			<-release
		}
		return ask(ctx)
	}
	var reports int
	req.Progress = func(end, commit uint64, err error) { reports++ }
	done := make(chan error, 1)
	go func() { done <- leader.AddVoter(changeCtx(t), req) }()
	<-asked
	if _, non := voterIDs(t, leader); len(non) != 1 || non[0] != "4" {
		t.Fatalf("while catching up, the non-voters are %v, want [4]", non)
	}
	if err := leader.RemoveVoter(changeCtx(t), "2", ""); !errors.Is(err, voter.ErrChangeInProgress) {
		t.Fatalf("a second change during an add: %v, want ErrChangeInProgress", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("AddVoter: %v (%s)", err, c)
	}
	if reports == 0 {
		t.Error("no catch-up progress was reported")
	}
	voters, non := voterIDs(t, leader)
	if len(voters) != 4 || len(non) != 0 {
		t.Fatalf("after the add: voters %v, non-voters %v; want 4 voters", voters, non)
	}
	if got := j.fsm.Len(); got < 40 {
		t.Fatalf("the new voter holds %d entries once promoted, want at least 40", got)
	}
	if st := leader.MembershipStats(); st.Added != 1 || st.Failed != 1 || st.InProgress != 0 {
		t.Fatalf("membership stats %+v, want one added, one failed (the refused removal), none in progress", st)
	}
	if err := leader.AddVoter(changeCtx(t), j.request("2")); !errors.Is(err, voter.ErrDuplicateVoter) {
		t.Fatalf("adding voter 2 again: %v, want ErrDuplicateVoter", err)
	}
	applyRange(t, c, 40, 50)
	votertest.WaitFor(t, waitTimeout, "the new voter to apply every entry", func() bool { return j.fsm.Len() == 50 })
}

// TestRemoveVoter: a follower is removed by id and directory (another
// directory is not found); the leader hands leadership over first and is
// removed by its successor.
func TestRemoveVoter(t *testing.T) {
	c := votertest.NewCluster(t, 3, newListFSM)
	j := startJoiner(t, "4", "127.0.0.1:0", "joinerDirectoryAAAAAAA")
	leader := c.Leader(waitTimeout)
	if err := leader.AddVoter(changeCtx(t), j.request("4")); err != nil {
		t.Fatal(err)
	}
	if err := leader.RemoveVoter(changeCtx(t), "4", "anotherDirectoryBBBBBB"); !errors.Is(err, voter.ErrVoterNotFound) {
		t.Fatalf("removing voter 4 of another directory: %v, want ErrVoterNotFound", err)
	}
	if err := leader.RemoveVoter(changeCtx(t), "4", j.dir); err != nil {
		t.Fatal(err)
	}
	if voters, _ := voterIDs(t, leader); len(voters) != 3 {
		t.Fatalf("voters after removing 4: %v", voters)
	}

	old := leader.ID()
	if err := leader.RemoveVoter(changeCtx(t), old, ""); !errors.Is(err, voter.ErrHandedOver) {
		t.Fatalf("removing the leader: %v, want ErrHandedOver", err)
	}
	if leader.IsLeader() {
		t.Fatal("the leader still leads after handing over")
	}
	var next *voter.Voter
	votertest.WaitFor(t, waitTimeout, "another leader", func() bool {
		next = c.Leader(waitTimeout)
		return next.ID() != old
	})
	if err := next.RemoveVoter(changeCtx(t), old, ""); err != nil {
		t.Fatalf("the new leader removing %s: %v", old, err)
	}
	if voters, _ := voterIDs(t, next); len(voters) != 2 {
		t.Fatalf("voters after removing the old leader: %v", voters)
	}
}

// TestAddVoterThatStopsFailsCleanly: a node that stops while it is being
// added never becomes a voter, and the non-voter is taken out again.
func TestAddVoterThatStopsFailsCleanly(t *testing.T) {
	c := votertest.NewCluster(t, 3, newListFSM)
	applyRange(t, c, 0, 20)
	j := startJoiner(t, "4", "127.0.0.1:0", "joinerDirectoryAAAAAAA")
	req := j.request("4")
	req.LogEnd = func(context.Context) (uint64, error) {
		j.stop()
		return 0, errors.New("the node stopped")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	leader := c.Leader(waitTimeout)
	if err := leader.AddVoter(ctx, req); !errors.Is(err, voter.ErrNotCaughtUp) {
		t.Fatalf("adding a node that stopped: %v, want ErrNotCaughtUp", err)
	}
	voters, non := voterIDs(t, leader)
	if len(voters) != 3 || len(non) != 0 {
		t.Fatalf("after the failed add: voters %v, non-voters %v; want the 3 voters alone", voters, non)
	}
	applyRange(t, c, 20, 30)
}

// TestReplacedDirectoryIsRefused is the lost disk: voter 4's directory
// is wiped and the node starts again under its id with a new directory
// id. The quorum refuses it as voter 4 (it gets no entry, and its log
// says what to do) until voter 4 of the old directory is removed and the
// node is added as a new voter.
func TestReplacedDirectoryIsRefused(t *testing.T) {
	c := votertest.NewCluster(t, 3, newListFSM)
	// A port below the ephemeral range: the node stops and starts again
	// on it, and an ephemeral one may be taken meanwhile.
	j := testkit.BindOutsideEphemeral(t, "127.0.0.1", func(addr string) (*joiner, error) {
		return tryJoiner(t, "4", addr, "oldDirectoryAAAAAAAAAA")
	})
	leader := c.Leader(waitTimeout)
	if err := leader.AddVoter(changeCtx(t), j.request("4")); err != nil {
		t.Fatal(err)
	}
	applyRange(t, c, 0, 10)
	j.stop()

	fresh := startJoiner(t, "4", j.addr, "newDirectoryBBBBBBBBBB")
	applyRange(t, c, 10, 20)
	votertest.WaitFor(t, waitTimeout, "the wiped node to refuse the leader", func() bool {
		return fresh.logs.Has("refused a raft connection meant for another directory", "expected_directory=oldDirectoryAAAAAAAAAA")
	})
	if n := fresh.fsm.Len(); n != 0 || fresh.v.Raft().LastIndex() != 0 {
		t.Fatalf("the wiped node took %d entries (last index %d) as the voter it replaced", n, fresh.v.Raft().LastIndex())
	}

	leader = c.Leader(waitTimeout)
	if err := leader.RemoveVoter(changeCtx(t), "4", "oldDirectoryAAAAAAAAAA"); err != nil {
		t.Fatal(err)
	}
	if err := leader.AddVoter(changeCtx(t), fresh.request("4")); err != nil {
		t.Fatal(err)
	}
	applyRange(t, c, 20, 30)
	votertest.WaitFor(t, waitTimeout, "the replacement to hold every entry", func() bool { return fresh.fsm.Len() == 30 })
	ms, _, _ := leader.Members()
	for _, m := range ms {
		if m.ID == "4" && (m.Address.DirectoryID != fresh.dir || !m.Voter) {
			t.Fatalf("voter 4 is %+v, want the new directory as a voter", m)
		}
	}
}
