package raftlog

import (
	"bytes"
	"errors"
	"flag"
	"reflect"
	"strings"
	"testing"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
)

var tid = TopicID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// sampleRecords holds one filled-in record of every type.
func sampleRecords() []Record {
	return []Record{
		&ControllerEpoch{Epoch: 7, NodeID: 2},
		&RegisterBroker{BrokerID: 3, IncarnationID: IncarnationID{9, 9}, Rack: "r1",
			Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092, SecurityProtocol: 0}}},
		&RegisterBroker{BrokerID: 4, IncarnationID: IncarnationID{8}, Endpoints: []Endpoint{},
			Features: []FeatureRange{{Name: FeatureMetadataVersion, Min: 1, Max: 2}}},
		&FeatureLevel{Name: FeatureMetadataVersion, Level: 2},
		&StateChangeCause{Text: "broker 2 fenced: session expired"},
		&ClusterID{ID: "MkU3OEVBNTcwNTJENDM2Qg"},
		&FenceBroker{BrokerID: 3, BrokerEpoch: 42},
		&UnfenceBroker{BrokerID: 3, BrokerEpoch: 42},
		&BrokerShutdown{BrokerID: 3, BrokerEpoch: 42},
		&UnregisterBroker{BrokerID: 3, BrokerEpoch: 42},
		&Topic{TopicID: tid, Name: "orders", Configs: []ConfigEntry{{Key: "min.insync.replicas", Value: "2"}}},
		&TopicConfig{TopicID: tid, Key: "unclean.leader.election.enable", Value: "true"},
		&TopicConfig{TopicID: tid, Key: "retention.ms", Delete: true},
		&Partition{TopicID: tid, Partition: 5, Replicas: []int32{1, 2, 3}},
		&PartitionChange{TopicID: tid, Partition: 5, PartitionEpoch: 11, Set: ChangeLeader | ChangeISR,
			Leader: 2, ISR: []int32{2, 3}},
		&PartitionChange{TopicID: tid, Partition: 5, PartitionEpoch: 12, Set: ChangeReplicas | ChangeReassignment,
			Replicas: []int32{1, 2, 3, 4}, Adding: []int32{4}, Removing: []int32{1}},
		&ReplicaStateChange{TopicID: tid, State: OfflineReplica, Replicas: []ReplicaRef{{Partition: 0, Broker: 1}, {Partition: 3, Broker: 2}}},
		&PartitionStateChange{TopicID: tid, State: OnlinePartition, Partitions: []int32{0, 1, 2}},
		&BeginDeleteTopic{TopicID: tid},
		&RemoveTopic{TopicID: tid},
		&ScramCredential{User: "alice", Mechanism: ScramSHA256, Iterations: 4096, Salt: []byte("salt"),
			StoredKey: bytes.Repeat([]byte{1}, 32), ServerKey: bytes.Repeat([]byte{2}, 32)},
		&DeleteScramCredential{User: "alice", Mechanism: ScramSHA512},
		&AclChange{Add: []AclRule{{Principal: "User:alice", Host: "*", ResourceType: ResourceTopic, ResourceName: "orders",
			PatternType: PatternPrefixed, Operation: OpCreate, Permission: PermissionAllow}},
			Remove: []AclRule{{Principal: "User:bob", Host: "*", ResourceType: ResourceCluster, ResourceName: ClusterResourceName,
				PatternType: PatternLiteral, Operation: OpAlter, Permission: PermissionDeny}}},
		&BrokerConfig{Broker: "3", Key: "min.insync.replicas", Value: "2"},
		&BrokerConfig{Broker: "", Key: "auto.leader.rebalance.enable", Delete: true},
		&PartitionChanges{TopicID: tid, Changes: []PartitionDelta{
			{Partition: 5, PartitionEpoch: 11, Set: ChangeLeader | ChangeISR, Leader: 2, ISR: []int32{2, 3}},
			{Partition: 6, PartitionEpoch: 3, Set: ChangeISR, Leader: 1, ISR: []int32{}},
			{Partition: 7, PartitionEpoch: 12, Set: ChangeReplicas | ChangeReassignment,
				Replicas: []int32{1, 2, 3, 4}, Adding: []int32{4}, Removing: []int32{1}},
		}},
	}
}

func TestEveryTypeHasASample(t *testing.T) {
	seen := map[RecordType]bool{}
	for _, r := range sampleRecords() {
		seen[r.Type()] = true
	}
	for typ := range recordVersions {
		if !seen[typ] {
			t.Errorf("no round-trip sample for %s", typ)
		}
		if newRecord(typ) == nil {
			t.Errorf("newRecord(%s) = nil", typ)
		}
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range sampleRecords() {
		t.Run(r.Type().String(), func(t *testing.T) {
			b, err := EncodeRecord(r)
			if err != nil {
				t.Fatal(err)
			}
			if RecordType(b[0]) != r.Type() || b[1] != RecordVersion(r) {
				t.Fatalf("header = %d/%d", b[0], b[1])
			}
			got, err := DecodeRecord(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, r) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, r)
			}
		})
	}
}

func TestBatchRoundTrip(t *testing.T) {
	in := sampleRecords()
	b, err := EncodeBatch(in)
	if err != nil {
		t.Fatal(err)
	}
	if !IsBatch(b) {
		t.Fatal("IsBatch = false")
	}
	out, err := DecodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("got %d records, want %d", len(out), len(in))
	}
	for i := range in {
		if !reflect.DeepEqual(out[i], in[i]) {
			t.Errorf("record %d: got %#v want %#v", i, out[i], in[i])
		}
	}
	empty, _ := EncodeBatch(nil)
	if got, err := DecodeBatch(empty); err != nil || len(got) != 0 {
		t.Fatalf("empty batch: %v %v", got, err)
	}
}

func TestDecodeErrorsNameTheProblem(t *testing.T) {
	good, _ := EncodeBatch([]Record{&FenceBroker{BrokerID: 1, BrokerEpoch: 2}, &BeginDeleteTopic{TopicID: tid}})
	unknown := append([]byte{batchMagic, batchFormatVersion, 1, 3}, 200, 1, 0x90)
	newer := append([]byte{batchMagic, batchFormatVersion, 1, 3}, byte(TypeRemoveTopic), 9, 0x90)
	badState, _ := EncodeBatch([]Record{&ReplicaStateChange{TopicID: tid, State: 99}})
	cases := []struct {
		name    string
		in      []byte
		want    string
		wantErr error
		record  int
	}{
		{"empty", nil, "shorter than the batch header", nil, -1},
		{"bad magic", []byte{1, 1, 0}, "bad magic", nil, -1},
		{"newer format", []byte{batchMagic, 9, 0}, "batch format 9", nil, -1},
		{"huge count", []byte{batchMagic, batchFormatVersion, 0xff, 0xff, 0xff, 0x7f}, "record count", nil, -1},
		{"truncated", good[:len(good)-3], "exceeds", nil, 1},
		{"trailing", append(append([]byte{}, good...), 0), "trailing", nil, -1},
		{"unknown type", unknown, "unknown(200)", ErrUnknownType, 0},
		{"newer version", newer, "version 9", ErrNewerVersion, 0},
		{"bad state", badState, "field State", nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeBatch(c.in)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v is not a *DecodeError", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
			if c.wantErr != nil && !errors.Is(err, c.wantErr) {
				t.Errorf("error %v is not %v", err, c.wantErr)
			}
			if de.Record != c.record {
				t.Errorf("Record = %d, want %d", de.Record, c.record)
			}
		})
	}
}

func TestCorruptBodyIsAnError(t *testing.T) {
	b, _ := EncodeRecord(&Topic{TopicID: tid, Name: "x"})
	b[2] = 0xc1 // a msgpack code that is never valid
	if _, err := DecodeRecord(b); err == nil || !strings.Contains(err.Error(), "Topic") {
		t.Fatalf("err = %v, want a decode error naming Topic", err)
	}
}

// FuzzDecodeBatch holds the batch decoder to its encoder: whatever
// decodes re-encodes, the re-encoding decodes to an equal batch, and
// encoding that batch again gives the same bytes (the encoder's output is
// a fixed point of decode-then-encode, whatever non-canonical form the
// input took: long integers, str8 for a short string).
//
//	go test -run '^$' -fuzz '^FuzzDecodeBatch$' ./raftlog
func FuzzDecodeBatch(f *testing.F) {
	b, _ := EncodeBatch(sampleRecords())
	f.Add(b)
	f.Add([]byte{batchMagic, batchFormatVersion, 0})
	for _, r := range sampleRecords() {
		one, _ := EncodeBatch([]Record{r})
		f.Add(one)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		batch, err := DecodeBatch(data)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T is not a *DecodeError", err)
			}
			return
		}
		again, err := EncodeBatch(batch)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		batch2, err := DecodeBatch(again)
		if err != nil {
			t.Fatalf("the re-encoding does not decode: %v\n%x", err, again)
		}
		if !reflect.DeepEqual(batch, batch2) {
			t.Fatalf("the re-encoding decodes differently:\n got %#v\nwant %#v", batch2, batch)
		}
		third, err := EncodeBatch(batch2)
		if err != nil {
			t.Fatalf("third encode: %v", err)
		}
		if !bytes.Equal(again, third) {
			t.Fatalf("encoding is not a fixed point:\n%x\n%x", again, third)
		}
	})
}

// FuzzDecodeRecord is FuzzDecodeBatch for one record: decode, re-encode,
// decode again to a deeply equal record, encode again to the same bytes.
//
//	go test -run '^$' -fuzz '^FuzzDecodeRecord$' ./raftlog
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		b, _ := EncodeRecord(r)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRecord(data)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T is not a *DecodeError", err)
			}
			return
		}
		if r == nil {
			t.Fatal("nil record without error")
		}
		if data[0] != byte(r.Type()) {
			t.Fatalf("type byte %d decoded as %s", data[0], r.Type())
		}
		again, err := EncodeRecord(r)
		if err != nil {
			t.Fatalf("re-encode %s: %v", r.Type(), err)
		}
		r2, err := DecodeRecord(again)
		if err != nil {
			t.Fatalf("the re-encoding of %s does not decode: %v\n%x", r.Type(), err, again)
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("the re-encoding decodes differently:\n got %#v\nwant %#v", r2, r)
		}
		third, err := EncodeRecord(r2)
		if err != nil {
			t.Fatalf("third encode: %v", err)
		}
		if !bytes.Equal(again, third) {
			t.Fatalf("encoding of %s is not a fixed point:\n%x\n%x", r.Type(), again, third)
		}
	})
}

// corpusBatches are the entries the controller writes, in its shapes: a
// topic's creation, a broker's registration and unfencing, a fence round
// that moves leaders off a broker, a reassignment's start, a controller
// taking over, a credential and rules being set, and a dynamic broker
// config and a cluster default being changed.
func corpusBatches() map[string][]Record {
	reps := []int32{1, 2, 3}
	refs := func(brokers ...int32) []ReplicaRef {
		out := make([]ReplicaRef, 0, 2*len(brokers))
		for p := int32(0); p < 2; p++ {
			for _, b := range brokers {
				out = append(out, ReplicaRef{Partition: p, Broker: b})
			}
		}
		return out
	}
	var sec []Record
	for _, r := range sampleRecords() {
		switch r.Type() {
		case TypeScramCredential, TypeDeleteScramCredential, TypeAclChange:
			sec = append(sec, r)
		}
	}
	return map[string][]Record{
		"create-topic": {
			&Topic{TopicID: tid, Name: "orders", Configs: []ConfigEntry{{Key: "min.insync.replicas", Value: "2"}}},
			&Partition{TopicID: tid, Partition: 0, Replicas: reps},
			&Partition{TopicID: tid, Partition: 1, Replicas: []int32{2, 3, 1}},
			&ReplicaStateChange{TopicID: tid, State: NewReplica, Replicas: refs(1, 2, 3)},
			&PartitionChanges{TopicID: tid, Changes: []PartitionDelta{
				{Partition: 0, Set: ChangeLeader | ChangeISR, Leader: 1, ISR: reps},
				{Partition: 1, Set: ChangeLeader | ChangeISR, Leader: 2, ISR: []int32{2, 3, 1}},
			}},
			&PartitionStateChange{TopicID: tid, State: OnlinePartition, Partitions: []int32{0, 1}},
			&ReplicaStateChange{TopicID: tid, State: OnlineReplica, Replicas: refs(1, 2, 3)},
		},
		"register-broker": {
			&RegisterBroker{BrokerID: 4, IncarnationID: IncarnationID{4, 4, 4}, Rack: "rack-a",
				Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "10.0.0.4", Port: 9092}}},
			&UnfenceBroker{BrokerID: 4, BrokerEpoch: 57},
		},
		"fence-broker": {
			&FenceBroker{BrokerID: 1, BrokerEpoch: 12},
			&PartitionChanges{TopicID: tid, Changes: []PartitionDelta{
				{Partition: 0, PartitionEpoch: 1, Set: ChangeLeader | ChangeISR, Leader: 2, ISR: []int32{2, 3}},
				{Partition: 1, PartitionEpoch: 1, Set: ChangeISR, Leader: 2, ISR: []int32{2, 3}},
			}},
			&ReplicaStateChange{TopicID: tid, State: OfflineReplica, Replicas: []ReplicaRef{{Partition: 0, Broker: 1}, {Partition: 1, Broker: 1}}},
		},
		"reassign": {
			&PartitionChange{TopicID: tid, Partition: 0, PartitionEpoch: 2, Set: ChangeReplicas | ChangeReassignment,
				Replicas: []int32{2, 3, 4, 1}, Adding: []int32{4}, Removing: []int32{1}},
			&ReplicaStateChange{TopicID: tid, State: NewReplica, Replicas: []ReplicaRef{{Partition: 0, Broker: 4}}},
		},
		"controller-epoch": {&ControllerEpoch{Epoch: 3, NodeID: 1002}},
		"security":         sec,
		"broker-config": {
			&BrokerConfig{Broker: "", Key: "auto.leader.rebalance.enable", Value: "false"},
			&BrokerConfig{Broker: "2", Key: "min.insync.replicas", Delete: true},
		},
		"empty": {},
	}
}

var writeFuzzCorpus = flag.Bool("write-fuzz-corpus", false, "write the seed corpus files of the fuzz targets into testdata/fuzz")

// TestFuzzCorpus checks that the corpus seeds decode back to the records
// they were made of; with -write-fuzz-corpus it writes them to
// testdata/fuzz: each batch for FuzzDecodeBatch, the records of the
// topic creation, the security batch and the broker-config batch for
// FuzzDecodeRecord (the first of each type).
func TestFuzzCorpus(t *testing.T) {
	batches := corpusBatches()
	for name, recs := range batches {
		b, err := EncodeBatch(recs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeBatch(b)
		if err != nil || len(got) != len(recs) {
			t.Fatalf("%s: %d records, %v", name, len(got), err)
		}
		for i := range recs {
			if !reflect.DeepEqual(got[i], recs[i]) {
				t.Fatalf("%s record %d: got %#v, want %#v", name, i, got[i], recs[i])
			}
		}
		if *writeFuzzCorpus {
			testkit.WriteFuzzSeed(t, "FuzzDecodeBatch", name, b)
		}
	}
	seen := map[RecordType]bool{}
	for _, name := range []string{"create-topic", "security", "broker-config"} {
		for _, r := range batches[name] {
			if seen[r.Type()] {
				continue
			}
			seen[r.Type()] = true
			b, err := EncodeRecord(r)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := DecodeRecord(b); err != nil {
				t.Fatalf("%s: %v", r.Type(), err)
			}
			if *writeFuzzCorpus {
				testkit.WriteFuzzSeed(t, "FuzzDecodeRecord", r.Type().String(), b)
			}
		}
	}
}
