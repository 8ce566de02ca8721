package nemesis

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
)

// chain is the iptables chain, inside the namespace, that holds the drop
// rules; INPUT jumps to it. Rules sit on INPUT only: a packet between two
// 127.0.0.x addresses crosses OUTPUT and then INPUT, and a drop on OUTPUT
// would fail the sender's send at once with EPERM, which no real network
// partition does. Dropped on INPUT, packets vanish and the sender times
// out, as it would.
const chain = "cq-nemesis"

// namePrefix starts every namespace this package creates; the creating
// process id follows, so namespaces left by a process that was killed -9
// can be recognised and deleted by the next run.
const namePrefix = "cq-"

// Available reports why network faults cannot run here, or nil: they need
// root, ip (iproute2) and iptables.
func Available() error {
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Errorf("network faults need root for ip netns and iptables; running as uid %d", uid)
	}
	var missing []string
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("network faults need %s, not installed (Debian: apt-get install iproute2 iptables; make deps does it as root)", strings.Join(missing, " and "))
	}
	return nil
}

// Namespace is a network namespace created for one run. Its loopback is up,
// so every 127.0.0.0/8 address is usable inside it; processes started in it
// bind and dial their own 127.0.0.x. Close kills what runs in it and
// deletes it, which also removes its iptables rules.
type Namespace struct {
	Name string

	mu        sync.Mutex
	procs     []*Proc
	closeOnce sync.Once
	closeErr  error
	unhook    func()
}

// Proc is a process started in a namespace.
type Proc struct {
	Cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Wait waits for the process to exit and returns its exit error.
func (p *Proc) Wait() error { <-p.done; return p.err }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) error { return p.Cmd.Process.Signal(sig) }

// New creates a namespace for a test and deletes it when the test ends
// (or the process is interrupted). It skips the test, saying why, when
// network faults are not available here (with CI=true it fails it).
func New(t testing.TB) *Namespace {
	t.Helper()
	testkit.Need(t, "network faults (root, ip and iptables)", Available())
	ns, err := Create()
	testkit.Need(t, "a network namespace", err)
	t.Cleanup(func() {
		if err := ns.Close(); err != nil {
			t.Errorf("cleaning up network namespace %s: %v", ns.Name, err)
		}
	})
	return ns
}

// Create makes a namespace named cq-<pid>-<random>, brings its loopback up
// and installs the empty drop chain. Namespaces left behind by earlier
// runs whose process is gone are deleted first.
func Create() (*Namespace, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	reapStale()
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	n := &Namespace{Name: fmt.Sprintf("%s%d-%s", namePrefix, os.Getpid(), hex.EncodeToString(b[:]))}
	if out, err := exec.Command("ip", "netns", "add", n.Name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip netns add %s: %v: %s", n.Name, err, bytes.TrimSpace(out))
	}
	n.unhook = OnInterrupt(func() { _ = n.Close() })
	setup := [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"iptables", "-w", "-N", chain},
		{"iptables", "-w", "-I", "INPUT", "-j", chain},
	}
	for _, args := range setup {
		if out, err := n.Run(args[0], args[1:]...); err != nil {
			_ = n.Close()
			return nil, fmt.Errorf("in namespace %s: %s: %v: %s", n.Name, strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
	return n, nil
}

// Command is name with args, to run inside the namespace.
func (n *Namespace) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Run runs a command inside the namespace and returns its combined output.
func (n *Namespace) Run(name string, args ...string) ([]byte, error) {
	return n.Command(name, args...).CombinedOutput()
}

// Start starts cmd (from Command) and keeps track of it: Close kills it.
func (n *Namespace) Start(cmd *exec.Cmd) (*Proc, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closeErr != nil || n.unhook == nil {
		return nil, fmt.Errorf("namespace %s is closed", n.Name)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Proc{Cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	n.procs = append(n.procs, p)
	return p, nil
}

func checkLoopback(ip string) error {
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is4() || !a.IsLoopback() {
		return fmt.Errorf("%q is not a 127.0.0.0/8 address: only those are ever cut", ip)
	}
	return nil
}

// Cut adds a drop rule for each cut (packets from cut.From's address to
// cut.To's).
func (n *Namespace) Cut(cuts ...Cut) error {
	for _, c := range cuts {
		if c.From < 1 || c.From > 254 || c.To < 1 || c.To > 254 || c.From == c.To {
			return fmt.Errorf("bad cut %v", c)
		}
		if err := n.Drop(HostIP(c.From), HostIP(c.To)); err != nil {
			return err
		}
	}
	return nil
}

// Drop adds a rule dropping the packets from address src to address dst,
// both in 127.0.0.0/8.
func (n *Namespace) Drop(src, dst string) error {
	if err := checkLoopback(src); err != nil {
		return err
	}
	if err := checkLoopback(dst); err != nil {
		return err
	}
	if out, err := n.Run("iptables", "-w", "-A", chain, "-s", src, "-d", dst, "-j", "DROP"); err != nil {
		return fmt.Errorf("iptables drop %s→%s: %v: %s", src, dst, err, bytes.TrimSpace(out))
	}
	return nil
}

// Heal removes every drop rule.
func (n *Namespace) Heal() error {
	if out, err := n.Run("iptables", "-w", "-F", chain); err != nil {
		return fmt.Errorf("iptables -F %s: %v: %s", chain, err, bytes.TrimSpace(out))
	}
	return nil
}

// Rules lists the drop rules in place, as iptables -S prints them.
func (n *Namespace) Rules() ([]string, error) {
	out, err := n.Run("iptables", "-w", "-S", chain)
	if err != nil {
		return nil, fmt.Errorf("iptables -S %s: %v: %s", chain, err, bytes.TrimSpace(out))
	}
	var rules []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(l, "-A ") {
			rules = append(rules, l)
		}
	}
	return rules, nil
}

// Pids lists the processes running in the namespace.
func (n *Namespace) Pids() ([]int, error) { return nsPids(n.Name) }

func nsPids(name string) ([]int, error) {
	out, err := exec.Command("ip", "netns", "pids", name).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ip netns pids %s: %v: %s", name, err, bytes.TrimSpace(out))
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Close kills every process in the namespace (those it started and any
// they started) and deletes it, with its rules. It waits until the
// namespace is gone and is safe to call more than once.
func (n *Namespace) Close() error {
	n.closeOnce.Do(func() {
		n.mu.Lock()
		procs := n.procs
		unhook := n.unhook
		n.unhook = nil
		n.mu.Unlock()
		if unhook != nil {
			unhook()
		}
		for _, p := range procs {
			_ = p.Cmd.Process.Kill()
		}
		for _, p := range procs {
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
			}
		}
		err := destroy(n.Name)
		n.mu.Lock()
		n.closeErr = err
		if err == nil {
			n.closeErr = errClosed
		}
		n.mu.Unlock()
	})
	n.mu.Lock()
	defer n.mu.Unlock()
	if errors.Is(n.closeErr, errClosed) {
		return nil
	}
	return n.closeErr
}

var errClosed = errors.New("closed")

// destroy kills what runs in namespace name and deletes it.
func destroy(name string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		pids, err := nsPids(name)
		if err != nil || len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v in namespace %s did not die", pids, name)
		}
		time.Sleep(20 * time.Millisecond) // polling for the kernel to reap them
	}
	if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
		if ok, _ := Exists(name); ok {
			return fmt.Errorf("ip netns delete %s: %v: %s", name, err, bytes.TrimSpace(out))
		}
	}
	if ok, err := Exists(name); err != nil || ok {
		return fmt.Errorf("namespace %s still listed after delete (%v)", name, err)
	}
	return nil
}

// Exists reports whether a namespace of that name exists.
func Exists(name string) (bool, error) {
	names, err := list()
	if err != nil {
		return false, err
	}
	for _, n := range names {
		if n == name {
			return true, nil
		}
	}
	return false, nil
}

func list() ([]string, error) {
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ip netns list: %v: %s", err, bytes.TrimSpace(out))
	}
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names, nil
}

// reapStale deletes namespaces named cq-<pid>-… whose process is gone (a
// run killed -9 could not clean up after itself).
func reapStale() {
	names, err := list()
	if err != nil {
		return
	}
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, namePrefix)
		if !ok {
			continue
		}
		pidStr, _, ok := strings.Cut(rest, "-")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = destroy(name)
		}
	}
}
