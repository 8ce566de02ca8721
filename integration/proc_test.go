package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is a running ctrlnode whose combined output is collected line by
// line, with the time each line arrived.
type proc struct {
	name  string
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	times []time.Time
	done  chan struct{}
	err   error
}

func startProc(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	return startBinary(t, ctrlnode(t), name, env, args...)
}

// startBinary is startProc of another build of ctrlnode.
func startBinary(t *testing.T, bin, name string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = env
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.times = append(p.times, time.Now())
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, out)
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("output of %s:\n%s", name, p.output())
		}
	})
	return p
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// find returns the first line matching re with its arrival time.
func (p *proc) find(re *regexp.Regexp) ([]string, time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, l := range p.lines {
		if m := re.FindStringSubmatch(l); m != nil {
			return m, p.times[i], true
		}
	}
	return nil, time.Time{}, false
}

// waitLine waits for a line matching re and returns its submatches.
func (p *proc) waitLine(t *testing.T, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	var m []string
	waitFor(t, timeout, fmt.Sprintf("%s: a line matching %q", p.name, re), func() bool {
		var ok bool
		m, _, ok = p.find(re)
		return ok
	})
	return m
}

// count returns how many lines so far match re.
func (p *proc) count(re *regexp.Regexp) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.lines {
		if re.MatchString(l) {
			n++
		}
	}
	return n
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig and waits for the process to exit.
func (p *proc) signal(t *testing.T, sig syscall.Signal, timeout time.Duration) error {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v of %v", p.name, timeout, sig)
		return nil
	}
}

// waitFor polls cond every 50 ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// result is a finished admin command.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// ctl runs a ctrlnode command to completion.
func ctl(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(ctrlnode(t), args...)
	cmd.Env = withoutExitSleep(env)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("ctrlnode %v: %v", args, err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// withoutExitSleep is env (nil: this process's environment) with the
// race detector's exit sleep turned off. A race-built process that exits
// 0 sleeps atexit_sleep_ms (a second by default) first, for goroutines
// still running to report races; an admin command has finished its work
// by then, and the tests run hundreds of them, polling. A race it hit
// still makes it exit 66. Any GORACE options already set are kept.
func withoutExitSleep(env []string) []string {
	if env == nil {
		env = os.Environ()
	}
	opts := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GORACE="); ok {
			opts = v
		}
	}
	return append(env[:len(env):len(env)], "GORACE="+strings.TrimSpace(opts+" atexit_sleep_ms=0"))
}

// ctlJSON runs an admin command until it exits 0 (or timeout passes)
// and decodes its JSON output into v.
func ctlJSON(t *testing.T, timeout time.Duration, v any, args ...string) {
	t.Helper()
	var last result
	waitFor(t, timeout, fmt.Sprintf("ctrlnode %s to succeed", strings.Join(args, " ")), func() bool {
		last = ctl(t, nil, append(args, "--json")...)
		if last.code != 0 {
			return false
		}
		// Decode into a zero value: json merges into existing maps.
		rv := reflect.ValueOf(v).Elem()
		rv.Set(reflect.Zero(rv.Type()))
		if err := json.Unmarshal([]byte(last.stdout), v); err != nil {
			t.Fatalf("ctrlnode %v --json: %v\n%s", args, err, last)
		}
		return true
	})
}

// reservedPorts are the ports freePortBase has handed out in this test
// binary. The tests run in parallel, and a range is free when laid out,
// not held until its nodes bind it: without the reservation a test
// starting meanwhile could be handed the same ports. A port stays
// reserved for the whole run, so a node restarted on its old port never
// finds it given to another test.
var reservedPorts = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePortBase finds a base port p such that p+offset is free for every
// offset, and reserves those ports for the caller. The ports come from
// below the kernel's ephemeral range (32768 and up here): a process
// restarted on its old port must not find it taken by some outgoing
// connection's source port in the meantime.
func freePortBase(t *testing.T, offsets ...int) int {
	t.Helper()
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))
	reservedPorts.Lock()
	defer reservedPorts.Unlock()
	for try := 0; try < 500; try++ {
		base := 10000 + rnd.IntN(22000)
		ok := true
		var held []net.Listener
		for _, off := range offsets {
			if reservedPorts.ports[base+off] {
				ok = false
				break
			}
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+off))
			if err != nil {
				ok = false
				break
			}
			held = append(held, l)
		}
		for _, l := range held {
			_ = l.Close()
		}
		if ok {
			for _, off := range offsets {
				reservedPorts.ports[base+off] = true
			}
			return base
		}
	}
	t.Fatal("no free port range found")
	return 0
}

// httpGet returns the status and body of a GET.
func httpGet(url string) (int, string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
