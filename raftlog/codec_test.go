package raftlog

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

var tid = TopicID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// sampleRecords holds one filled-in record of every type.
func sampleRecords() []Record {
	return []Record{
		&ControllerEpoch{Epoch: 7, NodeID: 2},
		&RegisterBroker{BrokerID: 3, IncarnationID: IncarnationID{9, 9}, Rack: "r1",
			Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092, SecurityProtocol: 0}}},
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
			if RecordType(b[0]) != r.Type() || b[1] != recordVersions[r.Type()] {
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
		// What decodes must encode back to something that decodes the same.
		again, err := EncodeBatch(batch)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		batch2, err := DecodeBatch(again)
		if err != nil || !reflect.DeepEqual(batch, batch2) {
			t.Fatalf("re-decode differs: %v", err)
		}
	})
}

func FuzzDecodeRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		b, _ := EncodeRecord(r)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRecord(data)
		if err == nil && r == nil {
			t.Fatal("nil record without error")
		}
		if err == nil && !bytes.Equal(data[:1], []byte{byte(r.Type())}) {
			t.Fatal("type byte mismatch")
		}
	})
}
