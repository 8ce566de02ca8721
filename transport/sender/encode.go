package sender

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
)

// securityPlaintext is Kafka's code for the PLAINTEXT security protocol.
const securityPlaintext = 0

// PlaintextEndpoint returns a broker's first PLAINTEXT endpoint: the
// first named PLAINTEXT, or else the first whose security protocol is
// PLAINTEXT.
func PlaintextEndpoint(eps []rl.Endpoint) (rl.Endpoint, bool) {
	for _, e := range eps {
		if e.Name == "PLAINTEXT" {
			return e, true
		}
	}
	for _, e := range eps {
		if e.SecurityProtocol == securityPlaintext {
			return e, true
		}
	}
	return rl.Endpoint{}, false
}

// topicGroups groups partition indexes of ps by topic, in order of first
// appearance (the controller sorts partitions by topic id, so this is
// topic id order for its requests).
func topicGroups[T any](ps []T, key func(*T) (string, rl.TopicID)) [][]int {
	type tk struct {
		name string
		id   rl.TopicID
	}
	idx := map[tk]int{}
	var out [][]int
	var last tk
	lastG := -1
	for i := range ps {
		n, id := key(&ps[i])
		k := tk{n, id}
		if lastG >= 0 && k == last {
			out[lastG] = append(out[lastG], i)
			continue
		}
		g, ok := idx[k]
		if !ok {
			g = len(out)
			idx[k] = g
			out = append(out, nil)
		}
		out[g] = append(out[g], i)
		last, lastG = k, g
	}
	return out
}

// EncodeLeaderAndIsr maps a LeaderAndIsr to the Kafka request at version v
// (0..7). Partition epochs travel as ZKVersion, which is what the
// ZooKeeper version of the partition state was for.
func EncodeLeaderAndIsr(r *controller.LeaderAndIsr, v int16) *kmsg.LeaderAndISRRequest {
	req := kmsg.NewPtrLeaderAndISRRequest()
	req.SetVersion(v)
	req.ControllerID = r.ControllerID
	req.ControllerEpoch = r.ControllerEpoch
	req.BrokerEpoch = r.BrokerEpoch
	req.Type = 0 // incremental
	part := func(ps *controller.PartitionState) kmsg.LeaderAndISRRequestTopicPartition {
		p := kmsg.NewLeaderAndISRRequestTopicPartition()
		p.Topic = ps.Topic
		p.Partition = ps.Partition
		p.ControllerEpoch = r.ControllerEpoch
		p.Leader = ps.Leader
		p.LeaderEpoch = ps.LeaderEpoch
		p.ISR = nonNil(ps.ISR)
		p.ZKVersion = ps.PartitionEpoch
		p.Replicas = nonNil(ps.Replicas)
		p.AddingReplicas = nonNil(ps.Adding)
		p.RemovingReplicas = nonNil(ps.Removing)
		p.IsNew = ps.IsNew
		return p
	}
	if v <= 1 {
		req.PartitionStates = make([]kmsg.LeaderAndISRRequestTopicPartition, 0, len(r.Partitions))
		for _, ps := range r.Partitions {
			req.PartitionStates = append(req.PartitionStates, part(ps))
		}
	} else {
		for _, g := range topicGroups(r.Partitions, func(p **controller.PartitionState) (string, rl.TopicID) { return (*p).Topic, (*p).TopicID }) {
			ts := kmsg.NewLeaderAndISRRequestTopicState()
			ts.Topic = r.Partitions[g[0]].Topic
			ts.TopicID = r.Partitions[g[0]].TopicID
			ts.PartitionStates = make([]kmsg.LeaderAndISRRequestTopicPartition, 0, len(g))
			for _, i := range g {
				ts.PartitionStates = append(ts.PartitionStates, part(r.Partitions[i]))
			}
			req.TopicStates = append(req.TopicStates, ts)
		}
	}
	for _, b := range r.Leaders {
		l := kmsg.NewLeaderAndISRRequestLiveLeader()
		l.BrokerID = b.ID
		if e, ok := PlaintextEndpoint(b.Endpoints); ok {
			l.Host, l.Port = e.Host, int32(e.Port)
		}
		req.LiveLeaders = append(req.LiveLeaders, l)
	}
	return req
}

// EncodeUpdateMetadata maps an UpdateMetadata to the Kafka request at
// version v (0..8). Replicas on brokers missing from the live list are
// listed offline. A full one (a catch-up) is, from v8, of type full
// (kafkaclient.UpdateMetadataFull) and lists every topic it names, those
// with no partition in the request as a topic state without partitions;
// before v8 it goes as an ordinary one, since the broker could not tell.
func EncodeUpdateMetadata(r *controller.UpdateMetadata, v int16) *kmsg.UpdateMetadataRequest {
	req := kmsg.NewPtrUpdateMetadataRequest()
	req.SetVersion(v)
	req.ControllerID = r.ControllerID
	req.ControllerEpoch = r.ControllerEpoch
	req.BrokerEpoch = r.BrokerEpoch
	live := make(map[int32]bool, len(r.LiveBrokers))
	for _, b := range r.LiveBrokers {
		live[b.ID] = true
	}
	part := func(ps *controller.PartitionState) kmsg.UpdateMetadataRequestTopicPartition {
		p := kmsg.NewUpdateMetadataRequestTopicPartition()
		p.Topic = ps.Topic
		p.Partition = ps.Partition
		p.ControllerEpoch = r.ControllerEpoch
		p.Leader = ps.Leader
		p.LeaderEpoch = ps.LeaderEpoch
		p.ISR = nonNil(ps.ISR)
		p.ZKVersion = ps.PartitionEpoch
		p.Replicas = nonNil(ps.Replicas)
		p.OfflineReplicas = []int32{}
		for _, b := range ps.Replicas {
			if !live[b] {
				p.OfflineReplicas = append(p.OfflineReplicas, b)
			}
		}
		return p
	}
	if v <= 4 {
		req.PartitionStates = make([]kmsg.UpdateMetadataRequestTopicPartition, 0, len(r.Partitions))
		for i := range r.Partitions {
			req.PartitionStates = append(req.PartitionStates, part(&r.Partitions[i]))
		}
	} else {
		for _, g := range topicGroups(r.Partitions, func(p *controller.PartitionState) (string, rl.TopicID) { return p.Topic, p.TopicID }) {
			ts := kmsg.NewUpdateMetadataRequestTopicState()
			ts.Topic = r.Partitions[g[0]].Topic
			ts.TopicID = r.Partitions[g[0]].TopicID
			ts.PartitionStates = make([]kmsg.UpdateMetadataRequestTopicPartition, 0, len(g))
			for _, i := range g {
				ts.PartitionStates = append(ts.PartitionStates, part(&r.Partitions[i]))
			}
			req.TopicStates = append(req.TopicStates, ts)
		}
		if r.Full && v >= 8 {
			kafkaclient.SetUpdateMetadataType(req, kafkaclient.UpdateMetadataFull)
			named := make(map[rl.TopicID]bool, len(req.TopicStates))
			for i := range req.TopicStates {
				named[rl.TopicID(req.TopicStates[i].TopicID)] = true
			}
			for _, t := range r.Topics {
				if named[t.ID] {
					continue
				}
				ts := kmsg.NewUpdateMetadataRequestTopicState()
				ts.Topic, ts.TopicID = t.Name, t.ID
				ts.PartitionStates = []kmsg.UpdateMetadataRequestTopicPartition{}
				req.TopicStates = append(req.TopicStates, ts)
			}
		}
	}
	for _, b := range r.LiveBrokers {
		lb := kmsg.NewUpdateMetadataRequestLiveBroker()
		lb.ID = b.ID
		if e, ok := PlaintextEndpoint(b.Endpoints); ok {
			lb.Host, lb.Port = e.Host, int32(e.Port)
		}
		for _, e := range b.Endpoints {
			ep := kmsg.NewUpdateMetadataRequestLiveBrokerEndpoint()
			ep.Host, ep.Port = e.Host, int32(e.Port)
			ep.ListenerName = e.Name
			ep.SecurityProtocol = e.SecurityProtocol
			lb.Endpoints = append(lb.Endpoints, ep)
		}
		if b.Rack != "" {
			rack := b.Rack
			lb.Rack = &rack
		}
		req.LiveBrokers = append(req.LiveBrokers, lb)
	}
	return req
}

// DefaultMaxPartitionsPerRequest is how many partition states one
// UpdateMetadata request carries at most: at 40–80 bytes each, a few MiB,
// far below a broker's frame limit (100 MiB by default) and a size the
// broker decodes without holding the whole image twice. A catch-up of a
// broker at ten million partitions is some 200 requests.
const DefaultMaxPartitionsPerRequest = 100_000

// EncodeUpdateMetadataChunks is EncodeUpdateMetadata in requests of at
// most maxPartitions partition states each, in order. Each request but
// the last is an ordinary one; the last carries what makes a full one
// full (its type and the topics it names), so the broker forgets the
// topics the controller no longer has only once it has every partition
// state. A broker reads the requests one by one as upserts: delivered in
// order, they leave its cache as the single request would.
func EncodeUpdateMetadataChunks(r *controller.UpdateMetadata, v int16, maxPartitions int) []*kmsg.UpdateMetadataRequest {
	if maxPartitions <= 0 || len(r.Partitions) <= maxPartitions {
		return []*kmsg.UpdateMetadataRequest{EncodeUpdateMetadata(r, v)}
	}
	var out []*kmsg.UpdateMetadataRequest
	for lo := 0; lo < len(r.Partitions); lo += maxPartitions {
		hi := min(lo+maxPartitions, len(r.Partitions))
		chunk := *r
		chunk.Partitions = r.Partitions[lo:hi:hi]
		if hi < len(r.Partitions) {
			chunk.Full, chunk.Topics = false, nil
		}
		out = append(out, EncodeUpdateMetadata(&chunk, v))
	}
	return out
}

// EncodeStopReplica maps a StopReplica to Kafka requests at version v
// (0..4). From v3 one request carries a leader epoch and a delete flag per
// partition; before v3 delete is one flag for the whole request, so a
// StopReplica mixing both becomes two requests, stops before deletes.
func EncodeStopReplica(r *controller.StopReplica, v int16) []*kmsg.StopReplicaRequest {
	mk := func() *kmsg.StopReplicaRequest {
		req := kmsg.NewPtrStopReplicaRequest()
		req.SetVersion(v)
		req.ControllerID = r.ControllerID
		req.ControllerEpoch = r.ControllerEpoch
		req.BrokerEpoch = r.BrokerEpoch
		return req
	}
	groups := topicGroups(r.Partitions, func(p *controller.StopPartition) (string, rl.TopicID) { return p.Topic, p.TopicID })
	if v >= 3 {
		req := mk()
		for _, g := range groups {
			t := kmsg.NewStopReplicaRequestTopic()
			t.Topic = r.Partitions[g[0]].Topic
			for _, i := range g {
				sp := &r.Partitions[i]
				ps := kmsg.NewStopReplicaRequestTopicPartitionState()
				ps.Partition = sp.Partition
				ps.LeaderEpoch = sp.LeaderEpoch
				ps.Delete = sp.Delete
				t.PartitionStates = append(t.PartitionStates, ps)
			}
			req.Topics = append(req.Topics, t)
		}
		return []*kmsg.StopReplicaRequest{req}
	}
	var out []*kmsg.StopReplicaRequest
	for _, del := range []bool{false, true} {
		req := mk()
		req.DeletePartitions = del
		for _, g := range groups {
			var parts []int32
			for _, i := range g {
				if r.Partitions[i].Delete == del {
					parts = append(parts, r.Partitions[i].Partition)
				}
			}
			if len(parts) == 0 {
				continue
			}
			name := r.Partitions[g[0]].Topic
			if v == 0 {
				for _, p := range parts {
					t := kmsg.NewStopReplicaRequestTopic()
					t.Topic, t.Partition = name, p
					req.Topics = append(req.Topics, t)
				}
				continue
			}
			t := kmsg.NewStopReplicaRequestTopic()
			t.Topic, t.Partitions = name, parts
			req.Topics = append(req.Topics, t)
		}
		if len(req.Topics) > 0 {
			out = append(out, req)
		}
	}
	return out
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}
