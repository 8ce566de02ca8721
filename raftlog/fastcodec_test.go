package raftlog

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// The hand-written codecs must produce what the struct tags describe, so
// entries written either way decode the same.
type (
	plainPartition            Partition
	plainPartitionChange      PartitionChange
	plainReplicaStateChange   ReplicaStateChange
	plainPartitionStateChange PartitionStateChange
	plainPartitionChanges     PartitionChanges
	plainTopic                Topic
)

// marshalCompact encodes v as the record encoder does.
func marshalCompact(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	err := enc.Encode(v)
	return buf.Bytes(), err
}

func TestFastCodecMatchesStructTags(t *testing.T) {
	wide := []Record{
		// Integers of every width and sign.
		&PartitionChange{TopicID: tid, Partition: 300, PartitionEpoch: 70_000, Set: 255, Leader: -1,
			ISR: []int32{127, 128, 255, 256, 65_535, 65_536, -33, -129, 1 << 30}},
		&ReplicaStateChange{TopicID: tid, State: 200, Replicas: []ReplicaRef{{Partition: 1 << 20, Broker: -5}}},
		&PartitionChanges{TopicID: tid, Changes: []PartitionDelta{{Partition: 40_000, PartitionEpoch: -7, Set: 200, Leader: 1<<31 - 1}}},
		// Strings of every length class, and no, empty and several configs.
		&Topic{TopicID: tid, Name: "t"},
		&Topic{TopicID: tid, Name: string(bytes.Repeat([]byte("n"), 249)), Configs: []ConfigEntry{}},
		&Topic{TopicID: tid, Name: "u", Configs: []ConfigEntry{{Key: string(bytes.Repeat([]byte("k"), 70_000)), Value: ""}, {Key: "a", Value: string(bytes.Repeat([]byte("v"), 300))}}},
	}
	for _, r := range append(sampleRecords(), wide...) {
		var plain any
		switch v := r.(type) {
		case *Partition:
			plain = (*plainPartition)(v)
		case *PartitionChange:
			plain = (*plainPartitionChange)(v)
		case *ReplicaStateChange:
			plain = (*plainReplicaStateChange)(v)
		case *PartitionStateChange:
			plain = (*plainPartitionStateChange)(v)
		case *PartitionChanges:
			plain = (*plainPartitionChanges)(v)
		case *Topic:
			plain = (*plainTopic)(v)
		default:
			continue
		}
		want, err := marshalCompact(plain)
		if err != nil {
			t.Fatal(err)
		}
		got, err := marshalCompact(r)
		if err != nil {
			t.Fatal(err)
		}
		if enc, err := EncodeRecord(r); err != nil || !bytes.Equal(enc[2:], got) {
			t.Errorf("%s: the record encoder wrote %x, want %x (%v)", r.Type(), enc, got, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: hand-written encoding %x differs from struct-tag encoding %x", r.Type(), got, want)
		}
		// And the tag decoder reads what the hand-written encoder wrote.
		if err := msgpack.Unmarshal(got, plain); err != nil {
			t.Errorf("%s: %v", r.Type(), err)
		}
	}
}

func BenchmarkDecodeBatchPartitionChanges(b *testing.B) {
	recs := make([]Record, 10_000)
	for i := range recs {
		recs[i] = &PartitionChange{TopicID: tid, Partition: int32(i), PartitionEpoch: 4, Set: ChangeLeader | ChangeISR, Leader: 2, ISR: []int32{2, 3}}
	}
	data, _ := EncodeBatch(recs)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeBatch(data); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}

func TestPartitionChangesCountIsBoundedByInput(t *testing.T) {
	// A declared count of 65535 changes in a few bytes is refused before
	// anything is allocated for it.
	b, _ := EncodeRecord(&PartitionChanges{TopicID: tid, Changes: []PartitionDelta{{Partition: 1}}})
	i := bytes.IndexByte(b[2:], 0x91) + 2 // the one-element array of changes
	bad := append(append(append([]byte(nil), b[:i]...), 0xdc, 0xff, 0xff), b[i+1:]...)
	if _, err := DecodeRecord(bad); err == nil {
		t.Fatal("an oversized change count decoded")
	}
}

func BenchmarkDecodeBatchPartitionChangesRecord(b *testing.B) {
	var recs []Record
	for t := 0; t < 100; t++ {
		rec := &PartitionChanges{TopicID: TopicID{byte(t)}}
		for p := 0; p < 100; p++ {
			rec.Changes = append(rec.Changes, PartitionDelta{Partition: int32(p), PartitionEpoch: 4, Set: ChangeLeader | ChangeISR, Leader: 2, ISR: []int32{2, 3}})
		}
		recs = append(recs, rec)
	}
	data, _ := EncodeBatch(recs)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeBatch(data); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*10_000), "ns/change")
}

// The hand-written decoders must read what the struct-tag decoder reads,
// from what the struct-tag encoder writes, and refuse what it refuses.
func TestFastDecodeMatchesStructTags(t *testing.T) {
	long := string(bytes.Repeat([]byte("k"), 70_000))
	topics := []*Topic{
		{TopicID: tid, Name: "orders"},
		{TopicID: tid, Name: "orders", Configs: []ConfigEntry{}},
		{TopicID: tid, Name: string(bytes.Repeat([]byte("n"), 249)), Configs: []ConfigEntry{{Key: "min.insync.replicas", Value: "2"}, {Key: long, Value: ""}}},
		{TopicID: tid, Name: string(bytes.Repeat([]byte("m"), 40))},
	}
	for _, tp := range topics {
		enc, err := marshalCompact((*plainTopic)(tp))
		if err != nil {
			t.Fatal(err)
		}
		var fast, tags Topic
		if err := decodeBody(&fast, enc, &mpReader{}); err != nil {
			t.Fatalf("fast decode of %q: %v", tp.Name[:min(len(tp.Name), 20)], err)
		}
		if err := msgpack.Unmarshal(enc, (*plainTopic)(&tags)); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, tags) || !reflect.DeepEqual(fast, *tp) {
			t.Fatalf("fast decode %+v, struct tags %+v, written %+v", fast, tags, *tp)
		}
		for cut := range enc {
			var v Topic
			if err := decodeBody(&v, enc[:cut], &mpReader{}); err == nil {
				t.Fatalf("a body cut to %d of %d bytes decoded", cut, len(enc))
			}
		}
	}
}
