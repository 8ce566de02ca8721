package replica_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/broker/partlog"
	"github.com/ctrlquorum/ctrlquorum/broker/replica"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// metadataAgent is the part of an agent the follower uses here: where
// the leader listens, and the partition's state. (The other tests run
// real agents and a controller; this one sets up logs that diverge, as a
// leader's crash leaves them, which no schedule makes happen on cue.)
type metadataAgent struct {
	mu      sync.Mutex
	id      int32
	brokers []broker.BrokerInfo
	st      broker.PartitionState
}

func (a *metadataAgent) BrokerID() int32 { return a.id }
func (a *metadataAgent) Partition(string, int32) (broker.PartitionState, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st, true
}
func (a *metadataAgent) Brokers() []broker.BrokerInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.brokers
}
func (a *metadataAgent) AlterPartition(context.Context, string, int32, []int32) (broker.PartitionState, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st, nil
}

// batch is a producer's batch of one record.
func batch(t *testing.T, value string) []partlog.Batch {
	t.Helper()
	r := kmsg.Record{Value: []byte(value)}
	r.Length = int32(len(r.AppendTo(nil)) - 1)
	recs := r.AppendTo(nil)
	b := kmsg.RecordBatch{Length: int32(49 + len(recs)), Magic: 2, PartitionLeaderEpoch: -1, ProducerID: -1, ProducerEpoch: -1,
		FirstSequence: -1, NumRecords: 1, Records: recs}
	raw := b.AppendTo(nil)
	fixCRC(raw)
	bs, err := partlog.ParseBatches(raw)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// writeLog appends, to the log in dir, one record per value in each epoch.
func writeLog(t *testing.T, dir string, id rl.TopicID, epochs []int32, values [][]string) {
	t.Helper()
	l, err := partlog.Open(dir, partlog.Config{TopicID: id})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i, e := range epochs {
		for _, v := range values[i] {
			if _, _, err := l.AppendAsLeader(batch(t, v), e); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func readValues(t *testing.T, dir string, id rl.TopicID) []string {
	t.Helper()
	l, err := partlog.Open(dir, partlog.Config{TopicID: id})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var out []string
	for o := int64(0); o < l.EndOffset(); o++ {
		b, err := l.Read(o, o+1, 1)
		if err != nil {
			t.Fatal(err)
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		var r kmsg.Record
		if err := r.ReadFrom(rb.Records); err != nil {
			t.Fatal(err)
		}
		out = append(out, string(r.Value))
	}
	return out
}

// A follower holding records of epoch 1 past where epoch 1 ended on the
// new leader (the old leader's, never committed) truncates them before
// fetching: KIP-101's divergence is repaired, not kept.
func TestFollowerTruncatesToLeaderEpochEnd(t *testing.T) {
	root := t.TempDir()
	id := rl.TopicID{7}
	tp := "diverged-0"
	// The new leader (broker 2) had epoch 1's first three records when it
	// took over in epoch 2 and wrote two of its own.
	writeLog(t, filepath.Join(root, "b2", tp), id, []int32{1, 2}, [][]string{{"a", "b", "c"}, {"x", "y"}})
	// The follower (broker 1, epoch 1's leader) has five of epoch 1.
	writeLog(t, filepath.Join(root, "b1", tp), id, []int32{1}, [][]string{{"a", "b", "c", "lost-d", "lost-e"}})

	leader, err := replica.New(replica.Config{BrokerID: 2, DataDir: filepath.Join(root, "b2"), Logger: testkit.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	st := broker.PartitionState{Topic: "diverged", TopicID: id, Partition: 0, Leader: 2, LeaderEpoch: 2, PartitionEpoch: 3,
		ISR: []int32{2}, Replicas: []int32{1, 2}}
	leader.Attach(&metadataAgent{id: 2, st: st})
	leader.BecomeLeader(st)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	apis := map[int16]int16{}
	mins := map[int16]int16{}
	for k, v := range leader.APIs() {
		apis[k], mins[k] = v.Max, v.Min
	}
	srv := kafkawire.Serve(ln, kafkawire.Config{Handler: leader, APIs: apis, MinVersions: mins, Logger: testkit.Logger(t)})
	defer srv.Close()
	defer leader.Close()

	follower, err := replica.New(replica.Config{BrokerID: 1, DataDir: filepath.Join(root, "b1"), Logger: testkit.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	p, _ := strconv.Atoi(port)
	follower.Attach(&metadataAgent{id: 1, st: st, brokers: []broker.BrokerInfo{{ID: 2, Host: host, Port: int32(p)}}})
	follower.BecomeFollower(st)
	testkit.WaitFor(t, 20*time.Second, "the follower caught up with the leader", func() bool {
		rs := follower.Replicas()
		return len(rs) == 1 && rs[0].LogEnd == 5 && rs[0].HighWater == 5
	})
	if err := follower.Close(); err != nil {
		t.Fatal(err)
	}
	got := readValues(t, filepath.Join(root, "b1", tp), id)
	if fmt.Sprint(got) != "[a b c x y]" {
		t.Fatalf("follower's log after truncation and fetch: %v, want the leader's [a b c x y]", got)
	}
}

func fixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
}
