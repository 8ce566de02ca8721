package listener

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"strings"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// Authorized-operation bitfields for a cluster without an authorizer:
// everything a topic or the cluster supports is allowed, as Kafka answers
// when no authorizer is configured.
var (
	topicOps = opsBits(kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate,
		kmsg.ACLOperationDelete, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe,
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs)
	clusterOps = opsBits(kmsg.ACLOperationCreate, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe,
		kmsg.ACLOperationClusterAction, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs,
		kmsg.ACLOperationIdempotentWrite, kmsg.ACLOperationCreateTokens, kmsg.ACLOperationDescribeTokens)
)

func opsBits(ops ...kmsg.ACLOperation) int32 {
	var b int32
	for _, op := range ops {
		b |= 1 << uint(op)
	}
	return b
}

// brokerAgentClientID starts the client id of a broker agent's
// connections to the controllers (broker.Agent's control client).
const brokerAgentClientID = "ctrlquorum-broker-"

// internalTopics are the topics Kafka itself creates and flags internal.
var internalTopics = map[string]bool{"__consumer_offsets": true, "__transaction_state": true}

// metadata answers from this voter's committed image, so a standby's
// answer may trail the active controller's by the replication delay, as a
// Kafka broker's metadata cache does. AllowAutoTopicCreation is ignored:
// topics are created only by CreateTopics.
//
// Topics being deleted are not listed (Kafka's brokers drop them from
// their cache as soon as deletion starts).
//
// The broker list is the live brokers with a live broker as controller,
// as a broker answers; only while no live broker exists are the voters
// listed instead, with the active one as controller (see the package
// comment). A broker agent is answered with the voters and the active one
// as controller whatever the brokers: agents of the release before find
// the active controller by Metadata, and a rolling upgrade runs them
// beside voters of this one.
func (l *Listener) metadata(c *kafkawire.Conn, req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	v := req.Version
	active := l.activeID()
	agent := strings.HasPrefix(clientID(c), brokerAgentClientID)
	l.node.FSM.View(func(im *fsm.Image) {
		c := l.clusterOf(im, false, false, true)
		ctrl := c.liveBroker()
		if ctrl < 0 || agent {
			c = l.clusterOf(im, false, true, false)
			ctrl = active
		}
		for _, n := range c.nodes {
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port, b.Rack = n.id, n.host, n.port, n.rack
			resp.Brokers = append(resp.Brokers, b)
		}
		resp.ControllerID = ctrl
		if id := l.clusterIDOf(im); id != "" {
			resp.ClusterID = &id
		}
		if req.IncludeClusterAuthorizedOperations && v >= 8 && v <= 10 {
			resp.AuthorizedOperations = clusterOps
		}
		// v0 has no null: an empty list means every topic.
		if req.Topics == nil || (v == 0 && len(req.Topics) == 0) {
			for _, t := range im.Topics() {
				if !t.Deleting {
					resp.Topics = append(resp.Topics, l.topicMetadata(im, c, t, req))
				}
			}
			return
		}
		seenName := map[string]bool{}
		seenID := map[rl.TopicID]bool{}
		for _, rt := range req.Topics {
			if rt.Topic == nil && v >= 10 {
				id := rl.TopicID(rt.TopicID)
				if seenID[id] {
					continue
				}
				seenID[id] = true
				if t := im.Topic(id); t != nil && !t.Deleting {
					resp.Topics = append(resp.Topics, l.topicMetadata(im, c, t, req))
					continue
				}
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			name := ""
			if rt.Topic != nil {
				name = *rt.Topic
			}
			if seenName[name] {
				continue
			}
			seenName[name] = true
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = &name
			if err := controller.ValidTopicName(name); err != nil {
				mt.ErrorCode = kerr.InvalidTopicException.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			t := im.TopicByName(name)
			if t == nil || t.Deleting {
				mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			resp.Topics = append(resp.Topics, l.topicMetadata(im, c, t, req))
		}
	})
	return resp
}

// topicMetadata describes one topic the way a KRaft broker's metadata
// cache does: a partition whose leader clients cannot reach reports no
// leader (LEADER_NOT_AVAILABLE, or LISTENER_NOT_FOUND when the leader is
// up but has no endpoint of the client listener's name); offline replicas
// are those on unknown or fenced brokers. Version 0 drops unreachable
// replicas from the replica and ISR lists and flags the partition
// REPLICA_NOT_AVAILABLE, as Kafka did for it.
func (l *Listener) topicMetadata(im *fsm.Image, c cluster, t *fsm.Topic, req *kmsg.MetadataRequest) kmsg.MetadataResponseTopic {
	v := req.Version
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = internalTopics[t.Name]
	if req.IncludeTopicAuthorizedOperations && v >= 8 {
		mt.AuthorizedOperations = topicOps
	}
	im.EachPartition(t.ID, func(i int32, p *fsm.Partition) bool {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = i
		mp.LeaderEpoch = p.LeaderEpoch
		mp.Leader = p.Leader
		switch lb, ok := c.brokers[p.Leader]; {
		case p.Leader == rl.NoLeader || !ok || lb.offline():
			mp.Leader = rl.NoLeader
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		case !lb.endpoint:
			mp.Leader = rl.NoLeader
			mp.ErrorCode = kerr.ListenerNotFound.Code
			if v == 0 {
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
			}
		}
		mp.Replicas = append([]int32{}, p.Replicas...)
		mp.ISR = append([]int32{}, p.ISR...)
		for _, r := range p.Replicas {
			if c.brokers[r].offline() {
				mp.OfflineReplicas = append(mp.OfflineReplicas, r)
			}
		}
		if v == 0 {
			reachable := func(ids []int32) []int32 {
				out := ids[:0]
				for _, id := range ids {
					if c.brokers[id].available() {
						out = append(out, id)
					}
				}
				return out
			}
			n, m := len(mp.Replicas), len(mp.ISR)
			mp.Replicas, mp.ISR = reachable(mp.Replicas), reachable(mp.ISR)
			if mp.ErrorCode == 0 && (len(mp.Replicas) < n || len(mp.ISR) < m) {
				mp.ErrorCode = kerr.ReplicaNotAvailable.Code
			}
		}
		mt.Partitions = append(mt.Partitions, mp)
		return true
	})
	return mt
}
