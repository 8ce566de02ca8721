package partlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Byte positions in a v2 record batch header (Kafka's DefaultRecordBatch).
const (
	offBaseOffset  = 0
	offLength      = 8
	offLeaderEpoch = 12
	offMagic       = 16
	offCRC         = 17
	offAttributes  = 21 // the CRC covers everything from here on
	// HeaderBytes is the size of a v2 batch header: a batch is never
	// shorter.
	HeaderBytes = 61
	// batchOverhead is the part of the header not counted by Length.
	batchOverhead = 12
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// Batch is the header of one record batch and its bytes.
type Batch struct {
	BaseOffset  int64
	LeaderEpoch int32
	// LastOffsetDelta: the batch covers BaseOffset..BaseOffset+LastOffsetDelta.
	LastOffsetDelta int32
	FirstTimestamp  int64
	MaxTimestamp    int64
	NumRecords      int32
	// Bytes is the whole batch, header included.
	Bytes []byte
}

// LastOffset is the offset of the batch's last record.
func (b *Batch) LastOffset() int64 { return b.BaseOffset + int64(b.LastOffsetDelta) }

// NextOffset is the offset after the batch.
func (b *Batch) NextOffset() int64 { return b.LastOffset() + 1 }

// batchSize reads the size of the batch starting at b from its length
// field, or returns false when b is too short to say or the length is
// impossible.
func batchSize(b []byte) (int, bool) {
	if len(b) < batchOverhead {
		return 0, false
	}
	n := int64(int32(binary.BigEndian.Uint32(b[offLength:])))
	if n < HeaderBytes-batchOverhead || n > maxBatchBytes {
		return 0, false
	}
	return int(n) + batchOverhead, true
}

// maxBatchBytes bounds the length a batch header may claim, so that a
// damaged length is not taken for a huge batch.
const maxBatchBytes = 1 << 30

// ParseBatch reads the batch at the start of b: its header, checked
// (magic 2, a sane length, the CRC), and its bytes, which alias b. The
// error is a *kerr.Error a producer understands: CORRUPT_MESSAGE for a
// torn or damaged batch, UNSUPPORTED_FOR_MESSAGE_FORMAT for an older
// magic, INVALID_RECORD for impossible offsets or counts.
func ParseBatch(b []byte) (Batch, error) {
	n, ok := batchSize(b)
	if !ok || n > len(b) {
		return Batch{}, fmt.Errorf("%w: a record batch is cut short or its length is damaged", kerr.CorruptMessage)
	}
	if b[offMagic] != 2 {
		return Batch{}, fmt.Errorf("%w: record batch magic %d (only 2 is kept)", kerr.UnsupportedForMessageFormat, int8(b[offMagic]))
	}
	var h kmsg.RecordBatch
	if err := h.UnsafeReadFrom(b[:n]); err != nil {
		return Batch{}, fmt.Errorf("%w: %v", kerr.CorruptMessage, err)
	}
	if crc := crc32.Checksum(b[offAttributes:n], crc32c); int32(crc) != h.CRC {
		return Batch{}, fmt.Errorf("%w: record batch CRC %08x, computed %08x", kerr.CorruptMessage, uint32(h.CRC), crc)
	}
	if h.LastOffsetDelta < 0 || h.NumRecords < 0 || h.FirstOffset < 0 || h.FirstOffset > maxOffset-int64(h.LastOffsetDelta) {
		return Batch{}, fmt.Errorf("%w: record batch with base offset %d, last offset delta %d, %d records", kerr.InvalidRecord, h.FirstOffset, h.LastOffsetDelta, h.NumRecords)
	}
	return Batch{
		BaseOffset: h.FirstOffset, LeaderEpoch: h.PartitionLeaderEpoch, LastOffsetDelta: h.LastOffsetDelta,
		FirstTimestamp: h.FirstTimestamp, MaxTimestamp: h.MaxTimestamp, NumRecords: h.NumRecords, Bytes: b[:n],
	}, nil
}

// maxOffset bounds offsets far below int64's end, so that sums never wrap.
const maxOffset = 1 << 62

// ParseBatches splits b into its batches, each checked as ParseBatch
// does. An empty b is an error (INVALID_RECORD), as a produce of nothing is.
func ParseBatches(b []byte) ([]Batch, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: no record batch", kerr.InvalidRecord)
	}
	var out []Batch
	for len(b) > 0 {
		bt, err := ParseBatch(b)
		if err != nil {
			return nil, err
		}
		out = append(out, bt)
		b = b[len(bt.Bytes):]
	}
	return out, nil
}

// setBaseOffset and setLeaderEpoch rewrite header fields the CRC does not
// cover, as a leader does to a producer's batch.
func setBaseOffset(b []byte, o int64) { binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(o)) }

func setLeaderEpoch(b []byte, e int32) { binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(e)) }
