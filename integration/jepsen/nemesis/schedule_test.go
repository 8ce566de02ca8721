package nemesis

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

func TestParseKinds(t *testing.T) {
	all, err := ParseKinds("")
	if err != nil || !reflect.DeepEqual(all, AllKinds) {
		t.Fatalf("ParseKinds(\"\") = %v, %v", all, err)
	}
	got, err := ParseKinds("kill, partition,kill,heartbeat-flap")
	want := []Kind{Kill, PartitionLeader, PartitionMajority, PartitionOneWay, PartitionBridge, HeartbeatFlap}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
	if got, err := ParseKinds("none"); err != nil || len(got) != 0 {
		t.Fatalf("none = %v, %v", got, err)
	}
	if _, err := ParseKinds("kill,fire"); err == nil || !strings.Contains(err.Error(), `unknown nemesis "fire"`) || !strings.Contains(err.Error(), "partition-bridge") {
		t.Fatalf("err = %v", err)
	}
	kept, dropped := WithoutNetwork(AllKinds)
	if !reflect.DeepEqual(kept, []Kind{Kill, Pause, BrokerCrash, HeartbeatFlap, PowerLoss, ReplaceVoter}) || len(dropped) != 4 {
		t.Fatalf("kept %v dropped %v", kept, dropped)
	}
	kept, dropped = WithoutDisk(AllKinds)
	if slices.Contains(kept, PowerLoss) || !reflect.DeepEqual(dropped, []Kind{PowerLoss}) {
		t.Fatalf("kept %v dropped %v", kept, dropped)
	}
	if got, err := ParseKinds("process"); err != nil || !reflect.DeepEqual(got, []Kind{Kill, Pause, PowerLoss, ReplaceVoter}) {
		t.Fatalf("process = %v, %v", got, err)
	}
}

func cfg(seed uint64) Config {
	return Config{Seed: seed, Duration: 10 * time.Minute, Kinds: AllKinds, Hosts: 3, Brokers: []int{101, 102, 103, 104}}
}

func TestGenerateIsSeeded(t *testing.T) {
	a, err := Generate(cfg(42))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate(cfg(42))
	c, _ := Generate(cfg(43))
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave two schedules")
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("seeds 42 and 43 gave the same schedule")
	}
	// Power losses are in it, their outcome and random source drawn
	// from the seed too.
	var pa, pc []Fault
	for _, f := range a {
		if f.Kind == PowerLoss {
			pa = append(pa, f)
		}
	}
	for _, f := range c {
		if f.Kind == PowerLoss {
			pc = append(pc, f)
		}
	}
	if len(pa) == 0 || len(pc) == 0 {
		t.Fatalf("no power-loss fault in seed 42's schedule (%d) or 43's (%d)", len(pa), len(pc))
	}
	if pa[0].CutSeed == 0 || pa[0].CutSeed == pc[0].CutSeed {
		t.Fatalf("power-loss cut seeds %d (seed 42) and %d (seed 43)", pa[0].CutSeed, pc[0].CutSeed)
	}
	modes := map[bool]bool{}
	for _, f := range append(pa, pc...) {
		modes[f.KeepPrefix] = true
		if !strings.Contains(f.String(), f.CutMode()+" seed ") {
			t.Fatalf("%v does not name its cut", f)
		}
	}
	if len(modes) != 2 {
		t.Errorf("power losses with one outcome only: %v", append(pa, pc...))
	}
	only := cfg(42)
	only.Kinds = []Kind{PowerLoss}
	x, _ := Generate(only)
	y, _ := Generate(only)
	if len(x) == 0 || !reflect.DeepEqual(x, y) {
		t.Fatalf("power-loss schedules %v and %v", x, y)
	}
}

func TestGenerateIsWellFormed(t *testing.T) {
	seen := map[Kind]int{}
	leaderTargets := 0
	for seed := range uint64(20) {
		c := cfg(seed)
		faults, err := Generate(c)
		if err != nil {
			t.Fatal(err)
		}
		if len(faults) < 20 {
			t.Fatalf("seed %d: only %d faults in 10 minutes", seed, len(faults))
		}
		prevEnd := time.Duration(0)
		for i, f := range faults {
			seen[f.Kind]++
			if f.ID != i+1 {
				t.Fatalf("seed %d: fault %d has id %d", seed, i, f.ID)
			}
			if f.At < prevEnd+2*time.Second || f.At > prevEnd+5*time.Second {
				t.Fatalf("seed %d: %v starts %s after the previous heal, want 2–5 s", seed, f, f.At-prevEnd)
			}
			if f.For < 3*time.Second || f.For > 8*time.Second {
				t.Fatalf("seed %d: %v lasts %s", seed, f, f.For)
			}
			prevEnd = f.At + f.For
			if prevEnd > c.Duration-5*time.Second {
				t.Fatalf("seed %d: %v ends inside the settle time", seed, f)
			}
			if f.Leader {
				leaderTargets++
				if len(f.Hosts) != 0 || len(f.Cuts) != 0 {
					t.Fatalf("seed %d: leader-targeted %v already has targets", seed, f)
				}
				f = f.Resolve(2, 3)
			}
			checkFault(t, f)
		}
	}
	for _, k := range AllKinds {
		if seen[k] == 0 {
			t.Errorf("no %s fault in 20 schedules", k)
		}
	}
	if leaderTargets == 0 {
		t.Error("no fault targeted the leader")
	}
}

// checkFault checks a resolved fault's targets.
func checkFault(t *testing.T, f Fault) {
	t.Helper()
	cut := func(a, b int) bool { return slices.Contains(f.Cuts, Cut{a, b}) }
	for _, c := range f.Cuts {
		if c.From == c.To || c.From < 1 || c.From > 3 || c.To < 1 || c.To > 3 {
			t.Fatalf("%v: bad cut %v", f, c)
		}
	}
	switch f.Kind {
	case Kill, Pause, PowerLoss, ReplaceVoter:
		if len(f.Hosts) != 1 || len(f.Cuts) != 0 {
			t.Fatalf("%v: want one host, no cuts", f)
		}
	case PartitionLeader, PartitionMajority:
		// One host cut off both ways from the two others.
		if len(f.Hosts) != 1 || len(f.Cuts) != 4 {
			t.Fatalf("%v: want one host isolated", f)
		}
		h := f.Hosts[0]
		for o := 1; o <= 3; o++ {
			if o != h && (!cut(h, o) || !cut(o, h)) {
				t.Fatalf("%v: %d and %d not cut both ways", f, h, o)
			}
		}
	case PartitionOneWay:
		for _, c := range f.Cuts {
			if cut(c.To, c.From) {
				t.Fatalf("%v: cut both ways", f)
			}
		}
		if len(f.Cuts) == 0 {
			t.Fatalf("%v: no cuts", f)
		}
	case PartitionBridge:
		if len(f.Hosts) != 1 || len(f.Cuts) != 2 {
			t.Fatalf("%v: want a bridge host and one pair cut both ways", f)
		}
		for _, c := range f.Cuts {
			if c.From == f.Hosts[0] || c.To == f.Hosts[0] {
				t.Fatalf("%v: the bridge is cut", f)
			}
		}
	case BrokerCrash, HeartbeatFlap:
		if len(f.Brokers) != 1 || f.Brokers[0] < 101 || f.Brokers[0] > 104 {
			t.Fatalf("%v: want one of the brokers", f)
		}
		if f.Kind == HeartbeatFlap && f.FlapPeriod != time.Second {
			t.Fatalf("%v: flap period %s", f, f.FlapPeriod)
		}
	}
}

func TestGenerateRefusesWhatCannotRun(t *testing.T) {
	c := cfg(1)
	c.Hosts = 2
	c.Kinds = []Kind{PartitionBridge}
	if _, err := Generate(c); err == nil {
		t.Error("a bridge over two hosts was scheduled")
	}
	c = cfg(1)
	c.Brokers = nil
	c.Kinds = []Kind{BrokerCrash}
	if _, err := Generate(c); err == nil {
		t.Error("a broker crash with no brokers was scheduled")
	}
	c = cfg(1)
	c.Kinds = nil
	if f, err := Generate(c); err != nil || len(f) != 0 {
		t.Errorf("no kinds: %v, %v", f, err)
	}
	c = cfg(1)
	c.Duration = 9 * time.Second // quiet 2 s + fault 3 s + settle 5 s do not fit
	if f, err := Generate(c); err != nil || len(f) != 0 {
		t.Errorf("too short: %v, %v", f, err)
	}
}

func TestResolveLeader(t *testing.T) {
	f := Fault{ID: 1, Kind: PartitionLeader, Leader: true}.Resolve(3, 3)
	want := []Cut{{3, 1}, {1, 3}, {3, 2}, {2, 3}}
	if !reflect.DeepEqual(f.Cuts, want) || !reflect.DeepEqual(f.Hosts, []int{3}) {
		t.Fatalf("partition-leader resolved to %v", f)
	}
	f = Fault{ID: 2, Kind: PartitionOneWay, Leader: true}.Resolve(1, 3)
	if !reflect.DeepEqual(f.Cuts, []Cut{{1, 2}, {1, 3}}) {
		t.Fatalf("one-way from the leader resolved to %v", f)
	}
	if got := f.String(); got != "fault 2 partition-one-way at +0s for 0s hosts [1] dropping 127.0.0.1→127.0.0.2 127.0.0.1→127.0.0.3" {
		t.Errorf("String() = %q", got)
	}
}

// fakeCluster records the calls the runner makes.
type fakeCluster struct {
	mu     sync.Mutex
	calls  []string
	leader int
	failOn string
}

func (c *fakeCluster) call(s string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, s)
	if s == c.failOn {
		return fmt.Errorf("%s failed", s)
	}
	return nil
}

func (c *fakeCluster) Calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

func (c *fakeCluster) Leader(context.Context) (int, error) { return c.leader, c.call("leader") }
func (c *fakeCluster) Kill(_ context.Context, h int) error { return c.call(fmt.Sprint("kill ", h)) }
func (c *fakeCluster) Restart(_ context.Context, h int) error {
	return c.call(fmt.Sprint("restart ", h))
}
func (c *fakeCluster) Pause(_ context.Context, h int) error  { return c.call(fmt.Sprint("pause ", h)) }
func (c *fakeCluster) Resume(_ context.Context, h int) error { return c.call(fmt.Sprint("resume ", h)) }
func (c *fakeCluster) Cut(_ context.Context, cuts []Cut) error {
	return c.call(fmt.Sprint("cut ", cuts))
}
func (c *fakeCluster) Heal(context.Context) error { return c.call("heal") }
func (c *fakeCluster) CrashBroker(_ context.Context, id int) error {
	return c.call(fmt.Sprint("crash ", id))
}
func (c *fakeCluster) RestartBroker(_ context.Context, id int) error {
	return c.call(fmt.Sprint("restart broker ", id))
}
func (c *fakeCluster) PowerLoss(_ context.Context, h int, keepPrefix bool, seed uint64) (string, error) {
	return "cut", c.call(fmt.Sprint("power loss ", h, " ", keepPrefix, " ", seed))
}
func (c *fakeCluster) PowerRestore(_ context.Context, h int) error {
	return c.call(fmt.Sprint("power restore ", h))
}
func (c *fakeCluster) WipeDisk(_ context.Context, h int) (string, error) {
	return "refused", c.call(fmt.Sprint("wipe ", h))
}
func (c *fakeCluster) ReplaceVoter(_ context.Context, h int) error {
	return c.call(fmt.Sprint("replace ", h))
}
func (c *fakeCluster) SetHeartbeats(_ context.Context, id int, on bool) error {
	return c.call(fmt.Sprint("heartbeats ", id, " ", on))
}

func TestRunnerAppliesAndHealsInOrder(t *testing.T) {
	ms := time.Millisecond
	schedule := []Fault{
		{ID: 1, Kind: Kill, Leader: true, At: 0, For: 5 * ms},
		{ID: 2, Kind: PartitionMajority, At: 10 * ms, For: 5 * ms, Hosts: []int{1}, Cuts: []Cut{{1, 2}, {2, 1}}},
		{ID: 3, Kind: BrokerCrash, At: 20 * ms, For: 5 * ms, Brokers: []int{102}},
		{ID: 4, Kind: Pause, At: 30 * ms, For: 5 * ms, Hosts: []int{3}},
		{ID: 5, Kind: HeartbeatFlap, At: 40 * ms, For: 200 * ms, Brokers: []int{101}, FlapPeriod: 30 * ms},
	}
	fc := &fakeCluster{leader: 2, failOn: "pause 3"}
	tl := NewTimeline(nil, nil)
	r := &Runner{Cluster: fc, Timeline: tl}
	if err := r.Run(context.Background(), schedule); err != nil {
		t.Fatal(err)
	}
	calls := fc.Calls()
	want := []string{"leader", "kill 2", "restart 2", "cut [127.0.0.1→127.0.0.2 127.0.0.2→127.0.0.1]", "heal",
		"crash 102", "restart broker 102", "pause 3", "resume 3", "heartbeats 101 false"}
	if len(calls) < len(want)+2 || !reflect.DeepEqual(calls[:len(want)], want) {
		t.Fatalf("calls = %q", calls)
	}
	// Flapping toggled at least once, and the heal turned heartbeats on.
	if calls[len(want)] != "heartbeats 101 true" || calls[len(calls)-1] != "heartbeats 101 true" {
		t.Fatalf("flap calls = %q", calls[len(want)-1:])
	}
	events := tl.Events()
	var starts, heals, notes int
	for i, e := range events {
		switch e.Phase {
		case history.Start:
			starts++
		case history.Heal:
			heals++
		case history.Note:
			notes++
		}
		if i > 0 && e.Time.Before(events[i-1].Time) {
			t.Fatalf("timeline goes back: %v then %v", events[i-1], e)
		}
	}
	if starts != 5 || heals != 5 || notes == 0 {
		t.Fatalf("timeline:\n%s", tl.Text())
	}
	// The leader was resolved; the failed pause is recorded as such.
	if events[0].Kind != "kill" || !reflect.DeepEqual(events[0].Nodes, []int{2}) || !strings.Contains(events[0].Detail, "127.0.0.2") {
		t.Errorf("first event = %v", events[0])
	}
	text := tl.Text()
	if !strings.Contains(text, "fault 4 pause start nodes=[3]: SIGSTOP the voter on 127.0.0.3 ERROR pause 3 failed") {
		t.Errorf("timeline:\n%s", text)
	}
}

func TestRunnerHealsWhenStopped(t *testing.T) {
	fc := &fakeCluster{}
	tl := NewTimeline(nil, nil)
	r := &Runner{Cluster: fc, Timeline: tl}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, []Fault{
			{ID: 1, Kind: PartitionBridge, Hosts: []int{2}, Cuts: []Cut{{1, 3}, {3, 1}}, For: time.Hour},
			{ID: 2, Kind: Kill, Hosts: []int{1}, At: 2 * time.Hour, For: time.Hour},
		})
	}()
	// Wait for the partition to be in place, then stop the run.
	deadline := time.Now().Add(10 * time.Second)
	for len(tl.Events()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first fault never started")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Fatalf("Run returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if got := fc.Calls(); !reflect.DeepEqual(got, []string{"cut [127.0.0.1→127.0.0.3 127.0.0.3→127.0.0.1]", "heal"}) {
		t.Fatalf("calls = %q", got)
	}
	if ev := tl.Events(); len(ev) != 2 || ev[1].Phase != history.Heal {
		t.Fatalf("timeline:\n%s", tl.Text())
	}
}

func TestRunnerPowerLoss(t *testing.T) {
	schedule := []Fault{{ID: 1, Kind: PowerLoss, Leader: true, For: 5 * time.Millisecond, KeepPrefix: true, CutSeed: 77}}
	fc := &fakeCluster{leader: 3}
	tl := NewTimeline(nil, nil)
	r := &Runner{Cluster: fc, Timeline: tl}
	if err := r.Run(context.Background(), schedule); err != nil {
		t.Fatal(err)
	}
	if calls, want := fc.Calls(), []string{"leader", "power loss 3 true 77", "power restore 3"}; !reflect.DeepEqual(calls, want) {
		t.Fatalf("calls = %q, want %q", calls, want)
	}
	text := tl.Text()
	if !strings.Contains(text, "cut the power of the disk of the voter on 127.0.0.3 (keep-prefix, seed 77), kill -9 it: cut") ||
		!strings.Contains(text, "mount the disk again on what survived, restart the voter") {
		t.Fatalf("timeline:\n%s", text)
	}
}

func TestRunnerReplaceVoter(t *testing.T) {
	schedule := []Fault{{ID: 1, Kind: ReplaceVoter, Leader: true, For: 5 * time.Millisecond}}
	fc := &fakeCluster{leader: 2}
	tl := NewTimeline(nil, nil)
	r := &Runner{Cluster: fc, Timeline: tl}
	if err := r.Run(context.Background(), schedule); err != nil {
		t.Fatal(err)
	}
	if calls, want := fc.Calls(), []string{"leader", "wipe 2", "replace 2"}; !reflect.DeepEqual(calls, want) {
		t.Fatalf("calls = %q, want %q", calls, want)
	}
	text := tl.Text()
	if !strings.Contains(text, "kill -9 the voter on 127.0.0.2, wipe its data directory, format it again and start it: refused") ||
		!strings.Contains(text, "remove the voter of the old directory, add the node under its new one") {
		t.Fatalf("timeline:\n%s", text)
	}
}
