package raftlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/ctrlquorum/ctrlquorum/raftlog/logstore"
)

// LogStore names the store a voter keeps its raft log in.
type LogStore string

const (
	// LogStoreSegments is package logstore: append-only segment files in
	// LogDir, one fdatasync per append.
	LogStoreSegments LogStore = "segments"
	// LogStoreWAL is hashicorp/raft-wal: segment files and their meta
	// database in WALDir, one fsync per append.
	LogStoreWAL LogStore = "wal"
	// LogStoreBolt is hashicorp/raft-boltdb: the log in BoltFile with the
	// term and vote, two fdatasyncs per append.
	LogStoreBolt LogStore = "bolt"

	// DefaultLogStore is the log store of a new data directory. In runs
	// of `ctrlnode bench --log-store all`, raft-wal as it comes committed
	// a batch of 27 entries of 700 bytes (a CreateTopics round) 34-51%
	// slower than segments, with 64 or 16 MiB segments alike: it
	// allocates a segment with fallocate, and each append's sync then
	// also commits the journal entry that marks the extents it wrote as
	// written. With segment files grown by zeros written ahead and
	// fdatasync instead (BenchmarkStoreAppend's wal-fdatasync-zeroahead)
	// the batch was 8-11% slower, but topics were still created 9-20%
	// slower: raft-wal spends more CPU per entry (an encode into a new
	// buffer and five allocations each). And raft-wal v0.4.1 alone does
	// not survive kill -9 (see repairWAL).
	DefaultLogStore = LogStoreSegments
)

// ParseLogStore checks a log store's name; "" is the zero LogStore.
func ParseLogStore(s string) (LogStore, error) {
	switch k := LogStore(s); k {
	case "", LogStoreSegments, LogStoreWAL, LogStoreBolt:
		return k, nil
	}
	return "", fmt.Errorf("unknown raft log store %q (want %s, %s or %s)", s, LogStoreSegments, LogStoreWAL, LogStoreBolt)
}

const (
	// BoltFile is the name of the bolt database inside a voter's data
	// directory. It holds raft's stable state (current term, last vote),
	// and the log too with LogStoreBolt.
	BoltFile = "raft.db"

	// LogDir is the directory of LogStoreSegments (see logstore).
	LogDir = "log"

	// WALDir is the directory of LogStoreWAL.
	WALDir = "wal"

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
// Log is the log store Kind, through an in-memory cache of recent
// entries. Stable is the bolt database, written only when the term or the
// vote changes (with LogStoreBolt it holds the log too).
type Stores struct {
	Log       raft.LogStore
	Stable    raft.StableStore
	Snapshots raft.SnapshotStore
	// Kind is the log store in use.
	Kind LogStore

	bolt      *raftboltdb.BoltStore
	log       openedLog
	closeOnce sync.Once
	closeErr  error
}

// StoreOptions are the choices OpenStores leaves to its caller.
type StoreOptions struct {
	// LogStore is the store to keep the log in. A directory holding its
	// log in another one has it moved on open (see openLog). Zero: the
	// one the directory holds, DefaultLogStore for a new one.
	LogStore LogStore
	// WALSegmentBytes is the size of LogStoreWAL's segment files, each
	// allocated whole when it starts. Zero: raft-wal's default (64 MiB).
	WALSegmentBytes int
	// Logger; nil discards.
	Logger hclog.Logger
	// Counters, when set, count what the stores do (for benchmarks).
	Counters *IOCounters
}

// IOCounters count the work of a voter's log and stable stores.
type IOCounters struct {
	// Syncs are the fsync and fdatasync calls of the log and stable
	// stores: counted where segments and raft-wal make them, and for a
	// bolt file as two per write transaction, its commit protocol (data
	// pages, then meta page; bolt syncs once more when it grows its file,
	// which is not counted).
	Syncs atomic.Int64
	// Written are the bytes the log and stable stores wrote: counted where
	// segments and raft-wal write (zeros written ahead included), and for
	// a bolt file the pages its write transactions allocated (from its
	// statistics) and one meta page each.
	Written atomic.Int64
	// Appends are the log's StoreLogs calls and Entries the entries they
	// stored.
	Appends, Entries atomic.Int64
}

// OpenStores opens (creating if needed) the raft state kept in dir:
// dir/raft.db for the stable store, the log in the store opts.LogStore
// names (dir/log/, dir/wal/ or dir/raft.db) and dir/snapshots/ for
// snapshots. Open it once per process: bolt takes an exclusive file lock,
// so a second open of the same directory blocks until the first is
// closed.
func OpenStores(dir string, opts StoreOptions) (*Stores, error) {
	if dir == "" {
		return nil, errors.New("raftlog: data dir is empty")
	}
	if _, err := ParseLogStore(string(opts.LogStore)); err != nil {
		return nil, fmt.Errorf("raftlog: %w", err)
	}
	logger := opts.Logger
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
	log, kind, bolt, err := openLog(dir, bolt, opts, logger)
	if err != nil {
		if bolt != nil {
			_ = bolt.Close()
		}
		return nil, err
	}
	fail := func(err error) (*Stores, error) {
		_ = log.Close()
		_ = bolt.Close()
		return nil, err
	}
	var logs raft.LogStore = log
	var stable raft.StableStore = bolt
	if c := opts.Counters; c != nil {
		logs, stable = newCountedLog(log, kind, bolt, c), countedStable{bolt: bolt, c: c}
	}
	cached, err := raft.NewLogCache(logCacheSize, logs)
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
		Stable:    stable,
		Snapshots: syncedSnapshots{FileSnapshotStore: snaps, dir: filepath.Join(dir, "snapshots")},
		Kind:      kind,
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
