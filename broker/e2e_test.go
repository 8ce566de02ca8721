package broker_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/listener"
	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
	"github.com/ctrlquorum/ctrlquorum/transport/sender"
	"github.com/ctrlquorum/ctrlquorum/voter"
)

// The end-to-end tests run three controller voters (real raft over
// loopback TCP), each behind its Kafka listener and with its sender pool,
// and broker agents that find the active controller, register, heartbeat
// and take control requests over TCP. Voter ids are 1001–1003, broker
// ids 1–3 (the listener's id rule).

type e2eCluster struct {
	t         testing.TB
	nodes     []*controller.Node
	listeners []*listener.Listener
	pools     []*sender.Pool
	addrs     []string
	agents    map[int32]*broker.Agent
	// retired are agents that were stopped: their control logs still
	// count for the invariants.
	retired []*broker.Agent
	// static are the static configs an agent is started with, by id.
	static map[int32]map[string]string
}

// lateHandler passes StopReplica outcomes to a controller that is created
// after its sender.
type lateHandler struct {
	c atomic.Pointer[controller.Controller]
}

func (h *lateHandler) HandleStopReplicaResponse(b int32, res []sender.StopReplicaResult) {
	if c := h.c.Load(); c != nil {
		c.HandleStopReplicaResponse(b, res)
	}
}

func newE2ECluster(t testing.TB, session time.Duration) *e2eCluster {
	return newE2EClusterAt(t, session, 0)
}

// newE2EClusterAt starts the cluster at a metadata.version level (0: the
// latest).
func newE2EClusterAt(t testing.TB, session time.Duration, level rl.Level) *e2eCluster {
	c := &e2eCluster{t: t, agents: map[int32]*broker.Agent{}}
	var raftPeers []controller.Peer
	var peers []listener.PeerListener
	streams := make([]*raftnet.StreamLayer, 3)
	lns := make([]net.Listener, 3)
	for i := range 3 {
		// Below the ephemeral range: a voter stopped and started again
		// reopens its port (see testkit.BindOutsideEphemeral).
		s := testkit.BindOutsideEphemeral(t, "127.0.0.1", func(addr string) (*raftnet.StreamLayer, error) { return raftnet.NewTCPStreamLayer(addr, "") })
		ln := testkit.BindOutsideEphemeral(t, "127.0.0.1", func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) })
		streams[i], lns[i] = s, ln
		id := int32(1001 + i)
		raftPeers = append(raftPeers, controller.Peer{ID: id, Addr: s.Addr().String()})
		peers = append(peers, listener.PeerListener{NodeID: id, Host: "127.0.0.1", Port: int32(ln.Addr().(*net.TCPAddr).Port)})
		c.addrs = append(c.addrs, ln.Addr().String())
	}
	t.Cleanup(c.shutdown)
	for i := range 3 {
		h := &lateHandler{}
		var pool *sender.Pool
		n, err := controller.StartNode(controller.NodeConfig{
			NodeID:         int32(1001 + i),
			DataDir:        t.TempDir(),
			Peers:          raftPeers,
			SessionTimeout: session,
			Logger:         testLogger(t).Named(fmt.Sprintf("voter-%d", 1001+i)),
			Voter: func(vc *voter.Config) {
				vc.Stream = streams[i]
				voter.FastTimeouts(vc)
			},
			Controller: func(cc *controller.Config) {
				pool = sender.New(sender.Config{Resolve: sender.ImageResolver(cc.FSM), Responses: h, Logger: cc.Logger,
					MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
				cc.Sender, cc.BootstrapLevel = pool, level
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		h.c.Store(n.Controller)
		l, err := listener.New(listener.Config{Listener: lns[i], Node: n, Peers: peers, Logger: testLogger(t).Named(fmt.Sprintf("listener-%d", 1001+i))})
		if err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, n)
		c.listeners = append(c.listeners, l)
		c.pools = append(c.pools, pool)
	}
	return c
}

func (c *e2eCluster) shutdown() {
	for _, a := range c.agents {
		a.Close()
	}
	for i := range c.nodes {
		if c.listeners[i] != nil {
			c.listeners[i].Close()
		}
		if c.nodes[i] != nil {
			c.nodes[i].Shutdown()
		}
		c.pools[i].Close()
	}
}

// active returns the index of the active controller, waiting for one.
func (c *e2eCluster) active() int {
	c.t.Helper()
	idx := -1
	waitFor(c.t, "an active controller", func() bool {
		for i, n := range c.nodes {
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

func (c *e2eCluster) startAgent(id int32) *broker.Agent {
	c.t.Helper()
	a, err := broker.Start(broker.Config{BrokerID: id, Rack: fmt.Sprintf("rack-%d", id), Listener: "127.0.0.1:0", Controllers: c.addrs,
		HeartbeatInterval: 50 * time.Millisecond, RequestTimeout: 2 * time.Second, Logger: testLogger(c.t), StaticConfigs: c.static[id]})
	if err != nil {
		c.t.Fatal(err)
	}
	c.agents[id] = a
	return a
}

// startBrokers starts agents 1..n and waits until each is registered and
// unfenced, as the agents and the image both say, and knows the others.
func (c *e2eCluster) startBrokers(n int32) {
	for id := int32(1); id <= n; id++ {
		c.startAgent(id)
	}
	waitFor(c.t, fmt.Sprintf("%d unfenced brokers", n), func() bool {
		for _, a := range c.agents {
			if s := a.Status(); !s.Registered || s.Fenced || len(a.Brokers()) != int(n) {
				return false
			}
		}
		return c.liveBrokers() == int(n)
	})
}

// liveBrokers counts the unfenced brokers of the image.
func (c *e2eCluster) liveBrokers() int {
	_, brokers := c.image("")
	n := 0
	for _, b := range brokers {
		if !b.Fenced {
			n++
		}
	}
	return n
}

func (c *e2eCluster) stopAgent(id int32) {
	a := c.agents[id]
	a.Close()
	delete(c.agents, id)
	c.retired = append(c.retired, a)
}

// image reads the committed partitions of a topic and the brokers from
// the active controller's image.
type imagePart struct {
	id                                  rl.TopicID
	leader, leaderEpoch, partitionEpoch int32
	isr, replicas                       []int32
}

func (c *e2eCluster) image(topic string) (parts []imagePart, brokers []*fsm.Broker) {
	c.nodes[c.active()].FSM.View(func(im *fsm.Image) {
		for _, b := range im.Brokers() {
			cp := *b
			brokers = append(brokers, &cp)
		}
		t := im.TopicByName(topic)
		if t == nil {
			return
		}
		im.EachPartition(t.ID, func(_ int32, p *fsm.Partition) bool {
			parts = append(parts, imagePart{id: t.ID, leader: p.Leader, leaderEpoch: p.LeaderEpoch, partitionEpoch: p.PartitionEpoch,
				isr: slices.Clone(p.ISR), replicas: slices.Clone(p.Replicas)})
			return true
		})
	})
	return parts, brokers
}

// agrees reports whether an agent's cache holds exactly the image's
// state of every partition of topic.
func (c *e2eCluster) agrees(a *broker.Agent, topic string) bool {
	parts, _ := c.image(topic)
	if len(parts) == 0 {
		return false
	}
	for i, p := range parts {
		st, ok := a.Partition(topic, int32(i))
		if !ok || st.TopicID != p.id || st.Leader != p.leader || st.LeaderEpoch != p.leaderEpoch || st.PartitionEpoch != p.partitionEpoch ||
			!slices.Equal(st.ISR, p.isr) || !slices.Equal(st.Replicas, p.replicas) {
			return false
		}
	}
	return true
}

func (c *e2eCluster) waitAgree(topic string) {
	c.t.Helper()
	for id, a := range c.agents {
		waitFor(c.t, fmt.Sprintf("broker %d's cache of %s to match the image", id, topic), func() bool { return c.agrees(a, topic) })
	}
}

// checkClientView compares what a Kafka client reads from each agent with
// the controller's image: brokers (the unfenced ones, at their
// registered endpoints), and every partition's leader, leader epoch,
// replicas and ISR.
func (c *e2eCluster) checkClientView(topic string) {
	c.t.Helper()
	parts, brokers := c.image(topic)
	var live []int32
	for _, b := range brokers {
		if !b.Fenced {
			live = append(live, b.ID)
		}
	}
	for id, a := range c.agents {
		// The live brokers come with UpdateMetadata, which the sender
		// sends after the LeaderAndIsr that waitAgree may have seen.
		waitFor(c.t, fmt.Sprintf("broker %d's UpdateMetadata", id), func() bool {
			var ids []int32
			for _, b := range a.Brokers() {
				ids = append(ids, b.ID)
			}
			return slices.Equal(ids, live)
		})
		md := clientMetadata(c.t, a.Addr())
		var got []int32
		for _, b := range md.Brokers {
			if b.NodeID > 1000 {
				// The active controller as the agent found it.
				if b.NodeID != md.Controller {
					c.t.Fatalf("broker %d lists voter %d, which it does not name as controller (%d)", id, b.NodeID, md.Controller)
				}
				continue
			}
			got = append(got, b.NodeID)
			if ag := c.agents[b.NodeID]; ag != nil && net.JoinHostPort(b.Host, fmt.Sprint(b.Port)) != ag.Addr() {
				c.t.Fatalf("broker %d lists broker %d at %s:%d, it is at %s", id, b.NodeID, b.Host, b.Port, ag.Addr())
			}
		}
		if !slices.Equal(got, live) {
			c.t.Fatalf("broker %d lists brokers %v, the image has %v live", id, got, live)
		}
		td := md.Topics[topic]
		if td.Err != nil || td.ID != kadm.TopicID(parts[0].id) || len(td.Partitions) != len(parts) {
			c.t.Fatalf("broker %d: topic %s: %+v", id, topic, td)
		}
		for i, p := range parts {
			pd := td.Partitions[int32(i)]
			if pd.Leader != p.leader || pd.LeaderEpoch != p.leaderEpoch || !slices.Equal(pd.ISR, p.isr) || !slices.Equal(pd.Replicas, p.replicas) {
				c.t.Fatalf("broker %d: %s-%d is %+v, the image has %+v", id, topic, i, pd, p)
			}
		}
	}
}

// checkInvariants checks every agent's control log (the stopped ones'
// too), and across brokers that no (partition, leader epoch) was ever
// seen with two different leaders.
func (c *e2eCluster) checkInvariants() {
	c.t.Helper()
	type key struct {
		id    rl.TopicID
		p, le int32
	}
	leaders := map[key]int32{}
	all := slices.Clone(c.retired)
	for _, a := range c.agents {
		all = append(all, a)
	}
	for _, a := range all {
		recs := a.ControlLog()
		if len(recs) > 0 && recs[0].Seq != 1 {
			c.t.Fatalf("broker %d's control log lost records", a.BrokerID())
		}
		checkControlLog(c.t, recs)
		for _, r := range recs {
			if !r.Accepted || r.Partition < 0 || r.Key == broker.KeyStopReplica || r.Deleted {
				continue
			}
			k := key{r.TopicID, r.Partition, r.LeaderEpoch}
			if l, ok := leaders[k]; ok && l != r.Leader {
				c.t.Fatalf("partition %s-%d leader epoch %d had leaders %d and %d (broker %d: %v)", r.Topic, r.Partition, r.LeaderEpoch, l, r.Leader, a.BrokerID(), r)
			}
			leaders[k] = r.Leader
		}
	}
	if len(leaders) == 0 {
		c.t.Fatal("no partition state was ever accepted")
	}
}

func (c *e2eCluster) admin() *kadm.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("three raft voters and three brokers over TCP")
	}
	const session = 2 * time.Second
	c := newE2ECluster(t, session)
	c.active()
	// Registration → unfenced, as the agents and the image both say.
	c.startBrokers(3)
	_, brokers := c.image("")
	for _, b := range brokers {
		if a := c.agents[b.ID]; a == nil || a.Status().BrokerEpoch != b.Epoch || b.Incarnation != a.IncarnationID() || b.Rack != fmt.Sprintf("rack-%d", b.ID) {
			t.Fatalf("image broker %+v does not match its agent", b)
		}
	}

	// A topic created through kadm reaches every broker's cache.
	adm := c.admin()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if r, err := adm.CreateTopic(ctx, 6, 3, nil, "orders"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	c.waitAgree("orders")
	c.checkClientView("orders")
	parts, _ := c.image("orders")
	for id, a := range c.agents {
		host := a.Host().(*broker.MemoryHost)
		var want []broker.TopicPartition
		for i, p := range parts {
			if p.leader == id {
				want = append(want, broker.TopicPartition{Topic: "orders", Partition: int32(i)})
			}
		}
		waitFor(t, fmt.Sprintf("broker %d to lead what the image says", id), func() bool { return slices.Equal(host.Leading(), want) })
	}

	// Broker 3 dies: its session expires, it is fenced, its partitions
	// get other leaders, and the other brokers hear of it.
	led3 := 0
	for _, p := range parts {
		if p.leader == 3 {
			led3++
		}
	}
	if led3 == 0 {
		t.Fatal("broker 3 leads nothing: the test would prove nothing")
	}
	c.stopAgent(3)
	waitFor(t, "broker 3 fenced and leading nothing", func() bool {
		parts, brokers := c.image("orders")
		for _, b := range brokers {
			if b.ID == 3 && !b.Fenced {
				return false
			}
		}
		for _, p := range parts {
			if p.leader == 3 || slices.Contains(p.isr, 3) {
				return false
			}
		}
		return true
	})
	c.waitAgree("orders")
	c.checkClientView("orders")
	after, _ := c.image("orders")
	for i := range parts {
		if parts[i].leader == 3 && after[i].leaderEpoch <= parts[i].leaderEpoch {
			t.Fatalf("orders-%d changed leader without a new leader epoch", i)
		}
	}

	// Broker 3 comes back as a new incarnation, catches up, and a
	// preferred election gives it its partitions back.
	c.startAgent(3)
	waitFor(t, "broker 3 unfenced again", func() bool { s := c.agents[3].Status(); return s.Registered && !s.Fenced })
	// The leaders see broker 3 caught up (these brokers hold no data, so
	// at once) and report it back into their ISRs.
	c.waitAgree("orders")
	parts, _ = c.image("orders")
	for i, p := range parts {
		if slices.Contains(p.isr, 3) {
			continue
		}
		st, err := c.agents[p.leader].AlterPartition(ctx, "orders", int32(i), append(slices.Clone(p.isr), 3))
		if err != nil {
			t.Fatalf("AlterPartition orders-%d by broker %d: %v", i, p.leader, err)
		}
		if !slices.Contains(st.ISR, 3) || st.PartitionEpoch <= p.partitionEpoch {
			t.Fatalf("AlterPartition orders-%d: %+v", i, st)
		}
	}
	waitFor(t, "broker 3 back in every ISR", func() bool {
		parts, _ := c.image("orders")
		for _, p := range parts {
			if !slices.Contains(p.isr, 3) {
				return false
			}
		}
		return true
	})
	res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"orders": {0: {}, 1: {}, 2: {}, 3: {}, 4: {}, 5: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range res {
		for _, r := range ps {
			if r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
				t.Fatalf("preferred election of orders-%d: %v", r.Partition, r.Err)
			}
		}
	}
	waitFor(t, "preferred leaders", func() bool {
		parts, _ := c.image("orders")
		for _, p := range parts {
			if p.leader != p.replicas[0] {
				return false
			}
		}
		return true
	})
	c.waitAgree("orders")
	c.checkClientView("orders")
	host3 := c.agents[3].Host().(*broker.MemoryHost)
	waitFor(t, "broker 3 leading again", func() bool { return len(host3.Leading()) == led3 })

	// The active controller goes: the next one takes over under a new
	// controller epoch, the agents follow it, and new work reaches them.
	old := c.active()
	_, oldEpoch := c.nodes[old].Controller.Active()
	c.listeners[old].Close()
	c.nodes[old].Shutdown()
	c.listeners[old], c.nodes[old] = nil, nil
	next := c.active()
	_, newEpoch := c.nodes[next].Controller.Active()
	if newEpoch <= oldEpoch {
		t.Fatalf("controller epoch %d after %d", newEpoch, oldEpoch)
	}
	for id, a := range c.agents {
		waitFor(t, fmt.Sprintf("broker %d to accept controller epoch %d", id, newEpoch), func() bool { return a.Status().ControllerEpoch == newEpoch })
	}
	// A client in the middle of a failover may see transient errors and
	// retries; a retry of a create that went through finds the topic.
	for {
		r, err := adm.CreateTopic(ctx, 3, 2, nil, "after-failover")
		if err == nil {
			err = r.Err
		}
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create after the failover: %v", err)
		}
		t.Logf("create after the failover: %v; retrying", err)
		time.Sleep(50 * time.Millisecond)
	}
	c.waitAgree("after-failover")
	c.checkClientView("after-failover")
	c.waitAgree("orders")

	// Controlled shutdown of broker 2: it may stop once it leads nothing.
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	a2 := c.agents[2]
	if err := a2.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	delete(c.agents, 2)
	c.retired = append(c.retired, a2)
	for _, topic := range []string{"orders", "after-failover"} {
		parts, _ := c.image(topic)
		for i, p := range parts {
			if p.leader == 2 {
				t.Fatalf("%s-%d still led by broker 2 after its controlled shutdown", topic, i)
			}
		}
		c.waitAgree(topic)
	}
	c.checkInvariants()
}
