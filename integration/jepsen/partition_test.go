package jepsen

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/nemesis"
)

const partHelperEnv = "CTRLQUORUM_JEPSEN_PART_HELPER"

// TestPartitionHelper is not a test: TestPartitionRules starts the test
// binary again with partHelperEnv set to a host number, under that host's
// group id, to have a process of that host that listens and dials.
func TestPartitionHelper(t *testing.T) {
	h, err := strconv.Atoi(os.Getenv(partHelperEnv))
	if err != nil {
		t.Skip("helper process only; started by TestPartitionRules")
	}
	partHelper(h)
	os.Exit(0)
}

// partHelper listens on its host's address (TCP: answers with the
// address it saw the connection come from; UDP: counts datagrams by
// source and answers "echo" ones) and runs commands from stdin:
//
//	tcp ADDR         → ok SOURCE-SEEN | fail ERR
//	udp ADDR         → sent          (one datagram)
//	udpecho ADDR     → ok | noreply  (a datagram, and wait for the answer)
//	seen             → SRC=N …       (UDP datagrams received, by source)
//
// Every dial leaves unbound, as the nodes' dials do: the source address
// is the kernel's choice, rewritten by the run's NAT rule.
func partHelper(host int) {
	ip := nemesis.HostIP(host)
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		fmt.Println("fail", err)
		return
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 2)
				if _, err := io.ReadFull(c, buf); err == nil {
					_, _ = c.Write([]byte(c.RemoteAddr().(*net.TCPAddr).IP.String() + "\n"))
				}
			}()
		}
	}()
	pc, err := net.ListenPacket("udp", ip+":"+strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	if err != nil {
		fmt.Println("fail", err)
		return
	}
	var mu sync.Mutex
	seen := map[string]int{}
	go func() {
		buf := make([]byte, 16)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			src := from.(*net.UDPAddr).IP.String()
			mu.Lock()
			seen[src]++
			mu.Unlock()
			if string(buf[:n]) == "echo" {
				_, _ = pc.WriteTo([]byte("re"), from)
			}
		}
	}()
	fmt.Println("listen", ln.Addr())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		switch cmd {
		case "tcp":
			c, err := net.DialTimeout("tcp", arg, time.Second)
			if err != nil {
				fmt.Println("fail", err)
				continue
			}
			_ = c.SetDeadline(time.Now().Add(time.Second))
			_, _ = c.Write([]byte("hi"))
			line, err := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if err != nil {
				fmt.Println("fail", err)
				continue
			}
			fmt.Println("ok", strings.TrimSpace(line))
		case "udp", "udpecho":
			c, err := net.Dial("udp", arg)
			if err != nil {
				fmt.Println("fail", err)
				continue
			}
			payload := "x"
			if cmd == "udpecho" {
				payload = "echo"
			}
			_, _ = c.Write([]byte(payload))
			if cmd == "udp" {
				fmt.Println("sent")
			} else {
				_ = c.SetReadDeadline(time.Now().Add(time.Second))
				buf := make([]byte, 4)
				if _, err := c.Read(buf); err != nil {
					fmt.Println("noreply")
				} else {
					fmt.Println("ok")
				}
			}
			c.Close()
		case "seen":
			mu.Lock()
			var parts []string
			for src, n := range seen {
				parts = append(parts, fmt.Sprintf("%s=%d", src, n))
			}
			mu.Unlock()
			fmt.Println(strings.Join(parts, " "))
		}
	}
}

type partProc struct {
	addr string
	in   io.Writer
	out  *bufio.Scanner
}

func (p *partProc) ask(t *testing.T, format string, args ...any) string {
	t.Helper()
	fmt.Fprintf(p.in, format+"\n", args...)
	if !p.out.Scan() {
		t.Fatalf("helper at %s: no answer to %q", p.addr, fmt.Sprintf(format, args...))
	}
	return p.out.Text()
}

// TestPartitionRules checks the run's network rules in a namespace: the
// NAT makes every connection of a host's processes leave from the host's
// address, and a cut from a to b drops exactly what a sends to b, on
// connections either side opened, and nothing else.
func TestPartitionRules(t *testing.T) {
	ns := nemesis.New(t)
	n := &network{ns: ns}
	if err := n.setup(3); err != nil {
		t.Fatal(err)
	}
	helpers := map[int]*partProc{}
	for h := 1; h <= 3; h++ {
		cmd := ns.Command(os.Args[0], "-test.run=^TestPartitionHelper$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", partHelperEnv, h))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(os.Getuid()), Gid: natGID(h), NoSetGroups: true}}
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ns.Start(cmd); err != nil {
			t.Fatal(err)
		}
		p := &partProc{in: in, out: bufio.NewScanner(out)}
		if !p.out.Scan() || !strings.HasPrefix(p.out.Text(), "listen ") {
			t.Fatalf("helper %d: %q", h, p.out.Text())
		}
		p.addr = strings.TrimPrefix(p.out.Text(), "listen ")
		helpers[h] = p
	}
	tcp := func(a, b int) string { return helpers[a].ask(t, "tcp %s", helpers[b].addr) }
	pairs := [][2]int{{1, 2}, {2, 1}, {1, 3}, {3, 1}, {2, 3}, {3, 2}}

	// Whole: every host reaches every other, seen at its own address.
	for _, p := range pairs {
		if got, want := tcp(p[0], p[1]), "ok "+nemesis.HostIP(p[0]); got != want {
			t.Errorf("tcp %d→%d: %q, want %q", p[0], p[1], got, want)
		}
	}

	// Cut 3→2 only.
	if err := n.cut([]nemesis.Cut{{From: 3, To: 2}}); err != nil {
		t.Fatal(err)
	}
	rules, err := n.rules()
	if err != nil || len(rules) != 3 {
		t.Fatalf("rules %q, %v", rules, err)
	}
	for _, p := range pairs {
		got := tcp(p[0], p[1])
		cut := p == [2]int{3, 2} || p == [2]int{2, 3} // TCP needs both ways
		if cut != strings.HasPrefix(got, "fail") || (!cut && got != "ok "+nemesis.HostIP(p[0])) {
			t.Errorf("tcp %d→%d with 3→2 cut: %q", p[0], p[1], got)
		}
	}
	// Datagrams show the direction: 2→3 arrives, 3→2 does not; and 3's
	// answer on the flow 2 opened is dropped too.
	for i := 0; i < 3; i++ {
		helpers[2].ask(t, "udp %s", helpers[3].addr)
		helpers[3].ask(t, "udp %s", helpers[2].addr)
	}
	// The helper counts datagrams as its reader gets them, which may be
	// after the senders answered: wait for the count.
	seen := ""
	for deadline := time.Now().Add(10 * time.Second); ; {
		if seen = helpers[3].ask(t, "seen"); strings.Contains(seen, nemesis.HostIP(2)+"=3") || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(seen, nemesis.HostIP(2)+"=3") {
		t.Errorf("host 3 saw %q, want 3 datagrams from host 2", seen)
	}
	if got := helpers[2].ask(t, "seen"); strings.Contains(got, nemesis.HostIP(3)+"=") {
		t.Errorf("host 2 saw %q: datagrams from host 3 passed the cut", got)
	}
	wantEcho := map[[2]int]string{{2, 3}: "noreply", {3, 2}: "noreply", {1, 2}: "ok", {2, 1}: "ok", {1, 3}: "ok", {3, 1}: "ok"}
	gotEcho := map[[2]int]string{}
	for p := range wantEcho {
		gotEcho[p] = helpers[p[0]].ask(t, "udpecho %s", helpers[p[1]].addr)
	}
	if !reflect.DeepEqual(gotEcho, wantEcho) {
		t.Errorf("udp echo with 3→2 cut: %v, want %v", gotEcho, wantEcho)
	}

	// Healed, all is well again.
	if err := n.heal(); err != nil {
		t.Fatal(err)
	}
	for _, p := range pairs {
		if got := tcp(p[0], p[1]); got != "ok "+nemesis.HostIP(p[0]) {
			t.Errorf("tcp %d→%d after the heal: %q", p[0], p[1], got)
		}
	}
}

// TestCutRules: a cut matches connections by their reply tuple, in both
// directions of the flow.
func TestCutRules(t *testing.T) {
	got := cutRules(nemesis.Cut{From: 1, To: 3})
	want := [][]string{
		{"-w", "-A", cutChain, "-m", "conntrack", "--ctdir", "ORIGINAL", "--ctreplsrc", "127.0.0.3", "--ctrepldst", "127.0.0.1", "-j", "DROP"},
		{"-w", "-A", cutChain, "-m", "conntrack", "--ctdir", "REPLY", "--ctreplsrc", "127.0.0.1", "--ctrepldst", "127.0.0.3", "-j", "DROP"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cutRules = %q", got)
	}
	setup := setupRules(2)
	if len(setup) != 4 || !strings.Contains(strings.Join(setup[1], " "), "--gid-owner 47102 -j SNAT --to-source 127.0.0.2") {
		t.Errorf("setupRules = %q", setup)
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Log("iptables is not installed here; TestPartitionRules skips")
	}
}
