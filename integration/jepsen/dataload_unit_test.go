package jepsen

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker/partlog"
	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

// testBatch encodes a v2 batch of uncompressed records with these
// values, as a producer sends it.
func testBatch(t *testing.T, values ...string) partlog.Batch {
	t.Helper()
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // a one-byte length varint
		recs = r.AppendTo(recs)
	}
	b := kmsg.RecordBatch{Length: int32(49 + len(recs)), PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(len(values) - 1),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(values)), Records: recs}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	bt, err := partlog.ParseBatch(out)
	if err != nil {
		t.Fatal(err)
	}
	return bt
}

// TestReadReplicaLogs: a replica's log is read from its broker's data
// directory record by record, at the offsets the leader gave them;
// brokers without a replica of a partition have no log of it.
func TestReadReplicaLogs(t *testing.T) {
	dataDir := t.TempDir()
	dir := filepath.Join(brokerDataDir(dataDir, 4), dataTopics()[1]+"-2")
	l, err := partlog.Open(dir, partlog.Config{TopicID: [16]byte{7}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.AppendAsLeader([]partlog.Batch{testBatch(t, "a", "b"), testBatch(t, "c")}, 3); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.AppendAsLeader([]partlog.Batch{testBatch(t, "d", "e")}, 4); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(brokerDataDir(dataDir, 5), 0o755); err != nil {
		t.Fatal(err)
	}
	got := readReplicaLogs(dataDir, []int32{4, 5, 6})
	var want []history.Record
	for i, v := range []string{"a", "b", "c", "d", "e"} {
		want = append(want, history.Record{Topic: "jd-1", Partition: 2, Offset: int64(i), Value: v})
	}
	if len(got) != 1 || got[0].Error != "" || got[0].Broker != 4 || got[0].Start != 0 || got[0].End != 5 || !reflect.DeepEqual(got[0].Records, want) {
		t.Fatalf("read %+v, want broker 4's log of jd-1-2 holding %v", got, want)
	}
}

func TestBatchRecordsRefusesCompressed(t *testing.T) {
	b := testBatch(t, "x")
	raw := append([]byte(nil), b.Bytes...)
	raw[22] |= 1 // attributes: gzip
	if _, err := batchRecords(raw); err == nil {
		t.Error("a compressed batch was decoded as uncompressed")
	}
}

// TestProduceOutcomes: a produce fails for certain only when its one
// request was refused before the append; an error from the client with no
// write counted is unknown, since kgo fails a record on bad metadata even
// while a request carrying it is being written.
func TestProduceOutcomes(t *testing.T) {
	r := &dataRecorder{now: time.Now}
	for _, c := range []struct {
		err    error
		writes int
		want   history.Outcome
	}{
		{nil, 1, history.OK},
		{kerr.NotEnoughReplicas, 1, history.Fail},
		{kerr.NotEnoughReplicas, 2, history.Unknown},
		{kerr.NotEnoughReplicasAfterAppend, 1, history.Unknown},
		{errors.New("kafka did not reply with a comprehensive set of partitions for a topic"), 0, history.Unknown},
		{kgo.ErrRecordTimeout, 0, history.Unknown},
	} {
		p := r.invoke(0, "jd-0", 0, "v")
		r.finish(p, 7, c.err, c.writes)
		if p.Outcome != c.want {
			t.Errorf("%v after %d writes: %v, want %v", c.err, c.writes, p.Outcome, c.want)
		}
	}
}
