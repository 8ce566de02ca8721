package replica

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// ListOffsets timestamps with a meaning of their own.
const (
	latestTimestamp   = -1 // the high watermark (the log end for replica id -2)
	earliestTimestamp = -2 // the log start
)

// listOffsets answers at the leader: -1 the high watermark, -2 the log
// start, a time the first batch with a record at or after it (-1 when
// there is none).
func (m *Manager) listOffsets(c *kafkawire.Conn, req *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	access := m.topicAccess(c, rl.OpDescribe)
	for i := range req.Topics {
		rt := &req.Topics[i]
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		allowed := access.allowed(rt.Topic)
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			out := kmsg.NewListOffsetsResponseTopicPartition()
			out.Partition, out.Timestamp, out.Offset, out.LeaderEpoch = rp.Partition, -1, -1, -1
			epoch := int32(-1)
			if req.Version >= 4 {
				epoch = rp.CurrentLeaderEpoch
			}
			if allowed {
				out.ErrorCode = m.listPartition(broker.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}, epoch, rp.Timestamp, req.ReplicaID, &out)
			} else {
				out.ErrorCode = kerr.TopicAuthorizationFailed.Code
			}
			t.Partitions = append(t.Partitions, out)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func (m *Manager) listPartition(tp broker.TopicPartition, epoch int32, ts int64, replica int32, out *kmsg.ListOffsetsResponseTopicPartition) int16 {
	p := m.get(tp)
	if p == nil {
		return m.missingCode(tp)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if code := p.checkLocked(epoch, true); code != 0 {
		return code
	}
	out.LeaderEpoch = p.leaderEpoch
	switch ts {
	case latestTimestamp:
		out.Offset = p.hw
		if replica == -2 {
			out.Offset = p.log.EndOffset()
		}
	case earliestTimestamp:
		out.Offset = p.log.StartOffset()
	default:
		if ts < 0 {
			return kerr.UnsupportedVersion.Code // -3 (max timestamp) and the like: not served
		}
		o, found, err := p.log.OffsetForTime(ts)
		if err != nil {
			return codeOf(err)
		}
		if o >= p.hw {
			o, found = -1, -1
		}
		out.Offset, out.Timestamp = o, found
	}
	return 0
}

// offsetsForLeaderEpoch answers, at the leader, where each epoch asked
// ends in its log: Kafka's answer to a follower checking what to
// truncate.
func (m *Manager) offsetsForLeaderEpoch(c *kafkawire.Conn, req *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	// A replica may ask of any topic; anyone else needs DESCRIBE on it.
	cluster := m.clusterAction(c, true)
	access := m.topicAccess(c, rl.OpDescribe)
	for i := range req.Topics {
		rt := &req.Topics[i]
		t := kmsg.NewOffsetForLeaderEpochResponseTopic()
		t.Topic = rt.Topic
		allowed := cluster || access.allowed(rt.Topic)
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			out := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			out.Partition, out.LeaderEpoch, out.EndOffset = rp.Partition, -1, -1
			tp := broker.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			if !allowed {
				out.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if p := m.get(tp); p == nil {
				out.ErrorCode = m.missingCode(tp)
			} else {
				p.mu.Lock()
				if out.ErrorCode = p.checkLocked(rp.CurrentLeaderEpoch, true); out.ErrorCode == 0 {
					out.LeaderEpoch, out.EndOffset = p.log.EndOffsetForEpoch(rp.LeaderEpoch)
				}
				p.mu.Unlock()
			}
			t.Partitions = append(t.Partitions, out)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
