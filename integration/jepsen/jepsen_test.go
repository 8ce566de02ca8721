package jepsen

import (
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/nemesis"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// The run's flags: go test ./integration/jepsen -run TestJepsen -args
// -duration=5m -seed=42 -nemesis=kill,partition (what `make jepsen` does).
var (
	flagDuration = flag.Duration("duration", time.Minute, "how long the workload and the nemesis run")
	flagSeed     = flag.Uint64("seed", 0, "the schedule's seed; 0 picks one and prints it")
	flagNemesis  = flag.String("nemesis", "all", "nemeses, comma-separated: kill, pause, partition-leader, partition-majority-minority, partition-one-way, partition-bridge, broker-crash, heartbeat-flap, or the groups all, none, process, partition, broker")
	flagReport   = flag.String("report", filepath.Join(os.TempDir(), "ctrlquorum-jepsen"), "folder under which each run writes its report folder")
)

// TestJepsen is the jepsen-style run. It draws the schedule from the flags
// (a bad flag fails here), then needs a ctrlnode binary with the `run`
// command to start its processes.
func TestJepsen(t *testing.T) {
	cfg, err := NewConfig(*flagDuration, *flagSeed, *flagNemesis, nemesis.Available())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d (replay with: make jepsen SEED=%d DURATION=%s NEMESIS=%s), reports under %s", cfg.Seed, cfg.Seed, cfg.Duration, cfg.Nemesis, *flagReport)
	for _, s := range cfg.Skipped {
		t.Log(s)
	}
	schedule, err := cfg.Schedule()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range schedule {
		t.Log(f)
	}
	if testing.Short() {
		t.Skip("skipping: builds and runs the ctrlnode binary")
	}
	bin := buildCtrlnode(t)
	if err := ProbeRun(bin); err != nil {
		t.Skipf("skipping: %v; the run starts every voter and broker agent with it", err)
	}
	t.Skip("skipping: `ctrlnode run` is available but the process runner (start voters and agents, workload, sampling) is not in this tree yet; the schedule above is what it will apply")
}

// buildCtrlnode builds the binary from the tree, with the race detector.
func buildCtrlnode(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ctrlnode")
	out, err := exec.Command("go", "build", "-race", "-o", bin, "github.com/ctrlquorum/ctrlquorum/cmd/ctrlnode").CombinedOutput()
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
		ControllerEpoch: 3, BrokerEpoch: 17, Topic: "t", TopicID: "000000000000000000000000000000ab", Partition: 1, Leader: 2,
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
