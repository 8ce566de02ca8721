package listener

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// electLeaders maps ElectLeaders onto Controller.ElectLeaders. Version 0
// has no election type: it is the preferred-replica election it was
// introduced as. Null topics means every partition (and then only those an
// election could change are reported, as Kafka does).
func (l *Listener) electLeaders(ctx context.Context, req *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	typ := controller.ElectionType(req.ElectionType)
	if req.Version == 0 {
		typ = controller.PreferredLeaderElection
	}
	var parts []controller.TopicPartition
	if req.Topics != nil {
		parts = []controller.TopicPartition{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, controller.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	var results []controller.ElectLeadersResult
	var err error
	if l.standby() {
		err = l.notController()
	} else {
		cctx, cancel := l.requestContext(ctx, req.TimeoutMillis)
		results, err = l.node.Controller.ElectLeaders(cctx, typ, parts)
		cancel()
	}
	if err != nil {
		// A whole-request failure: the top-level code (v1+), and every
		// named partition too, which is where v0 clients (and kgo, when
		// deciding whether to retry on NOT_CONTROLLER) look.
		resp.ErrorCode = errorCode(err)
		results = results[:0]
		for _, tp := range parts {
			results = append(results, controller.ElectLeadersResult{Topic: tp.Topic, Partition: tp.Partition, Err: err})
		}
	}
	index := map[string]int{}
	for _, r := range results {
		i, ok := index[r.Topic]
		if !ok {
			i = len(resp.Topics)
			index[r.Topic] = i
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = r.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition = r.Partition
		rp.ErrorCode = errorCode(r.Err)
		rp.ErrorMessage = errorMessage(r.Err)
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}

// describeCluster answers what a client asks for. EndpointType 2
// (controllers, KIP-919's --bootstrap-controller) lists the voters, with
// the active one as controller. EndpointType 1 (brokers, and every v0
// request) lists the data brokers alone, with a live broker as
// controller, as a broker answers it: voters do not pose as brokers, and
// the brokers forward what only the controller answers.
// IncludeFencedBrokers (v2) adds fenced data brokers, flagged.
func (l *Listener) describeCluster(req *kmsg.DescribeClusterRequest) *kmsg.DescribeClusterResponse {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 {
		resp.EndpointType = req.EndpointType
		if req.EndpointType != 1 && req.EndpointType != 2 {
			resp.ErrorCode = kerr.UnsupportedEndpointType.Code
			msg := "endpoint type " + strconv.Itoa(int(req.EndpointType)) + " is not one of 1 (brokers) and 2 (controllers)"
			resp.ErrorMessage = &msg
			return resp
		}
	}
	resp.ClusterID = l.clusterID()
	controllers := req.Version >= 1 && req.EndpointType == 2
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = clusterOps
	}
	l.node.FSM.View(func(im *fsm.Image) {
		c := l.clusterOf(im, req.IncludeFencedBrokers, controllers, !controllers)
		if controllers {
			resp.ControllerID = l.activeID()
		} else {
			resp.ControllerID = c.liveBroker()
		}
		for _, n := range c.nodes {
			b := kmsg.NewDescribeClusterResponseBroker()
			b.NodeID, b.Host, b.Port, b.Rack, b.IsFenced = n.id, n.host, n.port, n.rack, n.fenced
			resp.Brokers = append(resp.Brokers, b)
		}
	})
	return resp
}

// metadataTopic is the name and partition DescribeQuorum asks about: the
// controllers' log, as KRaft names it.
const metadataTopic = "__cluster_metadata"

// probeClientID marks the DescribeQuorum the active voter sends a follower
// to learn its log end: the follower answers with its own raft state
// instead of NOT_CONTROLLER.
const probeClientID = "ctrlquorum-quorum-probe"

// describeQuorum answers on the active controller from hashicorp/raft:
//
//   - LeaderID: this voter; LeaderEpoch: the raft term; HighWatermark: the
//     raft commit index. Offsets are raft log indexes throughout.
//   - CurrentVoters / Observers: the voters and non-voters of the raft
//     configuration (GetConfiguration), with the directory id each one's
//     raft address names (zero for a legacy address); a non-voter is a
//     voter being added, still catching up. Nodes: their listeners (see
//     quorum).
//   - The leader's own LogEndOffset is its last log index. hashicorp/raft
//     keeps each follower's match index private, so a follower's log end
//     is asked of the follower itself: a probe DescribeQuorum to its
//     listener, answered with its last log index and the wall-clock time
//     it last heard from the leader (raft's LastContact). That gives
//     LogEndOffset and LastFetchTimestamp, and LastCaughtUpTimestamp (the
//     same time, when the follower's log reaches the high watermark). A
//     follower that does not answer within PeerTimeout is reported with
//     -1 in all three. The leader's own timestamps are -1, as in Kafka.
//
// A standby answers NOT_CONTROLLER at the top level, which is where
// clients look before rerouting.
func (l *Listener) describeQuorum(ctx context.Context, c *kafkawire.Conn, req *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse {
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	r := l.node.Voter.Raft()
	switch clientID(c) {
	case probeClientID:
		return l.quorumProbeAnswer(resp)
	case readIndexClientID:
		return l.readIndexAnswer(c, resp)
	}
	valid := len(req.Topics) == 1 && req.Topics[0].Topic == metadataTopic &&
		len(req.Topics[0].Partitions) == 1 && req.Topics[0].Partitions[0].Partition == 0
	if !valid {
		resp.ErrorCode = kerr.UnknownTopicOrPartition.Code
		msg := "DescribeQuorum describes " + metadataTopic + " partition 0 only"
		resp.ErrorMessage = &msg
		return resp
	}
	rt := kmsg.NewDescribeQuorumResponseTopic()
	rt.Topic = metadataTopic
	rp := kmsg.NewDescribeQuorumResponseTopicPartition()
	if r.State() != raft.Leader {
		err := l.notController()
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		rp.ErrorCode = kerr.NotLeaderForPartition.Code
		rp.LeaderID = l.activeID()
		rp.LeaderEpoch = int32(r.CurrentTerm())
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp
	}
	rp.LeaderID = l.self
	rp.LeaderEpoch = int32(r.CurrentTerm())
	hw := r.CommitIndex()
	rp.HighWatermark = int64(hw)

	nodes := l.quorum()
	states := make([]kmsg.DescribeQuorumResponseTopicPartitionReplicaState, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		st := &states[i]
		*st = kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		st.ReplicaID, st.ReplicaDirectoryID, st.LogEndOffset = n.id, n.dir, -1
		if n.id == l.self {
			st.LogEndOffset = int64(r.LastIndex())
			continue
		}
		if !n.ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.probeFollower(ctx, n.listener, hw, st)
		}()
	}
	wg.Wait()
	for i, n := range nodes {
		if n.voter {
			rp.CurrentVoters = append(rp.CurrentVoters, states[i])
		} else {
			rp.Observers = append(rp.Observers, states[i])
		}
	}
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	for _, n := range nodes {
		if !n.ok {
			continue
		}
		rn := kmsg.NewDescribeQuorumResponseNode()
		rn.NodeID = n.id
		ln := kmsg.NewDescribeQuorumResponseNodeListener()
		ln.Name, ln.Host, ln.Port = l.cfg.ControllerListener, n.listener.Host, uint16(n.listener.Port)
		rn.Listeners = append(rn.Listeners, ln)
		resp.Nodes = append(resp.Nodes, rn)
	}
	return resp
}

// probeFollower fills a follower's replica state from its own answer.
func (l *Listener) probeFollower(ctx context.Context, p PeerListener, hw uint64, st *kmsg.DescribeQuorumResponseTopicPartitionReplicaState) {
	own, err := l.probe(ctx, p)
	if err != nil {
		l.log.Debug("quorum probe failed", "voter", p.NodeID, "error", err)
		return
	}
	st.LogEndOffset = own.LogEndOffset
	st.LastFetchTimestamp = own.LastFetchTimestamp
	if own.LogEndOffset >= int64(hw) {
		st.LastCaughtUpTimestamp = own.LastFetchTimestamp
	}
}

// probe asks the node at p for its own replica state (quorumProbeAnswer),
// within PeerTimeout, and checks that it answers as node p.NodeID.
func (l *Listener) probe(ctx context.Context, p PeerListener) (kmsg.DescribeQuorumResponseTopicPartitionReplicaState, error) {
	var own kmsg.DescribeQuorumResponseTopicPartitionReplicaState
	ctx, cancel := context.WithTimeout(ctx, l.cfg.PeerTimeout)
	defer cancel()
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.SetVersion(req.MaxVersion())
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = metadataTopic
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	resp, err := l.callVoter(ctx, p, probeClientID, req)
	if err != nil {
		return own, err
	}
	qr := resp.(*kmsg.DescribeQuorumResponse)
	if len(qr.Topics) != 1 || len(qr.Topics[0].Partitions) != 1 || len(qr.Topics[0].Partitions[0].CurrentVoters) != 1 {
		return own, errors.New("the node's answer describes no replica")
	}
	own = qr.Topics[0].Partitions[0].CurrentVoters[0]
	if own.ReplicaID != p.NodeID {
		return own, fmt.Errorf("the node at %s is node %d, not node %d", p.addr(), own.ReplicaID, p.NodeID)
	}
	return own, nil
}

// quorumProbeAnswer is a voter's own raft state for the active voter's
// DescribeQuorum: its last log index, and the wall-clock time it last
// heard from the leader (-1 if never).
func (l *Listener) quorumProbeAnswer(resp *kmsg.DescribeQuorumResponse) *kmsg.DescribeQuorumResponse {
	r := l.node.Voter.Raft()
	rt := kmsg.NewDescribeQuorumResponseTopic()
	rt.Topic = metadataTopic
	rp := kmsg.NewDescribeQuorumResponseTopicPartition()
	rp.LeaderID = l.activeID()
	rp.LeaderEpoch = int32(r.CurrentTerm())
	rp.HighWatermark = int64(r.CommitIndex())
	st := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
	st.ReplicaID, st.ReplicaDirectoryID = l.self, l.ownDirectory()
	st.LogEndOffset = int64(r.LastIndex())
	if last := r.LastContact(); !last.IsZero() {
		st.LastFetchTimestamp = last.UnixMilli()
	} else if r.State() == raft.Leader {
		st.LastFetchTimestamp = time.Now().UnixMilli()
	}
	rp.CurrentVoters = append(rp.CurrentVoters, st)
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	return resp
}
