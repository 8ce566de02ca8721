package metrics

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

func apply(t *testing.T, f *fsm.FSM, idx uint64, recs ...rl.Record) {
	t.Helper()
	data, err := rl.EncodeBatch(recs)
	if err != nil {
		t.Fatal(err)
	}
	res := f.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data})
	if ar, ok := res.(*fsm.ApplyResult); ok && ar.Err() != nil {
		t.Fatalf("entry %d: %v", idx, ar.Err())
	}
}

// TestReadImageStats counts brokers by state, and offline and imbalanced
// partitions, the way Kafka's controller gauges do.
func TestReadImageStats(t *testing.T) {
	f := fsm.New(fsm.Options{Halt: func(err error) { t.Fatal(err) }})
	for i := int32(1); i <= 3; i++ {
		apply(t, f, uint64(i), &rl.RegisterBroker{BrokerID: i, IncarnationID: rl.IncarnationID{byte(i)}})
	}
	var fenced int
	f.View(func(im *fsm.Image) {
		for _, b := range im.Brokers() {
			if b.Fenced {
				fenced++
			}
		}
	})
	idx := uint64(4)
	if fenced > 0 { // registration leaves a broker fenced until it catches up
		for i := int32(1); i <= 3; i++ {
			apply(t, f, idx, &rl.UnfenceBroker{BrokerID: i, BrokerEpoch: int64(i)})
			idx++
		}
	}
	apply(t, f, idx, &rl.FenceBroker{BrokerID: 3, BrokerEpoch: 3}, &rl.BrokerShutdown{BrokerID: 2, BrokerEpoch: 2})
	idx++
	id := rl.TopicID{1}
	refs := []rl.ReplicaRef{{Partition: 0, Broker: 1}, {Partition: 0, Broker: 2}, {Partition: 1, Broker: 2}, {Partition: 1, Broker: 1}, {Partition: 2, Broker: 1}, {Partition: 2, Broker: 2}}
	apply(t, f, idx,
		&rl.Topic{TopicID: id, Name: "t"},
		&rl.Partition{TopicID: id, Partition: 0, Replicas: []int32{1, 2}},
		&rl.Partition{TopicID: id, Partition: 1, Replicas: []int32{2, 1}},
		&rl.Partition{TopicID: id, Partition: 2, Replicas: []int32{1, 2}},
		&rl.ReplicaStateChange{TopicID: id, State: rl.NewReplica, Replicas: refs},
		&rl.PartitionChange{TopicID: id, Partition: 0, Set: rl.ChangeLeader | rl.ChangeISR, Leader: 1, ISR: []int32{1, 2}},
		&rl.PartitionChange{TopicID: id, Partition: 1, Set: rl.ChangeLeader | rl.ChangeISR, Leader: 1, ISR: []int32{1, 2}},
	)
	st := ReadImageStats(f)
	want := ImageStats{AppliedIndex: idx, ControllerNode: -1, MetadataVersion: 1, ActiveBrokers: 2, FencedBrokers: 1, ShuttingDownBrokers: 1, Topics: 1, Partitions: 3,
		OfflinePartitions: 1, PreferredImbalance: 1}
	if st != want {
		t.Fatalf("stats = %+v\nwant    %+v", st, want)
	}
}

// TestLoopObserverCounts feeds rounds to the observer and reads them back
// from the registry.
func TestLoopObserverCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	o := NewLoopObserver(reg)
	o.RoundCommitted(controller.RoundStats{Events: 3, Records: 10, Entries: 1, QueueTimes: []time.Duration{1e6, 2e6, 3e6}, Compute: 5e5, Commit: 2e6})
	o.RoundCommitted(controller.RoundStats{Events: 1, QueueTimes: []time.Duration{1e6}})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		switch {
		case m.GetCounter() != nil:
			got[mf.GetName()] = m.GetCounter().GetValue()
		case m.GetHistogram() != nil:
			got[mf.GetName()] = float64(m.GetHistogram().GetSampleCount())
		}
	}
	for name, want := range map[string]float64{
		"kafka_controller_events_total":                        4,
		"kafka_controller_records_total":                       10,
		"kafka_controller_rounds_total":                        2,
		"kafka_controller_event_queue_time_seconds":            4,
		"kafka_controller_event_queue_processing_time_seconds": 2,
		"kafka_raft_commit_latency_seconds":                    1, // rounds without records commit nothing
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
}
