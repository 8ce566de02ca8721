package raftlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

const (
	// BoltFile is the name of the bolt database inside a voter's data
	// directory. It holds both the raft log and raft's stable state (current
	// term, last vote), so a single fsync covers a log append and the vote
	// that goes with it.
	BoltFile = "raft.db"

	// logCacheSize is how many recent entries are kept in memory in front of
	// bolt. Followers that lag slightly and the leader's own replication
	// read the tail of the log over and over; serving it from memory keeps
	// those reads off the disk. 512 covers several full AppendEntries
	// batches.
	logCacheSize = 512

	// snapshotsRetained is how many snapshots stay on disk. Two means a
	// crash while the newest one is being written still leaves a complete
	// older one to restore from.
	snapshotsRetained = 2
)

// Stores is the on-disk state of one voter: the raft log, raft's stable
// store and its snapshots, all under one data directory.
//
// Log and Stable are the same bolt database seen through two interfaces;
// Log additionally goes through an in-memory cache of recent entries.
type Stores struct {
	Log       raft.LogStore
	Stable    raft.StableStore
	Snapshots raft.SnapshotStore

	bolt      *raftboltdb.BoltStore
	closeOnce sync.Once
	closeErr  error
}

// OpenStores opens (creating if needed) the raft state kept in dir:
// dir/raft.db for the log and stable store, and dir/snapshots/ for
// snapshots. Open it once per process: bolt takes an exclusive file lock,
// so a second open of the same directory blocks until the first is closed.
func OpenStores(dir string, logger hclog.Logger) (*Stores, error) {
	if dir == "" {
		return nil, errors.New("raftlog: data dir is empty")
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("raftlog: create data dir: %w", err)
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, BoltFile)})
	if err != nil {
		return nil, fmt.Errorf("raftlog: open %s: %w", BoltFile, err)
	}
	cached, err := raft.NewLogCache(logCacheSize, bolt)
	if err != nil {
		_ = bolt.Close()
		return nil, fmt.Errorf("raftlog: log cache: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, snapshotsRetained, logger.Named("snapshots"))
	if err != nil {
		_ = bolt.Close()
		return nil, fmt.Errorf("raftlog: snapshot store: %w", err)
	}
	return &Stores{
		Log:       cached,
		Stable:    bolt,
		Snapshots: snaps,
		bolt:      bolt,
	}, nil
}

// HasExistingState reports whether the directory already holds raft state
// (a term, a log entry or a snapshot). A voter bootstraps its cluster
// configuration only when this is false: bootstrapping over existing state
// would rewrite a membership the cluster has already agreed on.
func (s *Stores) HasExistingState() (bool, error) {
	return raft.HasExistingState(s.Log, s.Stable, s.Snapshots)
}

// Close releases the bolt database and its file lock. It must be called only
// after raft has shut down, because raft keeps writing to the log until then.
// Calling it more than once is safe.
func (s *Stores) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = s.bolt.Close()
	})
	return s.closeErr
}
