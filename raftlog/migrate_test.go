package raftlog

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"
)

var everyStore = []LogStore{LogStoreBolt, LogStoreSegments, LogStoreWAL}

// Every migration test's log: entries 5..3004, three of the migration's
// batches and a part, and a term and vote next to them.
const (
	fillFirst, fillLast = 5, 3004
	fillTerm            = 7
	fillCandidate       = "voter-2"
)

// fillDir writes a data directory whose log is in kind.
func fillDir(t *testing.T, dir string, kind LogStore, first, last uint64) {
	t.Helper()
	s, err := OpenStores(dir, StoreOptions{LogStore: kind, WALSegmentBytes: crashSegmentBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Kind != kind {
		t.Fatalf("opened %s, want %s", s.Kind, kind)
	}
	for i := first; i <= last; i += 100 {
		if err := s.Log.StoreLogs(crashBatch(i, min(i+99, last), 2)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Stable.SetUint64([]byte("CurrentTerm"), fillTerm); err != nil {
		t.Fatal(err)
	}
	if err := s.Stable.Set([]byte("LastVoteCand"), []byte(fillCandidate)); err != nil {
		t.Fatal(err)
	}
}

// checkDir opens dir asking for kind and checks that the log is entries
// first..last, in kind alone, with the term and vote next to it.
func checkDir(t *testing.T, dir string, kind LogStore, first, last uint64) {
	t.Helper()
	s, err := OpenStores(dir, StoreOptions{LogStore: kind, WALSegmentBytes: crashSegmentBytes})
	if err != nil {
		t.Fatalf("open asking for %s: %v", kind, err)
	}
	defer s.Close()
	if s.Kind != kind {
		t.Fatalf("opened %s, want %s", s.Kind, kind)
	}
	checkLog(t, s, first, last)
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := s.Log.GetLog(i, &l); err != nil || l.Term != 2 {
			t.Fatalf("entry %d: term %d, %v", i, l.Term, err)
		}
	}
	if term, err := s.Stable.GetUint64([]byte("CurrentTerm")); err != nil || term != fillTerm {
		t.Fatalf("CurrentTerm %d, %v; want %d", term, err, fillTerm)
	}
	if cand, err := s.Stable.Get([]byte("LastVoteCand")); err != nil || string(cand) != fillCandidate {
		t.Fatalf("LastVoteCand %q, %v; want %q", cand, err, fillCandidate)
	}
	if kind != LogStoreBolt {
		if boltLast, err := s.bolt.LastIndex(); err != nil || boltLast != 0 {
			t.Fatalf("%s still holds a log up to %d (%v)", BoltFile, boltLast, err)
		}
	}
	for _, other := range []LogStore{LogStoreSegments, LogStoreWAL} {
		left := []string{storePath(dir, other) + movingSuffix, storePath(dir, other) + replacedSuffix}
		if other != kind {
			left = append(left, storePath(dir, other))
		}
		for _, p := range left {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s is left behind (%v)", p, err)
			}
		}
	}
	if _, err := os.Stat(storePath(dir, LogStoreBolt) + movingSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s%s is left behind (%v)", BoltFile, movingSuffix, err)
	}
}

func TestEveryStoreMovesToEveryOther(t *testing.T) {
	for _, from := range everyStore {
		for _, to := range everyStore {
			if from == to {
				continue
			}
			t.Run(fmt.Sprintf("%s to %s", from, to), func(t *testing.T) {
				dir := t.TempDir()
				fillDir(t, dir, from, fillFirst, fillLast)
				checkDir(t, dir, to, fillFirst, fillLast)
				// Asking for no store in particular keeps the one there.
				s, err := OpenStores(dir, StoreOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if s.Kind != to {
					t.Errorf("reopened without asking: %s, want %s", s.Kind, to)
				}
				_ = s.Close()
			})
		}
	}
}

func TestNewDirectoryGetsTheDefaultStore(t *testing.T) {
	s, err := OpenStores(t.TempDir(), StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Kind != DefaultLogStore {
		t.Fatalf("new directory: %s, want %s", s.Kind, DefaultLogStore)
	}
}

func TestMoveOutOfBoltKeepsOnlyTheEntriesAfterAGap(t *testing.T) {
	for _, to := range []LogStore{LogStoreSegments, LogStoreWAL} {
		t.Run(string(to), func(t *testing.T) {
			dir := t.TempDir()
			fillDir(t, dir, LogStoreBolt, 1, 40)
			fillDir(t, dir, LogStoreBolt, 1900, 1950)
			checkDir(t, dir, to, 1900, 1950)
		})
	}
}

// A log directory and a WAL both present, with no log in bolt: a move
// between them that stopped after its rename (the same entries: the one
// asked for is kept), or one of them run since by a build that knew only
// that one (the later log is kept, and moved to the one asked for).
func TestLogDirectoryAndWALBothPresent(t *testing.T) {
	for _, tc := range []struct {
		name       string
		walLast    uint64
		ask        LogStore
		wantKind   LogStore
		first, end uint64
	}{
		{"same entries, asking for the WAL", fillLast, LogStoreWAL, LogStoreWAL, fillFirst, fillLast},
		{"same entries, asking for segments", fillLast, LogStoreSegments, LogStoreSegments, fillFirst, fillLast},
		{"the WAL is later, asking for segments", fillLast + 50, LogStoreSegments, LogStoreSegments, fillFirst, fillLast + 50},
		{"the log directory is later, asking for the WAL", fillLast - 50, LogStoreWAL, LogStoreWAL, fillFirst, fillLast},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fillDir(t, dir, LogStoreSegments, fillFirst, fillLast)
			other := t.TempDir()
			fillDir(t, other, LogStoreWAL, fillFirst, tc.walLast)
			copyTestDir(t, filepath.Join(other, WALDir), filepath.Join(dir, WALDir))
			checkDir(t, dir, tc.wantKind, tc.first, tc.end)
		})
	}
}

// A build once kept the term and vote in raft-wal's meta database, with no
// raft.db.
func TestWALThatKeptTheTermAndVote(t *testing.T) {
	dir := t.TempDir()
	walDir := filepath.Join(dir, WALDir)
	if err := os.MkdirAll(walDir, 0o700); err != nil {
		t.Fatal(err)
	}
	w := rawWAL(t, walDir)
	for i := uint64(fillFirst); i <= fillLast; i += 100 {
		if err := w.StoreLogs(crashBatch(i, min(i+99, fillLast), 2)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.SetUint64([]byte("CurrentTerm"), fillTerm); err != nil {
		t.Fatal(err)
	}
	if err := w.Set([]byte("LastVoteCand"), []byte(fillCandidate)); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	checkDir(t, dir, LogStoreSegments, fillFirst, fillLast)
}

// runMigration opens dir asking for to; with stopAt ("step#n"), it stops
// for good at the n-th time the migration reaches that step.
func runMigration(dir string, to LogStore, stopAt string) {
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
	}
	seen := map[string]int{}
	migrateStep = func(name string) {
		seen[name]++
		at := fmt.Sprintf("%s#%d", name, seen[name])
		say("step %s", at)
		if at == stopAt {
			say("stopped")
			select {}
		}
	}
	s, err := OpenStores(dir, StoreOptions{LogStore: to, WALSegmentBytes: crashSegmentBytes})
	if err != nil {
		say("error %v", err)
		os.Exit(1)
	}
	_ = s.Close()
	say("opened")
}

// TestMigrationKilledPartWay kills a process moving a log between two
// stores at each step of the move and at a point it does not choose, and
// checks that the next start, asking for either store, finds every entry.
func TestMigrationKilledPartWay(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range everyStore {
		for _, to := range everyStore {
			if from == to {
				continue
			}
			t.Run(fmt.Sprintf("%s to %s", from, to), func(t *testing.T) {
				base := t.TempDir()
				fillDir(t, base, from, fillFirst, fillLast)
				stops := []string{"copying#1", "copying#3", "copied#1", "renamed#1", "set-aside#1", "done#1", "killed after copying#2"}
				for i, stop := range stops {
					dir := filepath.Join(t.TempDir(), "voter")
					copyTestTree(t, base, dir)
					cmd := exec.Command(exe, "-test.run=^$")
					cmd.Env = append(os.Environ(), migrateChildEnv+"="+dir, migrateToEnv+"="+string(to), migrateStopAtEnv+"="+stop)
					stdout, err := cmd.StdoutPipe()
					if err != nil {
						t.Fatal(err)
					}
					cmd.Stderr = os.Stderr
					if err := cmd.Start(); err != nil {
						t.Fatal(err)
					}
					stopped := false
					lines := bufio.NewScanner(stdout)
					for lines.Scan() {
						line := lines.Text()
						switch {
						case strings.HasPrefix(line, "error"):
							_ = cmd.Process.Kill()
							t.Fatalf("%s: child: %s", stop, line)
						case line == "stopped", stop == "killed after copying#2" && line == "step copying#2":
							stopped = true
							_ = cmd.Process.Signal(syscall.SIGKILL)
						}
					}
					_ = cmd.Wait()
					// A move out of bolt sets nothing aside: bolt's entries
					// are deleted instead.
					if !stopped && !(stop == "set-aside#1" && from == LogStoreBolt) {
						t.Fatalf("%s: the move never got there", stop)
					}
					// Every other restart changes its mind and asks for the
					// store the log came from.
					again := to
					if i%2 == 1 {
						again = from
					}
					checkDir(t, dir, again, fillFirst, fillLast)
				}
			})
		}
	}
}

func copyTestTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o700)
		}
		copyTestFile(t, p, filepath.Join(to, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
