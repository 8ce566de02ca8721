package fsm

import (
	"testing"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// FuzzApply commits arbitrary entries to a small image: whatever decodes
// is applied or rejected, whatever does not halts the FSM, and nothing
// panics.
//
//	go test -run '^$' -fuzz FuzzApply ./fsm
func FuzzApply(f *testing.F) {
	id := topicID(1)
	for _, recs := range [][]rl.Record{
		{&rl.PartitionChange{TopicID: id, PartitionEpoch: 1, Set: rl.ChangeLeader | rl.ChangeISR, Leader: 2, ISR: []int32{2, 3}}},
		{&rl.ReplicaStateChange{TopicID: id, State: rl.OfflineReplica, Replicas: []rl.ReplicaRef{{Partition: 0, Broker: 1}}}},
		{&rl.PartitionStateChange{TopicID: id, State: rl.OfflinePartition, Partitions: []int32{0}}},
		{&rl.Partition{TopicID: id, Partition: 1, Replicas: []int32{1, 2}}},
		{&rl.FenceBroker{BrokerID: 1, BrokerEpoch: 1}, &rl.BeginDeleteTopic{TopicID: id}},
		{scramRecord("alice", rl.ScramSHA256), &rl.DeleteScramCredential{User: "alice", Mechanism: rl.ScramSHA256}},
		{&rl.AclChange{Add: []rl.AclRule{rule("User:a", rl.OpRead)}}},
	} {
		b, err := rl.EncodeBatch(recs)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tf := newTestFSM(t)
		tf.seed(3, 1, 2, 3)
		tf.commitRaw(data)
		if len(tf.halts) == 0 {
			// The image must still hash and snapshot.
			tf.StateHash()
		}
	})
}
