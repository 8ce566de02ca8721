// Package logcrash is the crash test every raft log store of the project
// runs: a writer process appends, truncates and compacts for ever and
// prints each step it finished; the test kills it with SIGKILL at a step
// it picks and checks that the reopened log holds everything acknowledged
// and nothing it did not write.
//
// The test runs its own test binary again as the writer: the package's
// TestMain calls Write when the environment variable the test names is
// set.
package logcrash

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

// Entry makes the entry the writer stores at an index in a term; the test
// checks what it reads back against it.
type Entry func(index, term uint64) *raft.Log

// Write is the writer process: it appends batches of 1–13 entries; now
// and then it cuts the last four and writes them again in a newer term (a
// follower dropping a conflicting tail for the leader's entries), so a
// term read back tells which of two writes of an index survived; and it
// compacts the front. It prints each step before and after it, and exits
// on the first error.
func Write(s raft.LogStore, entry Entry) {
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
	}
	fail := func(what string, err error) {
		say("error %s: %v", what, err)
		os.Exit(1)
	}
	store := func(from, to, term uint64) error {
		var batch []*raft.Log
		for i := from; i <= to; i++ {
			batch = append(batch, entry(i, term))
		}
		return s.StoreLogs(batch)
	}
	last, _ := s.LastIndex()
	term := last/97 + 100 // a fresh term per process, above any before it
	for {
		next := last + 1
		n := 1 + next%13
		if err := store(next, next+n-1, term); err != nil {
			fail(fmt.Sprintf("storing %d", next), err)
		}
		last = next + n - 1
		say("stored %d %d", last, term)
		if last%97 < 13 && last > 5 {
			cut := last - 3
			say("cutting %d", cut)
			if err := s.DeleteRange(cut, last); err != nil {
				fail("cutting", err)
			}
			say("cut %d", cut)
			term++
			if err := store(cut, last, term); err != nil {
				fail("storing after the cut", err)
			}
			say("stored %d %d", last, term)
		}
		if last%1000 < 13 && last > 600 {
			say("compacting %d", last-500)
			if err := s.DeleteRange(0, last-500); err != nil {
				fail("compacting", err)
			}
			say("compacted %d", last-500)
		}
	}
}

// Exit ends a writer process that could not start, as Write ends one
// that failed: with a line the test reports.
func Exit(what string, err error) {
	fmt.Printf("error %s: %v\n", what, err)
	os.Exit(1)
}

// Test describes one crash test.
type Test struct {
	// Env is the NAME=value the writer process is started with, for the
	// package's TestMain to call Write.
	Env string
	// Rounds is how many writers are started and killed in turn, each
	// going on from the log the one before left.
	Rounds int
	// KillAt is the step (a line the writer printed) at which round's
	// writer is killed.
	KillAt func(round int) int
	// Open opens the store the writer wrote; the test closes it with the
	// function returned.
	Open  func() (raft.LogStore, func() error, error)
	Entry Entry
	// AppendAfterReopen also checks, after each round, that the reopened
	// log takes an append.
	AppendAfterReopen bool
}

// Run runs the crash test.
func Run(t *testing.T, tc Test) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// What every acknowledged index holds, by term: later writes of an
	// index replace earlier ones.
	acked := map[uint64]uint64{}
	var ackedLast, compacted uint64
	for round := range tc.Rounds {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), tc.Env)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAt := tc.KillAt(round)
		// A delete the writer announced but did not report done when it
		// was killed may or may not have happened, in whole or in part.
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

		s, closeStore, err := tc.Open()
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
				t.Fatalf("round %d: GetLog(%d) of [%d, %d]: %v", round, i, first, last, err)
			}
			// Past the acknowledged end lie entries written but not yet
			// reported: any term of theirs is as good as another.
			if term, ok := acked[i]; ok && i <= ackedLast && l.Term != term {
				t.Fatalf("round %d: index %d holds term %d, the acknowledged write was term %d", round, i, l.Term, term)
			}
			if want := tc.Entry(i, l.Term).Data; string(l.Data) != string(want) {
				t.Fatalf("round %d: index %d holds %q", round, i, l.Data)
			}
			acked[i] = l.Term
		}
		ackedLast = last
		if tc.AppendAfterReopen {
			// What the next writer does first, checked here too for the
			// last round.
			if err := s.StoreLogs([]*raft.Log{tc.Entry(last+1, 99)}); err != nil {
				t.Fatalf("round %d: append after reopening [%d, %d]: %v", round, first, last, err)
			}
			if err := s.DeleteRange(last+1, last+1); err != nil {
				t.Fatal(err)
			}
		}
		if err := closeStore(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: killed after %d steps; log [%d, %d] intact", round, steps, first, last)
	}
}
