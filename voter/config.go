package voter

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
)

// Defaults applied by Start to zero-valued Config fields. They follow
// hashicorp/raft's own defaults except MaxAppendEntries, which is raised
// because one controller event commits a batch per log entry and followers
// catching up should move many entries per round trip.
const (
	DefaultHeartbeatTimeout   = 1000 * time.Millisecond
	DefaultElectionTimeout    = 1000 * time.Millisecond
	DefaultLeaderLeaseTimeout = 500 * time.Millisecond
	DefaultCommitTimeout      = 50 * time.Millisecond
	DefaultSnapshotInterval   = 120 * time.Second
	DefaultSnapshotThreshold  = 8192
	DefaultTrailingLogs       = 10240
	DefaultMaxAppendEntries   = 256
)

// Config describes one voter. NodeID, DataDir and FSM are required, and
// either BindAddr or Stream.
type Config struct {
	// NodeID is the raft server id, e.g. "1". It must be stable across
	// restarts: it is how the cluster configuration names this voter.
	NodeID string

	// BindAddr is the host:port raft listens on and dials from. Ignored when
	// Stream is set.
	BindAddr string

	// Advertise is the address peers dial to reach this voter. Empty means
	// BindAddr, which must then name a concrete IP. Ignored when Stream is set.
	Advertise string

	// Stream, when set, is used instead of a plain TCP stream layer on
	// BindAddr; this is where a TLS listener and dialer come in. The voter
	// takes ownership and closes it on Shutdown.
	Stream *raftnet.StreamLayer

	// DirectoryID is this copy of the node's data: the directory id its
	// data directory was formatted with. The stream layer refuses a raft
	// connection dialled for another directory of the same node id (see
	// raftnet.PeerAddress). Empty: none, every connection is accepted.
	// Start fills it from a formatted DataDir's meta.properties (and
	// refuses a different one).
	DirectoryID string

	// DataDir holds raft.db (term and vote), the log and the snapshots
	// directory.
	DataDir string

	// Store chooses the store of the raft log (Store.LogStore; zero: the
	// one DataDir holds, raftlog.DefaultLogStore for a new one) and its
	// options; a DataDir holding the log in another store has it moved on
	// start (see raftlog.OpenStores). Its Logger is ignored: the voter's
	// is used.
	Store raftlog.StoreOptions

	// Peers are all voters including this one, for a DataDir that is not
	// formatted (in-process clusters of tests and benchmarks); they are
	// used only to bootstrap a directory that has no raft state yet. A
	// formatted DataDir is bootstrapped from the initial voters of its
	// meta.properties and nothing else, and Peers must then be empty.
	Peers []raft.Server

	// FSM receives committed entries. Implementing raft.BatchingFSM lets raft
	// hand over whole batches.
	FSM raft.FSM

	// Logger is the parent logger; raft logs under the name "raft".
	// Nil discards logs.
	Logger hclog.Logger

	// Raft timing. Zero means the matching Default constant, except that an
	// unset ElectionTimeout is at least HeartbeatTimeout and an unset
	// LeaderLeaseTimeout at most HeartbeatTimeout, as raft requires.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration

	// Snapshotting. Raft checks every SnapshotInterval (with jitter) whether
	// SnapshotThreshold entries accumulated since the last snapshot, and
	// after a snapshot keeps TrailingLogs entries so that briefly lagging
	// followers catch up from the log instead of a full snapshot. Zero means
	// the matching Default constant.
	SnapshotInterval  time.Duration
	SnapshotThreshold uint64
	TrailingLogs      uint64

	// MaxAppendEntries caps the entries per AppendEntries RPC and per FSM
	// batch. Zero means DefaultMaxAppendEntries.
	MaxAppendEntries int
}

// FastTimeouts sets timings for voters that share one host over loopback,
// where a round trip takes microseconds: elections settle in well under a
// second instead of several. It has the shape of an option so test
// helpers can take it alongside others.
//
// They are not as tight as they could be on an idle machine: a leader that
// cannot reach a quorum within LeaderLeaseTimeout steps down, a follower
// that hears nothing for HeartbeatTimeout forgets its leader while it
// campaigns, and a busy 2-core CI host running the race detector stalls
// goroutines for a good part of a second (with 250 ms, followers of an
// idle cluster lost their leader under load and tests that need one
// leader throughout failed).
func FastTimeouts(c *Config) {
	c.HeartbeatTimeout = 500 * time.Millisecond
	c.ElectionTimeout = 500 * time.Millisecond
	c.LeaderLeaseTimeout = 500 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
}

func (c *Config) validate() error {
	switch {
	case c.NodeID == "":
		return errors.New("voter: NodeID is required")
	case c.DataDir == "":
		return errors.New("voter: DataDir is required")
	case c.FSM == nil:
		return errors.New("voter: FSM is required")
	case c.Stream == nil && c.BindAddr == "":
		return errors.New("voter: BindAddr or Stream is required")
	}
	if len(c.Peers) > 0 {
		found := false
		for _, p := range c.Peers {
			if string(p.ID) == c.NodeID {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("voter: Peers do not include this node (%s)", c.NodeID)
		}
	}
	return nil
}

// raftConfig turns c into raft's configuration, filling defaults.
func (c *Config) raftConfig(logger hclog.Logger, notify chan<- bool) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeID)
	rc.Logger = logger.Named("raft")
	rc.NotifyCh = notify
	rc.BatchApplyCh = true
	rc.NoSnapshotRestoreOnStart = false
	// A voter removed from the configuration keeps running as a node
	// outside the quorum (it campaigns for nothing, it is not a voter)
	// rather than stopping raft under the controller and listener that
	// use it.
	rc.ShutdownOnRemove = false

	rc.HeartbeatTimeout = orDefault(c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	// Raft requires election >= heartbeat >= lease. When only the heartbeat
	// is set, derive the unset ones from it instead of failing validation.
	rc.ElectionTimeout = orDefault(c.ElectionTimeout, max(DefaultElectionTimeout, rc.HeartbeatTimeout))
	rc.LeaderLeaseTimeout = orDefault(c.LeaderLeaseTimeout, min(DefaultLeaderLeaseTimeout, rc.HeartbeatTimeout))
	rc.CommitTimeout = orDefault(c.CommitTimeout, DefaultCommitTimeout)
	rc.SnapshotInterval = orDefault(c.SnapshotInterval, DefaultSnapshotInterval)
	rc.SnapshotThreshold = orDefault(c.SnapshotThreshold, DefaultSnapshotThreshold)
	rc.TrailingLogs = orDefault(c.TrailingLogs, DefaultTrailingLogs)
	rc.MaxAppendEntries = orDefault(c.MaxAppendEntries, DefaultMaxAppendEntries)
	return rc
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
