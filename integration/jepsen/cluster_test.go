package jepsen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/nemesis"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit/lossyfs"
	"github.com/ctrlquorum/ctrlquorum/server"
)

// The processes of a run. Host h (127.0.0.h, h = 1..3) runs voter 1000+h
// with broker h in the same process, and broker 3+h alone in a process of
// its own: the broker faults (crash, heartbeat flap) hit those, so a
// broker fault never takes a voter down with it. Every process binds its
// own host's address; port offsets from the run's base port:
const (
	offListener   = 0 // the voter's Kafka listener
	offRaft       = 1
	offHTTP       = 2 // the voter process's HTTP endpoint
	offBroker     = 3 // the voter process's broker agent
	offSoloBroker = 4 // the broker-only process's agent
	offSoloHTTP   = 5 // the broker-only process's HTTP endpoint
	numOffsets    = 6
)

// Timings the processes run with. The session timeout is short so that a
// heartbeat flap (off and on every second) expires sessions.
const (
	sessionTimeout    = "1s"
	heartbeatInterval = "200ms"
	// replicaLagTime is replica.lag.time.max.ms, far below Kafka's 30 s so
	// that a follower cut off from its leader for a fault's few seconds
	// leaves the ISR (and comes back when it catches up).
	replicaLagTime = "3s"
)

// Raft snapshot settings of the voters, far below raft's defaults (8192
// entries, 120 s, 10240 kept). The workload commits about 9 entries a
// second (a controller round is one entry, whatever it decided), so each
// voter snapshots every few seconds and keeps about a second of log
// behind a snapshot: a follower killed, paused or cut off for a few
// seconds comes back behind the leader's log and is sent a snapshot
// (InstallSnapshot). The snapshots checker counts both in the voters'
// logs.
const (
	snapshotThreshold = "32"
	snapshotInterval  = "1s"
	trailingLogs      = "8"
)

// clientIP is the address every client of the test binds: partitions cut
// 127.0.0.1–3 only, so they never cut the test off from the cluster.
const clientIP = "127.0.0.100"

// layout is where a run's processes listen.
type layout struct {
	hosts int
	base  int
}

func (l layout) addr(host, off int) string {
	return net.JoinHostPort(nemesis.HostIP(host), strconv.Itoa(l.base+off))
}

func voterID(host int) int32     { return int32(1000 + host) }
func soloBroker(host int) int32  { return int32(3 + host) }
func hostOfVoter(id int32) int   { return int(id) - 1000 }
func hostOfSolo(broker int) int  { return broker - 3 }
func voterName(host int) string  { return fmt.Sprintf("voter-%d", voterID(host)) }
func brokerName(host int) string { return fmt.Sprintf("broker-%d", soloBroker(host)) }

// listeners are the voters' Kafka listeners, by host.
func (l layout) listeners() []string {
	var out []string
	for h := 1; h <= l.hosts; h++ {
		out = append(out, l.addr(h, offListener))
	}
	return out
}

// brokerIDs are every broker agent's id: 1..hosts in the voter processes,
// then the broker-only ones.
func (l layout) brokerIDs() []int32 {
	var out []int32
	for h := 1; h <= l.hosts; h++ {
		out = append(out, int32(h))
	}
	for h := 1; h <= l.hosts; h++ {
		out = append(out, soloBroker(h))
	}
	return out
}

// freeBase finds a base port at which every address of the layout can be
// bound now (on the host's loopback; a fresh namespace has every port).
func freeBase(hosts int) (int, error) {
	for try := 0; try < 200; try++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		base := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if base+numOffsets > 65535 {
			continue
		}
		l := layout{hosts: hosts, base: base}
		var held []net.Listener
		ok := true
		for h := 1; h <= hosts && ok; h++ {
			for off := 0; off < numOffsets; off++ {
				x, err := net.Listen("tcp", l.addr(h, off))
				if err != nil {
					ok = false
					break
				}
				held = append(held, x)
			}
		}
		for _, x := range held {
			_ = x.Close()
		}
		if ok {
			return base, nil
		}
	}
	return 0, errors.New("no free port range on 127.0.0.1-3")
}

// nodeSpec is one process: how to start it and where it answers.
type nodeSpec struct {
	name string
	host int
	// voter is the voter id, 0 for a broker-only process.
	voter  int32
	broker int32
	http   string
	args   []string
}

// specs lays out the run's processes under dataDir.
func (l layout) specs(dataDir string) []nodeSpec {
	var voters, listeners []string
	for h := 1; h <= l.hosts; h++ {
		voters = append(voters, fmt.Sprintf("%d@%s", voterID(h), l.addr(h, offRaft)))
		listeners = append(listeners, fmt.Sprintf("%d@%s", voterID(h), l.addr(h, offListener)))
	}
	common := []string{"--session-timeout", sessionTimeout, "--broker-heartbeat-interval", heartbeatInterval,
		"--log-level", "info", "--shutdown-timeout", "5s",
		"--broker-min-insync-replicas", strconv.Itoa(dataMinISR), "--broker-replica-lag-time", replicaLagTime}
	var out []nodeSpec
	for h := 1; h <= l.hosts; h++ {
		out = append(out, nodeSpec{
			name: voterName(h), host: h, voter: voterID(h), broker: int32(h), http: l.addr(h, offHTTP),
			args: append([]string{"run",
				"--node-id", strconv.Itoa(int(voterID(h))), "--roles", "voter,broker", "--broker-id", strconv.Itoa(h),
				"--data-dir", voterDataDir(dataDir, h),
				"--raft-listener", l.addr(h, offRaft), "--listener", l.addr(h, offListener),
				"--voters", strings.Join(voters, ","), "--voter-listeners", strings.Join(listeners, ","),
				"--broker-listener", l.addr(h, offBroker), "--http-listener", l.addr(h, offHTTP),
				"--broker-data-dir", brokerDataDir(dataDir, int32(h)),
				"--raft-snapshot-threshold", snapshotThreshold, "--raft-snapshot-interval", snapshotInterval, "--raft-trailing-logs", trailingLogs,
			}, common...),
		})
	}
	for h := 1; h <= l.hosts; h++ {
		out = append(out, nodeSpec{
			name: brokerName(h), host: h, broker: soloBroker(h), http: l.addr(h, offSoloHTTP),
			args: append([]string{"run",
				"--roles", "broker", "--broker-id", strconv.Itoa(int(soloBroker(h))),
				"--broker-listener", l.addr(h, offSoloBroker), "--broker-controllers", strings.Join(l.listeners(), ","),
				"--http-listener", l.addr(h, offSoloHTTP),
				"--broker-data-dir", brokerDataDir(dataDir, soloBroker(h)),
			}, common...),
		})
	}
	return out
}

// proc is one process of the run across its restarts.
type proc struct {
	spec nodeSpec
	c    *procs

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current process exited
	expect  bool          // an exit now is one the run asked for
	paused  bool
	starts  int
	exitErr error
}

// procs runs the processes of a run: each writes its output to
// logs/<name>.log, appending across restarts.
type procs struct {
	bin    string
	logDir string
	// gid, when set, gives the group id host h's processes run with:
	// inside the namespace a NAT rule per group makes every connection
	// they open leave from their host's address (see netRules).
	gid func(host int) uint32
	// env is added to every process's environment.
	env []string

	mu         sync.Mutex
	all        []*proc
	byName     map[string]*proc
	unexpected []string
}

func newProcs(bin, logDir string, specs []nodeSpec, gid func(int) uint32, env []string) (*procs, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	c := &procs{bin: bin, logDir: logDir, gid: gid, env: env, byName: map[string]*proc{}}
	for _, s := range specs {
		p := &proc{spec: s, c: c}
		c.all = append(c.all, p)
		c.byName[s.name] = p
	}
	return c, nil
}

func (c *procs) get(name string) *proc { return c.byName[name] }

func (c *procs) logPath(name string) string { return filepath.Join(c.logDir, name+".log") }

// start starts the process (again). It is an error to start one that runs.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("%s is already running (pid %d)", p.spec.name, p.cmd.Process.Pid)
		}
	}
	f, err := os.OpenFile(p.c.logPath(p.spec.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.starts++
	fmt.Fprintf(f, "=== start %d at %s: %s %s\n", p.starts, time.Now().Format(time.RFC3339Nano), p.c.bin, strings.Join(p.spec.args, " "))
	cmd := exec.Command(p.c.bin, p.spec.args...)
	cmd.Stdout, cmd.Stderr = f, f
	// The binary has the race detector: a race ends the process at once
	// (an exit the run sees) instead of only changing the exit code of a
	// process the run kills anyway.
	cmd.Env = append(append(os.Environ(), p.c.env...), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" halt_on_error=1"))
	// The process dies with the test binary, even killed -9.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if p.c.gid != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(os.Getuid()), Gid: p.c.gid(p.spec.host), NoSetGroups: true}
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.spec.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.expect, p.paused, p.exitErr = cmd, done, false, false, nil
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.exitErr = err
		if !p.expect {
			p.c.mu.Lock()
			p.c.unexpected = append(p.c.unexpected, fmt.Sprintf("%s (pid %d, start %d) exited on its own at %s: %v; log: %s",
				p.spec.name, cmd.Process.Pid, p.starts, time.Now().Format("15:04:05.000"), err, p.c.logPath(p.spec.name)))
			p.c.mu.Unlock()
		}
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// running reports whether the process runs (paused or not).
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *proc) isPaused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// kill sends SIGKILL and waits for the process to be gone. Killing one
// that is not running is not an error: the runner may heal twice.
func (p *proc) kill(ctx context.Context) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	if cmd == nil {
		p.mu.Unlock()
		return nil
	}
	p.expect = true
	p.paused = false
	p.mu.Unlock()
	select {
	case <-done:
		return nil
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", p.spec.name, err)
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s (pid %d) still running after SIGKILL: %w", p.spec.name, cmd.Process.Pid, ctx.Err())
	}
}

// signal sends SIGSTOP or SIGCONT to the running process.
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("%s was never started", p.spec.name)
	}
	select {
	case <-p.done:
		return fmt.Errorf("%s is not running (%v)", p.spec.name, p.exitErr)
	default:
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%v to %s: %w", sig, p.spec.name, err)
	}
	p.paused = sig == syscall.SIGSTOP
	return nil
}

// stopAll kills every process; the run is over (or failed).
func (c *procs) stopAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, p := range c.all {
		_ = p.kill(ctx)
	}
}

// races lists the processes whose log reports a data race.
func (c *procs) races() []string {
	var out []string
	for _, p := range c.all {
		b, err := os.ReadFile(c.logPath(p.spec.name))
		if err == nil && strings.Contains(string(b), "WARNING: DATA RACE") {
			out = append(out, fmt.Sprintf("%s: data race reported in %s", p.spec.name, c.logPath(p.spec.name)))
		}
	}
	return out
}

// unexpectedExits lists the processes that exited without being killed.
func (c *procs) unexpectedExits() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.unexpected...)
}

// The network rules of a run inside its namespace.
//
// Only the raft transport binds its host's address when it dials; every
// other connection a node opens (the controller's control requests to the
// brokers, the agents' heartbeats and registrations, a voter's forwarded
// requests) lets the kernel choose the source address, and on the
// loopback the kernel chooses 127.0.0.1 whatever the destination. So each
// host's processes run under a group id of their own, and a NAT rule per
// group rewrites the source address of the connections they open to the
// host's address. Partitions then match the connection, not the packet:
// a cut from host a to host b drops a connection's packets that go from
// a to b, whichever side opened it. (The reply to a rewritten connection
// reaches INPUT with its destination already translated back to
// 127.0.0.1, so a plain -s/-d rule would cut the wrong host.)
const (
	natGIDBase = 47100
	cutChain   = "cq-jepsen-cut"
)

func natGID(host int) uint32 { return uint32(natGIDBase + host) }

// setupRules are the iptables commands (arguments of iptables) that
// prepare a namespace for hosts 1..hosts.
func setupRules(hosts int) [][]string {
	var out [][]string
	for h := 1; h <= hosts; h++ {
		out = append(out, []string{"-w", "-t", "nat", "-A", "POSTROUTING", "-o", "lo", "-m", "owner",
			"--gid-owner", strconv.Itoa(int(natGID(h))), "-j", "SNAT", "--to-source", nemesis.HostIP(h)})
	}
	out = append(out, []string{"-w", "-N", cutChain}, []string{"-w", "-I", "INPUT", "-j", cutChain})
	return out
}

// cutRules are the rules that drop what host c.From sends to host c.To on
// every connection between them. A connection's reply tuple holds both
// hosts' addresses as the other side sees them, after the NAT: for a
// packet sent the way the connection was opened, the reply tuple runs
// from its destination to its source; for a reply, from its source to its
// destination.
func cutRules(c nemesis.Cut) [][]string {
	from, to := nemesis.HostIP(c.From), nemesis.HostIP(c.To)
	return [][]string{
		{"-w", "-A", cutChain, "-m", "conntrack", "--ctdir", "ORIGINAL", "--ctreplsrc", to, "--ctrepldst", from, "-j", "DROP"},
		{"-w", "-A", cutChain, "-m", "conntrack", "--ctdir", "REPLY", "--ctreplsrc", from, "--ctrepldst", to, "-j", "DROP"},
	}
}

// invalidRule drops packets conntrack could not place (out of window
// after a long cut) while a partition is in place: with no connection to
// match they would otherwise pass every cut.
var invalidRule = []string{"-w", "-A", cutChain, "-m", "conntrack", "--ctstate", "INVALID", "-j", "DROP"}

// network applies partitions inside the run's namespace.
type network struct {
	ns *nemesis.Namespace
}

func (n *network) iptables(args []string) error {
	out, err := n.ns.Run("iptables", args...)
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (n *network) setup(hosts int) error {
	for _, r := range setupRules(hosts) {
		if err := n.iptables(r); err != nil {
			return err
		}
	}
	return nil
}

func (n *network) cut(cuts []nemesis.Cut) error {
	for _, c := range cuts {
		if c.From < 1 || c.To < 1 || c.From == c.To {
			return fmt.Errorf("bad cut %v", c)
		}
		for _, r := range cutRules(c) {
			if err := n.iptables(r); err != nil {
				return err
			}
		}
	}
	if len(cuts) > 0 {
		return n.iptables(invalidRule)
	}
	return nil
}

func (n *network) heal() error { return n.iptables([]string{"-w", "-F", cutChain}) }

// rules lists the cut rules in place.
func (n *network) rules() ([]string, error) {
	out, err := n.ns.Run("iptables", "-w", "-S", cutChain)
	if err != nil {
		return nil, fmt.Errorf("iptables -S %s: %v: %s", cutChain, err, strings.TrimSpace(string(out)))
	}
	var rules []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(l, "-A ") {
			rules = append(rules, l)
		}
	}
	return rules, nil
}

// disks are the voters' data directories on lossy file systems, for the
// power-loss nemesis: host h's voter keeps its data on a lossyfs mount at
// its data directory, backed by a directory of its own. The process that
// starts the voters mounts them (inside the namespace, the copy of the
// test binary there: ip netns exec gives each process its own copy of
// the mount namespace) and serves them.
type disks struct {
	mu     sync.Mutex
	byHost map[int]*lossyfs.FS
}

// formatVoters formats every voter's data directory under dataDir as a new
// cluster of the layout's voters, as `ctrlnode format --initial-voters`
// does on each host.
func (l layout) formatVoters(dataDir string) error {
	var voters []server.VoterPeer
	dirs := map[int32]string{}
	for h := 1; h <= l.hosts; h++ {
		voters = append(voters, server.VoterPeer{ID: voterID(h), Raft: l.addr(h, offRaft), Listener: l.addr(h, offListener)})
		dirs[voterID(h)] = voterDataDir(dataDir, h)
	}
	_, err := server.FormatVoters("", voters, dirs)
	return err
}

// voterDataDir is host h's voter's data directory under dataDir, as specs
// lays it out.
func voterDataDir(dataDir string, host int) string { return filepath.Join(dataDir, voterName(host)) }

// brokerDataDir is a broker's partition data under dataDir. It is beside
// the voters' data directories, not in them: on the host's disk, never on
// a voter's lossy file system, so a power loss cuts a voter's raft log
// but not the partition data of the broker in its process (which a kill
// -9 keeps: the page cache survives it).
func brokerDataDir(dataDir string, broker int32) string {
	return filepath.Join(dataDir, fmt.Sprintf("brokerdata-%d", broker))
}

// mountDisks mounts a lossy file system at each voter's data directory
// under dataDir, backed by a folder under backingDir.
func mountDisks(dataDir, backingDir string, hosts int) (*disks, error) {
	d := &disks{byHost: map[int]*lossyfs.FS{}}
	for h := 1; h <= hosts; h++ {
		dir, backing := voterDataDir(dataDir, h), filepath.Join(backingDir, voterName(h))
		if err := errors.Join(os.MkdirAll(dir, 0o755), os.MkdirAll(backing, 0o755)); err != nil {
			_ = d.abortAll()
			return nil, err
		}
		// The voters run under a group id of their own inside the
		// namespace (natGID), which FUSE refuses without allow_other.
		fs, err := lossyfs.Mount(backing, dir, lossyfs.Options{AllowOther: true})
		if err != nil {
			_ = d.abortAll()
			return nil, fmt.Errorf("mounting the disk of %s: %w", voterName(h), err)
		}
		d.mu.Lock()
		d.byHost[h] = fs
		d.mu.Unlock()
	}
	return d, nil
}

func (d *disks) get(host int) (*lossyfs.FS, error) {
	if d == nil {
		return nil, errors.New("the voters' data directories are not on lossy file systems in this run")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	fs := d.byHost[host]
	if fs == nil {
		return nil, fmt.Errorf("no disk for host %d", host)
	}
	return fs, nil
}

// remount unmounts host's disk if it is mounted (after a cut: the bytes
// that survived are in its backing folder already) and mounts it again.
// Its voter must not run. It retries the unmount while the kernel still
// holds files the killed voter had open.
func (d *disks) remount(ctx context.Context, host int) error {
	fs, err := d.get(host)
	if err != nil {
		return err
	}
	for fs.Mounted() {
		err := fs.Unmount()
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%v)", err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fs.Mount()
}

// ensureMounted mounts host's disk if it is not mounted (a heal that
// failed half way), so that its voter never starts on the bare mount
// point.
func (d *disks) ensureMounted(host int) error {
	if d == nil {
		return nil
	}
	fs, err := d.get(host)
	if err != nil || fs.Mounted() {
		return err
	}
	return fs.Mount()
}

// abortAll aborts and detaches every mount: the run's last cleanup, after
// its processes are dead, or on SIGINT and SIGTERM.
func (d *disks) abortAll() error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, fs := range d.byHost {
		errs = append(errs, fs.Abort())
	}
	return errors.Join(errs...)
}

// expectExit marks the process's coming exit as the run's doing (its disk
// is about to fail under it), not a failure.
func (p *proc) expectExit() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		p.expect = true
	}
}
