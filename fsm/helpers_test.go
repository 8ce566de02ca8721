package fsm

import (
	"testing"

	"github.com/hashicorp/raft"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// testFSM wraps an FSM with an index counter so tests read as a list of
// committed entries.
type testFSM struct {
	*FSM
	t     testing.TB
	index uint64
	halts []error
}

func newTestFSM(t testing.TB) *testFSM {
	tf := &testFSM{t: t}
	tf.FSM = New(Options{Halt: func(err error) { tf.halts = append(tf.halts, err) }})
	return tf
}

// commit applies recs as one entry and returns the result.
func (tf *testFSM) commit(recs ...rl.Record) *ApplyResult {
	tf.t.Helper()
	data, err := rl.EncodeBatch(recs)
	if err != nil {
		tf.t.Fatal(err)
	}
	return tf.commitRaw(data).(*ApplyResult)
}

func (tf *testFSM) commitRaw(data []byte) interface{} {
	tf.index++
	return tf.Apply(&raft.Log{Index: tf.index, Term: 1, Type: raft.LogCommand, Data: data})
}

// mustCommit applies recs and fails the test if any is rejected.
func (tf *testFSM) mustCommit(recs ...rl.Record) {
	tf.t.Helper()
	if err := tf.commit(recs...).Err(); err != nil {
		tf.t.Fatal(err)
	}
}

func (tf *testFSM) partition(id rl.TopicID, p int32) Partition {
	var out Partition
	tf.View(func(im *Image) { out = *im.Partition(id, p) })
	return out
}

func topicID(n int) rl.TopicID {
	var id rl.TopicID
	id[0], id[1], id[2] = byte(n>>16), byte(n>>8), byte(n)
	id[15] = 1
	return id
}

// seed registers brokers 1..n unfenced and creates topic "t" with one
// partition on replicas, led by replicas[0], all replicas online.
func (tf *testFSM) seed(brokers int, replicas ...int32) rl.TopicID {
	tf.t.Helper()
	for b := int32(1); b <= int32(brokers); b++ {
		tf.mustCommit(&rl.RegisterBroker{BrokerID: b, Rack: "r"})
		tf.mustCommit(&rl.UnfenceBroker{BrokerID: b, BrokerEpoch: int64(tf.index)})
	}
	id := topicID(1)
	refs := make([]rl.ReplicaRef, len(replicas))
	for i, b := range replicas {
		refs[i] = rl.ReplicaRef{Partition: 0, Broker: b}
	}
	tf.mustCommit(
		&rl.Topic{TopicID: id, Name: "t"},
		&rl.Partition{TopicID: id, Partition: 0, Replicas: replicas},
		&rl.ReplicaStateChange{TopicID: id, State: rl.NewReplica, Replicas: refs},
		&rl.PartitionChange{TopicID: id, Partition: 0, PartitionEpoch: 0, Set: rl.ChangeLeader | rl.ChangeISR, Leader: replicas[0], ISR: replicas},
		&rl.PartitionStateChange{TopicID: id, State: rl.OnlinePartition, Partitions: []int32{0}},
		&rl.ReplicaStateChange{TopicID: id, State: rl.OnlineReplica, Replicas: refs},
	)
	return id
}

func mustEncode(t testing.TB, recs ...rl.Record) []byte {
	t.Helper()
	b, err := rl.EncodeBatch(recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
