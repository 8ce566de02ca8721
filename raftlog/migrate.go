package raftlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/ctrlquorum/ctrlquorum/raftlog/logstore"
)

// moveBatch is how many entries one append of a migration writes.
const moveBatch = 1024

// Suffixes of the working names a migration uses next to a store's own
// name. Neither ever holds the log: Open throws both away.
const (
	movingSuffix   = ".moving"   // the copy being written
	replacedSuffix = ".replaced" // a store set aside to be removed
)

// migrateStep, when set, is called at each step of a migration; the crash
// tests stop or kill the process there.
var migrateStep func(step string)

func step(name string) {
	if migrateStep != nil {
		migrateStep(name)
	}
}

// openedLog is an open raft log store: its Close releases its files
// (bolt's is a no-op: the bolt file holds the stable store too and is
// closed with it).
type openedLog interface {
	raft.LogStore
	io.Closer
}

type boltLog struct{ *raftboltdb.BoltStore }

func (boltLog) Close() error { return nil }

// openLog finds which store holds dir's raft log, moves the log into the
// one asked for (opts.LogStore; zero: the one that holds it, or
// DefaultLogStore for a new directory) and opens it. bolt is raft.db, open;
// moving the log into it replaces the file, so the bolt store to use
// afterwards is returned with the log, and on error the one to close.
//
// Which store holds the log, whatever a crash interrupted:
//
//   - raft.db holding entries: they are the log. Raft starts only after a
//     move out of bolt deleted them, and a move into bolt lands in one
//     rename; a log directory next to them is a copy of the same entries
//     or one a build that kept the log in bolt has run past.
//   - otherwise log/ or wal/. Both appear only by a rename after a
//     complete copy and the source is not written before it is removed,
//     so when both are there they hold the same entries, unless a build
//     that knew only one of them ran the directory since: the one with
//     the later last entry (term, then index) is taken, on a tie the one
//     asked for.
//
// Every other store's files are then removed.
func openLog(dir string, bolt *raftboltdb.BoltStore, opts StoreOptions, logger hclog.Logger) (openedLog, LogStore, *raftboltdb.BoltStore, error) {
	if err := removeLeftovers(dir); err != nil {
		return nil, "", bolt, err
	}
	has, err := heldBy(dir, bolt, opts, logger)
	if err != nil {
		return nil, "", bolt, err
	}
	if has == LogStoreWAL {
		if err := adoptWALStable(dir, bolt, opts, logger); err != nil {
			return nil, "", bolt, err
		}
	}
	want := opts.LogStore
	switch {
	case want == "" && has == "":
		want = DefaultLogStore
	case want == "":
		want = has
	}
	if has != "" && has != want {
		if bolt, err = migrate(dir, bolt, has, want, opts, logger); err != nil {
			return nil, "", bolt, err
		}
	}
	for _, other := range []LogStore{LogStoreSegments, LogStoreWAL} {
		if other != want {
			if err := removeStore(dir, other); err != nil {
				return nil, "", bolt, err
			}
		}
	}
	if want != LogStoreBolt {
		if last, err := bolt.LastIndex(); err != nil || last != 0 {
			return nil, "", bolt, fmt.Errorf("raftlog: %s still holds a log up to %d (%v)", BoltFile, last, err)
		}
	}
	log, err := openStore(dir, bolt, want, opts, logger, "")
	return log, want, bolt, err
}

// The keys raft keeps in its stable store: two numbers (raft-wal and bolt
// encode them differently) and the candidate's id.
var (
	stableNumbers = []string{"CurrentTerm", "LastVoteTerm"}
	stableBytes   = []string{"LastVoteCand"}
)

// adoptWALStable copies the term and vote into raft.db from a WAL that
// kept them, as a build did that ran raft-wal as both log and stable
// store, when raft.db has none.
func adoptWALStable(dir string, bolt *raftboltdb.BoltStore, opts StoreOptions, logger hclog.Logger) error {
	if _, err := bolt.Get([]byte(stableNumbers[0])); !errors.Is(err, raftboltdb.ErrKeyNotFound) {
		return err
	}
	w, err := openWAL(storePath(dir, LogStoreWAL), opts.WALSegmentBytes, nil, logger.Named("wal"))
	if err != nil {
		return err
	}
	var errs []error
	copied := false
	for _, k := range stableNumbers {
		v, err := w.GetUint64([]byte(k))
		if err == nil && v != 0 {
			err, copied = bolt.SetUint64([]byte(k), v), true
		}
		errs = append(errs, err)
	}
	for _, k := range stableBytes {
		v, err := w.Get([]byte(k))
		if err == nil && len(v) > 0 {
			err, copied = bolt.Set([]byte(k), v), true
		}
		errs = append(errs, err)
	}
	if err := errors.Join(append(errs, w.Close())...); err != nil {
		return fmt.Errorf("raftlog: copy the term and vote from the WAL into %s: %w", BoltFile, err)
	}
	if copied {
		logger.Info("took the term and vote from the WAL, which kept them", "to", BoltFile)
	}
	return nil
}

// openStore opens the log store kind in dir (or at its name with suffix).
func openStore(dir string, bolt *raftboltdb.BoltStore, kind LogStore, opts StoreOptions, logger hclog.Logger, suffix string) (openedLog, error) {
	path := storePath(dir, kind) + suffix
	switch kind {
	case LogStoreSegments:
		o := logstore.Options{Logger: logger.Named("log")}
		if c := opts.Counters; c != nil {
			o.Syncs, o.Written = &c.Syncs, &c.Written
		}
		s, err := logstore.Open(path, o)
		if err != nil {
			return nil, fmt.Errorf("raftlog: %w", err)
		}
		return s, nil
	case LogStoreWAL:
		return openWAL(path, opts.WALSegmentBytes, opts.Counters, logger.Named("wal"))
	}
	return boltLog{bolt}, nil
}

func storePath(dir string, kind LogStore) string {
	switch kind {
	case LogStoreSegments:
		return filepath.Join(dir, LogDir)
	case LogStoreWAL:
		return filepath.Join(dir, WALDir)
	}
	return filepath.Join(dir, BoltFile)
}

func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("raftlog: %w", err)
}

// removeLeftovers throws away what an interrupted migration left under
// working names.
func removeLeftovers(dir string) error {
	for _, p := range []string{
		filepath.Join(dir, LogDir) + movingSuffix, filepath.Join(dir, LogDir) + replacedSuffix,
		filepath.Join(dir, WALDir) + movingSuffix, filepath.Join(dir, WALDir) + replacedSuffix,
		filepath.Join(dir, BoltFile) + movingSuffix,
	} {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("raftlog: %w", err)
		}
	}
	return nil
}

// removeStore removes the log directory of kind, if there is one: renamed
// aside first, so that a crash part way cannot leave a partial log under
// its name.
func removeStore(dir string, kind LogStore) error {
	path := storePath(dir, kind)
	ok, err := exists(path)
	if err != nil || !ok {
		return err
	}
	aside := path + replacedSuffix
	if err := os.Rename(path, aside); err != nil {
		return fmt.Errorf("raftlog: %w", err)
	}
	if err := logstore.SyncDir(dir); err != nil {
		return err
	}
	step("set-aside")
	if err := os.RemoveAll(aside); err != nil {
		return fmt.Errorf("raftlog: %w", err)
	}
	return nil
}

// heldBy names the store that holds dir's log ("" for none).
func heldBy(dir string, bolt *raftboltdb.BoltStore, opts StoreOptions, logger hclog.Logger) (LogStore, error) {
	last, err := bolt.LastIndex()
	if err != nil {
		return "", fmt.Errorf("raftlog: read %s: %w", BoltFile, err)
	}
	if last != 0 {
		return LogStoreBolt, nil
	}
	var found []LogStore
	for _, k := range []LogStore{LogStoreSegments, LogStoreWAL} {
		ok, err := exists(storePath(dir, k))
		if err != nil {
			return "", err
		}
		if ok {
			found = append(found, k)
		}
	}
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return found[0], nil
	}
	var ends [2]raft.Log
	for i, k := range found {
		l, err := openStore(dir, bolt, k, opts, logger, "")
		if err != nil {
			return "", err
		}
		if last, err := l.LastIndex(); err == nil && last > 0 {
			err = l.GetLog(last, &ends[i])
		}
		err = errors.Join(err, l.Close())
		if err != nil {
			return "", fmt.Errorf("raftlog: read the end of the %s log: %w", k, err)
		}
	}
	a, b := ends[0], ends[1]
	switch {
	case a.Term != b.Term:
		if a.Term > b.Term {
			return found[0], nil
		}
		return found[1], nil
	case a.Index != b.Index:
		if a.Index > b.Index {
			return found[0], nil
		}
		return found[1], nil
	case opts.LogStore == found[1]:
		return found[1], nil
	}
	return found[0], nil
}

// migrate moves dir's raft log from the store from to the store to. The
// copy is written under a working name and takes the store's own name in
// one rename, the step that commits the move; only then is the source
// removed (for bolt: its entries deleted). Every step can be interrupted:
// the next open either starts again or finishes the removal.
func migrate(dir string, bolt *raftboltdb.BoltStore, from, to LogStore, opts StoreOptions, logger hclog.Logger) (*raftboltdb.BoltStore, error) {
	src, err := openStore(dir, bolt, from, opts, logger, "")
	if err != nil {
		return bolt, err
	}
	first, _ := src.FirstIndex()
	last, err := src.LastIndex()
	if err != nil {
		_ = src.Close()
		return bolt, fmt.Errorf("raftlog: read the %s log: %w", from, err)
	}
	logger.Info("moving the raft log to another store", "from", from, "to", to, "first", first, "last", last)
	if to == LogStoreBolt {
		return migrateIntoBolt(dir, bolt, src, from, first, last, opts, logger)
	}
	err = copyInto(dir, bolt, src, from, to, first, last, opts, logger)
	if err == nil && from != LogStoreBolt {
		err = src.Close()
		src = nil
		if err == nil {
			err = removeStore(dir, from)
		}
	} else if err == nil && last != 0 {
		// Deleting bolt's entries ends their claim to be the log.
		if err = bolt.DeleteRange(first, last); err != nil {
			err = fmt.Errorf("raftlog: drop the moved log from %s: %w", BoltFile, err)
		}
	}
	if src != nil {
		err = errors.Join(err, src.Close())
	}
	if err != nil {
		return bolt, err
	}
	step("done")
	logger.Info("raft log moved", "from", from, "to", to, "entries", entries(first, last))
	return bolt, nil
}

func entries(first, last uint64) uint64 {
	if last == 0 {
		return 0
	}
	return last - first + 1
}

// copyInto copies the log into a new log directory of kind to and renames
// it into place, setting aside a stale one found there.
func copyInto(dir string, bolt *raftboltdb.BoltStore, src openedLog, from, to LogStore, first, last uint64, opts StoreOptions, logger hclog.Logger) error {
	path := storePath(dir, to)
	dst, err := openStore(dir, bolt, to, opts, logger, movingSuffix)
	if err != nil {
		return err
	}
	err = copyLog(src, dst, first, last, from == LogStoreBolt)
	if err = errors.Join(err, dst.Close()); err != nil {
		return err
	}
	step("copied")
	if err := removeStore(dir, to); err != nil {
		return err
	}
	if err := os.Rename(path+movingSuffix, path); err != nil {
		return fmt.Errorf("raftlog: %w", err)
	}
	if err := logstore.SyncDir(dir); err != nil {
		return err
	}
	step("renamed")
	return nil
}

// migrateIntoBolt writes a copy of raft.db holding the log too, then
// renames it over raft.db: until then raft.db holds no entries and the
// source is the log, after it raft.db's entries are.
func migrateIntoBolt(dir string, bolt *raftboltdb.BoltStore, src openedLog, from LogStore, first, last uint64, opts StoreOptions, logger hclog.Logger) (*raftboltdb.BoltStore, error) {
	path := filepath.Join(dir, BoltFile)
	tmp := path + movingSuffix
	err := bolt.Close()
	if err == nil {
		err = copyFile(path, tmp)
	}
	var dst *raftboltdb.BoltStore
	if err == nil {
		dst, err = raftboltdb.New(raftboltdb.Options{Path: tmp})
	}
	if err == nil {
		err = copyLog(src, boltLog{dst}, first, last, false)
		err = errors.Join(err, dst.Close())
	}
	if err == nil {
		step("copied")
		if err = os.Rename(tmp, path); err == nil {
			err = logstore.SyncDir(dir)
		}
	}
	err = errors.Join(err, src.Close())
	reopened, rerr := raftboltdb.New(raftboltdb.Options{Path: path})
	if rerr != nil {
		return nil, errors.Join(err, fmt.Errorf("raftlog: reopen %s: %w", BoltFile, rerr))
	}
	if err != nil {
		return reopened, fmt.Errorf("raftlog: move the log into %s: %w", BoltFile, err)
	}
	step("renamed")
	if err := removeStore(dir, from); err != nil {
		return reopened, err
	}
	step("done")
	logger.Info("raft log moved", "from", from, "to", LogStoreBolt, "entries", entries(first, last))
	return reopened, nil
}

// copyFile copies src to a new file dst and syncs it.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	return errors.Join(err, out.Close())
}

// copyLog copies the entries first..last of src into dst, a new store.
// With gaps, src is a bolt log: bolt let raft leave the entries before an
// installed snapshot behind a gap, and only those after the last gap
// belong to the log (the ones before are covered by the snapshot).
func copyLog(src, dst raft.LogStore, first, last uint64, gaps bool) error {
	if last == 0 {
		return nil
	}
	batch := make([]*raft.Log, 0, moveBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := dst.StoreLogs(batch); err != nil {
			return fmt.Errorf("raftlog: copy the log: %w", err)
		}
		batch = batch[:0]
		step("copying")
		return nil
	}
	for i := first; i <= last; i++ {
		l := new(raft.Log)
		err := src.GetLog(i, l)
		if gaps && errors.Is(err, raft.ErrLogNotFound) {
			batch = batch[:0]
			if err := dst.DeleteRange(0, i); err != nil {
				return fmt.Errorf("raftlog: copy the log: %w", err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("raftlog: read entry %d: %w", i, err)
		}
		if batch = append(batch, l); len(batch) == moveBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}
