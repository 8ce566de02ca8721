package raftlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// LogStore names how a voter keeps its raft log and stable state.
type LogStore string

const (
	// LogStoreWAL is hashicorp/raft-wal: append-only segment files, one
	// fsync per append, with term and vote in a small bolt file beside
	// them. The default for a new data directory: a raft round pays one
	// fsync on the leader and one on each follower where bolt pays two
	// (its pages, then its meta page), which halves the commit latency
	// on this kind of disk.
	LogStoreWAL LogStore = "wal"
	// LogStoreBolt is hashicorp/raft-boltdb/v2: the log and stable state
	// in one bolt database.
	LogStoreBolt LogStore = "bolt"

	// BoltFile is the bolt database of LogStoreBolt inside a voter's data
	// directory.
	BoltFile = "raft.db"
	// WALDir is the directory of LogStoreWAL inside a voter's data
	// directory.
	WALDir = "wal"
	// DefaultWALSegmentBytes is the size of a WAL segment file, which
	// is allocated whole when it is opened: a quarter of raft-wal's own
	// default, as a controller's log is small and a dev cluster keeps
	// three of them on one disk.
	DefaultWALSegmentBytes = 16 << 20

	// logCacheSize is how many recent entries are kept in memory in front of
	// the log store. Followers that lag slightly and the leader's own
	// replication read the tail of the log over and over; serving it from
	// memory keeps those reads off the disk. 512 covers several full
	// AppendEntries batches.
	logCacheSize = 512

	// snapshotsRetained is how many snapshots stay on disk. Two means a
	// crash while the newest one is being written still leaves a complete
	// older one to restore from.
	snapshotsRetained = 2
)

// ParseLogStore checks a log store name; "" leaves the choice to
// OpenStores.
func ParseLogStore(s string) (LogStore, error) {
	switch k := LogStore(s); k {
	case "", LogStoreWAL, LogStoreBolt:
		return k, nil
	}
	return "", fmt.Errorf("unknown raft log store %q (want %s or %s)", s, LogStoreWAL, LogStoreBolt)
}

// Stores is the on-disk state of one voter: the raft log, raft's stable
// store and its snapshots, all under one data directory.
//
// Log and Stable are one store (a WAL, or a bolt database) seen through
// two interfaces; Log additionally goes through an in-memory cache of
// recent entries.
type Stores struct {
	Log       raft.LogStore
	Stable    raft.StableStore
	Snapshots raft.SnapshotStore
	// Kind is the log store in use.
	Kind LogStore

	closer    io.Closer
	closeOnce sync.Once
	closeErr  error
}

// StoreOptions are the choices OpenStores leaves to its caller.
type StoreOptions struct {
	// Kind is the log store asked for. Zero: the one the directory holds,
	// or LogStoreWAL for a new one.
	Kind LogStore
	// WALSegmentBytes is the size of a WAL segment file (zero:
	// DefaultWALSegmentBytes).
	// Log compaction deletes whole segments: entries of the segment being
	// written stay readable until it is full, and a lagging follower is
	// sent them rather than a snapshot.
	WALSegmentBytes int
	Logger          hclog.Logger
}

// OpenStores opens (creating if needed) the raft state kept in dir: the
// log and stable store (dir/wal/ or dir/raft.db) and dir/snapshots/.
// A directory that already holds a log store keeps it, and asking for
// the other is refused rather than starting an empty log beside the real
// one. Open it once per process: both stores take an exclusive file
// lock, so a second open of the same directory blocks until the first is
// closed.
func OpenStores(dir string, opts StoreOptions) (*Stores, error) {
	if dir == "" {
		return nil, errors.New("raftlog: data dir is empty")
	}
	logger := opts.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	want, err := ParseLogStore(string(opts.Kind))
	if err != nil {
		return nil, fmt.Errorf("raftlog: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("raftlog: create data dir: %w", err)
	}
	has, err := existingLogStore(dir)
	if err != nil {
		return nil, err
	}
	switch {
	case has != "" && want != "" && has != want:
		return nil, fmt.Errorf("raftlog: %s holds a %s raft log (%s), not the %s one asked for: keep %s, or move the data directory aside to start anew",
			dir, has, storePath(dir, has), want, has)
	case has != "":
		want = has
	case want == "":
		want = LogStoreWAL
	}
	path := storePath(dir, want)
	var (
		logs   raft.LogStore
		stable raft.StableStore
		closer io.Closer
	)
	switch want {
	case LogStoreWAL:
		if err := os.MkdirAll(path, 0o700); err != nil {
			return nil, fmt.Errorf("raftlog: create %s: %w", path, err)
		}
		// The WAL's Close leaves its meta database open, and with it
		// the file lock a later open in this process would wait on for
		// ever: the meta database is ours to close.
		meta := &metadb.BoltMetaDB{}
		size := opts.WALSegmentBytes
		if size <= 0 {
			size = DefaultWALSegmentBytes
		}
		w, err := wal.Open(path, wal.WithLogger(logger.Named("wal")), wal.WithMetaStore(meta), wal.WithSegmentSize(size))
		if err != nil {
			_ = meta.Close()
			return nil, fmt.Errorf("raftlog: open %s: %w", path, err)
		}
		logs, stable, closer = w, w, closers{w, meta}
	default:
		b, err := raftboltdb.New(raftboltdb.Options{Path: path})
		if err != nil {
			return nil, fmt.Errorf("raftlog: open %s: %w", path, err)
		}
		logs, stable, closer = b, b, b
	}
	cached, err := raft.NewLogCache(logCacheSize, logs)
	if err != nil {
		_ = closer.Close()
		return nil, fmt.Errorf("raftlog: log cache: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, snapshotsRetained, logger.Named("snapshots"))
	if err != nil {
		_ = closer.Close()
		return nil, fmt.Errorf("raftlog: snapshot store: %w", err)
	}
	logger.Info("raft log store opened", "store", string(want), "path", path, "new", has == "")
	return &Stores{Log: cached, Stable: stable, Snapshots: snaps, Kind: want, closer: closer}, nil
}

// closers closes each in order and returns the first error.
type closers []io.Closer

func (cs closers) Close() error {
	var first error
	for _, c := range cs {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func storePath(dir string, kind LogStore) string {
	if kind == LogStoreBolt {
		return filepath.Join(dir, BoltFile)
	}
	return filepath.Join(dir, WALDir)
}

// existingLogStore tells which log store dir already holds ("" for none).
func existingLogStore(dir string) (LogStore, error) {
	var found []LogStore
	for _, k := range []LogStore{LogStoreWAL, LogStoreBolt} {
		switch _, err := os.Stat(storePath(dir, k)); {
		case err == nil:
			found = append(found, k)
		case !errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("raftlog: %w", err)
		}
	}
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("raftlog: %s holds both a wal raft log (%s) and a bolt one (%s): remove the one that is not in use",
		dir, storePath(dir, LogStoreWAL), storePath(dir, LogStoreBolt))
}

// HasExistingState reports whether the directory already holds raft state
// (a term, a log entry or a snapshot). A voter bootstraps its cluster
// configuration only when this is false: bootstrapping over existing state
// would rewrite a membership the cluster has already agreed on.
func (s *Stores) HasExistingState() (bool, error) {
	return raft.HasExistingState(s.Log, s.Stable, s.Snapshots)
}

// Close releases the log store and its file lock. It must be called only
// after raft has shut down, because raft keeps writing to the log until then.
// Calling it more than once is safe.
func (s *Stores) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = s.closer.Close()
	})
	return s.closeErr
}
