package controller

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// The benchmarks here measure the controller alone, over the in-memory
// log (no raft, no disk), like BenchmarkControllerOnly.

// loadSinglePartitionTopics commits n topics of one partition each,
// replicas (i mod 3)+1 and the two after it over brokers 1..3, online
// with their preferred replica leading, straight into the log.
func (h *harness) loadSinglePartitionTopics(n int) []DeleteTopic {
	var batch []rl.Record
	flush := func() {
		data, err := rl.EncodeBatch(batch)
		if err != nil {
			h.t.Fatal(err)
		}
		if res := h.log.Apply(data, time.Minute).Response().(*fsm.ApplyResult); res.Err() != nil {
			h.t.Fatal(res.Err())
		}
		batch = batch[:0]
	}
	out := make([]DeleteTopic, n)
	for i := 0; i < n; i++ {
		var id rl.TopicID
		id[0], id[1], id[2], id[15] = byte(i>>16), byte(i>>8), byte(i), 0xde
		name := fmt.Sprintf("del-%06d", i)
		out[i] = DeleteTopic{Name: name}
		first := int32(i % 3)
		reps := []int32{first + 1, (first+1)%3 + 1, (first+2)%3 + 1}
		refs := []rl.ReplicaRef{{Broker: reps[0]}, {Broker: reps[1]}, {Broker: reps[2]}}
		batch = append(batch,
			&rl.Topic{TopicID: id, Name: name},
			&rl.Partition{TopicID: id, Replicas: reps},
			&rl.ReplicaStateChange{TopicID: id, State: rl.NewReplica, Replicas: refs},
			&rl.PartitionChange{TopicID: id, Set: rl.ChangeLeader | rl.ChangeISR, Leader: reps[0], ISR: reps},
			&rl.PartitionStateChange{TopicID: id, State: rl.OnlinePartition, Partitions: []int32{0}},
			&rl.ReplicaStateChange{TopicID: id, State: rl.OnlineReplica, Replicas: refs})
		if len(batch) >= 30_000 {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
	return out
}

// BenchmarkDeleteTopics10k deletes 10k topics (one partition, three
// replicas each) in one DeleteTopics call, with brokers that confirm each
// StopReplica delete=true as soon as it is sent, and measures until every
// topic is removed from the image: the whole state machine, BeginDeleteTopic
// to RemoveTopic, 30k replicas through five states each.
func BenchmarkDeleteTopics10k(b *testing.B) {
	const n = 10_000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h, resp := newResponderHarness(b)
		h.sender = nil
		resp.rec = nil // keep no copy of 10k requests
		for id := int32(1); id <= 3; id++ {
			h.register(id, "")
		}
		req := h.loadSinglePartitionTopics(n)
		runtime.GC()
		b.StartTimer()
		start := time.Now()
		res := h.c.DeleteTopics(context.Background(), req)
		answered := time.Since(start)
		for _, r := range res {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		waitUntil(b, time.Minute, func() bool {
			var left int
			h.fsm.View(func(im *fsm.Image) { left = im.NumTopics() })
			return left == 0
		})
		took := time.Since(start)
		b.StopTimer()
		if got := resp.answered.Load(); got != 3*n {
			b.Fatalf("%d deletions confirmed, want %d", got, 3*n)
		}
		b.ReportMetric(float64(n)/took.Seconds(), "topics/s")
		b.ReportMetric(float64(answered.Milliseconds()), "answered-ms")
		b.ReportMetric(float64(took.Milliseconds()), "removed-ms")
		b.Logf("10k topics: DeleteTopics answered in %v, all removed after %v (%.0f topics/s), %d log entries",
			answered, took, float64(n)/took.Seconds(), h.log.Index())
	}
}

// waitUntil polls cond until it holds.
func waitUntil(tb testing.TB, timeout time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("condition not met within %v", timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkPreferredRebalance1M: on a 1M-partition image over 10 brokers
// (RF 3), broker 1 is the preferred replica of 100k partitions. It is
// fenced (leadership moves away), comes back, and its partitions' leaders
// add it back to their ISRs (one AlterPartition per leader broker); then
// the rebalance runs, MaxPerRun elections per run and runs back to back
// as the automatic balancer does, until every move has committed. The
// fence, the return and the ISR expansion are reported apart.
func BenchmarkPreferredRebalance1M(b *testing.B) {
	parts := 1_000_000
	if testing.Short() {
		parts = 100_000
	}
	for _, perRun := range []int{DefaultMaxPerRun, 100_000} {
		b.Run(fmt.Sprintf("max-per-run=%d", perRun), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				h := newHarness(b)
				for id := int32(1); id <= 10; id++ {
					h.register(id, "")
				}
				h.loadImage(parts, 10)
				ctx := context.Background()

				start := time.Now()
				if _, _, err := h.c.submit(ctx, "fence", func(m *managers, w *work) (eventOutcome, error) {
					return answer(nil, m.cluster.fence(w, w.img().Broker(1)))
				}, nil); err != nil {
					b.Fatal(err)
				}
				fence := time.Since(start)
				start = time.Now()
				h.heartbeat(1)
				back := time.Since(start)
				start = time.Now()
				rejoinISRs(b, h, 1)
				rejoin := time.Since(start)
				want := balImbalance(h)
				runtime.GC()

				h.c.SetBalance(BalanceConfig{ImbalancePercent: 10, MaxPerRun: perRun})
				b.StartTimer()
				start = time.Now()
				res, err := h.c.RebalanceLeaders(ctx)
				if err != nil {
					b.Fatal(err)
				}
				moved, runs := res.Moved, res.Runs
				took := time.Since(start)
				b.StopTimer()
				h.c.SetBalance(BalanceConfig{})
				if left := balImbalance(h); left != 0 || moved != want {
					b.Fatalf("moved %d of %d, imbalance left %d", moved, want, left)
				}
				b.ReportMetric(float64(took.Milliseconds()), "rebalance-ms")
				b.ReportMetric(float64(moved), "moved")
				b.ReportMetric(float64(runs), "runs")
				b.Logf("partitions=%d: fence of broker 1 %v, its return (unfence) %v, ISR re-expansion %v; rebalance of %d leaderships in %d runs: %v",
					parts, fence, back, rejoin, moved, runs, took)
			}
		})
	}
}

// rejoinISRs has every leader add broker id back to the ISR of the
// partitions it hosts: one AlterPartition per leader broker.
func rejoinISRs(tb testing.TB, h *harness, id int32) {
	byLeader := map[int32][]AlterPartitionItem{}
	h.fsm.View(func(im *fsm.Image) {
		im.ForEachTopic(func(t *fsm.Topic) bool {
			im.EachPartition(t.ID, func(i int32, p *fsm.Partition) bool {
				if slices.Index(p.Replicas, id) >= 0 && !p.InISR(id) && p.Leader != rl.NoLeader {
					byLeader[p.Leader] = append(byLeader[p.Leader], AlterPartitionItem{TopicID: t.ID, Partition: i,
						LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: append(slices.Clone(p.ISR), id)})
				}
				return true
			})
			return true
		})
	})
	for leader, items := range byLeader {
		res, err := h.c.AlterPartition(context.Background(), AlterPartitionRequest{BrokerID: leader, BrokerEpoch: h.epochs[leader], Partitions: items})
		if err != nil {
			tb.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				tb.Fatal(r.Err)
			}
		}
	}
}
