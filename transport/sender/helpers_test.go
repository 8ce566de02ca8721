package sender_test

import (
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/sender"
)

var testLogger = testkit.Logger

func startAgent(t testing.TB, cfg broker.Config) *broker.Agent {
	t.Helper()
	if cfg.Listener == "" {
		cfg.Listener = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	a, err := broker.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testkit.WaitFor(t, 30*time.Second, what, cond)
}

// book is a broker address book for Config.Resolve.
type book struct {
	mu sync.Mutex
	m  map[int32]string
}

func newBook() *book { return &book{m: map[int32]string{}} }

func (b *book) set(id int32, addr string) {
	b.mu.Lock()
	b.m[id] = addr
	b.mu.Unlock()
}

func (b *book) resolve(id int32) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, ok := b.m[id]
	return a, ok
}

func newPool(t testing.TB, bk *book, cfg sender.Config) *sender.Pool {
	t.Helper()
	cfg.Resolve = bk.resolve
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = 5 * time.Millisecond
		cfg.MaxBackoff = 50 * time.Millisecond
	}
	p := sender.New(cfg)
	t.Cleanup(p.Close)
	return p
}

var topicID = rl.TopicID{0x77}

func hdr(ce int32, offset uint64) controller.Header {
	return controller.Header{ControllerID: 1, ControllerEpoch: ce, BrokerEpoch: -1, MetadataOffset: offset}
}

func ps(topic string, id rl.TopicID, p, leader, le int32, replicas ...int32) controller.PartitionState {
	return controller.PartitionState{Topic: topic, TopicID: id, Partition: p, Leader: leader, LeaderEpoch: le,
		PartitionEpoch: le, ISR: replicas, Replicas: replicas}
}

func endpoint(addr string) []rl.Endpoint {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return []rl.Endpoint{{Name: "PLAINTEXT", Host: host, Port: uint16(p)}}
}

// statePtrs takes the address of each state, as a LeaderAndIsr holds
// them.
func statePtrs(s []controller.PartitionState) []*controller.PartitionState {
	out := make([]*controller.PartitionState, len(s))
	for i := range s {
		out[i] = &s[i]
	}
	return out
}

// set builds a request set for one broker: LeaderAndIsr and
// UpdateMetadata for parts, StopReplica for stops (if any).
func set(broker int32, h controller.Header, live []controller.LiveBroker, parts []controller.PartitionState, stops ...controller.StopPartition) controller.Requests {
	r := controller.Requests{Broker: broker}
	if len(parts) > 0 {
		r.LeaderAndIsr = &controller.LeaderAndIsr{Header: h, Partitions: statePtrs(parts), Leaders: live}
	}
	r.UpdateMetadata = &controller.UpdateMetadata{Header: h, Partitions: parts, LiveBrokers: live}
	if len(stops) > 0 {
		r.StopReplica = &controller.StopReplica{Header: h, Partitions: stops}
	}
	return r
}

// gate is a Host whose BecomeLeader/BecomeFollower block while closed.
type gate struct {
	*broker.MemoryHost
	mu      sync.Mutex
	open    chan struct{}
	entered chan struct{}
}

func newGate() *gate {
	return &gate{MemoryHost: broker.NewMemoryHost(), open: make(chan struct{}), entered: make(chan struct{}, 1)}
}

func (g *gate) wait() {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	<-ch
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *gate) BecomeLeader(p broker.PartitionState) {
	g.wait()
	g.MemoryHost.BecomeLeader(p)
}

func (g *gate) BecomeFollower(p broker.PartitionState) {
	g.wait()
	g.MemoryHost.BecomeFollower(p)
}

// recorder is a ResponseHandler that keeps what it was told.
type recorder struct {
	mu  sync.Mutex
	got map[int32][]sender.StopReplicaResult
}

func (r *recorder) HandleStopReplicaResponse(b int32, results []sender.StopReplicaResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got == nil {
		r.got = map[int32][]sender.StopReplicaResult{}
	}
	r.got[b] = append(r.got[b], results...)
}

func (r *recorder) results(b int32) []sender.StopReplicaResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sender.StopReplicaResult(nil), r.got[b]...)
}

// balanced checks the counters' identity for every broker.
func balanced(t testing.TB, s sender.Stats) {
	t.Helper()
	for id, b := range s.Brokers {
		if b.Queued != uint64(b.Pending)+uint64(b.InFlight)+b.Sent+b.Dropped+b.Coalesced {
			t.Fatalf("broker %d counters do not add up: %+v", id, b)
		}
	}
}
