package controller

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

func balImbalance(h *harness) int {
	var n int
	h.fsm.View(func(im *fsm.Image) { n = PreferredReplicaImbalance(im) })
	return n
}

// balSetup: brokers 1..3, topics p0..p(n-1) with replicas 1,2,3 (broker 1
// preferred), broker 1 fenced and back, then re-added to every ISR, so
// broker 1 is live, in sync, and leads none of the partitions it is
// preferred for.
func balSetup(t *testing.T, n int) *harness {
	h := newHarness(t)
	for b := int32(1); b <= 3; b++ {
		h.register(b, "")
	}
	for i := 0; i < n; i++ {
		admTopic(h, fmt.Sprintf("p%d", i), []int32{1, 2, 3})
	}
	admFence(h, 1)
	h.heartbeat(1)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("p%d", i)
		p := h.partition(name, 0)
		res, err := h.c.AlterPartition(h.ctx, AlterPartitionRequest{BrokerID: p.Leader, BrokerEpoch: h.epochs[p.Leader], Partitions: []AlterPartitionItem{{
			Topic: name, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: append(slices.Clone(p.ISR), 1)}}})
		if err != nil || res[0].Err != nil {
			t.Fatal(err, res)
		}
	}
	if got := balImbalance(h); got != n {
		t.Fatalf("setup: imbalance %d, want %d", got, n)
	}
	return h
}

func TestPreferredReplicaImbalanceCounts(t *testing.T) {
	h := balSetup(t, 3)
	// A topic being deleted does not count; a leaderless partition does.
	if r := h.c.DeleteTopics(h.ctx, []DeleteTopic{{Name: "p0"}}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	if got := balImbalance(h); got != 2 {
		t.Fatalf("imbalance %d with one topic being deleted, want 2", got)
	}
	admTopic(h, "solo", []int32{3})
	admFence(h, 3)
	if p := h.partition("solo", 0); p.Leader != rl.NoLeader {
		t.Fatalf("setup: %+v", p)
	}
	if got := balImbalance(h); got != 3 {
		t.Fatalf("imbalance %d with a leaderless partition, want 3", got)
	}
}

func TestRebalanceBoundedPerRun(t *testing.T) {
	h := balSetup(t, 5)
	h.c.SetBalance(BalanceConfig{ImbalancePercent: 10, MaxPerRun: 2})
	t.Cleanup(func() { h.c.SetBalance(BalanceConfig{}) })
	before := h.log.Index()
	res, err := h.c.RebalanceLeaders(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (BalanceResult{Brokers: []int32{1}, Moved: 5, Runs: 3}); !slices.Equal(res.Brokers, want.Brokers) || res.Moved != want.Moved || res.Runs != want.Runs || res.Failed != 0 {
		t.Fatalf("got %+v, want %+v", res, want)
	}
	// Each run is an event of its own: one log entry each here.
	if n := h.log.Index() - before; n != 3 {
		t.Fatalf("%d log entries for 3 runs", n)
	}
	if got := balImbalance(h); got != 0 {
		t.Fatalf("imbalance %d after the rebalance", got)
	}
	if res, err := h.c.RebalanceLeaders(h.ctx); err != nil || res.Moved != 0 || len(res.Brokers) != 0 {
		t.Fatalf("balanced already: %+v %v", res, err)
	}
}

func TestRebalanceThreshold(t *testing.T) {
	h := balSetup(t, 4)
	t.Cleanup(func() { h.c.SetBalance(BalanceConfig{}) })
	// Broker 1 leads none of its 4 partitions: 100%, not above 100%.
	h.c.SetBalance(BalanceConfig{ImbalancePercent: 100})
	if res, err := h.c.RebalanceLeaders(h.ctx); err != nil || res.Moved != 0 {
		t.Fatalf("at 100%%: %+v %v", res, err)
	}
	// Three of them move back on demand: 1 of 4 left, 25%.
	var parts []TopicPartition
	for i := 0; i < 3; i++ {
		parts = append(parts, TopicPartition{Topic: fmt.Sprintf("p%d", i)})
	}
	if _, err := h.c.ElectLeaders(h.ctx, PreferredLeaderElection, parts); err != nil {
		t.Fatal(err)
	}
	h.c.SetBalance(BalanceConfig{ImbalancePercent: 25})
	if res, err := h.c.RebalanceLeaders(h.ctx); err != nil || res.Moved != 0 {
		t.Fatalf("at 25%%: %+v %v", res, err)
	}
	h.c.SetBalance(BalanceConfig{ImbalancePercent: 24})
	if res, err := h.c.RebalanceLeaders(h.ctx); err != nil || res.Moved != 1 {
		t.Fatalf("at 24%%: %+v %v", res, err)
	}
	if got := balImbalance(h); got != 0 {
		t.Fatalf("imbalance %d, want 0", got)
	}
}

// TestAutomaticRebalance lets the balancer goroutine find the imbalance
// on its own.
func TestAutomaticRebalance(t *testing.T) {
	h := balSetup(t, 6)
	h.c.SetBalance(BalanceConfig{Interval: 5 * time.Millisecond, ImbalancePercent: 10, MaxPerRun: 4})
	t.Cleanup(func() { h.c.SetBalance(BalanceConfig{}) })
	waitFor(t, 10*time.Second, "leadership back on the preferred replicas", func() bool { return balImbalance(h) == 0 })
	for i := 0; i < 6; i++ {
		if p := h.partition(fmt.Sprintf("p%d", i), 0); p.Leader != 1 {
			t.Fatalf("p%d led by %d", i, p.Leader)
		}
	}
	h.c.SetBalance(BalanceConfig{})
	if b, _ := h.c.balance(); b.cfg != (BalanceConfig{Interval: 300 * time.Second, ImbalancePercent: 10}) || !b.enabled {
		t.Fatalf("after the override ends, the balancer runs with %+v, not the configs' defaults", b)
	}
}
