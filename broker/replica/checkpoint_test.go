package replica_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/broker/replica"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// serve serves a manager's APIs on a fresh port of 127.0.0.1 and returns
// it as a broker of the metadata.
func serve(t *testing.T, m *replica.Manager, id int32) broker.BrokerInfo {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	apis, mins := map[int16]int16{}, map[int16]int16{}
	for k, v := range m.APIs() {
		apis[k], mins[k] = v.Max, v.Min
	}
	srv := kafkawire.Serve(ln, kafkawire.Config{Handler: m, APIs: apis, MinVersions: mins, Logger: testkit.Logger(t)})
	t.Cleanup(func() { _ = srv.Close() })
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	p, _ := strconv.Atoi(port)
	return broker.BrokerInfo{ID: id, Host: host, Port: int32(p)}
}

// consumerFetch is a consumer's Fetch of one partition from offset,
// answered at once.
func consumerFetch(t *testing.T, m *replica.Manager, topic string, partition int32, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = partition, offset, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := m.Handle(context.Background(), nil, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// A leader whose ISR has a follower checkpoints the high watermark its
// follower's fetches moved; restarted alone, it serves consumers the
// committed records at once, where without the checkpoint its high
// watermark would be 0 until the follower fetched again.
func TestHighWatermarkCheckpointRestart(t *testing.T) {
	root := t.TempDir()
	id := rl.TopicID{9}
	writeLog(t, filepath.Join(root, "b2", "hw-0"), id, []int32{1}, [][]string{{"a", "b", "c", "d", "e"}})
	st := broker.PartitionState{Topic: "hw", TopicID: id, Partition: 0, Leader: 2, LeaderEpoch: 2, PartitionEpoch: 1,
		ISR: []int32{1, 2}, Replicas: []int32{1, 2}}
	cfg := func(broker int32) replica.Config {
		return replica.Config{BrokerID: broker, DataDir: filepath.Join(root, "b"+strconv.Itoa(int(broker))),
			HighWatermarkCheckpointInterval: 20 * time.Millisecond, Logger: testkit.Logger(t)}
	}

	leader, err := replica.New(cfg(2))
	if err != nil {
		t.Fatal(err)
	}
	leader.Attach(&metadataAgent{id: 2, st: st})
	leader.BecomeLeader(st)
	if rs := leader.Replicas(); rs[0].HighWater != 0 {
		t.Fatalf("a fresh leader with a follower in its ISR has high watermark %d before any fetch", rs[0].HighWater)
	}
	follower, err := replica.New(cfg(1))
	if err != nil {
		t.Fatal(err)
	}
	follower.Attach(&metadataAgent{id: 1, st: st, brokers: []broker.BrokerInfo{serve(t, leader, 2)}})
	follower.BecomeFollower(st)
	// The tick writes the checkpoint once the follower's fetch moved the
	// high watermark, with no shutdown.
	path := filepath.Join(root, "b2", "replication-offset-checkpoint")
	testkit.WaitFor(t, 20*time.Second, "the leader's checkpoint at 5", func() bool {
		return readFile(t, path) == "0\n1\nhw 0 5\n"
	})
	if err := follower.Close(); err != nil {
		t.Fatal(err)
	}
	if err := leader.Close(); err != nil {
		t.Fatal(err)
	}

	restarted, err := replica.New(cfg(2))
	if err != nil {
		t.Fatal(err)
	}
	defer restarted.Close()
	restarted.Attach(&metadataAgent{id: 2, st: st})
	restarted.BecomeLeader(st)
	if rs := restarted.Replicas(); len(rs) != 1 || rs[0].HighWater != 5 {
		t.Fatalf("restarted leader's replicas %+v, want high watermark 5 from the checkpoint", rs)
	}
	got := consumerFetch(t, restarted, "hw", 0, 0)
	if got.ErrorCode != 0 || got.HighWatermark != 5 || len(got.RecordBatches) == 0 {
		t.Fatalf("consumer fetch after the restart: error %d, high watermark %d, %d bytes; want the 5 committed records",
			got.ErrorCode, got.HighWatermark, len(got.RecordBatches))
	}
}

// A checkpoint is never trusted past the log: an entry above the log end
// is cut to it; a replica not opened keeps its entry; an unreadable file
// starts every replica from 0.
func TestHighWatermarkCheckpointBounds(t *testing.T) {
	root := t.TempDir()
	id := rl.TopicID{3}
	dir := filepath.Join(root, "b2")
	writeLog(t, filepath.Join(dir, "short-0"), id, []int32{1}, [][]string{{"a", "b", "c"}})
	st := broker.PartitionState{Topic: "short", TopicID: id, Partition: 0, Leader: 2, LeaderEpoch: 2, PartitionEpoch: 1,
		ISR: []int32{1, 2}, Replicas: []int32{1, 2}}
	path := filepath.Join(dir, "replication-offset-checkpoint")
	for _, tc := range []struct {
		name, file string
		wantHW     int64
		wantAfter  string
	}{
		{"above the log end", "0\n2\nshort 0 99\nother 4 7\n", 3, "0\n2\nother 4 7\nshort 0 3\n"},
		{"unreadable", "0\n2\nshort 0 2\n", 0, "0\n1\nshort 0 0\n"},
		{"negative", "0\n1\nshort 0 -4\n", 0, "0\n1\nshort 0 0\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := replica.New(replica.Config{BrokerID: 2, DataDir: dir, Logger: testkit.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			m.Attach(&metadataAgent{id: 2, st: st})
			m.BecomeLeader(st)
			if rs := m.Replicas(); rs[0].HighWater != tc.wantHW {
				t.Fatalf("high watermark %d from checkpoint %q, want %d", rs[0].HighWater, tc.file, tc.wantHW)
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, path); got != tc.wantAfter {
				t.Fatalf("checkpoint after Close %q, want %q", got, tc.wantAfter)
			}
		})
	}
}
