package controller

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// TestReplicationManagerCreateThenElect: a topic is created (its
// partitions brought online, the first replica leading), its leader's
// broker is fenced (an Offline election moves leadership to the next ISR
// member), the broker returns and rejoins the ISR (AlterPartition), and a
// preferred election gives it leadership back; each handler's records are
// replayed into the image.
func TestReplicationManagerCreateThenElect(t *testing.T) {
	e := newManagerEnv(t)
	epochs := map[int32]int64{}
	for id := int32(1); id <= 3; id++ {
		epochs[id] = e.addBroker(id, "")
	}
	rm := e.m.replication
	create := CreateTopic{Name: "orders", NumPartitions: 2, ReplicationFactor: 3}

	// validateOnly checks and stages nothing.
	w, err := e.call(func(w *work) error { _, err := rm.createTopic(w, create, true); return err })
	if err != nil || len(w.records()) != 0 || !w.plan.empty() {
		t.Fatalf("validate only: %v, staged %s", err, recordTypes(w))
	}

	var res CreateTopicResult
	w = e.run(func(w *work) (err error) { res, err = rm.createTopic(w, create, false); return err })
	if res.Err != nil || res.NumPartitions != 2 || res.ReplicationFactor != 3 || res.TopicID.IsZero() {
		t.Fatalf("create: %+v", res)
	}
	if got, want := recordTypes(w), "Topic Partition Partition ReplicaState PartitionChanges PartitionState ReplicaState"; got != want {
		t.Fatalf("create staged %s, want %s", got, want)
	}
	sent := plannedLeaderAndIsr(w)
	for i := int32(0); i < 2; i++ {
		p := e.partition("orders", i)
		if p.State != rl.OnlinePartition || p.Leader != p.Replicas[0] || !slices.Equal(p.ISR, p.Replicas) {
			t.Fatalf("orders-%d after creation: %+v", i, p)
		}
		for _, b := range p.Replicas {
			if p.ReplicaState(b) != rl.OnlineReplica || !slices.Contains(sent[b], fmt.Sprintf("orders-%d", i)) {
				t.Fatalf("orders-%d: replica on %d is %s, LeaderAndIsr planned %v", i, b, p.ReplicaState(b), sent)
			}
		}
	}
	if _, err := e.call(func(w *work) error { _, err := rm.createTopic(w, create, false); return err }); ErrorCode(err) != kerr.TopicAlreadyExists.Code {
		t.Fatalf("creating it again: %v", err)
	}

	// The leader's broker is fenced: an Offline election.
	p0 := *e.partition("orders", 0)
	preferred := p0.Replicas[0]
	w = e.run(func(w *work) error { return e.m.cluster.fence(w, w.img().Broker(preferred)) })
	p := e.partition("orders", 0)
	if p.Leader == preferred || p.Leader == rl.NoLeader || slices.Contains(p.ISR, preferred) || p.LeaderEpoch <= p0.LeaderEpoch {
		t.Fatalf("orders-0 after its leader %d was fenced: %+v", preferred, p)
	}
	if p.ReplicaState(preferred) != rl.OfflineReplica {
		t.Fatalf("the fenced broker's replica is %s", p.ReplicaState(preferred))
	}

	// It returns, and its leader takes it back into the ISR.
	e.run(func(w *work) error {
		_, err := e.m.cluster.heartbeat(w, Heartbeat{BrokerID: preferred, BrokerEpoch: epochs[preferred], MetadataOffset: e.fsm.AppliedIndex()})
		return err
	})
	p = e.partition("orders", 0)
	var alter []AlterPartitionResult
	e.run(func(w *work) (err error) {
		alter, err = rm.alterPartition(w, AlterPartitionRequest{BrokerID: p.Leader, BrokerEpoch: epochs[p.Leader], Partitions: []AlterPartitionItem{{
			Topic: "orders", Partition: 0, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: append(slices.Clone(p.ISR), preferred)}}})
		return err
	})
	if alter[0].Err != nil || !slices.Contains(alter[0].ISR, preferred) {
		t.Fatalf("AlterPartition: %+v", alter[0])
	}

	// A preferred election moves leadership back.
	var elected []ElectLeadersResult
	w = e.run(func(w *work) (err error) {
		elected, err = rm.electLeaders(w, PreferredLeaderElection, []TopicPartition{{"orders", 0}, {"orders", 1}})
		return err
	})
	if elected[0].Err != nil || ErrorCode(elected[1].Err) != kerr.ElectionNotNeeded.Code {
		t.Fatalf("preferred election: %+v", elected)
	}
	if p := e.partition("orders", 0); p.Leader != preferred {
		t.Fatalf("orders-0 led by %d after a preferred election, want %d", p.Leader, preferred)
	}
	if got := plannedLeaderAndIsr(w); len(got) != 3 {
		t.Fatalf("the election planned LeaderAndIsr for %v, want every replica", got)
	}
}
