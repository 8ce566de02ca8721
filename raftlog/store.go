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

	"github.com/ctrlquorum/ctrlquorum/raftlog/logstore"
)

const (
	// BoltFile is the name of the bolt database inside a voter's data
	// directory. It holds raft's stable state (current term, last vote).
	// Data directories written before LogDir existed also kept the log in
	// it; OpenStores moves such a log out on first open.
	BoltFile = "raft.db"

	// LogDir is the directory of the raft log's segment files (see
	// logstore).
	LogDir = "log"

	// logCacheSize is how many recent entries are kept in memory in front of
	// the log files. Followers that lag slightly and the leader's own
	// replication read the tail of the log over and over; serving it from
	// memory keeps those reads off the disk. 512 covers several full
	// AppendEntries batches.
	logCacheSize = 512

	// snapshotsRetained is how many snapshots stay on disk. Two means a
	// crash while the newest one is being written still leaves a complete
	// older one to restore from.
	snapshotsRetained = 2
)

// Stores is the on-disk state of one voter: the raft log, raft's stable
// store and its snapshots, all under one data directory.
//
// The log lives in its own append-only files, which take one fsync per
// append where bolt takes two; Log goes through an in-memory cache of
// recent entries. Stable is the bolt database, written only when the term
// or the vote changes.
type Stores struct {
	Log       raft.LogStore
	Stable    raft.StableStore
	Snapshots raft.SnapshotStore

	bolt      *raftboltdb.BoltStore
	log       *logstore.Store
	closeOnce sync.Once
	closeErr  error
}

// OpenStores opens (creating if needed) the raft state kept in dir:
// dir/raft.db for the stable store, dir/log/ for the log and dir/snapshots/
// for snapshots. Open it once per process: bolt takes an exclusive file
// lock, so a second open of the same directory blocks until the first is
// closed.
func OpenStores(dir string, logger hclog.Logger) (*Stores, error) {
	if dir == "" {
		return nil, errors.New("raftlog: data dir is empty")
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	missing := outermostMissing(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("raftlog: create data dir: %w", err)
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, BoltFile)})
	if err != nil {
		return nil, fmt.Errorf("raftlog: open %s: %w", BoltFile, err)
	}
	if err := moveLogOutOfBolt(dir, bolt, logger); err != nil {
		_ = bolt.Close()
		return nil, err
	}
	log, err := logstore.Open(filepath.Join(dir, LogDir), logstore.Options{Logger: logger.Named("log")})
	if err != nil {
		_ = bolt.Close()
		return nil, fmt.Errorf("raftlog: %w", err)
	}
	fail := func(err error) (*Stores, error) {
		_ = log.Close()
		_ = bolt.Close()
		return nil, err
	}
	cached, err := raft.NewLogCache(logCacheSize, log)
	if err != nil {
		return fail(fmt.Errorf("raftlog: log cache: %w", err))
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, snapshotsRetained, logger.Named("snapshots"))
	if err != nil {
		return fail(fmt.Errorf("raftlog: snapshot store: %w", err))
	}
	// Bolt does not sync the directory it creates raft.db in, raft the one
	// it creates snapshots/ in, nor MkdirAll the parents of what it
	// creates: until they are synced a power cut can take those names, and
	// with them the term, the vote and the entries raft was told are
	// stored.
	if err := syncCreated(dir, missing); err != nil {
		return fail(fmt.Errorf("raftlog: %w", err))
	}
	return &Stores{
		Log:       cached,
		Stable:    bolt,
		Snapshots: syncedSnapshots{FileSnapshotStore: snaps, dir: filepath.Join(dir, "snapshots")},
		bolt:      bolt,
		log:       log,
	}, nil
}

// syncedSnapshots is raft's file snapshot store with the directory of each
// new snapshot synced before raft moves it into place. Raft syncs the
// snapshot's files and, once it has renamed the snapshot's directory from
// its temporary name, the directory holding it, but never the snapshot's
// own directory: a power cut could then leave it without its files,
// which raft skips (after it had dropped the log entries the snapshot
// covers: a follower that installed a snapshot from the leader keeps none
// before it), or with meta.json but no state.bin, which makes raft
// refuse to start.
type syncedSnapshots struct {
	*raft.FileSnapshotStore
	dir string // where raft keeps the snapshots, a directory each
}

func (s syncedSnapshots) Create(version raft.SnapshotVersion, index, term uint64, conf raft.Configuration,
	confIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, conf, confIndex, trans)
	if err != nil {
		return nil, err
	}
	return &syncedSink{SnapshotSink: sink, dir: s.dir}, nil
}

type syncedSink struct {
	raft.SnapshotSink
	dir    string
	closed bool
}

// Close syncs the snapshot's directory, under the temporary name raft
// gives it until it is complete (raft's tmpSuffix), then completes the
// snapshot as raft does. Both its files are created by Create, so the
// rename that publishes them can only become durable after their names.
// Closing again does nothing more, as for raft's sink: raft closes the
// sink after the FSM's Persist did.
func (s *syncedSink) Close() error {
	if !s.closed {
		s.closed = true
		if err := logstore.SyncDir(filepath.Join(s.dir, s.ID()+".tmp")); err != nil {
			_ = s.SnapshotSink.Cancel()
			return err
		}
	}
	return s.SnapshotSink.Close()
}

func (s *syncedSink) Cancel() error {
	s.closed = true
	return s.SnapshotSink.Cancel()
}

// outermostMissing returns the outermost directory on the way to dir that
// does not exist yet, or "" when dir exists.
func outermostMissing(dir string) string {
	missing := ""
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			return missing
		}
		missing = d
		if filepath.Dir(d) == d {
			return missing
		}
	}
}

// syncCreated syncs dir and, up to the parent of missing, each directory
// that holds one created since outermostMissing returned missing.
func syncCreated(dir, missing string) error {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if err := logstore.SyncDir(d); err != nil {
			return err
		}
		if missing == "" || d == filepath.Dir(missing) || filepath.Dir(d) == d {
			return nil
		}
	}
}

// HasExistingState reports whether the directory already holds raft state
// (a term, a log entry or a snapshot). A voter bootstraps its cluster
// configuration only when this is false: bootstrapping over existing state
// would rewrite a membership the cluster has already agreed on.
func (s *Stores) HasExistingState() (bool, error) {
	return raft.HasExistingState(s.Log, s.Stable, s.Snapshots)
}

// Close releases the log files, the bolt database and their locks. It must be called only
// after raft has shut down, because raft keeps writing to the log until then.
// Calling it more than once is safe.
func (s *Stores) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = errors.Join(s.log.Close(), s.bolt.Close())
	})
	return s.closeErr
}
