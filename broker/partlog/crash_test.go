package partlog

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The crash test runs this test binary again as a writer process, which
// appends as a leader for ever, now and then truncating its tail and
// writing on in a newer epoch as a follower of a new leader would, and
// prints each acknowledged step; the test kills it with SIGKILL and
// checks that the reopened log holds everything acknowledged.
const crashWriterEnv = "PARTLOG_CRASH_WRITER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashWriterEnv); dir != "" {
		runCrashWriter(dir)
		return
	}
	os.Exit(m.Run())
}

var crashCfg = Config{SegmentBytes: 8 << 10, IndexIntervalBytes: 512}

// crashValue is what offset o holds when written in epoch e.
func crashValue(o int64, e int32) string { return fmt.Sprintf("%d@%d", o, e) }

func runCrashWriter(dir string) {
	l, err := Open(dir, crashCfg)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
	}
	epoch := l.LatestEpoch() + 1
	if err := l.AssignEpoch(epoch); err != nil {
		say("error %v", err)
		os.Exit(1)
	}
	for i := 0; ; i++ {
		next := l.EndOffset()
		n := 1 + int(next%7)
		vals := make([]string, n)
		for j := range vals {
			vals[j] = crashValue(next+int64(j), epoch)
		}
		bs, err := ParseBatches(makeBatch(next, vals...))
		if err == nil {
			_, _, err = l.AppendAsLeader(bs, epoch)
		}
		if err != nil {
			say("error %v", err)
			os.Exit(1)
		}
		say("appended %d %d %d", next, next+int64(n)-1, epoch)
		if i%41 == 40 && next > 10 {
			cut := next - 5
			say("truncating %d", cut)
			if err := l.Truncate(cut); err != nil {
				say("error %v", err)
				os.Exit(1)
			}
			say("truncated %d", l.EndOffset())
			epoch++
			if err := l.AssignEpoch(epoch); err != nil {
				say("error %v", err)
				os.Exit(1)
			}
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
	acked := map[int64]string{} // offset → value of every acknowledged record
	var ackedEnd int64
	for round := 0; round < 6; round++ {
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
		killAt := 200 + round*150
		var truncating int64 = -1
		steps := 0
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			f := strings.Fields(lines.Text())
			num := func(i int) int64 { v, _ := strconv.ParseInt(f[i], 10, 64); return v }
			switch f[0] {
			case "appended":
				first, last, epoch := num(1), num(2), int32(num(3))
				if first != ackedEnd {
					t.Fatalf("round %d: append at %d, the log ended at %d", round, first, ackedEnd)
				}
				for o := first; o <= last; o++ {
					acked[o] = crashValue(o, epoch)
				}
				ackedEnd = last + 1
			case "truncating":
				truncating = num(1)
			case "truncated":
				for o := num(1); o < ackedEnd; o++ {
					delete(acked, o)
				}
				ackedEnd, truncating = num(1), -1
			default:
				t.Fatalf("writer: %s", lines.Text())
			}
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

		l, err := Open(dir, crashCfg)
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		end := l.EndOffset()
		// An announced truncation that was not reported may have
		// happened: it cuts the batch holding its offset, which starts at
		// most 6 offsets before it (batches hold 1–7 records).
		mustHold := ackedEnd
		if truncating >= 0 {
			mustHold = truncating - 6
		}
		if end < mustHold {
			t.Fatalf("round %d: log ends at %d, acknowledged up to %d", round, end, ackedEnd)
		}
		for o := l.StartOffset(); o < end; o++ {
			b, err := l.Read(o, end, 1)
			if err != nil {
				t.Fatalf("round %d: read %d: %v", round, o, err)
			}
			got, ok := values(t, b)[o]
			if want, acknowledged := acked[o]; acknowledged && o < mustHold && got != want {
				t.Fatalf("round %d: offset %d holds %q (ok %v), acknowledged %q", round, o, got, ok, want)
			}
		}
		// The log's end is where the next writer starts; what it holds
		// past the acknowledged end was written but not reported.
		for o := l.StartOffset(); o < end; o++ {
			b, _ := l.Read(o, end, 1)
			acked[o] = values(t, b)[o]
		}
		for o := end; o < ackedEnd; o++ {
			delete(acked, o)
		}
		ackedEnd = end
		if es := l.Epochs(); len(es) > 0 && es[len(es)-1].StartOffset > end {
			t.Fatalf("round %d: epoch cache %v past the log end %d", round, es, end)
		}
		t.Logf("round %d: killed after %d steps; log [0, %d) intact, epochs %d", round, steps, end, len(l.Epochs()))
		_ = l.Close()
	}
}
