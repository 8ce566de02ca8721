package raftlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/ctrlquorum/ctrlquorum/raftlog/logstore"
)

func TestStoresPersistAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStores(dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if has, err := s.HasExistingState(); err != nil || has {
		t.Fatalf("fresh dir: HasExistingState = %v, %v; want false", has, err)
	}
	if err := s.Log.StoreLog(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Stable.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	s, err = OpenStores(dir, StoreOptions{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if has, err := s.HasExistingState(); err != nil || !has {
		t.Fatalf("reopened dir: HasExistingState = %v, %v; want true", has, err)
	}
	var l raft.Log
	if err := s.Log.GetLog(1, &l); err != nil || string(l.Data) != "a" {
		t.Fatalf("log entry after reopen: %q, %v", l.Data, err)
	}
	if snaps, err := s.Snapshots.List(); err != nil || len(snaps) != 0 {
		t.Fatalf("snapshots: %v, %v; want none", snaps, err)
	}
}

// boltWithLog writes a data directory the way it was laid out before the log
// had its own files: entries and stable state both in raft.db.
func boltWithLog(t *testing.T, dir string, indexes ...uint64) {
	t.Helper()
	b, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, BoltFile)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, i := range indexes {
		if err := b.StoreLog(&raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: []byte(fmt.Sprint("e", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.SetUint64([]byte("CurrentTerm"), 2); err != nil {
		t.Fatal(err)
	}
}

func span(from, to uint64) []uint64 {
	var out []uint64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// checkMoved opens dir and checks the log holds exactly [first, last] with
// the entries boltWithLog wrote, the term survived, and bolt has no log left.
func checkMoved(t *testing.T, dir string, first, last uint64) {
	t.Helper()
	s, err := OpenStores(dir, StoreOptions{LogStore: LogStoreSegments})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	gotFirst, _ := s.Log.FirstIndex()
	gotLast, _ := s.Log.LastIndex()
	if gotFirst != first || gotLast != last {
		t.Fatalf("log [%d, %d] after the move, want [%d, %d]", gotFirst, gotLast, first, last)
	}
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := s.Log.GetLog(i, &l); err != nil || string(l.Data) != fmt.Sprint("e", i) || l.Term != 2 {
			t.Fatalf("entry %d after the move: %+v, %v", i, l, err)
		}
	}
	if term, err := s.Stable.GetUint64([]byte("CurrentTerm")); err != nil || term != 2 {
		t.Fatalf("CurrentTerm after the move: %d, %v", term, err)
	}
	if boltLast, err := s.bolt.LastIndex(); err != nil || boltLast != 0 {
		t.Fatalf("bolt still holds a log up to %d (%v)", boltLast, err)
	}
	for _, left := range []string{LogDir + ".moving", LogDir + ".replaced"} {
		if _, err := os.Stat(filepath.Join(dir, left)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the move left %s behind: %v", left, err)
		}
	}
}

func TestLogInBoltIsMovedOut(t *testing.T) {
	dir := t.TempDir()
	boltWithLog(t, dir, span(1, 3000)...)
	checkMoved(t, dir, 1, 3000)
	checkMoved(t, dir, 1, 3000) // a second open finds nothing to move
}

func TestMoveKeepsOnlyTheEntriesAfterAGap(t *testing.T) {
	dir := t.TempDir()
	boltWithLog(t, dir, append(span(1, 40), span(900, 950)...)...)
	checkMoved(t, dir, 900, 950)
}

func TestMoveInterruptedBeforeItsRenameStartsAgain(t *testing.T) {
	dir := t.TempDir()
	boltWithLog(t, dir, span(5, 80)...)
	// What a crash while copying leaves: a partial copy under the working
	// name, holding entries that must not survive.
	partial, err := logstore.Open(filepath.Join(dir, LogDir+".moving"), logstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := partial.StoreLogs([]*raft.Log{{Index: 5, Term: 9, Data: []byte("stale")}}); err != nil {
		t.Fatal(err)
	}
	_ = partial.Close()
	checkMoved(t, dir, 5, 80)
}

// Whenever bolt holds log entries they are the log: a log directory next
// to them is either a move interrupted after its rename (the same entries)
// or one a build that kept the log in bolt ran past (older entries).
func TestBoltLogReplacesALogDirectoryNextToIt(t *testing.T) {
	cases := []struct {
		name        string
		from, to    uint64 // the bolt entries found next to the moved log 1..50
		setAsideOld bool   // the old log directory already renamed to .replaced
	}{
		{name: "move interrupted after its rename", from: 1, to: 50},
		// That build found an empty log, caught up from the leader and
		// wrote on into bolt; the log directory is stale.
		{name: "run since by a build that kept the log in bolt", from: 40, to: 120},
		{name: "interrupted between setting the old directory aside and the rename", from: 1, to: 70, setAsideOld: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			boltWithLog(t, dir, span(1, 50)...)
			checkMoved(t, dir, 1, 50)
			boltWithLog(t, dir, span(tc.from, tc.to)...)
			if tc.setAsideOld {
				if err := os.Rename(filepath.Join(dir, LogDir), filepath.Join(dir, LogDir+".replaced")); err != nil {
					t.Fatal(err)
				}
			}
			checkMoved(t, dir, tc.from, tc.to)
		})
	}
}
