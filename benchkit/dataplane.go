package benchkit

import (
	"context"

	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ctrlquorum/ctrlquorum/server"
)

// DataConfig is the data path's failure scenarios: one controller voter
// and three brokers with real data in this process, a partition producer
// each writing with acks=all (no idempotence) for the whole run.
type DataConfig struct {
	// Partitions of the topic written, replication factor 3. Default 12.
	Partitions int
	// SessionTimeout is the brokers' session timeout. Default 9 s,
	// Kafka's broker.session.timeout.ms.
	SessionTimeout time.Duration
	// Dir holds the nodes' data; default a temporary folder, removed after.
	Dir      string
	Progress func(string)
	Logger   hclog.Logger
}

// DataReport is what the data path's scenarios measured.
type DataReport struct {
	SessionTimeout time.Duration `json:"session_timeout"`
	// KilledLed is how many partitions the killed broker led, and
	// Recovery, for each, the time from the kill to the first acks=all
	// produce to it that succeeded, sorted.
	KilledLed int             `json:"killed_led"`
	Recovery  []time.Duration `json:"recovery"`
	// ShutdownLed is how many partitions the broker stopped by a
	// controlled shutdown led; ShutdownProduces the produces that
	// completed while it stopped (and for a second after), and
	// ShutdownFailed those that failed.
	ShutdownLed      int `json:"shutdown_led"`
	ShutdownProduces int `json:"shutdown_produces"`
	ShutdownFailed   int `json:"shutdown_failed"`
}

// dataCluster is the scenario's nodes.
type dataCluster struct {
	voter   *server.Server
	brokers map[int32]*server.Server
}

func (c *dataCluster) close() {
	for _, b := range c.brokers {
		_ = b.Close()
	}
	_ = c.voter.Close()
}

// leaders maps each partition of topic to the broker whose agent leads it.
func (c *dataCluster) leaders(topic string) map[int32]int32 {
	out := map[int32]int32{}
	for id, b := range c.brokers {
		for _, p := range b.Agent.Partitions() {
			if p.Topic == topic && p.Leader == id {
				out[p.Partition] = id
			}
		}
	}
	return out
}

// RunData runs the data path's scenarios: a broker leading partitions is
// killed (closed at once: its connections reset and its port refuses new
// ones, as after kill -9 of its process) and the time until each
// partition it led takes an acks=all produce again is measured; then
// another broker goes through a controlled shutdown and the produces
// that fail meanwhile are counted.
func RunData(ctx context.Context, cfg DataConfig) (*DataReport, error) {
	if cfg.Partitions <= 0 {
		cfg.Partitions = 12
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 9 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	progress := func(format string, args ...any) {
		if cfg.Progress != nil {
			cfg.Progress(fmt.Sprintf(format, args...))
		}
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "ctrlquorum-bench-data-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	addrs, err := freeAddrs(5)
	if err != nil {
		return nil, err
	}
	peers := []server.VoterPeer{{ID: 1001, Raft: addrs[0], Listener: addrs[1]}}
	c := &dataCluster{brokers: map[int32]*server.Server{}}
	if _, err := server.FormatVoters("", peers, map[int32]string{1001: filepath.Join(dir, "voter")}); err != nil {
		return nil, err
	}
	c.voter, err = server.Start(server.Config{NodeID: 1001, Voter: true, RaftAddr: addrs[0], Listener: addrs[1], Voters: peers,
		DataDir: filepath.Join(dir, "voter"), SessionTimeout: cfg.SessionTimeout, Logger: cfg.Logger.Named("voter")})
	if err != nil {
		return nil, err
	}
	defer c.close()
	var seeds []string
	for i := int32(1); i <= 3; i++ {
		b, err := server.Start(server.Config{NodeID: i, Broker: true, BrokerID: i, BrokerListener: addrs[1+i], Voters: peers,
			HeartbeatInterval: min(cfg.SessionTimeout/4, 2*time.Second), Logger: cfg.Logger.Named(fmt.Sprintf("broker-%d", i)),
			BrokerData: server.BrokerData{Dir: filepath.Join(dir, fmt.Sprintf("broker-%d", i))}})
		if err != nil {
			return nil, err
		}
		c.brokers[i] = b
		seeds = append(seeds, addrs[1+i])
	}
	progress("data: three brokers with data, topic of %d partitions, a producer per partition (acks=all)", cfg.Partitions)
	admin, err := kgo.NewClient(kgo.SeedBrokers(peers[0].Listener))
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	const topic = "bench-data"
	for {
		_, err := kadm.NewClient(admin).CreateTopic(ctx, int32(cfg.Partitions), 3, nil, topic)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond) // the brokers are still registering
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(50*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		kgo.ProducerLinger(0))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var mu sync.Mutex
	done := map[int32][]time.Time{} // completion times of successful produces
	failed := map[int32][]time.Time{}
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for p := int32(0); p < int32(cfg.Partitions); p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pctx.Err() == nil {
				err := cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("x")}).FirstErr()
				now := time.Now()
				mu.Lock()
				if err == nil {
					done[p] = append(done[p], now)
				} else if pctx.Err() == nil {
					failed[p] = append(failed[p], now)
				}
				mu.Unlock()
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()
	successAfter := func(p int32, t time.Time) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range done[p] {
			if d.After(t) {
				return d, true
			}
		}
		return time.Time{}, false
	}
	waitAll := func(ps []int32, since time.Time, limit time.Duration) error {
		deadline := time.Now().Add(limit)
		for {
			ok := true
			for _, p := range ps {
				if _, got := successAfter(p, since); !got {
					ok = false
				}
			}
			if ok {
				return nil
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("partitions %v took no acks=all produce within %v", ps, limit)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	all := make([]int32, cfg.Partitions)
	for i := range all {
		all[i] = int32(i)
	}
	if err := waitAll(all, time.Now(), time.Minute); err != nil {
		return nil, err
	}

	rep := &DataReport{SessionTimeout: cfg.SessionTimeout}
	led := func(b int32) []int32 {
		var out []int32
		for p, l := range c.leaders(topic) {
			if l == b {
				out = append(out, p)
			}
		}
		slices.Sort(out)
		return out
	}
	victim := int32(1)
	for b := int32(2); b <= 3; b++ {
		if len(led(b)) > len(led(victim)) {
			victim = b
		}
	}
	killedLed := led(victim)
	rep.KilledLed = len(killedLed)
	progress("data: killing broker %d, leader of %d partitions", victim, len(killedLed))
	killed := time.Now()
	_ = c.brokers[victim].Close()
	delete(c.brokers, victim)
	if err := waitAll(killedLed, killed, 3*cfg.SessionTimeout+30*time.Second); err != nil {
		return nil, err
	}
	for _, p := range killedLed {
		t, _ := successAfter(p, killed)
		rep.Recovery = append(rep.Recovery, t.Sub(killed))
	}
	sort.Slice(rep.Recovery, func(i, j int) bool { return rep.Recovery[i] < rep.Recovery[j] })

	var target int32 = -1
	for b := range c.brokers {
		if target < 0 || len(led(b)) > len(led(target)) {
			target = b
		}
	}
	rep.ShutdownLed = len(led(target))
	progress("data: controlled shutdown of broker %d, leader of %d partitions", target, rep.ShutdownLed)
	from := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 2*cfg.SessionTimeout+30*time.Second)
	err = c.brokers[target].Stop(sctx)
	cancel()
	delete(c.brokers, target)
	if err != nil {
		return nil, fmt.Errorf("controlled shutdown of broker %d: %w", target, err)
	}
	time.Sleep(time.Second)
	until := time.Now()
	mu.Lock()
	for p := range done {
		for _, d := range done[p] {
			if d.After(from) && d.Before(until) {
				rep.ShutdownProduces++
			}
		}
		for _, f := range failed[p] {
			if f.After(from) && f.Before(until) {
				rep.ShutdownFailed++
				rep.ShutdownProduces++
			}
		}
	}
	mu.Unlock()
	return rep, nil
}

func pct(s []time.Duration, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// WriteTable prints the report.
func (r *DataReport) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "data path\tpartitions\tmedian\tp99\tmax\tsession timeout")
	fmt.Fprintf(tw, "broker killed: kill -> first acks=all produce\t%d\t%v\t%v\t%v\t%v\n", r.KilledLed,
		pct(r.Recovery, 0.5).Round(time.Millisecond), pct(r.Recovery, 0.99).Round(time.Millisecond),
		pct(r.Recovery, 1).Round(time.Millisecond), r.SessionTimeout)
	_ = tw.Flush()
	fmt.Fprintf(w, "controlled shutdown of a broker leading %d partitions: %d of %d produces failed\n",
		r.ShutdownLed, r.ShutdownFailed, r.ShutdownProduces)
}
