package jepsen

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/nemesis"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit/lossyfs"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// The run's flags: go test ./integration/jepsen -run TestJepsen -args
// -duration=5m -seed=42 -nemesis=kill,partition (what `make jepsen` does).
// Plain `go test` (and `make test`) runs the short default.
var (
	flagDuration = flag.Duration("duration", 45*time.Second, "how long the workload and the nemesis run")
	flagSeed     = flag.Uint64("seed", 0, "the schedule's seed; 0 picks one and prints it")
	flagNemesis  = flag.String("nemesis", "all", "nemeses, comma-separated: kill, pause, partition-leader, partition-majority-minority, partition-one-way, partition-bridge, broker-crash, heartbeat-flap, power-loss, replace-voter, or the groups all, none, process, partition, broker")
	flagReport   = flag.String("report", filepath.Join(os.TempDir(), "ctrlquorum-jepsen"), "folder under which each run writes its report folder")
)

// A run as root happens inside a network namespace: the test binary
// starts itself again there (ip netns exec) with these set, and that copy
// runs the processes, the workload, the nemesis and the checkers.
const (
	envNetns = "CTRLQUORUM_JEPSEN_NETNS"
	envBin   = "CTRLQUORUM_JEPSEN_CTRLNODE"
)

// The workload: concurrent clients, each call bounded.
const (
	numWorkers = 4
	opTimeout  = 6 * time.Second
)

// TestJepsen is the jepsen-style run (README.md in this folder). It draws
// the schedule from the flags (a bad flag fails here) and builds ctrlnode.
// As root it creates a network namespace and runs in it, so the partition
// nemeses can cut 127.0.0.1–3 apart; otherwise it runs on the host's
// loopback without them, and says so (with CI=true it fails instead).
func TestJepsen(t *testing.T) {
	inside := os.Getenv(envNetns)
	netErr := nemesis.Available()
	cfg, err := NewConfig(*flagDuration, *flagSeed, *flagNemesis, netErr)
	if err != nil {
		t.Fatal(err)
	}
	cfg = withSoloBrokers(cfg)
	diskErr := lossyfs.Available()
	cfg = cfg.WithoutDisk(diskErr)
	if inside == "" {
		t.Logf("seed %d (replay with: make jepsen SEED=%d DURATION=%s NEMESIS=%s), reports under %s", cfg.Seed, cfg.Seed, cfg.Duration, cfg.Nemesis, *flagReport)
	}
	for _, s := range cfg.Skipped {
		t.Log(s)
	}
	schedule, err := cfg.Schedule()
	if err != nil {
		t.Fatal(err)
	}
	if inside == "" {
		for _, f := range schedule {
			t.Log(f)
		}
	}
	if testing.Short() {
		t.Skip("skipping: builds and runs the ctrlnode binary")
	}
	// Without root, ip and iptables the run leaves the partition nemeses
	// out and says so; with CI=true it fails instead.
	if len(cfg.Skipped) > 0 {
		testkit.NeedInCI(t, "network faults for the partition nemeses (root, ip and iptables)", netErr)
		testkit.NeedInCI(t, "lossy file systems for the power-loss nemesis (FUSE: /dev/fuse, fusermount3, root)", diskErr)
	}
	rs := runSettings{reportBase: *flagReport, workers: numWorkers, opTimeout: opTimeout, bin: os.Getenv(envBin)}
	if rs.bin == "" {
		rs.bin = buildCtrlnode(t)
	}
	testkit.Need(t, "`ctrlnode run` in the race-built binary (the run starts every voter and broker agent with it)", ProbeRun(rs.bin))

	switch {
	case inside != "":
		if err := inNamespace(inside); err != nil {
			t.Fatal(err)
		}
		rs.ns = &nemesis.Namespace{Name: inside}
		runJepsen(t, cfg, schedule, rs)
	case netErr != nil:
		runJepsen(t, cfg, schedule, rs)
	default:
		ns, err := nemesis.Create()
		if err != nil {
			// Root, but no namespace here (a container without the
			// capability): run on the loopback without partitions.
			cfg, _ = NewConfig(cfg.Duration, cfg.Seed, cfg.Nemesis, fmt.Errorf("cannot create a network namespace: %w", err))
			cfg = withSoloBrokers(cfg).WithoutDisk(diskErr)
			if len(cfg.Skipped) > 0 {
				testkit.NeedInCI(t, "a network namespace for the partition nemeses", err)
			}
			for _, s := range cfg.Skipped {
				t.Log(s)
			}
			if schedule, err = cfg.Schedule(); err != nil {
				t.Fatal(err)
			}
			runJepsen(t, cfg, schedule, rs)
			return
		}
		t.Cleanup(func() {
			if err := ns.Close(); err != nil {
				t.Errorf("deleting network namespace %s: %v", ns.Name, err)
			}
		})
		runInNamespace(t, ns, "TestJepsen", cfg, rs.bin)
	}
}

// withSoloBrokers aims the broker nemeses at the broker-only processes
// (brokers 4–6): brokers 1–3 share their process with a voter, and the
// process nemeses already kill and stop those.
func withSoloBrokers(c Config) Config {
	c.Brokers = nil
	for h := 1; h <= c.Voters; h++ {
		c.Brokers = append(c.Brokers, int(soloBroker(h)))
	}
	return c
}

// inNamespace checks that this process runs in the named namespace, so
// that no rule of the run can land on the host.
func inNamespace(name string) error {
	self, err := os.Stat("/proc/self/ns/net")
	if err != nil {
		return err
	}
	ns, err := os.Stat(filepath.Join("/run/netns", name))
	if err != nil {
		return fmt.Errorf("%s=%s: %w", envNetns, name, err)
	}
	if !os.SameFile(self, ns) {
		return fmt.Errorf("%s=%s but this process is not in that network namespace", envNetns, name)
	}
	return nil
}

// runInNamespace runs the test named test again inside ns, with the same
// settings (and extra flags), passing its output on line by line.
func runInNamespace(t *testing.T, ns *nemesis.Namespace, test string, cfg Config, bin string, extra ...string) {
	timeout := "0"
	if d, ok := t.Deadline(); ok {
		timeout = max(time.Until(d)-30*time.Second, time.Minute).String()
	}
	cmd := ns.Command(os.Args[0], append([]string{"-test.run=^" + test + "$", "-test.v", "-test.count=1", "-test.timeout=" + timeout,
		"-duration=" + cfg.Duration.String(), fmt.Sprintf("-seed=%d", cfg.Seed), "-nemesis=" + cfg.Nemesis, "-report=" + *flagReport}, extra...)...)
	cmd.Env = append(os.Environ(), envNetns+"="+ns.Name, envBin+"="+bin)
	cmd.Dir, _ = os.Getwd()
	// It dies with this process, even killed -9 (and its processes die
	// with it); the namespace left behind is deleted by the next run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	t.Logf("running inside network namespace %s", ns.Name)
	p, err := ns.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	var skip string
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		t.Log("| " + line)
		if strings.Contains(line, "--- SKIP: "+test) {
			skip = "the run inside the namespace skipped"
		}
	}
	err = p.Wait()
	switch {
	case err != nil:
		t.Fatalf("the run inside network namespace %s failed: %v (its output is above)", ns.Name, err)
	case skip != "":
		testkit.Missing(t, "what the run inside network namespace "+ns.Name+" needs", skip+" (its output is above)")
	}
}

// buildCtrlnode builds the binary from the tree, with the race detector
// and the build tags given.
func buildCtrlnode(t *testing.T, tags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ctrlnode")
	out, err := exec.Command("go", "build", "-race", "-tags="+strings.Join(tags, ","), "-o", bin, "github.com/ctrlquorum/ctrlquorum/cmd/ctrlnode").CombinedOutput()
	if err != nil {
		t.Fatalf("build ctrlnode: %v\n%s", err, out)
	}
	return bin
}

func TestNewConfig(t *testing.T) {
	c, err := NewConfig(90*time.Second, 7, "kill,partition", nil)
	if err != nil || c.Seed != 7 || len(c.Kinds) != 5 || len(c.Skipped) != 0 {
		t.Fatalf("config = %+v, %v", c, err)
	}
	s1, err := c.Schedule()
	if err != nil || len(s1) == 0 {
		t.Fatalf("schedule = %v, %v", s1, err)
	}
	s2, _ := c.Schedule()
	if len(s1) != len(s2) || s1[0].String() != s2[0].String() {
		t.Fatal("the same seed gave two schedules")
	}

	// Without root the partitions are left out, each with the reason.
	c, err = NewConfig(time.Minute, 0, "all", errors.New("network faults need root"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Seed == 0 {
		t.Error("seed 0 was not replaced by a random one")
	}
	if len(c.Skipped) != 4 || !strings.Contains(c.Skipped[0], "partition-leader skipped: network faults need root") {
		t.Errorf("skipped = %q", c.Skipped)
	}
	for _, k := range c.Kinds {
		if k.Network() {
			t.Errorf("network nemesis %s kept without root", k)
		}
	}

	if _, err := NewConfig(time.Minute, 1, "kill,earthquake", nil); err == nil || !strings.Contains(err.Error(), `-nemesis: unknown nemesis "earthquake"`) {
		t.Errorf("bad nemesis: %v", err)
	}
	if _, err := NewConfig(0, 1, "all", nil); err == nil {
		t.Error("a zero duration was accepted")
	}
}

func TestProbeRun(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	with := script("with-run", `[ "$1 $2" = "help run" ] && echo "usage: ctrlnode run [--config FILE] [flags]" && exit 0; exit 2`)
	without := script("without-run", `echo "usage: ctrlnode <command> [flags]"; exit 0`)
	broken := script("broken", `echo "ctrlnode: unknown command \"help\"" >&2; exit 2`)
	if err := ProbeRun(with); err != nil {
		t.Errorf("binary with run: %v", err)
	}
	for _, bin := range []string{without, broken} {
		if err := ProbeRun(bin); err == nil || !strings.Contains(err.Error(), "`ctrlnode run` is not available") {
			t.Errorf("%s: %v", filepath.Base(bin), err)
		}
	}
	if err := ProbeRun(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "cannot run") {
		t.Errorf("missing binary: %v", err)
	}
}

func TestObservationFromControlRecord(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var id rl.TopicID
	id[15] = 0xab
	rec := broker.ControlRecord{Seq: 4, At: at, Key: broker.KeyLeaderAndIsr, ControllerID: 1002, ControllerEpoch: 3, BrokerEpoch: 17,
		Partition: 1, Topic: "t", TopicID: id, Leader: 2, LeaderEpoch: 5, PartitionEpoch: 6, ISR: []int32{2, 3},
		Accepted: false, ErrorCode: kerr.StaleControllerEpoch.Code}
	o := Observation(2, "inc-1", rec)
	want := history.Observation{Broker: 2, Incarnation: "inc-1", Seq: 4, Time: at, Request: history.LeaderAndIsr, ControllerID: 1002,
		ControllerEpoch: 3, BrokerEpoch: 17, Topic: "t", TopicID: "AAAAAAAAAAAAAAAAAAAAqw", Partition: 1, Leader: 2,
		LeaderEpoch: 5, PartitionEpoch: 6, ISR: []int32{2, 3}, ErrorCode: kerr.StaleControllerEpoch.Code, Reason: "STALE_CONTROLLER_EPOCH"}
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("got  %+v\nwant %+v", o, want)
	}
	rec.ISR[0] = 9
	if o.ISR[0] != 2 {
		t.Error("the observation shares the record's ISR slice")
	}
	rec = broker.ControlRecord{Key: broker.KeyStopReplica, Partition: -1, Accepted: true}
	if o := Observation(1, "", rec); o.Request != history.StopReplica || o.TopicID != "" || o.Reason != "" || !o.Accepted {
		t.Errorf("StopReplica record: %+v", o)
	}
	if o := Observation(1, "", broker.ControlRecord{Key: 99}); o.Request != "api-key-99" {
		t.Errorf("unknown key: %q", o.Request)
	}
}
