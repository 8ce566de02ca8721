package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
	"github.com/ctrlquorum/ctrlquorum/transport/zookeeper/zktest"
	"github.com/ctrlquorum/ctrlquorum/voter"
)

// One ZooKeeper server serves the package's tests and benchmarks; each
// test works under a chroot of its own.
var (
	shared     *zktest.Server
	sharedWhy  string
	sharedOnce sync.Once
	sharedDir  string
	chrootSeq  atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	if sharedDir != "" {
		_ = os.RemoveAll(sharedDir)
	}
	os.Exit(code)
}

// needZK returns the shared server, starting it on first use, or skips
// (fails with CI=true) when it cannot run here.
func needZK(t testing.TB) *zktest.Server {
	t.Helper()
	sharedOnce.Do(func() {
		if why := zktest.Available(); why != "" {
			sharedWhy = why
			return
		}
		dir, err := os.MkdirTemp("", "zktest-")
		if err != nil {
			sharedWhy = err.Error()
			return
		}
		sharedDir = dir
		s, err := zktest.Launch(dir)
		if err != nil {
			sharedWhy = err.Error()
			return
		}
		shared = s
	})
	if shared == nil {
		testkit.Missing(t, "a ZooKeeper server", sharedWhy)
	}
	if !shared.Running() {
		if err := shared.StartAgain(); err != nil {
			t.Fatal(err)
		}
	}
	return shared
}

// chrootAddr returns the shared server's address under a fresh chroot.
func chrootAddr(t testing.TB) (addr, root string) {
	s := needZK(t)
	root = fmt.Sprintf("/t%d-%s", chrootSeq.Add(1), strings.ReplaceAll(t.Name(), "/", "_"))
	return s.Addr() + root, root
}

// rawZK is a plain session for tests to write and read znodes.
type rawZK struct {
	t    testing.TB
	conn *zk.Conn
	root string
}

func dialRaw(t testing.TB, addr string) *rawZK {
	t.Helper()
	c, err := dial(addr, 10*time.Second, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.waitSession(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	return &rawZK{t: t, conn: c.zk, root: c.root}
}

// put creates or overwrites a znode, creating its parents.
func (r *rawZK) put(path, data string) {
	r.t.Helper()
	full := r.root + path
	parts := strings.Split(strings.Trim(full, "/"), "/")
	cur := ""
	for i, p := range parts {
		cur += "/" + p
		var d []byte
		if i == len(parts)-1 {
			d = []byte(data)
		}
		_, err := r.conn.Create(cur, d, 0, zk.WorldACL(zk.PermAll))
		if errors.Is(err, zk.ErrNodeExists) && i == len(parts)-1 {
			_, err = r.conn.Set(cur, d, -1)
		}
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			r.t.Fatalf("put %s: %v", cur, err)
		}
	}
}

// get returns a znode's data, or ok false.
func (r *rawZK) get(path string) (string, bool) {
	r.t.Helper()
	d, _, err := r.conn.Get(r.root + path)
	if errors.Is(err, zk.ErrNoNode) {
		return "", false
	}
	if err != nil {
		r.t.Fatalf("get %s: %v", path, err)
	}
	return string(d), true
}

func (r *rawZK) children(path string) []string {
	r.t.Helper()
	kids, _, err := r.conn.Children(r.root + path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		r.t.Fatalf("children %s: %v", path, err)
	}
	sortStrings(kids)
	return kids
}

var waitFor = testkit.WaitFor

// cluster runs controller nodes in the test process over loopback TCP.
type cluster struct {
	t       testing.TB
	mu      sync.Mutex
	peers   []controller.Peer
	dirs    []string
	nodes   []*controller.Node
	mirrors []*Mirror
	zkAddr  string // mirrors started with each node when set
	session time.Duration
	steady  bool
}

func newCluster(t testing.TB, n int, session time.Duration, zkAddr string, steady bool) *cluster {
	t.Helper()
	c := &cluster{t: t, session: session, zkAddr: zkAddr, steady: steady}
	streams := make([]*raftnet.StreamLayer, n)
	for i := range n {
		// Below the ephemeral range: a voter stopped and started again
		// reopens its port (see testkit.BindOutsideEphemeral).
		s := testkit.BindOutsideEphemeral(t, "127.0.0.1", func(addr string) (*raftnet.StreamLayer, error) { return raftnet.NewTCPStreamLayer(addr, "") })
		streams[i] = s
		c.peers = append(c.peers, controller.Peer{ID: int32(i + 1), Addr: s.Addr().String()})
		c.dirs = append(c.dirs, t.TempDir())
	}
	c.nodes = make([]*controller.Node, n)
	c.mirrors = make([]*Mirror, n)
	t.Cleanup(c.shutdown)
	for i := range n {
		c.start(i, streams[i])
	}
	return c
}

func (c *cluster) logger(name string) hclog.Logger {
	level := hclog.Off
	if os.Getenv("CQ_DEBUG") != "" {
		level = hclog.Debug
	}
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: level})
}

func (c *cluster) start(i int, stream *raftnet.StreamLayer) {
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
	n, err := controller.StartNode(controller.NodeConfig{
		NodeID:         c.peers[i].ID,
		DataDir:        c.dirs[i],
		Peers:          c.peers,
		SessionTimeout: c.session,
		Logger:         c.logger(fmt.Sprintf("node-%d", i+1)),
		Voter: func(vc *voter.Config) {
			vc.Stream = stream
			if c.steady {
				vc.SnapshotThreshold = 1 << 30
			} else {
				voter.FastTimeouts(vc)
			}
		},
	})
	if err != nil {
		c.t.Fatal(err)
	}
	var m *Mirror
	if c.zkAddr != "" {
		m, err = StartMirror(MirrorConfig{Addr: c.zkAddr, Node: n, Logger: c.logger(fmt.Sprintf("mirror-%d", i+1)), RetryInterval: 50 * time.Millisecond})
		if err != nil {
			c.t.Fatal(err)
		}
	}
	c.mu.Lock()
	c.nodes[i], c.mirrors[i] = n, m
	c.mu.Unlock()
}

func (c *cluster) snapshot() []*controller.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*controller.Node(nil), c.nodes...)
}

func (c *cluster) mirror(i int) *Mirror {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mirrors[i]
}

// stop shuts node i down, its mirror first.
func (c *cluster) stop(i int) {
	c.mu.Lock()
	n, m := c.nodes[i], c.mirrors[i]
	c.nodes[i], c.mirrors[i] = nil, nil
	c.mu.Unlock()
	if m != nil {
		m.Stop()
	}
	if n != nil {
		if err := n.Shutdown(); err != nil {
			c.t.Logf("shutdown node %d: %v", i+1, err)
		}
	}
}

func (c *cluster) shutdown() {
	for i := range c.snapshot() {
		c.stop(i)
	}
}

// active waits for the node whose controller is active and ready.
func (c *cluster) active(timeout time.Duration) (int, *controller.Node) {
	c.t.Helper()
	idx := -1
	var node *controller.Node
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
func (c *cluster) do(what string, fn func(context.Context, *controller.Controller) error) {
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
		if !errors.Is(err, controller.ErrNotController) && !errors.Is(err, context.DeadlineExceeded) || time.Now().After(deadline) {
			c.t.Fatalf("%s: %v", what, err)
		}
	}
}

// converged waits until every running node applied the same index with
// the same state hash.
func (c *cluster) converged(timeout time.Duration) {
	c.t.Helper()
	waitFor(c.t, timeout, "voters to converge", func() bool {
		var first *fsm.StateHash
		var idx uint64
		for _, n := range c.snapshot() {
			if n == nil {
				continue
			}
			h, i := n.FSM.StateHash()
			if first == nil {
				first, idx = &h, i
				continue
			}
			if h != *first || i != idx {
				return false
			}
		}
		return true
	})
}

func (c *cluster) brokerFenced(i int, id int32) bool {
	fenced := false
	c.snapshot()[i].FSM.View(func(im *fsm.Image) {
		if b := im.Broker(id); b != nil {
			fenced = b.Fenced
		}
	})
	return fenced
}

func (c *cluster) partitionOn(i int, topic string, p int32) (fsm.Partition, bool) {
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

// simBroker heartbeats to whichever node is active until stopped.
type simBroker struct {
	id    int32
	epoch atomic.Int64
	stopc chan struct{}
	done  chan struct{}
}

func (c *cluster) startBroker(id int32, incarnation byte) *simBroker {
	c.t.Helper()
	b := &simBroker{id: id, stopc: make(chan struct{}), done: make(chan struct{})}
	inc := rl.IncarnationID{byte(id), incarnation}
	c.do(fmt.Sprintf("register broker %d", id), func(ctx context.Context, ctl *controller.Controller) error {
		e, err := ctl.RegisterBroker(ctx, controller.BrokerRegistration{BrokerID: id, IncarnationID: inc,
			Endpoints: []rl.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: uint16(19000 + id)}}, Rack: "rack-" + fmt.Sprint(id%2)})
		b.epoch.Store(e)
		return err
	})
	c.t.Cleanup(b.stop)
	go func() {
		defer close(b.done)
		tk := time.NewTicker(c.session / 8)
		defer tk.Stop()
		for {
			select {
			case <-b.stopc:
				return
			case <-tk.C:
			}
			for _, n := range c.snapshot() {
				if n == nil {
					continue
				}
				if ok, _ := n.Controller.Active(); !ok {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, _ = n.Controller.Heartbeat(ctx, controller.Heartbeat{BrokerID: id, BrokerEpoch: b.epoch.Load(), MetadataOffset: n.FSM.AppliedIndex()})
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
