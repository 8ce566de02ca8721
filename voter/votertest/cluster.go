package votertest

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
	"github.com/ctrlquorum/ctrlquorum/voter"
)

// Cluster is a set of voters in this process. Node i has raft id
// strconv.Itoa(i+1), its own data directory and a fixed address on
// 127.0.0.1 that survives Stop/Restart. Methods must be called from the
// test's goroutine.
type Cluster struct {
	t      testing.TB
	newFSM func(id string) raft.FSM
	nodes  []*node
	log    *testLog
	down   bool
}

// shutdownTimeout bounds Stop. A clean raft shutdown on loopback takes
// milliseconds; anything near this long is a hang.
const shutdownTimeout = 30 * time.Second

type node struct {
	cfg   voter.Config // as for a restart: BindAddr set, Stream nil
	voter *voter.Voter // nil while stopped
	fsm   raft.FSM     // FSM of the current (or last) incarnation
}

// NewCluster starts n voters that bootstrap one cluster. newFSM is called
// with the node id at every start, so a restarted node gets a fresh FSM that
// raft rebuilds from the snapshot and log on disk. opts adjust each node's
// Config after the defaults (FastTimeouts, a logger at Warn level into t.Log).
// The cluster shuts down in t.Cleanup.
func NewCluster(t testing.TB, n int, newFSM func(id string) raft.FSM, opts ...func(*voter.Config)) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("votertest: cluster of %d voters", n)
	}
	c := &Cluster{t: t, newFSM: newFSM, log: &testLog{t: t}}

	// Listen before anyone starts: every address is known and held when the
	// peer list is written, so no other process can take a port in between.
	streams := make([]*raftnet.StreamLayer, n)
	peers := make([]raft.Server, n)
	for i := range n {
		// A port below the ephemeral range: a node restarted on its
		// address must not find it taken meanwhile as the local port of
		// some outgoing connection.
		s := testkit.BindOutsideEphemeral(t, "127.0.0.1", func(addr string) (*raftnet.StreamLayer, error) {
			return raftnet.NewTCPStreamLayer(addr, "")
		})
		streams[i] = s
		peers[i] = raft.Server{
			Suffrage: raft.Voter,
			ID:       raft.ServerID(strconv.Itoa(i + 1)),
			Address:  raft.ServerAddress(s.Addr().String()),
		}
	}

	for i := range n {
		id := string(peers[i].ID)
		cfg := voter.Config{
			NodeID:   id,
			BindAddr: string(peers[i].Address),
			DataDir:  t.TempDir(),
			Peers:    peers,
			Logger: hclog.New(&hclog.LoggerOptions{
				Name:   "voter-" + id,
				Level:  hclog.Warn,
				Output: c.log,
			}),
		}
		voter.FastTimeouts(&cfg)
		for _, opt := range opts {
			opt(&cfg)
		}
		c.nodes = append(c.nodes, &node{cfg: cfg})
	}
	// Registered after the t.TempDir calls, so it runs before they are
	// removed: the stores are closed before their directory goes away.
	t.Cleanup(c.Shutdown)

	for i, nd := range c.nodes {
		cfg := nd.cfg
		cfg.Stream = streams[i]
		if err := c.start(i, cfg); err != nil {
			for _, rest := range streams[i+1:] {
				_ = rest.Close()
			}
			t.Fatal(err)
		}
	}
	return c
}

// start runs node i with cfg and a fresh FSM. Start closes cfg.Stream if it
// fails, so the caller only cleans up streams not yet handed over.
func (c *Cluster) start(i int, cfg voter.Config) error {
	nd := c.nodes[i]
	nd.fsm = c.newFSM(cfg.NodeID)
	cfg.FSM = nd.fsm
	v, err := voter.Start(cfg)
	if err != nil {
		return fmt.Errorf("votertest: start voter %s: %w", cfg.NodeID, err)
	}
	nd.voter = v
	return nil
}

// Size is the number of nodes, running or not.
func (c *Cluster) Size() int { return len(c.nodes) }

// Voter returns node i, or nil while it is stopped.
func (c *Cluster) Voter(i int) *voter.Voter { return c.nodes[i].voter }

// FSM returns the FSM of node i's current incarnation (its last one while
// stopped).
func (c *Cluster) FSM(i int) raft.FSM { return c.nodes[i].fsm }

// Index returns the node index of v, or -1 if v is not a running node.
func (c *Cluster) Index(v *voter.Voter) int {
	for i, nd := range c.nodes {
		if nd.voter != nil && nd.voter == v {
			return i
		}
	}
	return -1
}

// Running returns the indexes of the nodes that are running.
func (c *Cluster) Running() []int {
	var out []int
	for i, nd := range c.nodes {
		if nd.voter != nil {
			out = append(out, i)
		}
	}
	return out
}

// Leader waits until exactly one running voter is leader and every running
// voter names it as leader, then returns it. It fails the test on timeout.
func (c *Cluster) Leader(timeout time.Duration) *voter.Voter {
	c.t.Helper()
	var leader *voter.Voter
	WaitFor(c.t, timeout, "a leader all running voters agree on", func() bool {
		leader = c.agreedLeader()
		return leader != nil
	})
	return leader
}

func (c *Cluster) agreedLeader() *voter.Voter {
	var leader *voter.Voter
	for _, nd := range c.nodes {
		if nd.voter != nil && nd.voter.IsLeader() {
			if leader != nil {
				return nil
			}
			leader = nd.voter
		}
	}
	if leader == nil {
		return nil
	}
	for _, nd := range c.nodes {
		if nd.voter == nil {
			continue
		}
		if _, id := nd.voter.LeaderID(); id != leader.ID() {
			return nil
		}
	}
	return leader
}

// Followers returns the running voters that are not leader right now.
func (c *Cluster) Followers() []*voter.Voter {
	var out []*voter.Voter
	for _, nd := range c.nodes {
		if nd.voter != nil && !nd.voter.IsLeader() {
			out = append(out, nd.voter)
		}
	}
	return out
}

// Stop shuts node i down; its data directory and address stay reserved for
// Restart. Stopping a stopped node does nothing.
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	if nd.voter == nil {
		return
	}
	v := nd.voter
	nd.voter = nil
	done := make(chan error, 1)
	go func() { done <- v.Shutdown() }()
	select {
	case err := <-done:
		if err != nil {
			c.t.Errorf("votertest: shutdown voter %s: %v", nd.cfg.NodeID, err)
		}
	case <-time.After(shutdownTimeout):
		// A hung shutdown is a bug worth its stacks; the test cannot
		// continue with a node that holds its data directory.
		buf := make([]byte, 1<<20)
		c.t.Fatalf("votertest: voter %s did not shut down within %s\n%s",
			nd.cfg.NodeID, shutdownTimeout, buf[:runtime.Stack(buf, true)])
	}
}

// Restart stops node i if it runs and starts it again on the same data
// directory and address, with a fresh FSM from newFSM.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.Stop(i)
	if err := c.start(i, c.nodes[i].cfg); err != nil {
		c.t.Fatal(err)
	}
}

// Shutdown stops every node. It runs automatically in t.Cleanup; calling it
// earlier is allowed and later calls do nothing.
func (c *Cluster) Shutdown() {
	if c.down {
		return
	}
	c.down = true
	// Deferred so that a failing Stop, which ends the goroutine, still
	// silences nodes that keep running.
	defer c.log.close()
	for i := range c.nodes {
		c.Stop(i)
	}
}

// String lists the nodes with their role, for failure messages.
func (c *Cluster) String() string {
	s := ""
	for i, nd := range c.nodes {
		state := "stopped"
		if nd.voter != nil {
			state = nd.voter.Raft().State().String()
		}
		s += fmt.Sprintf("[%d id=%s %s %s] ", i, nd.cfg.NodeID, nd.cfg.BindAddr, state)
	}
	return s
}
