package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// Kafka's leader values in UpdateMetadata and leader epochs in StopReplica
// with special meanings.
const (
	leaderDuringDelete int32 = -2 // UpdateMetadata: the topic is being deleted
	epochNone          int32 = -1 // StopReplica: no epoch given
	epochDuringDelete  int32 = -2 // StopReplica: stop whatever the epoch
)

// Handle serves the agent's listener (kafkawire.Handler).
func (a *Agent) Handle(ctx context.Context, c *kafkawire.Conn, req kmsg.Request) (kmsg.Response, error) {
	if refused := a.authorizeControl(c, req); refused != nil {
		return refused, nil
	}
	if _, ok := kafkaclient.Forwardable()[req.Key()]; ok {
		return a.forward(ctx, c, req), nil
	}
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		return a.metadata(r), nil
	case *kmsg.DescribeClusterRequest:
		return a.describeCluster(r), nil
	case *kmsg.LeaderAndISRRequest:
		a.watchBeforeLeaderAndIsr(ctx, r)
		return a.leaderAndIsr(c.ClientID, r), nil
	case *kmsg.UpdateMetadataRequest:
		resp := a.updateMetadata(c.ClientID, r)
		if resp.ErrorCode == 0 {
			a.watchAfterUpdateMetadata(ctx)
			if kafkaclient.UpdateMetadataType(r) == kafkaclient.UpdateMetadataFull {
				a.featuresRead.now(ctx, a, a.readFinalizedFeatures)
			}
		}
		return resp, nil
	case *kmsg.StopReplicaRequest:
		return a.stopReplica(c.ClientID, r), nil
	}
	return nil, fmt.Errorf("%s is not served by a broker agent", kmsg.NameForKey(req.Key()))
}

// checkHeaderLocked applies the request-level fencing. a.mu is held.
func (a *Agent) checkHeaderLocked(controllerEpoch int32, brokerEpoch int64) int16 {
	if controllerEpoch < a.controllerEpoch {
		return kerr.StaleControllerEpoch.Code
	}
	if brokerEpoch >= 0 && brokerEpoch != a.brokerEpoch {
		return kerr.StaleBrokerEpoch.Code
	}
	return 0
}

// acceptHeaderLocked notes the controller of an accepted request.
func (a *Agent) acceptHeaderLocked(controllerID, controllerEpoch int32, offset uint64) {
	a.controllerEpoch = max(a.controllerEpoch, controllerEpoch)
	a.controllerID = controllerID
	a.applied = max(a.applied, offset)
}

// stale reports whether next is older than cur for the same partition.
func stale(cur *PartitionState, leaderEpoch, partitionEpoch int32) bool {
	if leaderEpoch != cur.LeaderEpoch {
		return leaderEpoch < cur.LeaderEpoch
	}
	return partitionEpoch < cur.PartitionEpoch
}

// lookupLocked returns the cached topic for a name, or nil when there is
// none or the id says it is another topic of the same name.
func (a *Agent) lookupLocked(name string, id rl.TopicID) *cachedTopic {
	t := a.topics[name]
	if t == nil || (!id.IsZero() && !t.id.IsZero() && t.id != id) {
		return nil
	}
	return t
}

// storeLocked caches a partition state, replacing a topic of the same
// name with another id. The state is kept by pointer: its slices (and the
// request's array it sits in) are the agent's own, decoded for it, and
// never modified.
func (a *Agent) storeLocked(st *PartitionState) {
	t := a.lookupLocked(st.Topic, st.TopicID)
	if t == nil {
		if old := a.topics[st.Topic]; old != nil {
			a.log.Info("topic re-created under the same name: forgetting the old one", "topic", st.Topic, "old_id", old.id.String(), "new_id", st.TopicID.String())
		}
		t = &cachedTopic{name: st.Topic, id: st.TopicID, parts: map[int32]*PartitionState{}}
		a.topics[st.Topic] = t
	} else if t.id.IsZero() {
		t.id = st.TopicID
	}
	t.parts[st.Partition] = st
}

// judgeLocked decides on one partition state.
func (a *Agent) judgeLocked(st *PartitionState) int16 {
	t := a.lookupLocked(st.Topic, st.TopicID)
	if t == nil {
		return 0
	}
	if cur := t.parts[st.Partition]; cur != nil && stale(cur, st.LeaderEpoch, st.PartitionEpoch) {
		return kerr.FencedLeaderEpoch.Code
	}
	return 0
}

func partitionRecord(base ControlRecord, st *PartitionState, code int16) ControlRecord {
	r := base
	r.Partition, r.Topic, r.TopicID = st.Partition, st.Topic, st.TopicID
	r.Leader, r.LeaderEpoch, r.PartitionEpoch, r.ISR = st.Leader, st.LeaderEpoch, st.PartitionEpoch, st.ISR
	r.Accepted, r.ErrorCode = code == 0, code
	return r
}

func (a *Agent) leaderAndIsr(clientID string, req *kmsg.LeaderAndISRRequest) *kmsg.LeaderAndISRResponse {
	resp := req.ResponseKind().(*kmsg.LeaderAndISRResponse)
	_, offset, _ := kafkaclient.ParseControlClientID(clientID)
	brokerEpoch := int64(-1)
	if req.Version >= 2 {
		brokerEpoch = req.BrokerEpoch
	}
	base := ControlRecord{Key: KeyLeaderAndIsr, ControllerID: req.ControllerID, ControllerEpoch: req.ControllerEpoch,
		BrokerEpoch: brokerEpoch, MetadataOffset: offset, Partition: -1}

	n := len(req.PartitionStates)
	for i := range req.TopicStates {
		n += len(req.TopicStates[i].PartitionStates)
	}
	states := make([]PartitionState, 0, n)
	add := func(topic string, id rl.TopicID, p *kmsg.LeaderAndISRRequestTopicPartition) {
		states = append(states, PartitionState{
			Topic: topic, TopicID: id, Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			PartitionEpoch: p.ZKVersion, ISR: p.ISR, Replicas: p.Replicas, Adding: p.AddingReplicas,
			Removing: p.RemovingReplicas, IsNew: p.IsNew, ControllerEpoch: req.ControllerEpoch,
		})
	}
	if req.Version <= 1 {
		for i := range req.PartitionStates {
			add(req.PartitionStates[i].Topic, rl.TopicID{}, &req.PartitionStates[i])
		}
	} else {
		for i := range req.TopicStates {
			ts := &req.TopicStates[i]
			for j := range ts.PartitionStates {
				add(ts.Topic, rl.TopicID(ts.TopicID), &ts.PartitionStates[j])
			}
		}
	}
	codes := make([]int16, len(states))

	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	a.mu.Lock()
	if code := a.checkHeaderLocked(req.ControllerEpoch, brokerEpoch); code != 0 {
		a.mu.Unlock()
		resp.ErrorCode = code
		for i := range codes {
			codes[i] = code
		}
		base.ErrorCode = code
		a.clog.add([]ControlRecord{base})
		a.log.Warn("refused LeaderAndIsr", "error", kerr.ErrorForCode(code), "controller_epoch", req.ControllerEpoch, "broker_epoch", brokerEpoch)
		fillLAIResponse(resp, req.Version, states, codes)
		return resp
	}
	a.acceptHeaderLocked(req.ControllerID, req.ControllerEpoch, 0)
	for i := range states {
		st := &states[i]
		if codes[i] = a.judgeLocked(st); codes[i] != 0 {
			continue
		}
		if !slices.Contains(st.Replicas, a.cfg.BrokerID) {
			codes[i] = kerr.UnknownTopicOrPartition.Code
			continue
		}
		a.storeLocked(st)
	}
	a.mu.Unlock()

	base.Accepted = true
	for i := range states {
		st := &states[i]
		if codes[i] != 0 {
			continue
		}
		if st.Leader == a.cfg.BrokerID {
			a.host.BecomeLeader(*st)
		} else {
			a.host.BecomeFollower(*st)
		}
	}
	// The offset counts once the Host has applied the request.
	a.mu.Lock()
	a.applied = max(a.applied, offset)
	a.mu.Unlock()
	a.clog.addN(len(states)+1, func(i int) ControlRecord {
		if i == 0 {
			return base
		}
		return partitionRecord(base, &states[i-1], codes[i-1])
	})
	fillLAIResponse(resp, req.Version, states, codes)
	return resp
}

func fillLAIResponse(resp *kmsg.LeaderAndISRResponse, version int16, states []PartitionState, codes []int16) {
	if version < 5 {
		for i := range states {
			p := kmsg.NewLeaderAndISRResponseTopicPartition()
			p.Topic, p.Partition, p.ErrorCode = states[i].Topic, states[i].Partition, codes[i]
			resp.Partitions = append(resp.Partitions, p)
		}
		return
	}
	idx := map[rl.TopicID]int{}
	for i := range states {
		k, ok := idx[states[i].TopicID]
		if !ok {
			k = len(resp.Topics)
			idx[states[i].TopicID] = k
			t := kmsg.NewLeaderAndISRResponseTopic()
			t.TopicID = states[i].TopicID
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewLeaderAndISRResponseTopicPartition()
		p.Partition, p.ErrorCode = states[i].Partition, codes[i]
		resp.Topics[k].Partitions = append(resp.Topics[k].Partitions, p)
	}
}

func (a *Agent) updateMetadata(clientID string, req *kmsg.UpdateMetadataRequest) *kmsg.UpdateMetadataResponse {
	resp := req.ResponseKind().(*kmsg.UpdateMetadataResponse)
	_, offset, _ := kafkaclient.ParseControlClientID(clientID)
	brokerEpoch := int64(-1)
	if req.Version >= 5 {
		brokerEpoch = req.BrokerEpoch
	}
	base := ControlRecord{Key: KeyUpdateMetadata, ControllerID: req.ControllerID, ControllerEpoch: req.ControllerEpoch,
		BrokerEpoch: brokerEpoch, MetadataOffset: offset, Partition: -1}

	n := len(req.PartitionStates)
	for i := range req.TopicStates {
		n += len(req.TopicStates[i].PartitionStates)
	}
	states := make([]PartitionState, 0, n)
	add := func(topic string, id rl.TopicID, p *kmsg.UpdateMetadataRequestTopicPartition) {
		states = append(states, PartitionState{
			Topic: topic, TopicID: id, Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			PartitionEpoch: p.ZKVersion, ISR: p.ISR, Replicas: p.Replicas, ControllerEpoch: req.ControllerEpoch,
		})
	}
	// A full UpdateMetadata (the controller's catch-up) names every topic
	// there is: by a topic state without partitions, or by one with a
	// partition not being deleted.
	full := kafkaclient.UpdateMetadataType(req) == kafkaclient.UpdateMetadataFull
	var named map[string]rl.TopicID
	if full {
		named = make(map[string]rl.TopicID, len(req.TopicStates))
	}
	if req.Version <= 4 {
		for i := range req.PartitionStates {
			add(req.PartitionStates[i].Topic, rl.TopicID{}, &req.PartitionStates[i])
		}
	} else {
		for i := range req.TopicStates {
			ts := &req.TopicStates[i]
			live := len(ts.PartitionStates) == 0
			for j := range ts.PartitionStates {
				add(ts.Topic, rl.TopicID(ts.TopicID), &ts.PartitionStates[j])
				live = live || ts.PartitionStates[j].Leader != leaderDuringDelete
			}
			if full && live {
				named[ts.Topic] = rl.TopicID(ts.TopicID)
			}
		}
	}
	brokers := make([]BrokerInfo, 0, len(req.LiveBrokers))
	for _, b := range req.LiveBrokers {
		bi := BrokerInfo{ID: b.ID, Host: b.Host, Port: b.Port, Rack: b.Rack}
		// The first PLAINTEXT endpoint is what clients are given.
		for _, e := range b.Endpoints {
			if e.ListenerName == "PLAINTEXT" || (e.ListenerName == "" && e.SecurityProtocol == 0) {
				bi.Host, bi.Port = e.Host, e.Port
				break
			}
		}
		brokers = append(brokers, bi)
	}
	sort.Slice(brokers, func(i, j int) bool { return brokers[i].ID < brokers[j].ID })

	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	a.mu.Lock()
	if code := a.checkHeaderLocked(req.ControllerEpoch, brokerEpoch); code != 0 {
		a.mu.Unlock()
		resp.ErrorCode = code
		base.ErrorCode = code
		a.clog.add([]ControlRecord{base})
		a.log.Warn("refused UpdateMetadata", "error", kerr.ErrorForCode(code), "controller_epoch", req.ControllerEpoch, "broker_epoch", brokerEpoch)
		return resp
	}
	a.acceptHeaderLocked(req.ControllerID, req.ControllerEpoch, offset)
	a.brokers = brokers
	base.Accepted = true
	codes := make([]int16, len(states))
	for i := range states {
		st := &states[i]
		if st.Leader == leaderDuringDelete {
			a.forgetLocked(st.Topic, st.TopicID, st.Partition)
			continue
		}
		if codes[i] = a.judgeLocked(st); codes[i] == 0 {
			a.storeLocked(st)
		}
	}
	var dropped []PartitionState
	if full {
		dropped = a.keepOnlyLocked(named)
	}
	a.mu.Unlock()
	if len(dropped) > 0 {
		a.log.Info("full UpdateMetadata: forgetting topics the controller no longer has", "partitions", len(dropped))
	}
	a.clog.addN(len(states)+len(dropped)+1, func(i int) ControlRecord {
		if i == 0 {
			return base
		}
		if i > len(states) {
			// A partition of a topic the request did not name.
			st := dropped[i-1-len(states)]
			st.Leader = leaderDuringDelete
			r := partitionRecord(base, &st, 0)
			r.Deleted = true
			return r
		}
		st := &states[i-1]
		r := partitionRecord(base, st, codes[i-1])
		r.Deleted = st.Leader == leaderDuringDelete
		return r
	})
	return resp
}

// forgetLocked drops a partition from the cache, and its topic with its
// last partition: the controller said the topic is being deleted.
func (a *Agent) forgetLocked(topic string, id rl.TopicID, partition int32) {
	t := a.lookupLocked(topic, id)
	if t == nil {
		return
	}
	delete(t.parts, partition)
	if len(t.parts) == 0 {
		delete(a.topics, topic)
	}
}

// keepOnlyLocked drops every cached topic a full UpdateMetadata did not
// name (by name, and by id where both sides have one) and returns the
// partitions it dropped, by topic and partition.
func (a *Agent) keepOnlyLocked(named map[string]rl.TopicID) []PartitionState {
	var out []PartitionState
	for name, t := range a.topics {
		if id, ok := named[name]; ok && (id.IsZero() || t.id.IsZero() || id == t.id) {
			continue
		}
		for _, p := range t.parts {
			out = append(out, *p)
		}
		delete(a.topics, name)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

type stopItem struct {
	topic       string
	partition   int32
	leaderEpoch int32
	delete      bool
	id          rl.TopicID
	code        int16
	accepted    bool
}

func (a *Agent) stopReplica(clientID string, req *kmsg.StopReplicaRequest) *kmsg.StopReplicaResponse {
	resp := req.ResponseKind().(*kmsg.StopReplicaResponse)
	_, offset, _ := kafkaclient.ParseControlClientID(clientID)
	brokerEpoch := int64(-1)
	if req.Version >= 1 {
		brokerEpoch = req.BrokerEpoch
	}
	base := ControlRecord{Key: KeyStopReplica, ControllerID: req.ControllerID, ControllerEpoch: req.ControllerEpoch,
		BrokerEpoch: brokerEpoch, MetadataOffset: offset, Partition: -1}

	var items []stopItem
	for i := range req.Topics {
		t := &req.Topics[i]
		switch {
		case req.Version == 0:
			items = append(items, stopItem{topic: t.Topic, partition: t.Partition, leaderEpoch: epochNone, delete: req.DeletePartitions})
		case req.Version <= 2:
			for _, p := range t.Partitions {
				items = append(items, stopItem{topic: t.Topic, partition: p, leaderEpoch: epochNone, delete: req.DeletePartitions})
			}
		default:
			for _, p := range t.PartitionStates {
				items = append(items, stopItem{topic: t.Topic, partition: p.Partition, leaderEpoch: p.LeaderEpoch, delete: p.Delete})
			}
		}
	}

	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	a.mu.Lock()
	if code := a.checkHeaderLocked(req.ControllerEpoch, brokerEpoch); code != 0 {
		a.mu.Unlock()
		resp.ErrorCode = code
		base.ErrorCode = code
		a.clog.add([]ControlRecord{base})
		a.log.Warn("refused StopReplica", "error", kerr.ErrorForCode(code), "controller_epoch", req.ControllerEpoch, "broker_epoch", brokerEpoch)
		for _, it := range items {
			p := kmsg.NewStopReplicaResponsePartition()
			p.Topic, p.Partition, p.ErrorCode = it.topic, it.partition, code
			resp.Partitions = append(resp.Partitions, p)
		}
		return resp
	}
	a.acceptHeaderLocked(req.ControllerID, req.ControllerEpoch, 0)
	for i := range items {
		it := &items[i]
		t := a.topics[it.topic]
		if t == nil {
			continue
		}
		it.id = t.id
		cur := t.parts[it.partition]
		if cur != nil && it.leaderEpoch != epochNone && it.leaderEpoch != epochDuringDelete && it.leaderEpoch < cur.LeaderEpoch {
			it.code = kerr.FencedLeaderEpoch.Code
		}
	}
	a.mu.Unlock()

	base.Accepted = true
	for i := range items {
		it := &items[i]
		it.accepted = it.code == 0
		if it.accepted {
			if err := a.host.StopReplica(it.topic, it.id, it.partition, it.delete); err != nil {
				it.code = errorCode(err)
				a.log.Warn("stopping a replica failed", "topic", it.topic, "partition", it.partition, "delete", it.delete, "error", err)
			}
		}
		p := kmsg.NewStopReplicaResponsePartition()
		p.Topic, p.Partition, p.ErrorCode = it.topic, it.partition, it.code
		resp.Partitions = append(resp.Partitions, p)
	}
	a.mu.Lock()
	// Deleting a replica of a topic being deleted (leader epoch -2, which
	// the controller sends for nothing else) takes the partition out of
	// the cache too, as UpdateMetadata with leader -2 does: a broker
	// that missed that request must not keep serving the topic. A replica
	// deleted for a reassignment leaves the partition, which lives on
	// elsewhere, in the cache.
	for i := range items {
		if it := &items[i]; it.accepted && it.delete && it.leaderEpoch == epochDuringDelete {
			a.forgetLocked(it.topic, rl.TopicID{}, it.partition)
		}
	}
	a.applied = max(a.applied, offset)
	a.mu.Unlock()
	a.clog.addN(len(items)+1, func(i int) ControlRecord {
		if i == 0 {
			return base
		}
		it := &items[i-1]
		r := base
		r.Partition, r.Topic, r.TopicID, r.LeaderEpoch, r.Deleted = it.partition, it.topic, it.id, it.leaderEpoch, it.delete
		r.Leader, r.Accepted, r.ErrorCode = -1, it.accepted, it.code
		return r
	})
	return resp
}

// errorCode maps a Host error to a Kafka code: its own if it wraps a
// *kerr.Error, KAFKA_STORAGE_ERROR otherwise.
func errorCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.KafkaStorageError.Code
}

// metadata answers a client from the cache: the live brokers (never a
// controller voter) and, as ControllerID, a live broker (see
// clientControllerLocked).
func (a *Agent) metadata(req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	if id := a.ClusterID(); id != "" {
		resp.ClusterID = &id
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	resp.ControllerID = a.clientControllerLocked()
	live := make(map[int32]bool, len(a.brokers))
	for _, b := range a.brokers {
		live[b.ID] = true
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port, mb.Rack = b.ID, b.Host, b.Port, b.Rack
		resp.Brokers = append(resp.Brokers, mb)
	}
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		names := make([]string, 0, len(a.topics))
		for n := range a.topics {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			resp.Topics = append(resp.Topics, a.topicMetadata(a.topics[n], live))
		}
		return resp
	}
	for _, rt := range req.Topics {
		var t *cachedTopic
		if rt.Topic != nil {
			t = a.topics[*rt.Topic]
		} else {
			for _, c := range a.topics {
				if c.id == rl.TopicID(rt.TopicID) {
					t = c
					break
				}
			}
		}
		if t == nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if rt.Topic == nil {
				mt.ErrorCode = kerr.UnknownTopicID.Code
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, a.topicMetadata(t, live))
	}
	return resp
}

func (a *Agent) topicMetadata(t *cachedTopic, live map[int32]bool) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.name
	mt.Topic, mt.TopicID = &name, t.id
	ids := make([]int32, 0, len(t.parts))
	for p := range t.parts {
		ids = append(ids, p)
	}
	slices.Sort(ids)
	for _, id := range ids {
		p := t.parts[id]
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = id, p.Leader, p.LeaderEpoch
		mp.Replicas = append([]int32{}, p.Replicas...)
		mp.ISR = append([]int32{}, p.ISR...)
		mp.OfflineReplicas = []int32{}
		for _, r := range p.Replicas {
			if !live[r] {
				mp.OfflineReplicas = append(mp.OfflineReplicas, r)
			}
		}
		if p.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
