package replica

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/broker/partlog"
	"github.com/ctrlquorum/ctrlquorum/controller/configmodel"
	"github.com/ctrlquorum/ctrlquorum/internal/plantedbug"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// produced is one partition's append, waiting for acks=all.
type produced struct {
	p         *partition
	out       *kmsg.ProduceResponseTopicPartition
	last      int64
	minInsync int
	done      bool
}

// produce appends each partition's batches at its leader and answers
// once acks says: 0 never (no response at all), 1 once appended, -1 once
// the high watermark passed the records.
func (m *Manager) produce(ctx context.Context, c *kafkawire.Conn, req *kmsg.ProduceRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		fillProduceError(resp, req, kerr.InvalidRequiredAcks.Code)
		return resp
	}
	if req.TransactionID != nil {
		fillProduceError(resp, req, kerr.TransactionalIDAuthorizationFailed.Code)
		return resp
	}
	var waits []produced
	access := m.topicAccess(c, rl.OpWrite)
	for i := range req.Topics {
		rt := &req.Topics[i]
		t := kmsg.NewProduceResponseTopic()
		t.Topic = rt.Topic
		t.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		allowed := access.allowed(rt.Topic)
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			out := &t.Partitions[j]
			*out = kmsg.NewProduceResponseTopicPartition()
			out.Partition = rp.Partition
			out.BaseOffset, out.LogAppendTime, out.LogStartOffset = -1, -1, -1
			if !allowed {
				out.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			minInsync := 0
			if req.Acks == -1 {
				minInsync = m.minInsyncReplicas(rt.Topic)
			}
			p, last, code := m.appendLeader(broker.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}, rp.Records, minInsync, out)
			out.ErrorCode = code
			if code == 0 && req.Acks == -1 {
				waits = append(waits, produced{p: p, out: out, last: last, minInsync: minInsync})
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	if req.Acks == 0 {
		return nil // Kafka sends nothing back for acks=0
	}
	if len(waits) > 0 {
		timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
		m.awaitReplication(ctx, waits, timeout)
	}
	return resp
}

func fillProduceError(resp *kmsg.ProduceResponse, req *kmsg.ProduceRequest, code int16) {
	for _, rt := range req.Topics {
		t := kmsg.NewProduceResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition, p.ErrorCode, p.BaseOffset, p.LogAppendTime, p.LogStartOffset = rp.Partition, code, -1, -1, -1
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
}

// minInsyncReplicas is a topic's effective min.insync.replicas on this
// broker: resolved from the agent's levels, with the manager's own
// setting in place of Kafka's default.
func (m *Manager) minInsyncReplicas(topic string) int {
	var lv configmodel.Levels
	if a := m.getAgent(); a != nil {
		lv = a.TopicLevels(topic)
	}
	if r, _ := configmodel.ResolveTopic(configmodel.KeyMinInsyncReplicas, lv); r.Source == kmsg.ConfigSourceDefaultConfig && m.cfg.MinInsyncReplicas > 0 {
		return m.cfg.MinInsyncReplicas
	}
	return configmodel.MinInsyncReplicas(lv)
}

// appendLeader appends one partition's records at this leader. An
// acks=all produce (minInsync > 0) is refused while the ISR is smaller.
func (m *Manager) appendLeader(tp broker.TopicPartition, records []byte, minInsync int, out *kmsg.ProduceResponseTopicPartition) (*partition, int64, int16) {
	batches, err := partlog.ParseBatches(records)
	if err != nil {
		return nil, 0, codeOf(err)
	}
	p := m.get(tp)
	if p == nil {
		return nil, 0, m.missingCode(tp)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if code := p.checkLocked(-1, true); code != 0 {
		return nil, 0, code
	}
	if len(p.isr) < minInsync {
		return nil, 0, kerr.NotEnoughReplicas.Code
	}
	first, last, err := p.log.AppendAsLeader(batches, p.leaderEpoch)
	if err != nil {
		m.log.Error("append failed", "topic", tp.Topic, "partition", tp.Partition, "error", err)
		return nil, 0, codeOf(err)
	}
	out.BaseOffset, out.LogStartOffset = first, p.log.StartOffset()
	p.advanceHWLocked(m)
	m.notify() // followers' fetches wait for this
	return p, last, 0
}

// awaitReplication waits until every partition's high watermark passes
// its records, the replica stops leading, or the timeout.
func (m *Manager) awaitReplication(ctx context.Context, waits []produced, timeout time.Duration) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	epochs := make([]int32, len(waits))
	for i, w := range waits {
		w.p.mu.Lock()
		epochs[i] = w.p.leaderEpoch
		w.p.mu.Unlock()
	}
	for {
		ch := m.changes()
		pending := 0
		for i := range waits {
			w := &waits[i]
			if w.done {
				continue
			}
			w.p.mu.Lock()
			switch {
			case w.p.role != roleLeader || w.p.leaderEpoch != epochs[i]:
				w.out.ErrorCode, w.done = kerr.NotLeaderForPartition.Code, true
			case w.p.hw > w.last || plantedbug.On(plantedbug.EarlyAck):
				if len(w.p.isr) < w.minInsync {
					w.out.ErrorCode = kerr.NotEnoughReplicasAfterAppend.Code
				}
				w.done = true
			default:
				pending++
			}
			w.p.mu.Unlock()
		}
		if pending == 0 {
			return
		}
		// Whatever ends the wait early, a record not yet replicated is
		// never answered as acknowledged.
		select {
		case <-ch:
			continue
		case <-deadline.C:
		case <-ctx.Done():
		case <-m.stop:
		}
		for i := range waits {
			if !waits[i].done {
				waits[i].out.ErrorCode = kerr.RequestTimedOut.Code
			}
		}
		return
	}
}

// codeOf is the Kafka code of an error: its own for a *kerr.Error,
// KAFKA_STORAGE_ERROR for anything else (a disk error).
func codeOf(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.KafkaStorageError.Code
}
