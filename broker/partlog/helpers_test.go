package partlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// makeBatch encodes a v2 batch of uncompressed records with these values,
// as a producer sends it (base offset 0, no leader epoch).
func makeBatch(ts int64, values ...string) []byte {
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: int64(i), Value: []byte(v)}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	b := kmsg.RecordBatch{
		FirstOffset: 0, Length: int32(49 + len(recs)), PartitionLeaderEpoch: -1, Magic: 2,
		LastOffsetDelta: int32(len(values) - 1), FirstTimestamp: ts, MaxTimestamp: ts + int64(len(values)-1),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(values)), Records: recs,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], crc32c))
	return out
}

// values decodes the records of the batches in b: offset → value.
func values(t testing.TB, b []byte) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	bs, err := ParseBatches(b)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	for _, bt := range bs {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(bt.Bytes); err != nil {
			t.Fatal(err)
		}
		recs := rb.Records
		for i := 0; i < int(rb.NumRecords); i++ {
			var r kmsg.Record
			if err := r.ReadFrom(recs); err != nil {
				t.Fatalf("record %d of batch %d: %v", i, bt.BaseOffset, err)
			}
			n := len(r.AppendTo(nil))
			recs = recs[n:]
			out[bt.BaseOffset+int64(r.OffsetDelta)] = string(r.Value)
		}
	}
	return out
}

func mustParse(t testing.TB, b []byte) []Batch {
	t.Helper()
	bs, err := ParseBatches(b)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

func val(o int64) string { return fmt.Sprintf("value-%d", o) }
