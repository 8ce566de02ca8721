package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
	"github.com/ctrlquorum/ctrlquorum/voter"
)

// nodeCluster runs three controller nodes in the test process over real
// TCP on 127.0.0.1 with bolt files in temp dirs.
type nodeCluster struct {
	t       testing.TB
	mu      sync.Mutex // guards nodes: simulated brokers read it concurrently
	peers   []Peer
	dirs    []string
	nodes   []*Node
	senders []*RecordingSender
	tweak   func(*Config)
	session time.Duration
	// steady keeps raft's default timeouts: benchmarks load the machine
	// enough that the fast test timeouts would trigger elections.
	steady bool
}

func newNodeCluster(t testing.TB, n int, session time.Duration, tweak func(*Config)) *nodeCluster {
	return newNodeClusterOpts(t, n, session, tweak, false)
}

func newNodeClusterOpts(t testing.TB, n int, session time.Duration, tweak func(*Config), steady bool) *nodeCluster {
	t.Helper()
	c := &nodeCluster{t: t, tweak: tweak, session: session, steady: steady}
	streams := make([]*raftnet.StreamLayer, n)
	for i := range n {
		// Below the ephemeral range: a voter stopped and started again
		// reopens its port (see testkit.BindOutsideEphemeral).
		s := testkit.BindOutsideEphemeral(t, "127.0.0.1", func(addr string) (*raftnet.StreamLayer, error) { return raftnet.NewTCPStreamLayer(addr, "") })
		streams[i] = s
		c.peers = append(c.peers, Peer{ID: int32(i + 1), Addr: s.Addr().String()})
		c.dirs = append(c.dirs, t.TempDir())
		c.senders = append(c.senders, NewRecordingSender())
	}
	c.nodes = make([]*Node, n)
	t.Cleanup(c.shutdown)
	for i := range n {
		c.start(i, streams[i])
	}
	return c
}

func (c *nodeCluster) start(i int, stream *raftnet.StreamLayer) {
	c.t.Helper()
	if stream == nil {
		var err error
		deadline := time.Now().Add(5 * time.Second)
		for {
			stream, err = raftnet.NewTCPStreamLayer(c.peers[i].Addr, "")
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond) // the old listener's port is being released
		}
		if err != nil {
			c.t.Fatal(err)
		}
	}
	level := hclog.Warn
	if os.Getenv("CQ_DEBUG") != "" {
		level = hclog.Debug
	}
	if testing.Verbose() {
		level = hclog.Info
	}
	n, err := StartNode(NodeConfig{
		NodeID:         c.peers[i].ID,
		DataDir:        c.dirs[i],
		Peers:          c.peers,
		Sender:         c.senders[i],
		SessionTimeout: c.session,
		Logger:         hclog.New(&hclog.LoggerOptions{Name: fmt.Sprintf("node-%d", i+1), Level: level}),
		Voter: func(vc *voter.Config) {
			vc.Stream = stream
			if !c.steady {
				voter.FastTimeouts(vc)
			} else {
				vc.SnapshotThreshold = 1 << 30 // no snapshot in the middle of a measurement
			}
		},
		Controller: c.tweak,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.nodes[i] = n
	c.mu.Unlock()
}

// snapshot returns the nodes as they are now (nil for stopped ones).
func (c *nodeCluster) snapshot() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.nodes...)
}

func (c *nodeCluster) stop(i int) {
	c.mu.Lock()
	n := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if n != nil {
		if err := n.Shutdown(); err != nil {
			c.t.Logf("shutdown node %d: %v", i+1, err)
		}
	}
}

func (c *nodeCluster) shutdown() {
	for i := range c.snapshot() {
		c.stop(i)
	}
}

// active waits for the node whose controller is active and ready.
func (c *nodeCluster) active(timeout time.Duration) (int, *Node) {
	c.t.Helper()
	var idx = -1
	var node *Node
	waitFor(c.t, timeout, "an active controller", func() bool {
		for i, n := range c.snapshot() {
			if n == nil {
				continue
			}
			if ok, _ := n.Controller.Active(); ok {
				idx, node = i, n
				return true
			}
		}
		return false
	})
	return idx, node
}

// do runs fn against the active controller, retrying while leadership moves.
func (c *nodeCluster) do(what string, fn func(context.Context, *Controller) error) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, n := c.active(20 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := fn(ctx, n.Controller)
		cancel()
		if err == nil {
			return
		}
		if !errors.Is(err, ErrNotController) && !errors.Is(err, context.DeadlineExceeded) || time.Now().After(deadline) {
			c.t.Fatalf("%s: %v", what, err)
		}
	}
}

// hashes returns each running node's state hash once all have applied the
// same index.
func (c *nodeCluster) converged(timeout time.Duration) fsm.StateHash {
	c.t.Helper()
	var h fsm.StateHash
	waitFor(c.t, timeout, "voters to converge", func() bool {
		var first *fsm.StateHash
		var idx uint64
		for _, n := range c.snapshot() {
			if n == nil {
				continue
			}
			hh, i := n.FSM.StateHash()
			if first == nil {
				first, idx = &hh, i
				continue
			}
			if hh != *first || i != idx {
				return false
			}
		}
		h = *first
		return true
	})
	return h
}

var waitFor = testkit.WaitFor

// simBroker heartbeats to whichever node is active until stopped.
type simBroker struct {
	id    int32
	inc   rl.IncarnationID
	mu    sync.Mutex
	epoch int64
	stopc chan struct{}
	done  chan struct{}
}

func (c *nodeCluster) startBroker(id int32, incarnation byte) *simBroker {
	c.t.Helper()
	b := &simBroker{id: id, inc: rl.IncarnationID{byte(id), incarnation}, stopc: make(chan struct{}), done: make(chan struct{})}
	c.do(fmt.Sprintf("register broker %d", id), func(ctx context.Context, ctl *Controller) error {
		e, err := ctl.RegisterBroker(ctx, BrokerRegistration{BrokerID: id, IncarnationID: b.inc,
			Endpoints: []rl.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: uint16(19000 + id)}}})
		b.epoch = e
		return err
	})
	c.t.Cleanup(b.stop)
	go func() {
		defer close(b.done)
		t := time.NewTicker(c.session / 8)
		defer t.Stop()
		for {
			select {
			case <-b.stopc:
				return
			case <-t.C:
			}
			for _, n := range c.snapshot() {
				if n == nil {
					continue
				}
				if ok, _ := n.Controller.Active(); !ok {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, _ = n.Controller.Heartbeat(ctx, Heartbeat{BrokerID: id, BrokerEpoch: b.epoch, MetadataOffset: n.FSM.AppliedIndex()})
				cancel()
			}
		}
	}()
	return b
}

func (b *simBroker) stop() {
	select {
	case <-b.stopc:
	default:
		close(b.stopc)
	}
	<-b.done
}

// partitionOn reads a partition from node i.
func (c *nodeCluster) partitionOn(i int, topic string, p int32) (fsm.Partition, bool) {
	var out fsm.Partition
	var ok bool
	c.snapshot()[i].FSM.View(func(im *fsm.Image) {
		if t := im.TopicByName(topic); t != nil {
			if pp := im.Partition(t.ID, p); pp != nil {
				out, ok = *pp, true
			}
		}
	})
	return out, ok
}

func (c *nodeCluster) brokerFenced(i int, id int32) bool {
	fenced := false
	c.snapshot()[i].FSM.View(func(im *fsm.Image) {
		if b := im.Broker(id); b != nil {
			fenced = b.Fenced
		}
	})
	return fenced
}

// settled waits until every running voter has applied as far as the
// active one.
func (c *nodeCluster) settled() {
	c.t.Helper()
	waitFor(c.t, 5*time.Minute, "every voter to apply the active voter's entries", func() bool {
		_, active := c.active(time.Second)
		want := active.FSM.AppliedIndex()
		for _, n := range c.snapshot() {
			if n != nil && n.FSM.AppliedIndex() < want {
				return false
			}
		}
		return true
	})
}

// forgetSent drops what the voters' recording senders were handed so far.
func (c *nodeCluster) forgetSent() {
	for _, s := range c.senders {
		s.Reset()
	}
}
