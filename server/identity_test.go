package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/voter/meta"
)

// TestAdoptsDirectoryOfEarlierRelease: a data directory holding raft state
// but no meta.properties (as a release from before format left it) is
// adopted: the node starts on it with its log, meta.properties is written
// with a new directory id and no initial voters, and the cluster id is the
// cluster.id setting when there is one, else the same hash of the voters
// on every voter.
func TestAdoptsDirectoryOfEarlierRelease(t *testing.T) {
	for _, tc := range []struct {
		name, setting string
	}{{"from the voters", ""}, {"from cluster.id", "legacy-cluster-1"}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := oneNode(t)
			cfg.Broker = false
			first, err := meta.Read(cfg.DataDir)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Start(cfg)
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "leader", func() bool { return s.Node.Voter.IsLeader() })
			before := s.Node.FSM.AppliedIndex()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(cfg.DataDir, meta.FileName)); err != nil {
				t.Fatal(err)
			}

			cfg.ClusterID = tc.setting
			var logs testkit.Log
			cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
			s, err = Start(cfg)
			if err != nil {
				t.Fatalf("restart on a directory without meta.properties: %v", err)
			}
			defer s.Close()
			waitFor(t, 30*time.Second, "the log replayed", func() bool { return s.Node.FSM.AppliedIndex() >= before })
			p, err := meta.Read(cfg.DataDir)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.setting
			if want == "" {
				want = adoptedClusterID(cfg.Voters)
			}
			if p.ClusterID != want || p.NodeID != 1001 || p.DirectoryID == first.DirectoryID || len(p.InitialVoters) != 0 {
				t.Fatalf("adopted as %+v; want cluster %s, node 1001, a new directory id, no initial voters", p, want)
			}
			if !logs.Has("[INFO]", "adopted a data directory written by a release without meta.properties", "cluster_id="+want) {
				t.Errorf("no INFO line about the adoption:\n%s", logs.String())
			}
			if got := s.Cfg().ClusterID; got != want {
				t.Fatalf("the node runs with cluster id %q, want %q", got, want)
			}
		})
	}
	a := adoptedClusterID([]VoterPeer{{ID: 1, Raft: "h:1"}, {ID: 2, Raft: "h:2"}})
	b := adoptedClusterID([]VoterPeer{{ID: 2, Raft: "h:2"}, {ID: 1, Raft: "h:1"}})
	c := adoptedClusterID([]VoterPeer{{ID: 1, Raft: "h:1"}, {ID: 2, Raft: "h:3"}})
	if _, err := meta.ParseUUID(a); err != nil || a != b || a == c {
		t.Fatalf("adopted ids: %s %s %s (%v): want one valid id per set of voters, whatever their order", a, b, c, err)
	}
}

// TestWipedVoterNeverBootstraps: a voter of a running cluster whose data
// directory is wiped is refused until formatted again; formatted to join
// (no initial voters) it starts without bootstrapping a quorum of its own,
// has no leader and leaves the others' configuration as it was.
func TestWipedVoterNeverBootstraps(t *testing.T) {
	var cfgs []Config
	var peers []VoterPeer
	for i := 0; i < 2; i++ {
		peers = append(peers, VoterPeer{ID: int32(1001 + i), Raft: freeAddr(t), Listener: freeAddr(t)})
	}
	for _, p := range peers {
		c := oneNode(t)
		c.NodeID, c.Broker, c.RaftAddr, c.Listener, c.Voters, c.DataDir = p.ID, false, p.Raft, p.Listener, peers, t.TempDir()
		cfgs = append(cfgs, c)
	}
	formatAll(t, cfgs...)
	var servers []*Server
	for _, c := range cfgs {
		s, err := Start(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		servers = append(servers, s)
	}
	waitFor(t, 30*time.Second, "a leader", func() bool { return servers[0].Node.Voter.IsLeader() || servers[1].Node.Voter.IsLeader() })
	if err := servers[1].Close(); err != nil {
		t.Fatal(err)
	}
	p0, _ := meta.Read(cfgs[0].DataDir)
	if err := os.RemoveAll(cfgs[1].DataDir); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(cfgs[1]); err == nil || !strings.Contains(err.Error(), "is not formatted: run `ctrlnode format` first") {
		t.Fatalf("start on a wiped directory: %v, want a refusal saying to format it", err)
	}
	if has, _ := meta.HasRaftState(cfgs[1].DataDir); has {
		t.Fatal("the refused start left raft state")
	}
	again, err := meta.Format(cfgs[1].DataDir, meta.FormatOptions{ClusterID: p0.ClusterID, NodeID: 1002})
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.Log
	cfgs[1].Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	s, err := Start(cfgs[1])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if s.Node.Voter.Identity().DirectoryID != again.DirectoryID || s.Cfg().ClusterID != p0.ClusterID {
		t.Fatalf("the voter runs as %+v, formatted as %+v", s.Node.Voter.Identity(), again)
	}
	cf := s.Node.Voter.Raft().GetConfiguration()
	if err := cf.Error(); err != nil {
		t.Fatal(err)
	}
	if n := len(cf.Configuration().Servers); n != 0 {
		t.Fatalf("the re-formatted voter has a configuration of %d servers; want none until it is added", n)
	}
	if logs.Has("bootstrapping new cluster") || !logs.Has("waiting to be added to the quorum") {
		t.Fatalf("the re-formatted voter's log:\n%s", logs.String())
	}
}
