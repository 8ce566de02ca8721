package nemesis

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
)

const helperEnv = "CTRLQUORUM_NEMESIS_HELPER"

// TestHelperProcess is not a test: the tests below start the test binary
// again with helperEnv set, inside a namespace or not, to have a process
// to partition, interrupt or kill.
func TestHelperProcess(t *testing.T) {
	switch os.Getenv(helperEnv) {
	case "net":
		netHelper()
	case "interrupt", "abandon":
		nsHelper()
	default:
		t.Skip("helper process only; started by the namespace tests")
	}
	os.Exit(0)
}

// netHelper serves TCP echo and counts UDP datagrams by source on
// 127.0.0.1–3, and dials or sends on command (one per stdin line).
func netHelper() {
	var tcp, udp []string
	var mu sync.Mutex
	counts := map[string]map[string]int{} // udp listener → source ip → count
	for i := 1; i <= 3; i++ {
		ln, err := net.Listen("tcp", HostIP(i)+":0")
		if err != nil {
			fmt.Println("helper: fail", err)
			return
		}
		tcp = append(tcp, ln.Addr().String())
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
			}
		}()
		pc, err := net.ListenPacket("udp", HostIP(i)+":0")
		if err != nil {
			fmt.Println("helper: fail", err)
			return
		}
		addr := pc.LocalAddr().String()
		udp = append(udp, addr)
		counts[addr] = map[string]int{}
		go func() {
			buf := make([]byte, 64)
			for {
				_, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				mu.Lock()
				counts[addr][from.(*net.UDPAddr).IP.String()]++
				mu.Unlock()
			}
		}()
	}
	fmt.Println("helper: tcp", strings.Join(tcp, " "), "udp", strings.Join(udp, " "))
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 4 && f[0] == "dial":
			timeout, _ := time.ParseDuration(f[3])
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(f[1])}, Timeout: timeout}
			c, err := d.Dial("tcp", f[2])
			if err == nil {
				_ = c.SetDeadline(time.Now().Add(timeout))
				_, err = c.Write([]byte("ping\n"))
				if err == nil {
					var line string
					line, err = bufio.NewReader(c).ReadString('\n')
					if err == nil && line != "ping\n" {
						err = fmt.Errorf("echo %q", line)
					}
				}
				c.Close()
			}
			if err != nil {
				fmt.Println("helper: fail", err)
			} else {
				fmt.Println("helper: ok")
			}
		case len(f) == 3 && f[0] == "send":
			c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(f[1])}, net.UDPAddrFromAddrPort(mustAddrPort(f[2])))
			if err == nil {
				_, err = c.Write([]byte("x"))
				c.Close()
			}
			if err != nil {
				fmt.Println("helper: fail", err)
			} else {
				fmt.Println("helper: sent")
			}
		case len(f) == 2 && f[0] == "count":
			mu.Lock()
			var parts []string
			for ip, n := range counts[f[1]] {
				parts = append(parts, fmt.Sprintf("%s=%d", ip, n))
			}
			mu.Unlock()
			sort.Strings(parts)
			fmt.Println("helper: count", strings.Join(parts, " "))
		default:
			fmt.Println("helper: fail unknown command", sc.Text())
		}
	}
}

func mustAddrPort(s string) netip.AddrPort {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		panic(err)
	}
	return ap
}

// nsHelper creates a namespace with a process in it, says so, and waits
// to be interrupted or killed.
func nsHelper() {
	ns, err := Create()
	if err != nil {
		fmt.Println("helper: fail", err)
		return
	}
	p, err := ns.Start(ns.Command("sleep", "600"))
	if err != nil {
		fmt.Println("helper: fail", err)
		return
	}
	fmt.Printf("helper: ns %s pid %d\n", ns.Name, p.Cmd.Process.Pid)
	select {}
}

// helper is a running helper process.
type helper struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan error
}

func startHelper(t *testing.T, cmd *exec.Cmd, mode string) *helper {
	t.Helper()
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 16), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l, ok := strings.CutPrefix(sc.Text(), "helper: "); ok {
				h.lines <- l
			}
		}
		close(h.lines)
		h.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	return h
}

func (h *helper) next() string {
	h.t.Helper()
	select {
	case l, ok := <-h.lines:
		if !ok {
			h.t.Fatal("the helper process exited")
		}
		return l
	case <-time.After(30 * time.Second):
		h.t.Fatal("no answer from the helper process in 30 s")
	}
	return ""
}

func (h *helper) ask(format string, args ...any) string {
	h.t.Helper()
	if _, err := fmt.Fprintf(h.stdin, format+"\n", args...); err != nil {
		h.t.Fatal(err)
	}
	return h.next()
}

// dialOK asks for dials until one succeeds (a rule just removed may take a
// moment to stop applying) or 20 s pass.
func (h *helper) dialOK(src, dst string) {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ans := h.ask("dial %s %s 5s", src, dst)
		if ans == "ok" {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("dial %s → %s: %s", src, dst, ans)
		}
	}
}

func (h *helper) dialFails(src, dst string) {
	h.t.Helper()
	if ans := h.ask("dial %s %s 700ms", src, dst); !strings.HasPrefix(ans, "fail") {
		h.t.Fatalf("dial %s → %s went through a cut: %s", src, dst, ans)
	}
}

// waitDatagram polls the UDP listener at dst until a datagram from src
// arrived, and returns the counts by source.
func (h *helper) waitDatagram(dst, src string) string {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ans := h.ask("count %s", dst)
		if strings.Contains(ans, src+"=") {
			return ans
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("no datagram from %s at %s: %s", src, dst, ans)
		}
		time.Sleep(5 * time.Millisecond) // polling
	}
}

func hostRules(t *testing.T) string {
	out, err := exec.Command("iptables", "-w", "-S").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables -S: %v: %s", err, out)
	}
	return string(out)
}

// TestNamespacePartition runs a helper process in a fresh namespace,
// partitions 127.0.0.1 from 127.0.0.2 and back, and checks that dials
// across the cut fail, dials elsewhere do not, a one-way cut drops one
// direction only, and Close leaves nothing behind.
func TestNamespacePartition(t *testing.T) {
	before := ""
	if Available() == nil {
		before = hostRules(t)
	}
	ns := New(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := startHelper(t, ns.Command(exe, "-test.run=^TestHelperProcess$"), "net")
	f := strings.Fields(h.next())
	if len(f) != 8 || f[0] != "tcp" || f[4] != "udp" {
		t.Fatalf("helper said %q", f)
	}
	tcp, udp := f[1:4], f[5:8]
	ip1, ip2, ip3 := HostIP(1), HostIP(2), HostIP(3)

	h.dialOK(ip1, tcp[1])
	h.dialOK(ip2, tcp[0])

	if err := ns.Cut(Cut{1, 2}, Cut{2, 1}); err != nil {
		t.Fatal(err)
	}
	rules, err := ns.Rules()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-A cq-nemesis -s 127.0.0.1/32 -d 127.0.0.2/32 -j DROP", "-A cq-nemesis -s 127.0.0.2/32 -d 127.0.0.1/32 -j DROP"}
	if strings.Join(rules, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rules = %q, want %q", rules, want)
	}
	h.dialFails(ip1, tcp[1])
	h.dialFails(ip2, tcp[0])
	h.dialOK(ip3, tcp[1]) // the cut is between .1 and .2 only
	h.dialOK(ip1, tcp[2])

	if err := ns.Heal(); err != nil {
		t.Fatal(err)
	}
	if rules, err := ns.Rules(); err != nil || len(rules) != 0 {
		t.Fatalf("rules after heal = %q, %v", rules, err)
	}
	h.dialOK(ip1, tcp[1])
	h.dialOK(ip2, tcp[0])

	// One way: .1 → .2 dropped, .2 → .1 delivered. A datagram from .3 sent
	// after the one from .1 shows the latter had its chance to arrive.
	if err := ns.Cut(Cut{1, 2}); err != nil {
		t.Fatal(err)
	}
	if ans := h.ask("send %s %s", ip1, udp[1]); ans != "sent" {
		t.Fatal(ans)
	}
	if ans := h.ask("send %s %s", ip3, udp[1]); ans != "sent" {
		t.Fatal(ans)
	}
	if counts := h.waitDatagram(udp[1], ip3); strings.Contains(counts, ip1+"=") {
		t.Fatalf("a datagram crossed the one-way cut 127.0.0.1→127.0.0.2: %s", counts)
	}
	if ans := h.ask("send %s %s", ip2, udp[0]); ans != "sent" {
		t.Fatal(ans)
	}
	h.waitDatagram(udp[0], ip2)
	if err := ns.Heal(); err != nil {
		t.Fatal(err)
	}

	// Close kills the helper and deletes the namespace with its rules.
	pids, err := ns.Pids()
	if err != nil || len(pids) == 0 {
		t.Fatalf("pids in the namespace = %v, %v", pids, err)
	}
	if err := ns.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, err := Exists(ns.Name); err != nil || ok {
		t.Fatalf("namespace %s still there after Close (%v)", ns.Name, err)
	}
	select {
	case <-h.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the helper process outlived its namespace")
	}
	if after := hostRules(t); after != before {
		t.Fatalf("the host's iptables rules changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if err := ns.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestNamespaceCleanupOnInterrupt interrupts a process that created a
// namespace with a process in it: both must be gone.
func TestNamespaceCleanupOnInterrupt(t *testing.T) {
	testkit.Need(t, "network faults (root, ip and iptables)", Available())
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := startHelper(t, exec.Command(exe, "-test.run=^TestHelperProcess$"), "interrupt")
	name, pid := parseNS(t, h.next())
	if ok, _ := Exists(name); !ok {
		t.Fatalf("namespace %s not there", name)
	}
	if err := h.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-h.done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGINT {
			t.Fatalf("the helper ended with %v, want death by SIGINT", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the helper did not stop on SIGINT")
	}
	if ok, err := Exists(name); err != nil || ok {
		t.Fatalf("namespace %s left behind after SIGINT (%v)", name, err)
	}
	waitGone(t, pid)
}

// TestStaleNamespaceIsReaped kills -9 a process that created a namespace:
// the next namespace created deletes the orphan.
func TestStaleNamespaceIsReaped(t *testing.T) {
	testkit.Need(t, "network faults (root, ip and iptables)", Available())
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := startHelper(t, exec.Command(exe, "-test.run=^TestHelperProcess$"), "abandon")
	name, pid := parseNS(t, h.next())
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-h.done
	if ok, _ := Exists(name); !ok {
		t.Fatalf("namespace %s should outlive a process killed -9", name)
	}
	ns := New(t)
	if ok, err := Exists(name); err != nil || ok {
		t.Fatalf("orphan namespace %s not reaped when %s was created (%v)", name, ns.Name, err)
	}
	waitGone(t, pid)
}

func parseNS(t *testing.T, line string) (string, int) {
	t.Helper()
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "ns" || f[2] != "pid" {
		t.Fatalf("helper said %q", line)
	}
	pid, err := strconv.Atoi(f[3])
	if err != nil {
		t.Fatal(err)
	}
	return f[1], pid
}

// waitGone polls until process pid no longer runs (gone, or a zombie
// waiting for whoever inherited it to reap it).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for running(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d from the namespace still runs", pid)
		}
		time.Sleep(10 * time.Millisecond) // polling
	}
}

func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state …: comm may hold spaces, so look after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestOnlyLoopbackAddresses(t *testing.T) {
	ns := &Namespace{Name: "cq-never-created"}
	for _, c := range [][2]string{{"10.0.0.1", "127.0.0.1"}, {"127.0.0.1", "192.168.1.2"}, {"::1", "127.0.0.1"}, {"127.0.0.1", "nonsense"}} {
		if err := ns.Drop(c[0], c[1]); err == nil || !strings.Contains(err.Error(), "not a 127.0.0.0/8 address") {
			t.Errorf("Drop(%s, %s) = %v", c[0], c[1], err)
		}
	}
	for _, c := range []Cut{{0, 1}, {1, 1}, {1, 255}} {
		if err := ns.Cut(c); err == nil {
			t.Errorf("Cut(%v) accepted", c)
		}
	}
}
