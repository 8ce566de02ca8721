package server

import (
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
	"github.com/ctrlquorum/ctrlquorum/voter/votertest"
)

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nopSnapshot{}, nil }
func (nopFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type nopSnapshot struct{}

func (nopSnapshot) Persist(s raft.SnapshotSink) error { return s.Close() }
func (nopSnapshot) Release()                          {}

// TestVoterCheckFollowsTheQuorum: over TLS a node accepts the
// certificates of the configured voters and, once its voter runs, of
// every server of the raft configuration (a voter added meanwhile), and
// no other.
func TestVoterCheckFollowsTheQuorum(t *testing.T) {
	s := &Server{cfg: Config{Voters: []VoterPeer{{ID: 1001}}}}
	check := s.voterCheck()
	voter := func(id int32) tlsconfig.Identity { return tlsconfig.Identity{Voter: id, Broker: -1} }
	if err := check(voter(1001)); err != nil {
		t.Fatalf("a configured voter refused: %v", err)
	}
	if err := check(voter(2)); err == nil {
		t.Fatal("voter 2 accepted before any raft configuration is known")
	}
	c := votertest.NewCluster(t, 3, func(string) raft.FSM { return nopFSM{} })
	s.quorum.Store(c.Leader(10 * time.Second))
	for _, id := range []int32{1, 2, 3, 1001} {
		if err := check(voter(id)); err != nil {
			t.Errorf("voter %d of the configuration refused: %v", id, err)
		}
	}
	if err := check(voter(9)); err == nil {
		t.Error("voter 9, in no configuration, accepted")
	}
	if err := check(tlsconfig.Identity{Voter: -1, Broker: 2}); err == nil {
		t.Error("a broker's certificate accepted as a voter's")
	}
}
