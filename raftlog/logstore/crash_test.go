package logstore

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"
)

// The crash test runs this test binary again as a writer process, which
// appends, truncates and compacts for ever and prints each acknowledged
// step; the test kills it with SIGKILL at some point and checks that the
// reopened log holds everything acknowledged.
const crashWriterEnv = "LOGSTORE_CRASH_WRITER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashWriterEnv); dir != "" {
		runCrashWriter(dir)
		return
	}
	os.Exit(m.Run())
}

// runCrashWriter appends batches of 1–13 entries; now and then it cuts the
// last four and writes them again in a newer term, so a term read back tells
// which of two writes of an index survived, and it compacts the front.
func runCrashWriter(dir string) {
	s, err := Open(dir, Options{SegmentBytes: 16 << 10})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
	}
	last, _ := s.LastIndex()
	term := last/97 + 100 // a fresh term per process, above any before it
	for {
		next := last + 1
		n := 1 + next%13
		if err := s.StoreLogs(batch(next, next+n-1, term)); err != nil {
			say("error %v", err)
			os.Exit(1)
		}
		last = next + n - 1
		say("stored %d %d", last, term)
		if last%97 < 13 && last > 5 {
			// A follower dropping a conflicting tail and taking the
			// leader's entries of a newer term instead.
			cut := last - 3
			say("cutting %d", cut)
			if err := s.DeleteRange(cut, last); err != nil {
				say("error %v", err)
				os.Exit(1)
			}
			say("cut %d", cut)
			term++
			if err := s.StoreLogs(batch(cut, last, term)); err != nil {
				say("error %v", err)
				os.Exit(1)
			}
			say("stored %d %d", last, term)
		}
		if last%1000 < 13 && last > 600 {
			say("compacting %d", last-500)
			if err := s.DeleteRange(0, last-500); err != nil {
				say("error %v", err)
				os.Exit(1)
			}
			say("compacted %d", last-500)
		}
	}
}

func TestKilledWriterLosesNothingAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// What every acknowledged index holds, by term: later writes of an index
	// replace earlier ones.
	acked := map[uint64]uint64{}
	var ackedLast, compacted uint64
	// A delete the writer announced but did not report done when it was
	// killed may or may not have happened, in whole or in part.
	var cutting, compacting uint64
	for round := 0; round < 8; round++ {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), crashWriterEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAt := 300 + round*170
		lines := bufio.NewScanner(stdout)
		steps := 0
		cutting, compacting = 0, 0
		for lines.Scan() {
			f := strings.Fields(lines.Text())
			switch f[0] {
			case "stored":
				last, _ := strconv.ParseUint(f[1], 10, 64)
				term, _ := strconv.ParseUint(f[2], 10, 64)
				for i := ackedLast + 1; i <= last; i++ {
					acked[i] = term
				}
				ackedLast = last
				cutting = 0
			case "cutting":
				cutting, _ = strconv.ParseUint(f[1], 10, 64)
			case "compacting":
				compacting, _ = strconv.ParseUint(f[1], 10, 64)
			case "cut":
				cut, _ := strconv.ParseUint(f[1], 10, 64)
				for i := cut; i <= ackedLast; i++ {
					delete(acked, i)
				}
				ackedLast = cut - 1
				cutting = 0
			case "compacted":
				compacted, _ = strconv.ParseUint(f[1], 10, 64)
				compacting = 0
			default:
				t.Fatalf("writer: %s", lines.Text())
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

		s, err := Open(dir, Options{SegmentBytes: 16 << 10})
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		first, _ := s.FirstIndex()
		last, _ := s.LastIndex()
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
			if err := s.GetLog(i, &l); err != nil {
				t.Fatalf("round %d: GetLog(%d): %v", round, i, err)
			}
			if term, ok := acked[i]; ok && l.Term != term {
				t.Fatalf("round %d: index %d holds term %d, the acknowledged write was term %d", round, i, l.Term, term)
			}
			if want := entry(i, l.Term).Data; string(l.Data) != string(want) {
				t.Fatalf("round %d: index %d holds %q", round, i, l.Data)
			}
		}
		// Anything past the acknowledged end was written but not yet
		// reported; the next writer continues after it.
		for i := ackedLast + 1; i <= last; i++ {
			var l raft.Log
			_ = s.GetLog(i, &l)
			acked[i] = l.Term
		}
		ackedLast = last
		t.Logf("round %d: killed after %d steps; log [%d, %d] intact", round, steps, first, last)
		_ = s.Close()
	}
}
