package replica

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/broker/partlog"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// fetch serves a consumer's fetch (replica id -1) up to each partition's
// high watermark, or a follower's (replica id ≥ 0) up to the log end,
// noting the follower's fetch offset as its log end. It waits up to
// MaxWaitMillis for MinBytes; there are no fetch sessions (session id 0
// in every answer, which tells a client to send full requests).
func (m *Manager) fetch(ctx context.Context, c *kafkawire.Conn, req *kmsg.FetchRequest) kmsg.Response {
	replica := req.ReplicaID
	if req.Version >= 15 {
		replica = req.ReplicaState.ID
	}
	// Denied topics: a consumer needs READ on each, a follower
	// CLUSTER_ACTION on the cluster for all.
	denied := map[string]bool{}
	if replica >= 0 {
		if !m.clusterAction(c, false) {
			for _, rt := range req.Topics {
				denied[rt.Topic] = true
			}
		}
	} else {
		access := m.topicAccess(c, rl.OpRead)
		for _, rt := range req.Topics {
			if !access.allowed(rt.Topic) {
				denied[rt.Topic] = true
			}
		}
	}
	now := time.Now()
	if replica >= 0 && len(denied) == 0 {
		m.noteFollowerFetch(req, replica, now)
	}
	wait := time.NewTimer(time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond)
	defer wait.Stop()
	for {
		ch := m.changes()
		resp, bytes, errs := m.readFetch(req, replica, denied)
		if bytes >= int(req.MinBytes) || errs || req.MaxWaitMillis <= 0 {
			return resp
		}
		select {
		case <-ch:
		case <-wait.C:
			resp, _, _ = m.readFetch(req, replica, denied)
			return resp
		case <-ctx.Done():
			return resp
		case <-m.stop:
			return resp
		}
	}
}

func fetchEpoch(req *kmsg.FetchRequest, rp *kmsg.FetchRequestTopicPartition) int32 {
	if req.Version >= 9 {
		return rp.CurrentLeaderEpoch
	}
	return -1
}

// noteFollowerFetch records a follower's fetch offsets at the leaders
// here, once per request.
func (m *Manager) noteFollowerFetch(req *kmsg.FetchRequest, replica int32, now time.Time) {
	for i := range req.Topics {
		rt := &req.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			p := m.get(broker.TopicPartition{Topic: rt.Topic, Partition: rp.Partition})
			if p == nil {
				continue
			}
			p.mu.Lock()
			if p.checkLocked(fetchEpoch(req, rp), true) == 0 && rp.FetchOffset <= p.log.EndOffset() {
				p.followerFetched(m, replica, rp.FetchOffset, now)
			}
			p.mu.Unlock()
		}
	}
}

// readFetch builds a fetch answer from the logs as they are: the bytes of
// records in it, and whether any partition has an error (which is
// answered at once). The partitions of denied topics get
// TOPIC_AUTHORIZATION_FAILED.
func (m *Manager) readFetch(req *kmsg.FetchRequest, replica int32, denied map[string]bool) (*kmsg.FetchResponse, int, bool) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	budget := int(req.MaxBytes)
	if req.Version < 3 || budget <= 0 {
		budget = 50 << 20
	}
	total, errs := 0, false
	for i := range req.Topics {
		rt := &req.Topics[i]
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			out := kmsg.NewFetchResponseTopicPartition()
			out.Partition, out.HighWatermark, out.LastStableOffset, out.LogStartOffset = rp.Partition, -1, -1, -1
			out.PreferredReadReplica = -1
			// Empty, not null: librdkafka refuses a null record set.
			out.RecordBatches = []byte{}
			tp := broker.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			limit := int(rp.PartitionMaxBytes)
			if total > 0 {
				limit = min(limit, budget-total)
			}
			var records []byte
			code := kerr.TopicAuthorizationFailed.Code
			if !denied[rt.Topic] {
				records, code = m.readPartition(tp, req, rp, replica, limit, &out)
			}
			out.ErrorCode = code
			if code != 0 {
				errs = true
			} else if records != nil && (limit > 0 || total == 0) {
				out.RecordBatches = records
				total += len(records)
			}
			t.Partitions = append(t.Partitions, out)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, total, errs
}

func (m *Manager) readPartition(tp broker.TopicPartition, req *kmsg.FetchRequest, rp *kmsg.FetchRequestTopicPartition, replica int32, limit int, out *kmsg.FetchResponseTopicPartition) ([]byte, int16) {
	p := m.get(tp)
	if p == nil {
		return nil, m.missingCode(tp)
	}
	p.mu.Lock()
	code := p.checkLocked(fetchEpoch(req, rp), true)
	l, hw := p.log, p.hw
	p.mu.Unlock()
	if code != 0 {
		return nil, code
	}
	start, end := l.StartOffset(), l.EndOffset()
	out.HighWatermark, out.LastStableOffset, out.LogStartOffset = hw, hw, start
	upTo := hw
	if replica >= 0 {
		upTo = end
	}
	if limit <= 0 {
		return nil, 0
	}
	records, err := l.Read(rp.FetchOffset, upTo, limit)
	if errors.Is(err, partlog.ErrOffsetOutOfRange) {
		return nil, kerr.OffsetOutOfRange.Code
	}
	if err != nil {
		return nil, codeOf(err)
	}
	return records, 0
}
