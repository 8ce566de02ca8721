package listener

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
	"github.com/ctrlquorum/ctrlquorum/voter"
)

// The tests run three controller voters in the process (real raft over
// loopback TCP, bolt files in temp dirs), each behind its listener, and
// data brokers that register and heartbeat over the wire. Voter ids are
// 1001–1003 and broker ids start at 1: the id rule the listener documents.

const testClusterID = "listener-test-cluster"

type testCluster struct {
	t       testing.TB
	session time.Duration
	steady  bool
	stable  bool

	mu        sync.Mutex // guards nodes and listeners: brokers read them concurrently
	ids       []int32
	raftPeers []controller.Peer
	peers     []PeerListener
	dirs      []string
	nodes     []*controller.Node
	listeners []*Listener
	brokers   map[int32]*testBroker
	// tls, when set, runs raft and the listeners over mutual TLS.
	tls *clusterTLS
	// security configures the listeners' SASL and authorization;
	// clientOpts are added to every client the harness makes (a SASL
	// login for the brokers, say).
	security   SecurityConfig
	clientOpts []kgo.Opt
	// logs, when set, also receives the voters' and listeners' log lines
	// at Info and above, in JSON.
	logs           io.Writer
	observer       controller.Observer
	bootstrapLevel rl.Level
}

type clusterOpts struct {
	session time.Duration
	// steady keeps raft's default timeouts, for benchmarks: the load they
	// put on the machine would trigger elections with the fast ones.
	steady bool
	// stable keeps raft's default timeouts too (a second without the
	// leader before an election, instead of a quarter), for tests that
	// need one leader throughout: on a loaded host under the race
	// detector a stall of a few hundred milliseconds ends a leadership
	// with the fast ones. The first election takes about a second longer.
	stable bool
	// tls runs raft, the listeners and every client over mutual TLS with
	// certificates of a throwaway CA (see tls_test.go).
	tls bool
	// security, clientOpts and logs: see testCluster.
	security   SecurityConfig
	clientOpts []kgo.Opt
	logs       io.Writer
	// observer, when set, is every voter's controller.Observer.
	observer controller.Observer
	// bootstrapLevel is the metadata.version the cluster starts at (0:
	// the latest).
	bootstrapLevel rl.Level
}

func newTestCluster(t testing.TB, opts clusterOpts) *testCluster {
	t.Helper()
	if opts.session == 0 {
		opts.session = 6 * time.Second
	}
	c := &testCluster{t: t, session: opts.session, steady: opts.steady, stable: opts.stable, brokers: map[int32]*testBroker{},
		security: opts.security, clientOpts: opts.clientOpts, logs: opts.logs, observer: opts.observer, bootstrapLevel: opts.bootstrapLevel}
	if opts.tls {
		c.tls = newClusterTLS(t, []int32{1001, 1002, 1003})
	}
	streams := make([]*raftnet.StreamLayer, 3)
	lns := make([]net.Listener, 3)
	for i := range 3 {
		// Ports below the ephemeral range: a voter stopped and started
		// again reopens them, and an ephemeral one could meanwhile be the
		// local port of another connection on the host.
		s := testkit.BindOutsideEphemeral(t, "127.0.0.1", func(addr string) (*raftnet.StreamLayer, error) { return c.openRaft(i, addr) })
		ln := testkit.BindOutsideEphemeral(t, "127.0.0.1", func(addr string) (net.Listener, error) { return c.openListener(i, addr) })
		streams[i], lns[i] = s, ln
		id := int32(1001 + i)
		c.ids = append(c.ids, id)
		c.raftPeers = append(c.raftPeers, controller.Peer{ID: id, Addr: s.Addr().String()})
		c.peers = append(c.peers, PeerListener{NodeID: id, Host: "127.0.0.1", Port: int32(ln.Addr().(*net.TCPAddr).Port)})
		c.dirs = append(c.dirs, t.TempDir())
	}
	c.nodes = make([]*controller.Node, 3)
	c.listeners = make([]*Listener, 3)
	t.Cleanup(c.shutdown)
	for i := range 3 {
		c.start(i, streams[i], lns[i])
	}
	return c
}

func testLogger(name string) hclog.Logger {
	level := hclog.Warn
	if os.Getenv("CQ_DEBUG") != "" {
		level = hclog.Debug
	}
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: level})
}

// logger is testLogger(name), whose lines also go to c.logs when set.
func (c *testCluster) logger(name string) hclog.Logger {
	if c.logs == nil {
		return testLogger(name)
	}
	l := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: name, Level: testLogger(name).GetLevel()})
	l.RegisterSink(hclog.NewSinkAdapter(&hclog.LoggerOptions{Name: name, Level: hclog.Info, JSONFormat: true, Output: c.logs}))
	return l
}

// start starts voter i with its listener; nil stream and ln reopen the
// voter's former ports.
func (c *testCluster) start(i int, stream *raftnet.StreamLayer, ln net.Listener) {
	c.t.Helper()
	if stream == nil {
		stream = retryListen(c.t, func() (*raftnet.StreamLayer, error) {
			return c.openRaft(i, c.raftPeers[i].Addr)
		})
		ln = retryListen(c.t, func() (net.Listener, error) {
			return c.openListener(i, c.peers[i].addr())
		})
	}
	sender := &ackSender{}
	n, err := controller.StartNode(controller.NodeConfig{
		NodeID:         c.ids[i],
		DataDir:        c.dirs[i],
		Peers:          c.raftPeers,
		Sender:         sender,
		SessionTimeout: c.session,
		Logger:         c.logger(fmt.Sprintf("voter-%d", c.ids[i])),
		Controller:     func(cc *controller.Config) { cc.Observer, cc.BootstrapLevel = c.observer, c.bootstrapLevel },
		Voter: func(vc *voter.Config) {
			vc.Stream = stream
			if c.steady {
				vc.SnapshotThreshold = 1 << 30 // no snapshot in the middle of a measurement
			} else if !c.stable {
				voter.FastTimeouts(vc)
			}
		},
	})
	if err != nil {
		c.t.Fatal(err)
	}
	sender.ctl.Store(n.Controller)
	l, err := New(Config{Listener: ln, Node: n, Peers: c.peers, ClusterID: testClusterID, Logger: c.logger(fmt.Sprintf("listener-%d", c.ids[i])),
		Dial: c.peerDial(i), Security: c.security})
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.nodes[i], c.listeners[i] = n, l
	c.mu.Unlock()
}

// ackSender stands in for the brokers' side of control requests: each
// replica a StopReplica asks to delete is confirmed deleted at once, so
// topic deletions and reassignments run to completion. Everything else
// is dropped: these brokers hold no data.
type ackSender struct {
	ctl atomic.Pointer[controller.Controller]
}

func (s *ackSender) Send(r controller.Requests) {
	ctl := s.ctl.Load()
	if r.StopReplica == nil || ctl == nil {
		return
	}
	var res []controller.StopReplicaResult
	for _, p := range r.StopReplica.Partitions {
		if p.Delete {
			res = append(res, controller.StopReplicaResult{TopicID: p.TopicID, Topic: p.Topic, Partition: p.Partition})
		}
	}
	ctl.HandleStopReplicaResponse(r.Broker, res)
}

// retryListen reopens a port a stopped voter held; the kernel may take a
// moment to release it.
func retryListen[T any](t testing.TB, open func() (T, error)) T {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := open()
		if err == nil {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop stops voter i: its listener first, so clients fail over, then the
// node.
func (c *testCluster) stop(i int) {
	c.mu.Lock()
	n, l := c.nodes[i], c.listeners[i]
	c.nodes[i], c.listeners[i] = nil, nil
	c.mu.Unlock()
	if l != nil {
		_ = l.Close()
	}
	if n != nil {
		if err := n.Shutdown(); err != nil {
			c.t.Logf("shutdown voter %d: %v", c.ids[i], err)
		}
	}
}

func (c *testCluster) shutdown() {
	c.mu.Lock()
	brokers := make([]*testBroker, 0, len(c.brokers))
	for _, b := range c.brokers {
		brokers = append(brokers, b)
	}
	c.mu.Unlock()
	for _, b := range brokers {
		b.close()
	}
	for i := range c.ids {
		c.stop(i)
	}
}

func (c *testCluster) snapshot() ([]*controller.Node, []*Listener) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*controller.Node(nil), c.nodes...), append([]*Listener(nil), c.listeners...)
}

// addrs lists the running voters' listener addresses.
func (c *testCluster) addrs() []string {
	_, ls := c.snapshot()
	var out []string
	for _, l := range ls {
		if l != nil {
			out = append(out, l.Addr().String())
		}
	}
	return out
}

// active waits for a voter whose controller is active and returns its index.
func (c *testCluster) active(timeout time.Duration) int {
	c.t.Helper()
	idx := -1
	waitFor(c.t, timeout, "an active controller", func() bool {
		nodes, _ := c.snapshot()
		for i, n := range nodes {
			if n == nil {
				continue
			}
			if ok, _ := n.Controller.Active(); ok {
				idx = i
				return true
			}
		}
		return false
	})
	return idx
}

// leadership is who leads: the voter whose controller is active, the raft
// term it leads in and its controller epoch. A voter leads at most once
// per term, so finding the same leadership twice means it held between.
type leadership struct {
	i     int
	term  uint64
	epoch int32
}

// leader returns the leadership when exactly one running voter has an
// active controller and it is raft leader.
func (c *testCluster) leader() (leadership, bool) {
	nodes, _ := c.snapshot()
	var out leadership
	found := 0
	for i, n := range nodes {
		if n == nil {
			continue
		}
		if ok, epoch := n.Controller.Active(); ok {
			found++
			out = leadership{i: i, term: n.Voter.Raft().CurrentTerm(), epoch: epoch}
		}
	}
	return out, found == 1 && nodes[out.i].Voter.IsLeader()
}

// stableActive waits until one voter is the active controller and its
// leadership holds across a barrier (the same voter, term and epoch
// before and after it commits): what its predecessors and its activation
// committed is then applied on it.
func (c *testCluster) stableActive(timeout time.Duration) leadership {
	c.t.Helper()
	var got leadership
	waitFor(c.t, timeout, "a stable active controller", func() bool {
		a, ok := c.leader()
		if !ok || !c.raftHeld(a.i, a.term) {
			return false
		}
		got = a
		return c.held(a)
	})
	return got
}

// raftHeld commits a barrier on voter i, so everything committed before is
// applied on it, and reports whether it is still raft leader in term.
func (c *testCluster) raftHeld(i int, term uint64) bool {
	n := c.node(i)
	if n == nil || n.Voter.Raft().Barrier(10*time.Second).Error() != nil {
		return false
	}
	return n.Voter.IsLeader() && n.Voter.Raft().CurrentTerm() == term
}

// held reports whether leadership a still holds: its voter is the one
// active controller, in the same term and epoch.
func (c *testCluster) held(a leadership) bool {
	b, ok := c.leader()
	return ok && b == a
}

// standbyIndex returns a running voter that is not the active one.
func (c *testCluster) standbyIndex(active int) int {
	nodes, _ := c.snapshot()
	for i, n := range nodes {
		if i != active && n != nil {
			return i
		}
	}
	c.t.Fatal("no standby voter running")
	return -1
}

func (c *testCluster) node(i int) *controller.Node {
	nodes, _ := c.snapshot()
	return nodes[i]
}

func (c *testCluster) listener(i int) *Listener {
	_, ls := c.snapshot()
	return ls[i]
}

// converged waits until every running voter has applied the same index
// and holds the same state, and returns that state's hash.
func (c *testCluster) converged(timeout time.Duration) fsm.StateHash {
	c.t.Helper()
	var h fsm.StateHash
	waitFor(c.t, timeout, "voters to converge", func() bool {
		nodes, _ := c.snapshot()
		var first *fsm.StateHash
		var idx uint64
		for _, n := range nodes {
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

// view runs fn on voter i's image.
func (c *testCluster) view(i int, fn func(im *fsm.Image)) { c.node(i).FSM.View(fn) }

// partition reads a partition from voter i's image.
func (c *testCluster) partition(i int, topic string, p int32) (fsm.Partition, bool) {
	var out fsm.Partition
	var ok bool
	c.view(i, func(im *fsm.Image) {
		if t := im.TopicByName(topic); t != nil {
			if pp := im.Partition(t.ID, p); pp != nil {
				out, ok = *pp, true
			}
		}
	})
	return out, ok
}

var waitFor = testkit.WaitFor

// client returns a kgo client seeded with every running voter.
func (c *testCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	opts = append(append(append([]kgo.Opt{kgo.SeedBrokers(c.addrs()...), kgo.RetryTimeout(60 * time.Second)}, c.clientTLS()...), c.clientOpts...), opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

func (c *testCluster) admin(opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	cl := c.client(opts...)
	return cl, kadm.NewClient(cl)
}

// toController sends a request to the active controller on cl's seed
// broker at its address: kgo pinned to the voter, with the request's
// broker chosen here, as a broker agent sends to the active controller
// it found. A voter's Metadata names a broker as controller, so kgo's
// own routing would not reach a voter.
func (c *testCluster) toController(ctx context.Context, cl *kgo.Client, req kmsg.Request) (kmsg.Response, error) {
	b, err := c.findController(cl)
	if err != nil {
		return nil, err
	}
	return b.Request(ctx, req)
}

// findController returns cl's seed broker at the voter whose controller
// is active.
func (c *testCluster) findController(cl *kgo.Client) (*kgo.Broker, error) {
	addrs, _ := cl.OptValue(kgo.SeedBrokers).([]string)
	seeds := cl.SeedBrokers()
	if len(addrs) != len(seeds) {
		return nil, fmt.Errorf("%d seed addresses, %d seed brokers", len(addrs), len(seeds))
	}
	nodes, _ := c.snapshot()
	for i, n := range nodes {
		if n == nil {
			continue
		}
		if ok, _ := n.Controller.Active(); !ok {
			continue
		}
		if j := slices.Index(addrs, c.peers[i].addr()); j >= 0 {
			return seeds[j], nil
		}
		return nil, fmt.Errorf("active controller %d at %s is not a seed", c.ids[i], c.peers[i].addr())
	}
	return nil, errors.New("no active controller")
}

// voterBroker returns cl's seed broker at voter id's listener: a voter's
// Metadata lists the brokers, not the voters, so kgo knows a voter only
// as a seed.
func (c *testCluster) voterBroker(t testing.TB, cl *kgo.Client, id int32) *kgo.Broker {
	t.Helper()
	addrs, _ := cl.OptValue(kgo.SeedBrokers).([]string)
	seeds := cl.SeedBrokers()
	for _, p := range c.peers {
		if i := slices.Index(addrs, p.addr()); p.NodeID == id && i >= 0 && i < len(seeds) {
			return seeds[i]
		}
	}
	t.Fatalf("voter %d is not a seed of the client (%v)", id, addrs)
	return nil
}

// toControllerRetry retries toController while the answer is
// NOT_CONTROLLER or the request failed outright (leadership moving).
func (c *testCluster) toControllerRetry(t testing.TB, cl *kgo.Client, req kmsg.Request, code func(kmsg.Response) int16) kmsg.Response {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := c.toController(ctx, cl, req)
		cancel()
		if err == nil && code(resp) != kerr.NotController.Code {
			return resp
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no answer from the controller: %v", kmsg.NameForKey(req.Key()), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testBroker is a data broker as the controller sees one: it registers
// and heartbeats over the wire, and serves clients at its PLAINTEXT
// endpoint by handing their requests to a running voter's listener (a
// broker answering from the metadata it holds, and forwarding the rest).
type testBroker struct {
	c           *testCluster
	id          int32
	incarnation rl.IncarnationID
	srv         *kafkawire.Server
	cl          *kgo.Client

	epoch        atomic.Int64
	wantFence    atomic.Bool
	wantShutdown atomic.Bool
	lastHB       atomic.Pointer[kmsg.BrokerHeartbeatResponse]
	// features makes the broker report the feature levels it supports in
	// ApiVersions, as a build that knows them does.
	features atomic.Bool
	// hbOK counts heartbeats answered without error; hbFailed those that
	// got no answer or an error other than NOT_CONTROLLER (leadership
	// moving, which a broker retries).
	hbOK, hbFailed atomic.Int64
	// served counts the requests clients sent to the broker's endpoint.
	served atomic.Int64
	// hbErrors holds why each failed heartbeat failed, the first 20.
	hbErrMu  sync.Mutex
	hbErrors []string

	stopOnce sync.Once
	stopc    chan struct{}
	done     chan struct{}
}

func (c *testCluster) startBroker(id int32) *testBroker {
	c.t.Helper()
	b := &testBroker{c: c, id: id, incarnation: rl.IncarnationID{byte(id), 0xb0}, stopc: make(chan struct{}), done: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	if c.tls != nil {
		// Clients reach the broker the way they reach the voters.
		cfg := c.tls.broker(id).ServerConfig(nil)
		if len(c.security.SASLMechanisms) > 0 {
			cfg = c.tls.broker(id).ClientListenerConfig()
		}
		ln = tls.NewListener(ln, cfg)
	}
	srv := kafkawire.Serve(ln, kafkawire.Config{APIs: APIs(), MinVersions: MinVersions(), Logger: testLogger(fmt.Sprintf("broker-%d", id)),
		Features: func(resp *kmsg.ApiVersionsResponse) {
			if b.features.Load() {
				resp.SupportedFeatures = SupportedFeatures()
			}
		},
		Handler: kafkawire.HandlerFunc(func(ctx context.Context, conn *kafkawire.Conn, req kmsg.Request) (kmsg.Response, error) {
			b.served.Add(1)
			if l := c.servingListener(); l != nil {
				return l.Handle(ctx, conn, req)
			}
			return nil, errors.New("no voter running")
		})})
	b.srv = srv
	b.cl = c.client(c.brokerTLS(id)...)
	c.mu.Lock()
	c.brokers[id] = b
	c.mu.Unlock()
	resp := c.toControllerRetry(c.t, b.cl, b.registration(), func(r kmsg.Response) int16 { return r.(*kmsg.BrokerRegistrationResponse).ErrorCode })
	rr := resp.(*kmsg.BrokerRegistrationResponse)
	if rr.ErrorCode != 0 {
		c.t.Fatalf("register broker %d: %v", id, kerr.ErrorForCode(rr.ErrorCode))
	}
	b.epoch.Store(rr.BrokerEpoch)
	go b.heartbeats()
	return b
}

// servingListener is the listener a test broker hands its clients'
// requests to, as a broker forwards to the active controller: the active
// controller's, else (leadership moving) any running one, nil when none
// runs.
func (c *testCluster) servingListener() *Listener {
	nodes, ls := c.snapshot()
	var any *Listener
	for i, l := range ls {
		if l == nil {
			continue
		}
		if ok, _ := nodes[i].Controller.Active(); ok {
			return l
		}
		if any == nil {
			any = l
		}
	}
	return any
}

func (b *testBroker) registration() *kmsg.BrokerRegistrationRequest {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID = b.id
	req.ClusterID = testClusterID
	req.IncarnationID = b.incarnation
	port := b.srv.Addr().(*net.TCPAddr).Port
	ln := kmsg.NewBrokerRegistrationRequestListener()
	ln.Name, ln.Host, ln.Port = "PLAINTEXT", "127.0.0.1", uint16(port)
	req.Listeners = append(req.Listeners, ln)
	rack := "rack-" + strconv.Itoa(int(b.id))
	req.Rack = &rack
	return req
}

// appliedOffset is what the broker reports as applied metadata: the
// highest index any voter applied, since these brokers apply nothing
// themselves.
func (b *testBroker) appliedOffset() int64 {
	nodes, _ := b.c.snapshot()
	var max uint64
	for _, n := range nodes {
		if n != nil {
			max = maxU(max, n.FSM.AppliedIndex())
		}
	}
	return int64(max)
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

func (b *testBroker) heartbeats() {
	defer close(b.done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	// ctrl is the active controller, kept until a heartbeat to it fails
	// or is answered NOT_CONTROLLER, as a broker agent keeps it.
	var ctrl *kgo.Broker
	for {
		select {
		case <-b.stopc:
			return
		case <-tick.C:
		}
		req := kmsg.NewPtrBrokerHeartbeatRequest()
		req.BrokerID, req.BrokerEpoch = b.id, b.epoch.Load()
		req.CurrentMetadataOffset = b.appliedOffset()
		req.WantFence, req.WantShutdown = b.wantFence.Load(), b.wantShutdown.Load()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var resp kmsg.Response
		var err error
		if ctrl == nil {
			ctrl, err = b.c.findController(b.cl)
		}
		if err == nil {
			resp, err = ctrl.Request(ctx, req)
		}
		cancel()
		if err != nil {
			ctrl = nil
			b.heartbeatFailed(err)
			continue
		}
		hb := resp.(*kmsg.BrokerHeartbeatResponse)
		if hb.ErrorCode == kerr.NotController.Code {
			ctrl = nil
		}
		switch hb.ErrorCode {
		case 0:
			b.hbOK.Add(1)
			b.lastHB.Store(hb)
		case kerr.NotController.Code:
		default:
			b.heartbeatFailed(kerr.ErrorForCode(hb.ErrorCode))
		}
	}
}

func (b *testBroker) heartbeatFailed(err error) {
	b.hbFailed.Add(1)
	b.hbErrMu.Lock()
	defer b.hbErrMu.Unlock()
	if len(b.hbErrors) < 20 {
		b.hbErrors = append(b.hbErrors, time.Now().Format("15:04:05.000")+" "+err.Error())
	}
}

// heartbeatErrors returns why heartbeats failed (the first 20).
func (b *testBroker) heartbeatErrors() []string {
	b.hbErrMu.Lock()
	defer b.hbErrMu.Unlock()
	return slices.Clone(b.hbErrors)
}

// stop stops heartbeating; the broker's endpoint keeps serving.
func (b *testBroker) stop() {
	b.stopOnce.Do(func() { close(b.stopc) })
	<-b.done
}

func (b *testBroker) close() {
	b.stop()
	_ = b.srv.Close()
}

// startBrokers starts brokers 1..n and waits until the active controller
// has them all unfenced.
func (c *testCluster) startBrokers(n int32) {
	c.t.Helper()
	for id := int32(1); id <= n; id++ {
		c.startBroker(id)
	}
	c.waitBrokers(n)
}

func (c *testCluster) waitBrokers(n int32) {
	c.t.Helper()
	waitFor(c.t, 30*time.Second, "brokers unfenced", func() bool {
		i := c.active(10 * time.Second)
		ok := true
		c.view(i, func(im *fsm.Image) {
			for id := int32(1); id <= n; id++ {
				if b := im.Broker(id); b == nil || b.Fenced {
					ok = false
				}
			}
		})
		return ok
	})
}

func (c *testCluster) broker(id int32) *testBroker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokers[id]
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
