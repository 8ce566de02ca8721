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

// DataConfig is the data path's failure scenarios: three controller
// voters and three brokers with real data in this process, a partition producer
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
	// FailoverTook is the time from closing the active controller's
	// voter to another voter being active; FailoverProduces and
	// FailoverFailed count the produces meanwhile (and for a second
	// after), FailoverGap is the longest any partition went without a
	// successful produce in that time.
	FailoverTook     time.Duration `json:"failover_took"`
	FailoverProduces int           `json:"failover_produces"`
	FailoverFailed   int           `json:"failover_failed"`
	FailoverGap      time.Duration `json:"failover_gap"`
}

// dataCluster is the scenario's nodes.
type dataCluster struct {
	voters  map[int32]*server.Server
	brokers map[int32]*server.Server
}

func (c *dataCluster) close() {
	for _, b := range c.brokers {
		_ = b.Close()
	}
	for _, v := range c.voters {
		_ = v.Close()
	}
}

// active returns the id of the voter that is the active controller, 0
// for none.
func (c *dataCluster) active() int32 {
	for id, v := range c.voters {
		if ok, _ := v.Node.Controller.Active(); ok {
			return id
		}
	}
	return 0
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

// RunData runs the data path's scenarios: the active controller's voter
// is closed and the produces that fail meanwhile are counted; a broker
// leading partitions is
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
	addrs, err := lowAddrs(9)
	if err != nil {
		return nil, err
	}
	var peers []server.VoterPeer
	dirs := map[int32]string{}
	for i := 0; i < 3; i++ {
		id := int32(1001 + i)
		peers = append(peers, server.VoterPeer{ID: id, Raft: addrs[2*i], Listener: addrs[2*i+1]})
		dirs[id] = filepath.Join(dir, fmt.Sprintf("voter-%d", id))
	}
	c := &dataCluster{voters: map[int32]*server.Server{}, brokers: map[int32]*server.Server{}}
	if _, err := server.FormatVoters("", peers, dirs); err != nil {
		return nil, err
	}
	defer c.close()
	for _, vp := range peers {
		v, err := server.Start(server.Config{NodeID: vp.ID, Voter: true, RaftAddr: vp.Raft, Listener: vp.Listener, Voters: peers,
			DataDir: dirs[vp.ID], SessionTimeout: cfg.SessionTimeout, Logger: cfg.Logger.Named(fmt.Sprintf("voter-%d", vp.ID))})
		if err != nil {
			return nil, err
		}
		c.voters[vp.ID] = v
	}
	var seeds []string
	for i := int32(1); i <= 3; i++ {
		b, err := server.Start(server.Config{NodeID: i, Broker: true, BrokerID: i, BrokerListener: addrs[5+i], Voters: peers,
			HeartbeatInterval: min(cfg.SessionTimeout/4, 2*time.Second), Logger: cfg.Logger.Named(fmt.Sprintf("broker-%d", i)),
			BrokerData: server.BrokerData{Dir: filepath.Join(dir, fmt.Sprintf("broker-%d", i))}})
		if err != nil {
			return nil, err
		}
		c.brokers[i] = b
		seeds = append(seeds, addrs[5+i])
	}
	progress("data: three brokers with data, topic of %d partitions, a producer per partition (acks=all)", cfg.Partitions)
	var listeners []string
	for _, vp := range peers {
		listeners = append(listeners, vp.Listener)
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(listeners...))
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
	// window counts the produces that completed in [from, until) and
	// those that failed, and the longest time any partition went
	// without a successful produce.
	window := func(from, until time.Time) (produces, failures int, gap time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		for p := int32(0); p < int32(cfg.Partitions); p++ {
			last := from
			for _, d := range done[p] {
				if d.After(from) && d.Before(until) {
					produces++
					gap = max(gap, d.Sub(last))
					last = d
				}
			}
			gap = max(gap, until.Sub(last))
			for _, f := range failed[p] {
				if f.After(from) && f.Before(until) {
					failures++
					produces++
				}
			}
		}
		return produces, failures, gap
	}

	var ctrl int32
	for ctrl = c.active(); ctrl == 0; ctrl = c.active() {
		time.Sleep(10 * time.Millisecond)
	}
	progress("data: closing voter %d, the active controller", ctrl)
	from := time.Now()
	_ = c.voters[ctrl].Close()
	delete(c.voters, ctrl)
	for c.active() == 0 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	rep.FailoverTook = time.Since(from)
	time.Sleep(time.Second)
	rep.FailoverProduces, rep.FailoverFailed, rep.FailoverGap = window(from, time.Now())
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
	// A produce the closing broker still acknowledged is not a recovery:
	// only those that completed once it was gone count, timed from the
	// start of the kill.
	gone := time.Now()
	if err := waitAll(killedLed, gone, 3*cfg.SessionTimeout+30*time.Second); err != nil {
		return nil, err
	}
	for _, p := range killedLed {
		t, _ := successAfter(p, gone)
		rep.Recovery = append(rep.Recovery, t.Sub(killed))
	}
	sort.Slice(rep.Recovery, func(i, j int) bool { return rep.Recovery[i] < rep.Recovery[j] })

	var target int32 = -1
	for b := range c.brokers {
		if target < 0 || len(led(b)) > len(led(target)) {
			target = b
		}
	}
	shutdownLed := led(target)
	rep.ShutdownLed = len(shutdownLed)
	progress("data: controlled shutdown of broker %d, leader of %d partitions", target, rep.ShutdownLed)
	from = time.Now()
	sctx, cancel := context.WithTimeout(ctx, 2*cfg.SessionTimeout+30*time.Second)
	err = c.brokers[target].Stop(sctx)
	cancel()
	delete(c.brokers, target)
	if err != nil {
		return nil, fmt.Errorf("controlled shutdown of broker %d: %w", target, err)
	}
	// The window closes once every partition the broker led has taken a
	// produce at its new leader: what the shutdown could have failed has
	// been tried by then, however slow the machine.
	if err := waitAll(shutdownLed, time.Now(), 2*cfg.SessionTimeout+30*time.Second); err != nil {
		return nil, err
	}
	rep.ShutdownProduces, rep.ShutdownFailed, _ = window(from, time.Now())
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
	fmt.Fprintf(w, "controller failover (new active controller after %v): %d of %d produces failed, longest gap on a partition %v\n",
		r.FailoverTook.Round(time.Millisecond), r.FailoverFailed, r.FailoverProduces, r.FailoverGap.Round(time.Millisecond))
}
