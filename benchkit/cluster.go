package benchkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// cluster is three controller voters in this process over loopback TCP,
// each with its own data directory, and simulated brokers that register and
// heartbeat through the controller's API.
type cluster struct {
	dir     string
	peers   []controller.Peer
	session time.Duration
	log     hclog.Logger

	mu       sync.Mutex
	nodes    []*controller.Node // nil while stopped
	observer controller.Observer

	brokers map[int32]*simBroker
}

// roundObserver forwards the loop's rounds to whatever is installed.
type roundObserver struct {
	mu sync.Mutex
	fn func(controller.RoundStats)
}

func (o *roundObserver) RoundCommitted(st controller.RoundStats) {
	o.mu.Lock()
	fn := o.fn
	o.mu.Unlock()
	if fn != nil {
		fn(st)
	}
}

func (o *roundObserver) set(fn func(controller.RoundStats)) {
	o.mu.Lock()
	o.fn = fn
	o.mu.Unlock()
}

func freeAddrs(n int) ([]string, error) {
	var out []string
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

func newCluster(dir string, session time.Duration, obs controller.Observer, log hclog.Logger) (*cluster, error) {
	addrs, err := freeAddrs(3)
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir, session: session, log: log, observer: obs, nodes: make([]*controller.Node, 3), brokers: map[int32]*simBroker{}}
	for i, a := range addrs {
		c.peers = append(c.peers, controller.Peer{ID: int32(i + 1), Addr: a})
	}
	for i := range c.peers {
		if err := c.start(i); err != nil {
			c.shutdown()
			return nil, err
		}
	}
	return c, nil
}

func (c *cluster) start(i int) error {
	p := c.peers[i]
	dir := filepath.Join(c.dir, "voter-"+strconv.Itoa(int(p.ID)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	n, err := controller.StartNode(controller.NodeConfig{
		// Raft's default timeouts, not voter.FastTimeouts: the scenarios run
		// on the cores they measure, and a leader starved past a 250 ms
		// lease stepped down in the middle of a measurement. Failover
		// figures start once the new leader is known, so the longer
		// election is reported apart and changes none of them.
		NodeID: p.ID, RaftAddr: p.Addr, DataDir: dir, Peers: c.peers, Logger: c.log, SessionTimeout: c.session,
		Controller: func(cc *controller.Config) { cc.Observer = c.observer },
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.nodes[i] = n
	c.mu.Unlock()
	return nil
}

func (c *cluster) stop(i int) {
	c.mu.Lock()
	n := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if n != nil {
		_ = n.Shutdown()
	}
}

func (c *cluster) shutdown() {
	for _, b := range c.brokers {
		b.stop()
	}
	for i := range c.peers {
		c.stop(i)
	}
}

func (c *cluster) running() []*controller.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*controller.Node(nil), c.nodes...)
}

// active waits for an active controller and returns its index and node.
func (c *cluster) active(ctx context.Context) (int, *controller.Node, error) {
	for {
		for i, n := range c.running() {
			if n == nil {
				continue
			}
			if ok, _ := n.Controller.Active(); ok {
				return i, n, nil
			}
		}
		select {
		case <-ctx.Done():
			return -1, nil, fmt.Errorf("no active controller: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// converged waits until every running voter has applied the same index.
func (c *cluster) converged(ctx context.Context) error {
	for {
		var idx []uint64
		for _, n := range c.running() {
			if n != nil {
				idx = append(idx, n.FSM.AppliedIndex())
			}
		}
		same := len(idx) > 0
		for _, v := range idx {
			same = same && v == idx[0]
		}
		if same {
			_, n, err := c.active(ctx)
			if err != nil {
				return err
			}
			if n.Voter.Raft().CommitIndex() <= idx[0] {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("voters did not converge: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// simBroker registers with the active controller and heartbeats.
type simBroker struct {
	c     *cluster
	id    int32
	inc   rl.IncarnationID
	mu    sync.Mutex
	epoch int64
	stopc chan struct{}
	done  chan struct{}
	once  sync.Once
}

func (c *cluster) startBroker(id int32, generation byte) *simBroker {
	b := &simBroker{c: c, id: id, inc: rl.IncarnationID{byte(id), byte(id >> 8), generation, 0xbe}, epoch: -1,
		stopc: make(chan struct{}), done: make(chan struct{})}
	c.brokers[id] = b
	go b.run()
	return b
}

func (b *simBroker) run() {
	defer close(b.done)
	t := time.NewTicker(max(b.c.session/10, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-b.stopc:
			return
		case <-t.C:
		}
		var n *controller.Node
		for _, x := range b.c.running() {
			if x != nil {
				if ok, _ := x.Controller.Active(); ok {
					n = x
				}
			}
		}
		if n == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b.mu.Lock()
		epoch := b.epoch
		b.mu.Unlock()
		if epoch < 0 {
			e, err := n.Controller.RegisterBroker(ctx, controller.BrokerRegistration{BrokerID: b.id, IncarnationID: b.inc,
				Endpoints: []rl.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: uint16(20000 + b.id)}}})
			if err == nil {
				b.mu.Lock()
				b.epoch = e
				b.mu.Unlock()
			}
		} else {
			_, err := n.Controller.Heartbeat(ctx, controller.Heartbeat{BrokerID: b.id, BrokerEpoch: epoch, MetadataOffset: n.FSM.AppliedIndex()})
			if errors.Is(err, kerr.StaleBrokerEpoch) || errors.Is(err, kerr.BrokerIDNotRegistered) {
				b.mu.Lock()
				b.epoch = -1
				b.mu.Unlock()
			}
		}
		cancel()
	}
}

func (b *simBroker) brokerEpoch() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.epoch
}

func (b *simBroker) stop() {
	b.once.Do(func() { close(b.stopc) })
	<-b.done
}

// brokerState reads a broker from the active image.
func brokerState(n *controller.Node, id int32) (registered, fenced bool) {
	n.FSM.View(func(im *fsm.Image) {
		if b := im.Broker(id); b != nil {
			registered, fenced = true, b.Fenced
		}
	})
	return
}

// waitBrokersLive waits until brokers 1..n are registered and unfenced.
func (c *cluster) waitBrokersLive(ctx context.Context, n int32) error {
	for {
		_, node, err := c.active(ctx)
		if err != nil {
			return err
		}
		ok := true
		for id := int32(1); id <= n; id++ {
			reg, fenced := brokerState(node, id)
			ok = ok && reg && !fenced
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("brokers not all unfenced: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ledBy counts the partitions broker b leads in the active image.
func ledBy(n *controller.Node, b int32) int {
	led := 0
	n.FSM.View(func(im *fsm.Image) {
		im.ForEachTopic(func(t *fsm.Topic) bool {
			im.EachPartition(t.ID, func(_ int32, p *fsm.Partition) bool {
				if p.Leader == b {
					led++
				}
				return true
			})
			return true
		})
	})
	return led
}

// startWithBrokers starts a cluster in dir, waits within ctx for an
// active controller, then starts cfg.Brokers simulated brokers and waits
// until all are live.
func startWithBrokers(ctx context.Context, cfg Config, dir string, obs controller.Observer) (*cluster, error) {
	c, err := newCluster(dir, cfg.SessionTimeout, obs, cfg.Logger)
	if err != nil {
		return nil, err
	}
	if _, _, err := c.active(ctx); err != nil {
		c.shutdown()
		return nil, err
	}
	for id := int32(1); id <= int32(cfg.Brokers); id++ {
		c.startBroker(id, 1)
	}
	if err := c.waitBrokersLive(ctx, int32(cfg.Brokers)); err != nil {
		c.shutdown()
		return nil, err
	}
	return c, nil
}

// loadWithProgress loads an image of n partitions over cfg.Brokers
// brokers, saying how far it got every cfg.ProgressEvery and how long it
// took.
func loadWithProgress(ctx context.Context, c *cluster, cfg Config, n int, phase func(string, ...any)) error {
	last, start := time.Now(), time.Now()
	if err := loadImage(ctx, c, n, int32(cfg.Brokers), func(done int) {
		if time.Since(last) >= cfg.ProgressEvery {
			last = time.Now()
			phase("  loading the image: %d/%d partitions", done, n)
		}
	}); err != nil {
		return err
	}
	phase("  image of %d partitions on three voters in %v", n, time.Since(start).Round(time.Millisecond))
	return nil
}
