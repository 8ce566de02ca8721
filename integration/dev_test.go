package integration

import (
	"bufio"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// devProcess is a running `ctrlnode dev` whose output is collected.
type devProcess struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	done  chan error
}

func startDev(t *testing.T, dataDir string) *devProcess {
	t.Helper()
	cmd := exec.Command(ctrlnode(t), "dev", "--data", dataDir, "--log-level", "warn", "--session-timeout", "2s")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &devProcess{cmd: cmd, done: make(chan error, 1)}
	var readDone sync.WaitGroup
	readDone.Add(1)
	go func() {
		defer readDone.Done()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() {
		readDone.Wait()
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	return p
}

// waitLine waits for an output line matching re and returns its submatches.
func (p *devProcess) waitLine(t *testing.T, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		for _, l := range p.lines {
			if m := re.FindStringSubmatch(l); m != nil {
				p.mu.Unlock()
				return m
			}
		}
		p.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t.Fatalf("no line matching %q within %v; output:\n%s", re, timeout, strings.Join(p.lines, "\n"))
	return nil
}

func (p *devProcess) interrupt(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("ctrlnode dev exited with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ctrlnode dev did not stop within 30 s of SIGINT")
	}
}

var activeRE = regexp.MustCompile(`^active controller: voter (\d+), controller epoch (\d+)$`)

// TestDevStartStopRestart runs `ctrlnode dev`, stops it with Ctrl-C, and
// starts it again on the same data folder: the quorum comes back from its
// own log, with a controller epoch above the first run's.
func TestDevStartStopRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	data := t.TempDir()
	first := startDev(t, data)
	first.waitLine(t, regexp.MustCompile(`^  voter 3  raft 127\.0\.0\.1:\d+$`), time.Minute)
	m := first.waitLine(t, activeRE, time.Minute)
	epoch1, _ := strconv.Atoi(m[2])
	first.interrupt(t)
	first.waitLine(t, regexp.MustCompile(`^stopped$`), time.Second)

	second := startDev(t, data)
	m = second.waitLine(t, activeRE, time.Minute)
	if epoch2, _ := strconv.Atoi(m[2]); epoch2 <= epoch1 {
		t.Fatalf("controller epoch after restart = %d, first run had %d: state was not kept", epoch2, epoch1)
	}
	second.interrupt(t)
}
