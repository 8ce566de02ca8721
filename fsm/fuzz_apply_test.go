package fsm

import (
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// FuzzApply commits arbitrary entries to a small image and checks that
// the outcome depends on the entries alone. The input is a sequence of
// log entries, each a uvarint length and that many bytes (a length past
// the end takes what is left); whatever decodes is applied or rejected,
// whatever does not halts the FSM, and nothing panics. Each entry's
// outcome (applied, which records were rejected and why, or the halt)
// and the final state hash and applied index must be the same on two
// fresh FSMs that apply every entry (determinism); on a third that takes
// a snapshot after the first half and applies the second half while the
// snapshot is still open, so apply copies what the snapshot shares
// instead of changing it in place; and on a fourth that restores that
// snapshot, which must hold the image as it was after the first half,
// and applies the second half. (A voter stops at a halt, so when the
// first half halts there is no fourth.)
//
//	go test -run '^$' -fuzz '^FuzzApply$' ./fsm
func FuzzApply(f *testing.F) {
	id := topicID(1)
	var all [][]byte
	for _, recs := range [][]rl.Record{
		{&rl.PartitionChange{TopicID: id, PartitionEpoch: 1, Set: rl.ChangeLeader | rl.ChangeISR, Leader: 2, ISR: []int32{2, 3}}},
		{&rl.ReplicaStateChange{TopicID: id, State: rl.OfflineReplica, Replicas: []rl.ReplicaRef{{Partition: 0, Broker: 1}}}},
		{&rl.PartitionStateChange{TopicID: id, State: rl.OfflinePartition, Partitions: []int32{0}}},
		{&rl.Partition{TopicID: id, Partition: 1, Replicas: []int32{1, 2}}},
		{&rl.FenceBroker{BrokerID: 1, BrokerEpoch: 1}, &rl.BeginDeleteTopic{TopicID: id}},
		{scramRecord("alice", rl.ScramSHA256), &rl.DeleteScramCredential{User: "alice", Mechanism: rl.ScramSHA256}},
		{&rl.AclChange{Add: []rl.AclRule{rule("User:a", rl.OpRead)}}},
		{&rl.FeatureLevel{Name: rl.FeatureMetadataVersion, Level: rl.LatestLevel},
			&rl.BrokerConfig{Broker: "1", Key: "min.insync.replicas", Value: "2"}, &rl.BrokerConfig{Key: "x", Delete: true}},
	} {
		b, err := rl.EncodeBatch(recs)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(joinEntries(b))
		all = append(all, b)
	}
	f.Add(joinEntries(all...))
	for _, s := range applySeeds(f) {
		f.Add(joinEntries(s.entries...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries := splitEntries(data)
		half := len(entries) / 2

		a, c := seededFSM(t), seededFSM(t)
		outA := make([]string, len(entries))
		var halfHash StateHash
		var halfIndex uint64
		for i, e := range entries {
			if i == half {
				halfHash, halfIndex = a.StateHash()
			}
			outA[i] = outcome(a.commitRaw(e))
		}
		if half == len(entries) {
			halfHash, halfIndex = a.StateHash()
		}
		final := stateOf(a)
		for i, e := range entries {
			if got := outcome(c.commitRaw(e)); got != outA[i] {
				t.Fatalf("entry %d on two fresh FSMs: %s, then %s", i, outA[i], got)
			}
		}
		sameState(t, "a second fresh FSM", final, c)

		b := seededFSM(t)
		for i, e := range entries[:half] {
			if got := outcome(b.commitRaw(e)); got != outA[i] {
				t.Fatalf("entry %d: %s, then %s", i, outA[i], got)
			}
		}
		snap, err := b.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		halted := b.Halted() != nil
		for i, e := range entries[half:] {
			if got := outcome(b.commitRaw(e)); got != outA[half+i] {
				t.Fatalf("entry %d with a snapshot open: %s, without: %s", half+i, got, outA[half+i])
			}
		}
		sink := &memSink{}
		if err := snap.Persist(sink); err != nil {
			t.Fatal(err)
		}
		snap.Release()
		sameState(t, "an FSM that applied the second half with a snapshot open", final, b)
		if halted {
			return
		}

		r := newTestFSM(t)
		if err := r.Restore(io.NopCloser(&sink.Buffer)); err != nil {
			t.Fatalf("restore the snapshot taken after entry %d: %v", half, err)
		}
		if h, i := r.StateHash(); h != halfHash || i != halfIndex {
			t.Fatalf("the snapshot taken after entry %d restores as %s@%d, the image was %s@%d", half, h, i, halfHash, halfIndex)
		}
		r.index = b.index - uint64(len(entries)-half)
		for i, e := range entries[half:] {
			if got := outcome(r.commitRaw(e)); got != outA[half+i] {
				t.Fatalf("entry %d after a restore: %s, without: %s", half+i, got, outA[half+i])
			}
		}
		sameState(t, "an FSM restored from the snapshot after the first half", final, r)
	})
}

// seededFSM is a fresh FSM with three brokers and topic "t" (see seed).
func seededFSM(t testing.TB) *testFSM {
	tf := newTestFSM(t)
	tf.seed(3, 1, 2, 3)
	return tf
}

// fsmState is what FuzzApply compares between FSMs.
type fsmState struct {
	hash    StateHash
	index   uint64 // the state hash's
	applied uint64 // AppliedIndex
	halted  string
}

func stateOf(tf *testFSM) fsmState {
	h, i := tf.StateHash()
	return fsmState{hash: h, index: i, applied: tf.AppliedIndex(), halted: fmt.Sprint(tf.Halted())}
}

// sameState fails unless got holds the image of want at the same index
// and halted alike.
func sameState(t *testing.T, what string, want fsmState, got *testFSM) {
	t.Helper()
	g := stateOf(got)
	if g.hash != want.hash || g.index != want.index {
		t.Fatalf("%s: %s@%d, want %s@%d", what, g.hash, g.index, want.hash, want.index)
	}
	if g.halted != want.halted {
		t.Fatalf("%s halted with %s, want %s", what, g.halted, want.halted)
	}
	if g.applied != want.applied {
		t.Fatalf("%s: applied index %d, want %d", what, g.applied, want.applied)
	}
}

// outcome describes what Apply returned for an entry.
func outcome(res interface{}) string {
	switch r := res.(type) {
	case *ApplyResult:
		var b strings.Builder
		fmt.Fprintf(&b, "applied at %d", r.Index)
		for _, rj := range r.Rejected {
			fmt.Fprintf(&b, "; record %d (%s) rejected: %v", rj.Record, rj.Type, rj.Err)
		}
		return b.String()
	case error:
		return "halted: " + r.Error()
	}
	return fmt.Sprintf("%T %v", res, res)
}

// splitEntries reads a FuzzApply input: entries, each a uvarint length and
// that many bytes; a bad or too long length makes the rest one entry.
func splitEntries(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		n, k := binary.Uvarint(data)
		if k <= 0 || n > uint64(len(data)-k) {
			return append(out, data)
		}
		out = append(out, data[k:k+int(n)])
		data = data[k+int(n):]
	}
	return out
}

// joinEntries writes a FuzzApply input.
func joinEntries(entries ...[]byte) []byte {
	var out []byte
	for _, e := range entries {
		out = binary.AppendUvarint(out, uint64(len(e)))
		out = append(out, e...)
	}
	return out
}

type applySeed struct {
	name    string
	entries [][]byte
	// refused: some records are rejected and the FSM halts; otherwise
	// every record applies.
	refused bool
}

// applySeeds are entries as the controller writes them, applied to the
// image seededFSM builds: a broker's life, a topic's creation and
// deletion, a fence and the elections that follow, a reassignment,
// credentials and rules, and entries with a stale broker epoch, a topic
// name in use, then one that is not a batch.
func applySeeds(t testing.TB) []applySeed {
	t1, t2 := topicID(1), topicID(2)
	entry := func(recs ...rl.Record) []byte { return mustEncode(t, recs...) }
	endpoints := []rl.Endpoint{{Name: "PLAINTEXT", Host: "10.0.0.4", Port: 9092}}
	refs := func(parts []int32, brokers ...[]int32) []rl.ReplicaRef {
		var out []rl.ReplicaRef
		for i, p := range parts {
			for _, b := range brokers[i] {
				out = append(out, rl.ReplicaRef{Partition: p, Broker: b})
			}
		}
		return out
	}
	uRefs := refs([]int32{0, 1}, []int32{2, 3}, []int32{3, 1})
	// Entries start at index 8: seededFSM applies 7, and broker 4
	// registers in the first of them where it appears.
	return []applySeed{
		{name: "broker-lifecycle", entries: [][]byte{
			entry(&rl.RegisterBroker{BrokerID: 4, IncarnationID: rl.IncarnationID{4}, Rack: "r", Endpoints: endpoints}),
			entry(&rl.UnfenceBroker{BrokerID: 4, BrokerEpoch: 8}),
			entry(&rl.BrokerShutdown{BrokerID: 4, BrokerEpoch: 8}),
			entry(&rl.FenceBroker{BrokerID: 4, BrokerEpoch: 8}),
			entry(&rl.UnregisterBroker{BrokerID: 4, BrokerEpoch: 8}),
			entry(&rl.RegisterBroker{BrokerID: 4, IncarnationID: rl.IncarnationID{5}, Rack: "r", Endpoints: endpoints}),
		}},
		{name: "topic-lifecycle", entries: [][]byte{
			entry(&rl.Topic{TopicID: t2, Name: "u", Configs: []rl.ConfigEntry{{Key: "min.insync.replicas", Value: "2"}}},
				&rl.Partition{TopicID: t2, Partition: 0, Replicas: []int32{2, 3}},
				&rl.Partition{TopicID: t2, Partition: 1, Replicas: []int32{3, 1}},
				&rl.ReplicaStateChange{TopicID: t2, State: rl.NewReplica, Replicas: uRefs},
				&rl.PartitionChanges{TopicID: t2, Changes: []rl.PartitionDelta{
					{Partition: 0, Set: rl.ChangeLeader | rl.ChangeISR, Leader: 2, ISR: []int32{2, 3}},
					{Partition: 1, Set: rl.ChangeLeader | rl.ChangeISR, Leader: 3, ISR: []int32{3, 1}},
				}},
				&rl.PartitionStateChange{TopicID: t2, State: rl.OnlinePartition, Partitions: []int32{0, 1}},
				&rl.ReplicaStateChange{TopicID: t2, State: rl.OnlineReplica, Replicas: uRefs}),
			entry(&rl.TopicConfig{TopicID: t2, Key: "retention.ms", Value: "1000"}),
			entry(&rl.BeginDeleteTopic{TopicID: t2}),
			entry(&rl.PartitionChanges{TopicID: t2, Changes: []rl.PartitionDelta{
				{Partition: 0, PartitionEpoch: 1, Set: rl.ChangeLeader, Leader: rl.NoLeader},
				{Partition: 1, PartitionEpoch: 1, Set: rl.ChangeLeader, Leader: rl.NoLeader},
			}}, &rl.PartitionStateChange{TopicID: t2, State: rl.OfflinePartition, Partitions: []int32{0, 1}}),
			entry(&rl.ReplicaStateChange{TopicID: t2, State: rl.OfflineReplica, Replicas: uRefs}),
			entry(&rl.ReplicaStateChange{TopicID: t2, State: rl.ReplicaDeletionStarted, Replicas: uRefs}),
			entry(&rl.ReplicaStateChange{TopicID: t2, State: rl.ReplicaDeletionSuccessful, Replicas: uRefs}),
			entry(&rl.ReplicaStateChange{TopicID: t2, State: rl.NonExistentReplica, Replicas: uRefs},
				&rl.PartitionStateChange{TopicID: t2, State: rl.NonExistentPartition, Partitions: []int32{0, 1}},
				&rl.RemoveTopic{TopicID: t2}),
		}},
		{name: "fence-and-elect", entries: [][]byte{
			entry(&rl.FenceBroker{BrokerID: 1, BrokerEpoch: 1},
				&rl.PartitionChange{TopicID: t1, PartitionEpoch: 1, Set: rl.ChangeLeader | rl.ChangeISR, Leader: 2, ISR: []int32{2, 3}},
				&rl.ReplicaStateChange{TopicID: t1, State: rl.OfflineReplica, Replicas: []rl.ReplicaRef{{Partition: 0, Broker: 1}}}),
			entry(&rl.UnfenceBroker{BrokerID: 1, BrokerEpoch: 1},
				&rl.ReplicaStateChange{TopicID: t1, State: rl.OnlineReplica, Replicas: []rl.ReplicaRef{{Partition: 0, Broker: 1}}}),
			entry(&rl.PartitionChange{TopicID: t1, PartitionEpoch: 2, Set: rl.ChangeISR, Leader: 2, ISR: []int32{2, 3, 1}}),
			entry(&rl.ControllerEpoch{Epoch: 1, NodeID: 1002}),
			entry(&rl.PartitionChange{TopicID: t1, PartitionEpoch: 3, Set: rl.ChangeLeader, Leader: 1}),
		}},
		{name: "reassign", entries: [][]byte{
			entry(&rl.RegisterBroker{BrokerID: 4, IncarnationID: rl.IncarnationID{4}, Rack: "r", Endpoints: endpoints}),
			entry(&rl.UnfenceBroker{BrokerID: 4, BrokerEpoch: 8}),
			entry(&rl.PartitionChange{TopicID: t1, PartitionEpoch: 1, Set: rl.ChangeReplicas | rl.ChangeReassignment,
				Replicas: []int32{1, 2, 3, 4}, Adding: []int32{4}, Removing: []int32{1}},
				&rl.ReplicaStateChange{TopicID: t1, State: rl.NewReplica, Replicas: []rl.ReplicaRef{{Partition: 0, Broker: 4}}}),
			entry(&rl.ReplicaStateChange{TopicID: t1, State: rl.OnlineReplica, Replicas: []rl.ReplicaRef{{Partition: 0, Broker: 4}}},
				&rl.PartitionChange{TopicID: t1, PartitionEpoch: 2, Set: rl.ChangeISR, Leader: 1, ISR: []int32{1, 2, 3, 4}}),
			entry(&rl.PartitionChange{TopicID: t1, PartitionEpoch: 3, Set: rl.ChangeLeader | rl.ChangeISR | rl.ChangeReassignment,
				Leader: 2, ISR: []int32{2, 3, 4}, Removing: []int32{1}},
				&rl.ReplicaStateChange{TopicID: t1, State: rl.OfflineReplica, Replicas: []rl.ReplicaRef{{Partition: 0, Broker: 1}}},
				&rl.ReplicaStateChange{TopicID: t1, State: rl.ReplicaDeletionStarted, Replicas: []rl.ReplicaRef{{Partition: 0, Broker: 1}}}),
			entry(&rl.ReplicaStateChange{TopicID: t1, State: rl.ReplicaDeletionSuccessful, Replicas: []rl.ReplicaRef{{Partition: 0, Broker: 1}}}),
			entry(&rl.ReplicaStateChange{TopicID: t1, State: rl.NonExistentReplica, Replicas: []rl.ReplicaRef{{Partition: 0, Broker: 1}}},
				&rl.PartitionChange{TopicID: t1, PartitionEpoch: 5, Set: rl.ChangeReassignment}),
		}},
		{name: "security", entries: [][]byte{
			entry(scramRecord("alice", rl.ScramSHA256), scramRecord("bob", rl.ScramSHA512)),
			entry(&rl.AclChange{Add: []rl.AclRule{rule("User:alice", rl.OpRead), rule("User:bob", rl.OpCreate)}}),
			entry(&rl.DeleteScramCredential{User: "alice", Mechanism: rl.ScramSHA256}),
			entry(&rl.AclChange{Remove: []rl.AclRule{rule("User:alice", rl.OpRead)}}),
		}},
		{name: "broker-configs", entries: [][]byte{
			entry(&rl.FeatureLevel{Name: rl.FeatureMetadataVersion, Level: rl.LatestLevel}),
			entry(&rl.BrokerConfig{Broker: "", Key: "auto.leader.rebalance.enable", Value: "false"},
				&rl.BrokerConfig{Broker: "2", Key: "min.insync.replicas", Value: "2"}),
			entry(&rl.BrokerConfig{Broker: "2", Key: "min.insync.replicas", Value: "3"}),
			entry(&rl.BrokerConfig{Broker: "", Key: "auto.leader.rebalance.enable", Delete: true}),
		}},
		{name: "feature-levels", entries: [][]byte{
			entry(&rl.FeatureLevel{Name: rl.FeatureMetadataVersion, Level: rl.Level2},
				&rl.RegisterBroker{BrokerID: 5, IncarnationID: rl.IncarnationID{5}, Endpoints: endpoints,
					Features: []rl.FeatureRange{{Name: rl.FeatureMetadataVersion, Min: 1, Max: 2}}}),
			entry(&rl.FeatureLevel{Name: "other.feature", Level: 3}),
			entry(&rl.FeatureLevel{Name: "other.feature", Level: 0}),
		}},
		{name: "refused", refused: true, entries: [][]byte{
			entry(&rl.FenceBroker{BrokerID: 1, BrokerEpoch: 99}, &rl.ControllerEpoch{Epoch: 1, NodeID: 1001}),
			entry(&rl.ControllerEpoch{Epoch: 2, NodeID: 1002}),
			entry(&rl.Topic{TopicID: topicID(3), Name: "t"}),
			[]byte("not a batch"),
			entry(&rl.FenceBroker{BrokerID: 1, BrokerEpoch: 1}),
		}},
	}
}

// TestFuzzApplyCorpus checks that the seeds apply as they should; with
// -write-fuzz-corpus it writes them to testdata/fuzz/FuzzApply.
func TestFuzzApplyCorpus(t *testing.T) {
	for _, s := range applySeeds(t) {
		tf := seededFSM(t)
		rejected := false
		for i, e := range s.entries {
			res := tf.commitRaw(e)
			if r, ok := res.(*ApplyResult); ok && r.Err() != nil {
				if !s.refused {
					t.Fatalf("%s entry %d: %v", s.name, i, r.Err())
				}
				rejected = true
			}
		}
		if s.refused && (!rejected || tf.Halted() == nil) {
			t.Fatalf("%s: rejected %v, halted %v", s.name, rejected, tf.Halted())
		}
		if !s.refused && tf.Halted() != nil {
			t.Fatalf("%s: %v", s.name, tf.Halted())
		}
		if *writeFuzzCorpus {
			testkit.WriteFuzzSeed(t, "FuzzApply", s.name, joinEntries(s.entries...))
		}
	}
}
