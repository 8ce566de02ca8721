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

	"github.com/ctrlquorum/ctrlquorum/authz"
	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/broker/partlog"
	"github.com/ctrlquorum/ctrlquorum/broker/replica"
	"github.com/ctrlquorum/ctrlquorum/controller/configmodel"
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
func (a *metadataAgent) TopicLevels(string) configmodel.Levels { return configmodel.Levels{} }
func (a *metadataAgent) Authorize(*kafkawire.Conn, rl.AclOperation, rl.ResourceType, string) authz.Decision {
	return authz.Decision{Allowed: true}
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

// A follower holding records the leader does not have, of epochs the
// leader ended earlier or never had (a former leader's, never committed),
// truncates them before fetching: KIP-101's divergence is repaired, not
// kept. The second case takes two rounds of OffsetsForLeaderEpoch: the
// follower's latest epoch (3) is unknown to the leader, whose answer is
// for its epoch 2, which the follower lacks in turn (KIP-279).
func TestFollowerTruncatesToLeaderEpochEnd(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		leaderEpochs, followerEpochs []int32
		leaderValues, followerValues [][]string
		leaderEpoch                  int32
		want                         string
	}{
		{"one round", []int32{1, 2}, []int32{1}, [][]string{{"a", "b", "c"}, {"x", "y"}}, [][]string{{"a", "b", "c", "lost-d", "lost-e"}}, 2, "[a b c x y]"},
		{"two rounds", []int32{1, 2}, []int32{1, 3}, [][]string{{"a", "b"}, {"x", "y", "z"}}, [][]string{{"a", "b", "lost-c", "lost-d"}, {"lost-e"}}, 4, "[a b x y z]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			id := rl.TopicID{7}
			tp := "diverged-0"
			writeLog(t, filepath.Join(root, "b2", tp), id, tc.leaderEpochs, tc.leaderValues)
			writeLog(t, filepath.Join(root, "b1", tp), id, tc.followerEpochs, tc.followerValues)
			leaderEnd := int64(0)
			for _, vs := range tc.leaderValues {
				leaderEnd += int64(len(vs))
			}

			leader, err := replica.New(replica.Config{BrokerID: 2, DataDir: filepath.Join(root, "b2"), Logger: testkit.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			st := broker.PartitionState{Topic: "diverged", TopicID: id, Partition: 0, Leader: 2, LeaderEpoch: tc.leaderEpoch, PartitionEpoch: 3,
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
			// The follower's high watermark comes from the leader's
			// fetch answers: at the leader's end, it has fetched all.
			testkit.WaitFor(t, 20*time.Second, "the follower caught up with the leader", func() bool {
				rs := follower.Replicas()
				return len(rs) == 1 && rs[0].LogEnd == leaderEnd && rs[0].HighWater == leaderEnd
			})
			if err := follower.Close(); err != nil {
				t.Fatal(err)
			}
			if got := readValues(t, filepath.Join(root, "b1", tp), id); fmt.Sprint(got) != tc.want {
				t.Fatalf("follower's log after truncation and fetch: %v, want the leader's %s", got, tc.want)
			}
		})
	}
}

func fixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
}
