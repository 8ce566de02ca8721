package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// steadyStateImage produces the records of a cluster in steady state:
// topics of 100 partitions, replication factor 3 over brokers 1..brokers,
// every partition online with a full ISR. Partition p of topic t has
// replicas starting at broker (t*100+p) mod brokers, so each broker leads
// the same share. emit receives batches of about 20k records.
func steadyStateImage(partitions int, brokers int32, emit func([]rl.Record)) {
	const perTopic = 100
	var batch []rl.Record
	for tn := 0; tn*perTopic < partitions; tn++ {
		var id rl.TopicID
		id[0], id[1], id[2], id[15] = byte(tn>>16), byte(tn>>8), byte(tn), 0xbe
		batch = append(batch, &rl.Topic{TopicID: id, Name: fmt.Sprintf("bench-%06d", tn)})
		var refs []rl.ReplicaRef
		var pids []int32
		var changes []rl.Record
		for p := int32(0); p < perTopic; p++ {
			first := int32(tn*perTopic+int(p)) % brokers
			reps := []int32{first + 1, (first+1)%brokers + 1, (first+2)%brokers + 1}
			batch = append(batch, &rl.Partition{TopicID: id, Partition: p, Replicas: reps})
			for _, r := range reps {
				refs = append(refs, rl.ReplicaRef{Partition: p, Broker: r})
			}
			pids = append(pids, p)
			changes = append(changes, &rl.PartitionChange{TopicID: id, Partition: p, Set: rl.ChangeLeader | rl.ChangeISR, Leader: reps[0], ISR: reps})
		}
		batch = append(batch, &rl.ReplicaStateChange{TopicID: id, State: rl.NewReplica, Replicas: refs})
		batch = append(batch, changes...)
		batch = append(batch, &rl.PartitionStateChange{TopicID: id, State: rl.OnlinePartition, Partitions: pids},
			&rl.ReplicaStateChange{TopicID: id, State: rl.OnlineReplica, Replicas: refs})
		if len(batch) >= 20_000 {
			emit(batch)
			batch = nil
		}
	}
	if len(batch) > 0 {
		emit(batch)
	}
}

// loadImage commits a steady-state image to the harness's in-memory log.
func (h *harness) loadImage(partitions int, brokers int32) {
	steadyStateImage(partitions, brokers, func(batch []rl.Record) {
		data, err := rl.EncodeBatch(batch)
		if err != nil {
			h.t.Fatal(err)
		}
		if res := h.log.Apply(data, time.Minute).Response().(*fsm.ApplyResult); res.Err() != nil {
			h.t.Fatal(res.Err())
		}
	})
}

// BenchmarkControllerOnly measures the controller's own work, over the
// in-memory log (no raft, no disk): controlled shutdown and fence on a
// 1M-partition image, 10 brokers, RF 3.
func BenchmarkControllerOnly(b *testing.B) {
	parts := 1_000_000
	if testing.Short() {
		parts = 100_000
	}
	for i := 0; i < b.N; i++ {
		h := newHarness(b)
		for id := int32(1); id <= 10; id++ {
			h.register(id, "")
		}
		h.loadImage(parts, 10)
		start := time.Now()
		r, err := h.c.Heartbeat(context.Background(), Heartbeat{BrokerID: 1, BrokerEpoch: h.epochs[1], MetadataOffset: h.log.Index(), WantShutDown: true})
		if err != nil || !r.ShouldShutDown {
			b.Fatal(r, err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "shutdown-ms")
		start = time.Now()
		if _, _, err := h.c.submit(context.Background(), "fence", func(m *managers, w *work) (eventOutcome, error) {
			return answer(nil, m.cluster.fence(w, w.img().Broker(2)))
		}, nil); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "fence-ms")
	}
}

// BenchmarkFenceCompute measures only the decision of a fence (staging and
// planning, nothing proposed) for a broker hosting 30k replicas of a
// 100k-partition image, so the hot path can be profiled on its own.
func BenchmarkFenceCompute(b *testing.B) {
	h := newHarness(b)
	for id := int32(1); id <= 10; id++ {
		h.register(id, "")
	}
	h.loadImage(100_000, 10)
	m := newManagers(1, time.Hour)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.fsm.View(func(im *fsm.Image) {
			round := fsm.NewTxn(im, im.AppliedIndex()+1)
			w := newWork(round, time.Time{}, h.c.log)
			if err := m.cluster.fence(w, w.img().Broker(2)); err != nil {
				b.Fatal(err)
			}
			if w.txn.Len() < 10_000 {
				b.Fatalf("only %d records", w.txn.Len())
			}
		})
	}
}

// BenchmarkCreateTopicCompute measures the controller's cost of creating a
// one-partition topic (replication factor 3, three brokers with racks) in
// rounds of 32, as a busy CreateTopics load arrives, over the in-memory
// log: compute, encoding, the FSM's apply and the callers' answers, but no
// raft, disk or wire.
func BenchmarkCreateTopicCompute(b *testing.B) {
	h := newHarness(b)
	for id := int32(1); id <= 3; id++ {
		h.register(id, fmt.Sprintf("rack-%d", id))
	}
	const perRound = 32
	topics := make([]CreateTopic, perRound)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += perRound {
		for j := range topics {
			topics[j] = CreateTopic{Name: fmt.Sprintf("compute-%08d", i+j), NumPartitions: 1, ReplicationFactor: 3}
		}
		for _, r := range h.c.CreateTopics(context.Background(), topics, false) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
}
