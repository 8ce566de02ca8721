package raftlog

import (
	"bytes"
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
)

func TestFastCodecMatchesStructTags(t *testing.T) {
	for _, r := range sampleRecords() {
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
		default:
			continue
		}
		want, err := msgpack.Marshal(plain)
		if err != nil {
			t.Fatal(err)
		}
		got, err := msgpack.Marshal(r)
		if err != nil {
			t.Fatal(err)
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
