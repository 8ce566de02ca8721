package listener

import (
	"sort"
	"strconv"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// activeID returns the node id of the active controller as this voter
// knows it: itself when its controller is active, otherwise the raft
// leader (which is, or is about to be, the active controller), or -1
// while no leader is known. Clients treat -1 as "ask again later"; naming
// the last controller instead would send them to a node that has most
// likely just died.
//
// A voter that raft has just made leader names no one until its
// controller is active. Until its barrier commits, its image may lack
// entries the previous leader committed (a follower learns the commit
// index only from the next append), and clients take the image of the
// node that names itself controller as the current one: a topic whose
// creation was acknowledged must not vanish from that answer.
func (l *Listener) activeID() int32 {
	if ok, _ := l.node.Controller.Active(); ok {
		return l.self
	}
	_, id := l.node.Voter.LeaderID()
	if id == "" {
		return -1
	}
	n, err := strconv.ParseInt(id, 10, 32)
	if err != nil || int32(n) == l.self {
		return -1
	}
	if _, ok := l.peer(int32(n)); !ok {
		// A leader the listener cannot send clients to: Peers is missing
		// a voter. Saying "unknown" keeps clients retrying instead of
		// failing on an id absent from the broker list.
		l.warnUnknownLeader(int32(n))
		return -1
	}
	return int32(n)
}

func (l *Listener) warnUnknownLeader(id int32) {
	if l.firstWarning("leader", id) {
		l.log.Warn("the raft leader is not in the listener's Peers: clients cannot be routed to it", "leader", id)
	}
}

// standby reports whether this voter must refuse mutations: its
// controller is not active and it is not the raft leader either. A leader
// whose controller is still activating is not a standby: its controller
// queues the request until it is ready.
func (l *Listener) standby() bool {
	if ok, _ := l.node.Controller.Active(); ok {
		return false
	}
	return !l.node.Voter.IsLeader()
}

// node is one entry of a broker list.
type node struct {
	id     int32
	host   string
	port   int32
	rack   *string
	fenced bool
	voter  bool
}

// dataBroker says how clients can reach a registered broker.
type dataBroker struct {
	registered bool
	fenced     bool
	// endpoint is false when the broker has no endpoint of the client
	// listener's name.
	endpoint bool
}

// available reports whether clients can use the broker: registered,
// unfenced, with an endpoint they can reach.
func (b dataBroker) available() bool { return b.registered && !b.fenced && b.endpoint }

// offline reports whether a replica on the broker is offline in Kafka's
// sense: its broker is unknown or fenced.
func (b dataBroker) offline() bool { return !b.registered || b.fenced }

// cluster is the broker list clients are given: every voter (under its
// voter id, with its client listener) and the data brokers, in id order,
// plus what the partitions' leaders and replicas need to know about the
// data brokers.
type cluster struct {
	nodes   []node
	brokers map[int32]dataBroker
}

func (l *Listener) clusterOf(im *fsm.Image, includeFenced, voters, dataBrokers bool) cluster {
	c := cluster{brokers: map[int32]dataBroker{}}
	voterIDs := map[int32]bool{}
	for _, p := range l.voterListeners() {
		voterIDs[p.NodeID] = true
		if voters {
			c.nodes = append(c.nodes, node{id: p.NodeID, host: p.Host, port: p.Port, voter: true})
		}
	}
	for _, b := range im.Brokers() {
		ep, ok := endpoint(b.Endpoints, l.cfg.BrokerListener)
		c.brokers[b.ID] = dataBroker{registered: true, fenced: b.Fenced, endpoint: ok}
		if voterIDs[b.ID] {
			l.warnCollision(b.ID)
			continue
		}
		if !dataBrokers || !ok || (b.Fenced && !includeFenced) {
			continue
		}
		n := node{id: b.ID, host: ep.Host, port: int32(ep.Port), fenced: b.Fenced}
		if b.Rack != "" {
			rack := b.Rack
			n.rack = &rack
		}
		c.nodes = append(c.nodes, n)
	}
	sort.SliceStable(c.nodes, func(i, j int) bool { return c.nodes[i].id < c.nodes[j].id })
	return c
}

// liveBroker is the controller a client is told of where it is given the
// brokers: the unfenced data broker with the lowest id, -1 when there is
// none. It forwards what only the controller answers. A broker agent
// names the same one, unless it is live itself (broker.Agent's
// clientControllerLocked): any live broker serves as the client's
// controller.
func (c cluster) liveBroker() int32 {
	for _, n := range c.nodes {
		if !n.voter && !n.fenced {
			return n.id
		}
	}
	return -1
}

// endpoint returns the broker's endpoint of the given listener name.
func endpoint(eps []rl.Endpoint, name string) (rl.Endpoint, bool) {
	for _, e := range eps {
		if e.Name == name {
			return e, true
		}
	}
	return rl.Endpoint{}, false
}
