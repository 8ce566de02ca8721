package listener

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// BenchmarkCreateTopicsOverWire creates b.N one-partition topics
// (replication factor 3) from 64 concurrent kgo clients, each with its
// own connection, through the listeners of three voters, and reports
// topics committed per second, the p50/p99 latency of one CreateTopics
// call, and the CPU time the whole process (voters, listeners and
// clients) spent per topic, a figure less swayed than the rate by other
// work on the machine. The raw raft floor (sequential 100-byte entries
// through the active voter's raft.Apply) is measured on the same cluster
// just before, and reported with its ratio. The voters, the brokers and the clients
// all share this machine's cores.
//
//	go test -run '^$' -bench CreateTopicsOverWire -benchtime 4000x ./transport/listener
func BenchmarkCreateTopicsOverWire(b *testing.B) {
	const clients = 64
	rounds := &roundRecorder{}
	c := newTestCluster(b, clusterOpts{session: 30 * time.Second, steady: true, observer: rounds})
	c.startBrokers(3)
	active := c.active(20 * time.Second)

	raft := rawRaftLatencies(b, c, active, 200)

	adms := make([]*kadm.Client, clients)
	for i := range adms {
		cl := c.client(kgo.RetryTimeout(2 * time.Minute))
		// Connect and learn the controller before the clock starts.
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), cl); err != nil {
			b.Fatal(err)
		}
		adms[i] = kadm.NewClient(cl)
	}

	prefix := fmt.Sprintf("bench-%d-", time.Now().UnixNano())
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	rounds.reset()
	cpu0 := processCPU()
	start := time.Now()
	for _, adm := range adms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				name := fmt.Sprintf("%s%07d", prefix, i)
				t0 := time.Now()
				res, err := adm.CreateTopics(context.Background(), 1, 3, nil, name)
				lat[i] = time.Since(t0)
				if err == nil {
					err = res.Error()
				}
				if err != nil {
					failed.Store(fmt.Errorf("%s: %w", name, err))
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	loop := rounds.summary()
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	var created int
	c.view(c.active(10*time.Second), func(im *fsm.Image) { created = im.NumTopics() - 1 }) // less raft-floor
	if created < b.N {
		b.Fatalf("%d topics in the image after %d acknowledged creations", created, b.N)
	}

	// The same load straight into the controller, bypassing the wire and
	// the clients: what is left of the difference is their cost.
	direct, directElapsed := directCreates(b, c, clients, b.N)

	rate := float64(b.N) / elapsed.Seconds()
	p50, p99 := percentile(lat, 0.50), percentile(lat, 0.99)
	r50, r99 := percentile(raft, 0.50), percentile(raft, 0.99)
	d50, d99 := percentile(direct, 0.50), percentile(direct, 0.99)
	b.ReportMetric(rate, "topics/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/topic")
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric(ms(r50), "raft-p50-ms")
	b.ReportMetric(ms(r99), "raft-p99-ms")
	b.ReportMetric(float64(b.N)/directElapsed.Seconds(), "direct-topics/s")
	b.ReportMetric(ms(d50), "direct-p50-ms")
	b.ReportMetric(loop.eventsPerRound, "events/round")
	b.ReportMetric(ms(loop.compute), "round-compute-ms")
	b.ReportMetric(ms(loop.commit), "round-commit-ms")
	b.ReportMetric(ms(loop.queue), "queue-ms")
	b.Logf("%d topics from %d kgo clients in %v: %.0f topics/s, CreateTopics p50 %v p99 %v | raw raft apply (sequential, 100 B) p50 %v p99 %v, p50 ratio %.1fx | direct Controller.CreateTopics from %d goroutines: %.0f topics/s, p50 %v p99 %v",
		b.N, clients, elapsed.Round(time.Millisecond), rate, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond),
		r50.Round(10*time.Microsecond), r99.Round(10*time.Microsecond), float64(p50)/float64(r50),
		clients, float64(b.N)/directElapsed.Seconds(), d50.Round(10*time.Microsecond), d99.Round(10*time.Microsecond))
}

// roundRecorder sums what the active controller reports of its rounds.
type roundRecorder struct {
	mu                     sync.Mutex
	rounds, events         int
	compute, commit, queue time.Duration
}

func (r *roundRecorder) RoundCommitted(st controller.RoundStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rounds++
	r.events += st.Events
	r.compute += st.Compute
	r.commit += st.Commit
	for _, q := range st.QueueTimes {
		r.queue += q
	}
}

func (r *roundRecorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rounds, r.events = 0, 0
	r.compute, r.commit, r.queue = 0, 0, 0
}

// roundSummary holds means: events per round, a round's compute and commit
// time, and an event's wait in the queue.
type roundSummary struct {
	eventsPerRound         float64
	compute, commit, queue time.Duration
}

func (r *roundRecorder) summary() roundSummary {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rounds == 0 || r.events == 0 {
		return roundSummary{}
	}
	n := time.Duration(r.rounds)
	return roundSummary{eventsPerRound: float64(r.events) / float64(r.rounds),
		compute: r.compute / n, commit: r.commit / n, queue: r.queue / time.Duration(r.events)}
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// directCreates creates n one-partition topics from the given number of
// goroutines through the active controller's CreateTopics, one topic per
// call, and returns each call's latency and the total time.
func directCreates(b *testing.B, c *testCluster, workers, n int) ([]time.Duration, time.Duration) {
	ctl := c.node(c.active(10 * time.Second)).Controller
	prefix := fmt.Sprintf("direct-%d-", time.Now().UnixNano())
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				res := ctl.CreateTopics(context.Background(), []controller.CreateTopic{{Name: fmt.Sprintf("%s%07d", prefix, i), NumPartitions: 1, ReplicationFactor: 3}}, false)
				lat[i] = time.Since(t0)
				if res[0].Err != nil {
					failed.Store(res[0].Err)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return lat, elapsed
}

// rawRaftLatencies applies n sequential 100-byte entries through voter
// i's raft and returns each one's latency. Each entry is a config record
// of a topic created for the purpose, so the FSM decodes and applies it
// like any other entry.
func rawRaftLatencies(b *testing.B, c *testCluster, i, n int) []time.Duration {
	r := c.node(i).Voter.Raft()
	id := rl.TopicID{0xff, 0xf1}
	setup, err := rl.EncodeBatch([]rl.Record{&rl.Topic{TopicID: id, Name: "raft-floor"}})
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Apply(setup, 5*time.Second).Error(); err != nil {
		b.Fatal(err)
	}
	var data []byte
	for value := ""; len(data) < 100; value += "0" {
		if data, err = rl.EncodeBatch([]rl.Record{&rl.TopicConfig{TopicID: id, Key: "retention.ms", Value: "1" + value}}); err != nil {
			b.Fatal(err)
		}
	}
	out := make([]time.Duration, n)
	for k := range out {
		t0 := time.Now()
		f := r.Apply(data, 5*time.Second)
		if err := f.Error(); err != nil {
			b.Fatal(err)
		}
		if res, ok := f.Response().(*fsm.ApplyResult); ok && res.Err() != nil {
			b.Fatal(res.Err())
		}
		out[k] = time.Since(t0)
	}
	return out
}

func percentile(s []time.Duration, q float64) time.Duration {
	s = append([]time.Duration(nil), s...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
