package controller

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// The benchmarks run three voters in this process over loopback TCP with
// bolt files, so the voters and the benchmark share the machine's cores.
// Each reports the raw raft floor (one small entry, sequential) measured
// on the same cluster for comparison.

func benchCluster(b *testing.B, brokers int32, maxRecords int) (*nodeCluster, map[int32]*simBroker) {
	c := newNodeClusterOpts(b, 3, 10*time.Second, func(cc *Config) {
		if maxRecords > 0 {
			cc.MaxRecordsPerEntry = maxRecords
		}
	}, true)
	c.active(20 * time.Second)
	sims := map[int32]*simBroker{}
	for id := int32(1); id <= brokers; id++ {
		sims[id] = c.startBroker(id, 1)
	}
	waitFor(b, 20*time.Second, "brokers unfenced", func() bool {
		i, _ := c.active(time.Second)
		for id := int32(1); id <= brokers; id++ {
			if c.brokerFenced(i, id) {
				return false
			}
		}
		return true
	})
	return c, sims
}

// rawRaftFloor measures sequential raft.Apply of a 100-byte entry through
// the active voter: the cost of one commit with nothing of ours in it. The
// entry is a valid empty batch padded so the FSM accepts it.
func rawRaftFloor(b *testing.B, c *nodeCluster, n int) time.Duration {
	_, node := c.active(time.Second)
	// One topic to hang the entries on, so the FSM accepts each of them.
	id := rl.TopicID{0xff, 0xf1}
	setup, _ := rl.EncodeBatch([]rl.Record{&rl.Topic{TopicID: id, Name: "raft-floor"}})
	if err := node.Voter.Raft().Apply(setup, 5*time.Second).Error(); err != nil {
		b.Fatal(err)
	}
	data, _ := rl.EncodeBatch([]rl.Record{&rl.TopicConfig{TopicID: id, Key: "retention.ms", Value: "86400000123456789012345678901234567890123456789012345678901234567890"}})
	var samples []time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := node.Voter.Raft().Apply(data, 5*time.Second).Error(); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
	}
	return median(samples)
}

func median(s []time.Duration) time.Duration {
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// loadImage commits a steady-state image (see steadyStateImage) straight
// into raft in large entries, without going through the event loop (whose
// own speed is measured elsewhere).
func loadImage(b *testing.B, c *nodeCluster, partitions int, brokers int32) {
	_, node := c.active(time.Second)
	start := time.Now()
	steadyStateImage(partitions, brokers, func(batch []rl.Record) {
		data, err := rl.EncodeBatch(batch)
		if err != nil {
			b.Fatal(err)
		}
		f := node.Voter.Raft().Apply(data, time.Minute)
		if err := f.Error(); err != nil {
			b.Fatal(err)
		}
		if res, ok := f.Response().(*fsm.ApplyResult); ok && res.Err() != nil {
			b.Fatal(res.Err())
		}
	})
	c.converged(5 * time.Minute)
	b.Logf("image of %d partitions committed on three voters in %v", partitions, time.Since(start).Round(time.Millisecond))
}

func (c *nodeCluster) ledBy(broker int32) int {
	_, n := c.active(time.Second)
	led := 0
	n.FSM.View(func(im *fsm.Image) {
		im.ForEachTopic(func(t *fsm.Topic) bool {
			for i := int32(0); i < im.PartitionCount(t.ID); i++ {
				if p := im.Partition(t.ID, i); p != nil && p.Leader == broker {
					led++
				}
			}
			return true
		})
	})
	return led
}

// BenchmarkBrokerEvents1M: on a 1M-partition image over 10 brokers (RF 3),
// the controlled shutdown of a broker that leads 100k partitions, then the
// fence of a broker that leads 100k partitions (a tenth of the image, as
// on a balanced cluster), then the fence of the broker that took over all
// of the first one's leadership (the image puts the replicas of a
// partition on consecutive brokers, so it now leads 200k): each from the
// call until every record committed and every control request was handed
// to the sender. Each event starts once every voter has applied the one
// before: on this machine the three voters share two cores, and a
// follower still applying the last event would slow the leader down. The
// test senders forget what they were handed before each event, as a real
// sender does once a request is delivered.
func BenchmarkBrokerEvents1M(b *testing.B) {
	parts := 1_000_000
	if testing.Short() {
		parts = 100_000
	}
	for i := 0; i < b.N; i++ {
		c, sims := benchCluster(b, 10, 0)
		floor := rawRaftFloor(b, c, 50)
		loadImage(b, c, parts, 10)
		c.settled()
		c.forgetSent()

		// CQ_EVENT_PROFILE names a file for a CPU profile of the
		// events alone (the image load left out).
		stopProfile := startEventProfile(b)
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)

		// Controlled shutdown of broker 1.
		sims[1].stop()
		led := c.ledBy(1)
		_, n := c.active(time.Second)
		start := time.Now()
		resp, err := n.Controller.Heartbeat(context.Background(), Heartbeat{BrokerID: 1, BrokerEpoch: sims[1].epoch, MetadataOffset: n.FSM.AppliedIndex(), WantShutDown: true})
		shutdown := time.Since(start)
		if err != nil || !resp.ShouldShutDown {
			b.Fatalf("controlled shutdown: %+v %v", resp, err)
		}
		if c.ledBy(1) != 0 {
			b.Fatal("broker 1 still leads partitions")
		}

		fence := func(id int32) (int, time.Duration) {
			c.settled()
			c.forgetSent()
			sims[id].stop()
			led := c.ledBy(id)
			start := time.Now()
			_, _, err := n.Controller.submit(context.Background(), "bench-fence", func(m *managers, w *work) (eventOutcome, error) {
				return answer(nil, m.cluster.fence(w, w.img().Broker(id)))
			}, nil)
			took := time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			if c.ledBy(id) != 0 {
				b.Fatalf("fenced broker %d still leads partitions", id)
			}
			return led, took
		}
		led6, fence6 := fence(6)
		led2, fence2 := fence(2)
		stopProfile()
		runtime.ReadMemStats(&ms1)
		b.ReportMetric(float64(shutdown.Milliseconds()), "shutdown-ms")
		b.ReportMetric(float64(fence6.Milliseconds()), "fence-ms")
		b.ReportMetric(float64(fence2.Milliseconds()), "fence-200k-ms")
		b.ReportMetric(float64(floor.Microseconds())/1000, "raft-floor-ms")
		// Allocation and GC cycles of the three events (all three voters
		// and the benchmark's own checks between them).
		b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/(1<<20), "events-alloc-MB")
		b.ReportMetric(float64(ms1.NumGC-ms0.NumGC), "events-gcs")
		b.Logf("partitions=%d: controlled shutdown of a leader of %d partitions %v; fence of a leader of %d partitions %v; fence of a leader of %d partitions %v; raw raft floor %v",
			parts, led, shutdown, led6, fence6, led2, fence2, floor)
		c.shutdown()
	}
}

// CQ_EVENT_MEMPROFILE names a prefix for two heap profiles taken
// around the events (compare them with pprof -base).
func startEventProfile(b *testing.B) func() {
	if prefix := os.Getenv("CQ_EVENT_MEMPROFILE"); prefix != "" {
		writeHeap := func(name string) {
			f, err := os.Create(prefix + name)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			runtime.GC() // the profile is as of the last collection
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				b.Fatal(err)
			}
		}
		writeHeap(".before")
		return func() { writeHeap(".after") }
	}
	path := os.Getenv("CQ_EVENT_PROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// BenchmarkCreateTopics10k creates 10k one-partition topics (RF 3) through
// the event loop, all submitted at once, and reports topics per second.
func BenchmarkCreateTopics10k(b *testing.B) {
	for i := 0; i < b.N; i++ {
		c, _ := benchCluster(b, 3, 0)
		floor := rawRaftFloor(b, c, 50)
		_, n := c.active(time.Second)
		topics := make([]CreateTopic, 10_000)
		for j := range topics {
			topics[j] = CreateTopic{Name: fmt.Sprintf("create-%05d", j), NumPartitions: 1, ReplicationFactor: 3}
		}
		start := time.Now()
		res := n.Controller.CreateTopics(context.Background(), topics, false)
		took := time.Since(start)
		for _, r := range res {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		rate := float64(len(topics)) / took.Seconds()
		b.ReportMetric(rate, "topics/s")
		b.ReportMetric(float64(floor.Microseconds())/1000, "raft-floor-ms")
		b.Logf("10k topics in %v: %.0f topics/s (raw raft floor %v per sequential entry)", took, rate, floor)
		c.shutdown()
	}
}

// failoverRounds is how many failovers BenchmarkFailover times per image
// size: one takes 4–8 ms on this machine with a spread of half that, so
// the medians need a good number of them to be compared.
const failoverRounds = 21

// BenchmarkFailover measures, at 1k and 1M partitions, the time from raft
// reporting the new leader (Activate) to the controller being ready
// (ControllerEpoch committed, UpdateMetadata to every live broker queued).
// Raft's own election time (old leader stopped to new leader known) is
// reported apart: it is dominated by the randomized election timeout.
func BenchmarkFailover(b *testing.B) {
	sizes := []int{1_000, 1_000_000}
	if testing.Short() {
		sizes = []int{1_000, 100_000}
	}
	for _, parts := range sizes {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c, _ := benchCluster(b, 10, 0)
				loadImage(b, c, parts, 10)
				var ready, election []time.Duration
				for round := 0; round < failoverRounds; round++ {
					idx, _ := c.active(10 * time.Second)
					// Start from a quiet heap: the three voters share one Go
					// runtime here, so a collection of all three images that
					// happens to overlap the activation would be charged to
					// it; in a deployment each voter has its own process.
					runtime.GC()
					stopped := time.Now()
					c.stop(idx)
					_, n := c.active(30 * time.Second)
					st := n.Controller.LastActivation()
					ready = append(ready, st.Ready.Sub(st.Started))
					election = append(election, st.Started.Sub(stopped))
					c.start(idx, nil)
					c.converged(5 * time.Minute)
				}
				b.ReportMetric(float64(median(ready).Microseconds())/1000, "failover-ms")
				b.ReportMetric(float64(median(election).Milliseconds()), "raft-election-ms")
				b.Logf("partitions=%d: activation (new leader known -> ready) median %v of %v; raft election median %v", parts, median(ready), ready, median(election))
				c.shutdown()
			}
		})
	}
}
