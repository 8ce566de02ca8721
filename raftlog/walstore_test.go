package raftlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/types"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit/logcrash"
)

// The crash tests run this test binary again as a child process, which
// does what the environment names and is killed with SIGKILL.
const (
	walWriterEnv     = "RAFTLOG_WAL_WRITER_DIR"
	migrateChildEnv  = "RAFTLOG_MIGRATE_DIR"
	migrateToEnv     = "RAFTLOG_MIGRATE_TO"
	migrateStopAtEnv = "RAFTLOG_MIGRATE_STOP_AT"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(walWriterEnv) != "":
		// The writer of TestWALSurvivesKill, in a voter's stores kept in
		// raft-wal.
		s, err := openCrashWAL(os.Getenv(walWriterEnv))
		if err != nil {
			logcrash.Exit("open", err)
		}
		logcrash.Write(s.Log, crashEntry)
		return
	case os.Getenv(migrateChildEnv) != "":
		runMigration(os.Getenv(migrateChildEnv), LogStore(os.Getenv(migrateToEnv)), os.Getenv(migrateStopAtEnv))
		return
	}
	os.Exit(m.Run())
}

// crashSegmentBytes makes raft-wal seal a segment every few dozen entries,
// so that a kill often lands between a seal and the rotation after it.
const crashSegmentBytes = 16 << 10

func crashEntry(index, term uint64) *raft.Log {
	return &raft.Log{Index: index, Term: term, Type: raft.LogCommand,
		Data: []byte(fmt.Sprintf("entry %d of term %d %0150d", index, term, index)), AppendedAt: time.Unix(1700000000, 0)}
}

func crashBatch(from, to, term uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, crashEntry(i, term))
	}
	return out
}

func openCrashWAL(dir string) (*Stores, error) {
	return OpenStores(dir, StoreOptions{LogStore: LogStoreWAL, WALSegmentBytes: crashSegmentBytes})
}

// TestWALSurvivesKill kills a process writing to a raft-wal log at
// arbitrary points and checks, each time, that the log reopens with every
// acknowledged entry and takes appends again. raft-wal v0.4.1 alone fails
// this: a kill between a segment's seal and the meta database's record of
// it leaves a log that refuses every append (see repairWAL and
// TestWALRepairsASealTheMetaDatabaseMissed).
func TestWALSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	logcrash.Run(t, logcrash.Test{
		Env:    walWriterEnv + "=" + dir,
		Rounds: 10,
		KillAt: func(round int) int { return 60 + round*83 },
		Open: func() (raft.LogStore, func() error, error) {
			s, err := openCrashWAL(dir)
			if err != nil {
				return nil, nil, err
			}
			return s.Log, s.Close, nil
		},
		Entry:             crashEntry,
		AppendAfterReopen: true,
	})
}

func rawWAL(t *testing.T, dir string) *wal.WAL {
	t.Helper()
	w, err := wal.Open(dir, wal.WithSegmentSize(crashSegmentBytes), wal.WithLogger(hclog.NewNullLogger()))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func copyTestFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func copyTestDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		copyTestFile(t, filepath.Join(from, e.Name()), filepath.Join(to, e.Name()))
	}
}

// sealedButNotRecorded writes, in dir/wal, what a kill leaves between the
// append that seals a raft-wal segment and the meta database's record of
// the seal: entries 1..40 in the segment, then 41..200 in one append that
// seals it, and the meta database as it was before that append.
func sealedButNotRecorded(t *testing.T, dir string) string {
	t.Helper()
	walDir := filepath.Join(dir, WALDir)
	if err := os.MkdirAll(walDir, 0o700); err != nil {
		t.Fatal(err)
	}
	w := rawWAL(t, walDir)
	if err := w.StoreLogs(crashBatch(1, 40, 3)); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	meta := filepath.Join(walDir, metadb.FileName)
	copyTestFile(t, meta, meta+".before")
	w = rawWAL(t, walDir)
	if err := w.StoreLogs(crashBatch(41, 200, 3)); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	copyTestFile(t, meta+".before", meta)
	if err := os.Remove(meta + ".before"); err != nil {
		t.Fatal(err)
	}
	return walDir
}

func checkLog(t *testing.T, s *Stores, first, last uint64) {
	t.Helper()
	gotFirst, _ := s.Log.FirstIndex()
	gotLast, _ := s.Log.LastIndex()
	if gotFirst != first || gotLast != last {
		t.Fatalf("log [%d, %d], want [%d, %d]", gotFirst, gotLast, first, last)
	}
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := s.Log.GetLog(i, &l); err != nil || string(l.Data) != string(crashEntry(i, l.Term).Data) {
			t.Fatalf("entry %d: %q, %v", i, l.Data, err)
		}
	}
}

// TestWALRepairsASealTheMetaDatabaseMissed: raft-wal v0.4.1 reopens a
// segment sealed in its file but not in its meta database as its open
// tail, and refuses every append to it. OpenStores completes the rotation.
func TestWALRepairsASealTheMetaDatabaseMissed(t *testing.T) {
	dir := t.TempDir()
	walDir := sealedButNotRecorded(t, dir)
	plain := filepath.Join(t.TempDir(), "wal")
	copyTestDir(t, walDir, plain)
	w := rawWAL(t, plain)
	if err := w.StoreLogs(crashBatch(201, 201, 3)); !errors.Is(err, types.ErrSealed) {
		t.Errorf("raft-wal alone: append after the state a kill leaves: %v, want %v", err, types.ErrSealed)
	}
	_ = w.Close()

	s, err := OpenStores(dir, StoreOptions{LogStore: LogStoreWAL, WALSegmentBytes: crashSegmentBytes})
	if err != nil {
		t.Fatal(err)
	}
	checkLog(t, s, 1, 200)
	if err := s.Log.StoreLogs(crashBatch(201, 230, 4)); err != nil {
		t.Fatalf("append after the repair: %v", err)
	}
	_ = s.Close()
	s, err = OpenStores(dir, StoreOptions{LogStore: LogStoreWAL, WALSegmentBytes: crashSegmentBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkLog(t, s, 1, 230)
}

// TestWALDropsAnIndexBlockItsAppendDidNotCommit: a kill that cut the
// sealing append short can leave the index block without the commit after
// it. The index does not read back, so the segment stays open and the
// uncommitted append is dropped.
func TestWALDropsAnIndexBlockItsAppendDidNotCommit(t *testing.T) {
	dir := t.TempDir()
	walDir := sealedButNotRecorded(t, dir)
	// The index array is the last thing before the commit frame: zero the
	// entries that point at the first segment's frames.
	meta := &metadb.BoltMetaDB{}
	state, err := meta.Load(walDir)
	if err != nil {
		t.Fatal(err)
	}
	_ = meta.Close()
	name := filepath.Join(walDir, fmt.Sprintf("%020d-%016x.wal", state.Segments[0].BaseIndex, state.Segments[0].ID))
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	// The commit frame is the last 8 bytes before the zeros; the index's
	// 200 four-byte offsets before it.
	start := end - 8 - 200*4
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 200*4), int64(start)); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	s, err := OpenStores(dir, StoreOptions{LogStore: LogStoreWAL, WALSegmentBytes: crashSegmentBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkLog(t, s, 1, 40)
	if err := s.Log.StoreLogs(crashBatch(41, 60, 4)); err != nil {
		t.Fatalf("append after the repair: %v", err)
	}
	checkLog(t, s, 1, 60)
}

// TestWALRepairsASealWithoutIndexBlock: raft-wal v0.4.0 sealed the last
// segment on a tail truncation without writing its index block, and after
// a restart every read of it failed with "sealed segment has no index
// block" (raft panicked at start; hashicorp/raft-wal#31). This writes the
// meta database v0.4.0 left after DeleteRange(8, 10) on entries 1..10.
func TestWALRepairsASealWithoutIndexBlock(t *testing.T) {
	dir := t.TempDir()
	walDir := filepath.Join(dir, WALDir)
	if err := os.MkdirAll(walDir, 0o700); err != nil {
		t.Fatal(err)
	}
	w := rawWAL(t, walDir)
	if err := w.StoreLogs(crashBatch(1, 10, 2)); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	meta := &metadb.BoltMetaDB{}
	state, err := meta.Load(walDir)
	if err != nil {
		t.Fatal(err)
	}
	tail := &state.Segments[len(state.Segments)-1]
	tail.SealTime, tail.MaxIndex = time.Now(), 7
	state.Segments = append(state.Segments, types.SegmentInfo{ID: state.NextSegmentID, BaseIndex: 8, MinIndex: 8,
		Codec: tail.Codec, SizeLimit: tail.SizeLimit, CreateTime: time.Now()})
	state.NextSegmentID++
	if err := meta.CommitState(state); err != nil {
		t.Fatal(err)
	}
	_ = meta.Close()

	plain := filepath.Join(t.TempDir(), "wal")
	copyTestDir(t, walDir, plain)
	w = rawWAL(t, plain)
	var l raft.Log
	if err := w.GetLog(1, &l); err == nil || !strings.Contains(err.Error(), "no index block") {
		t.Errorf("raft-wal alone: GetLog(1): %v, want sealed segment has no index block", err)
	}
	_ = w.Close()

	s, err := OpenStores(dir, StoreOptions{LogStore: LogStoreWAL, WALSegmentBytes: crashSegmentBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkLog(t, s, 1, 7)
	if err := s.Log.StoreLogs(crashBatch(8, 12, 3)); err != nil {
		t.Fatal(err)
	}
	checkLog(t, s, 1, 12)
}
