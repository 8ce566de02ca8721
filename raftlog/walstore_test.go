package raftlog

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/types"
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
		runWALWriter(os.Getenv(walWriterEnv))
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

// runWALWriter appends batches of 1–13 entries to a voter's stores kept in
// raft-wal; now and then it cuts the last four, as a follower drops a
// conflicting suffix, and writes them again in a newer term, and it
// compacts the front. It prints each step before and after it.
func runWALWriter(dir string) {
	s, err := openCrashWAL(dir)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
	}
	fail := func(what string, err error) {
		say("error %s: %v", what, err)
		os.Exit(1)
	}
	last, _ := s.Log.LastIndex()
	term := last/97 + 100 // a fresh term per process, above any before it
	for {
		next := last + 1
		n := 1 + next%13
		if err := s.Log.StoreLogs(crashBatch(next, next+n-1, term)); err != nil {
			fail(fmt.Sprintf("storing %d", next), err)
		}
		last = next + n - 1
		say("stored %d %d", last, term)
		if last%97 < 13 && last > 5 {
			cut := last - 3
			say("cutting %d", cut)
			if err := s.Log.DeleteRange(cut, last); err != nil {
				fail("cutting", err)
			}
			say("cut %d", cut)
			term++
			if err := s.Log.StoreLogs(crashBatch(cut, last, term)); err != nil {
				fail("storing after the cut", err)
			}
			say("stored %d %d", last, term)
		}
		if last%1000 < 13 && last > 600 {
			say("compacting %d", last-500)
			if err := s.Log.DeleteRange(0, last-500); err != nil {
				fail("compacting", err)
			}
			say("compacted %d", last-500)
		}
	}
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
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	acked := map[uint64]uint64{} // index -> term of its acknowledged write
	var ackedLast, compacted uint64
	for round := range 10 {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), walWriterEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAt := 60 + round*83
		var cutting, compacting uint64
		steps := 0
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			f := strings.Fields(lines.Text())
			num := func(i int) uint64 { v, _ := strconv.ParseUint(f[i], 10, 64); return v }
			switch f[0] {
			case "stored":
				for i := ackedLast + 1; i <= num(1); i++ {
					acked[i] = num(2)
				}
				ackedLast, cutting = num(1), 0
			case "cutting":
				cutting = num(1)
			case "cut":
				for i := num(1); i <= ackedLast; i++ {
					delete(acked, i)
				}
				ackedLast, cutting = num(1)-1, 0
			case "compacting":
				compacting = num(1)
			case "compacted":
				compacted, compacting = num(1), 0
			default:
				_ = cmd.Process.Kill()
				t.Fatalf("round %d: writer: %s", round, lines.Text())
			}
			// Lines the writer printed before it died still count: keep
			// reading until the pipe closes.
			if steps++; steps == killAt {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
		}
		_ = cmd.Wait()
		if steps < killAt {
			t.Fatalf("round %d: the writer ended by itself after %d steps", round, steps)
		}

		s, err := openCrashWAL(dir)
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		first, _ := s.Log.FirstIndex()
		last, _ := s.Log.LastIndex()
		mustHold := ackedLast
		if cutting != 0 {
			mustHold = cutting - 1
		}
		if first > max(compacted, compacting)+1 || last < mustHold {
			t.Fatalf("round %d: log [%d, %d], acknowledged up to %d (cutting from %d), compaction through %d (in progress to %d)",
				round, first, last, ackedLast, cutting, compacted, compacting)
		}
		if last < ackedLast {
			ackedLast = last // the announced cut happened
		}
		for i := first; i <= last; i++ {
			var l raft.Log
			if err := s.Log.GetLog(i, &l); err != nil {
				t.Fatalf("round %d: GetLog(%d) of [%d, %d]: %v", round, i, first, last, err)
			}
			if term, ok := acked[i]; ok && i <= ackedLast && l.Term != term {
				t.Fatalf("round %d: index %d holds term %d, the acknowledged write was term %d", round, i, l.Term, term)
			}
			if want := crashEntry(i, l.Term).Data; string(l.Data) != string(want) {
				t.Fatalf("round %d: index %d holds %q", round, i, l.Data)
			}
			acked[i] = l.Term
		}
		ackedLast = last
		// What the next writer would do first, checked here too for the
		// last round: the reopened log takes an append.
		if err := s.Log.StoreLogs(crashBatch(last+1, last+1, 99)); err != nil {
			t.Fatalf("round %d: append after reopening [%d, %d]: %v", round, first, last, err)
		}
		if err := s.Log.DeleteRange(last+1, last+1); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: killed after %d steps; log [%d, %d] intact", round, steps, first, last)
	}
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
