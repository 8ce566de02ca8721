package replica_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/broker/replica"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// heldAlterAgent is a metadataAgent whose AlterPartition waits for the
// test to answer it.
type heldAlterAgent struct {
	*metadataAgent
	asked   chan []int32
	answers chan alterAnswer
}

type alterAnswer struct {
	st  broker.PartitionState
	err error
}

func (a *heldAlterAgent) AlterPartition(_ context.Context, _ string, _ int32, isr []int32) (broker.PartitionState, error) {
	a.asked <- isr
	ans := <-a.answers
	return ans.st, ans.err
}

// TestHighWatermarkWaitsForAJoiningFollower: while the leader's
// AlterPartition adding a follower that reached the high watermark is in
// flight, the high watermark (and with it every acks=all answer) waits
// for that follower too (Kafka's maximal ISR): once the change commits,
// every ISR member holds every record below the high watermark, so any of
// them may be elected without losing an acknowledged record. The same
// holds when the AlterPartition's outcome is unknown (REQUEST_TIMED_OUT:
// the controller may have committed it), until the controller's next
// state for the partition settles it.
func TestHighWatermarkWaitsForAJoiningFollower(t *testing.T) {
	for _, timedOut := range []bool{false, true} {
		t.Run(map[bool]string{false: "answered", true: "timed out"}[timedOut], func(t *testing.T) {
			highWatermarkWaitsForAJoiningFollower(t, timedOut)
		})
	}
}

func highWatermarkWaitsForAJoiningFollower(t *testing.T, timedOut bool) {
	st := broker.PartitionState{Topic: "isr", TopicID: rl.TopicID{9}, Partition: 0, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1,
		ISR: []int32{1, 2}, Replicas: []int32{1, 2, 3}}
	agent := &heldAlterAgent{metadataAgent: &metadataAgent{id: 1, st: st}, asked: make(chan []int32, 1), answers: make(chan alterAnswer, 1)}
	var logs testkit.Log
	m, err := replica.New(replica.Config{BrokerID: 1, DataDir: t.TempDir(), ReplicaLagTime: time.Hour,
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &logs})})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Attach(agent)
	m.BecomeLeader(st)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := &kafkawire.Conn{ClientID: "test"}

	produce := func(value string, acks int16) *kmsg.ProduceResponse {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(8)
		req.Acks, req.TimeoutMillis = acks, 30000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = st.Topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch(t, value)[0].Bytes
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := m.Handle(ctx, conn, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.ProduceResponse)
	}
	fetch := func(replicaID int32, offset int64) {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = replicaID, 0, 0, 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = st.Topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.FetchOffset, rp.LastFetchedEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = 0, 1, offset, -1, -1, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := m.Handle(ctx, conn, req)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("replica %d's fetch at %d: %v", replicaID, offset, kerr.ErrorForCode(code))
		}
	}
	highWater := func() int64 { return m.Replicas()[0].HighWater }

	if r := produce("a", 1); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("acks=1: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	fetch(2, 1)
	if hw := highWater(); hw != 1 {
		t.Fatalf("high watermark %d once the ISR has record 0, want 1", hw)
	}
	// Follower 3 reaches the high watermark: the leader asks to add it.
	fetch(3, 1)
	if isr := <-agent.asked; !slices.Equal(isr, []int32{1, 2, 3}) {
		t.Fatalf("AlterPartition asked for %v", isr)
	}
	acked := make(chan *kmsg.ProduceResponse, 1)
	go func() { acked <- produce("b", -1) }()
	testkit.WaitFor(t, 10*time.Second, "record 1 appended", func() bool { return m.Replicas()[0].LogEnd == 2 })
	fetch(2, 2) // follower 2 has record 1; follower 3 does not
	if hw := highWater(); hw != 1 {
		t.Fatalf("high watermark %d while follower 3's addition is in flight at offset 1, want 1", hw)
	}
	select {
	case r := <-acked:
		t.Fatalf("record 1 answered (%v) before follower 3, joining the ISR, had it", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	default:
	}

	joined := st
	joined.ISR, joined.PartitionEpoch = []int32{1, 2, 3}, 2
	if timedOut {
		agent.answers <- alterAnswer{err: kerr.RequestTimedOut}
		testkit.WaitFor(t, 10*time.Second, "the timed-out AlterPartition handled", func() bool {
			return logs.Has("ISR change refused or failed", "REQUEST_TIMED_OUT")
		})
		fetch(2, 2)
		if hw := highWater(); hw != 1 {
			t.Fatalf("high watermark %d after the addition timed out (it may have committed), want 1", hw)
		}
		m.BecomeLeader(joined) // the controller's state: it did
	} else {
		agent.answers <- alterAnswer{st: joined}
	}
	testkit.WaitFor(t, 10*time.Second, "the ISR with follower 3", func() bool { return len(m.Replicas()[0].ISR) == 3 })
	if hw := highWater(); hw != 1 {
		t.Fatalf("high watermark %d with follower 3 in the ISR at offset 1, want 1", hw)
	}
	fetch(3, 2)
	if r := <-acked; r.Topics[0].Partitions[0].ErrorCode != 0 || highWater() != 2 {
		t.Fatalf("acks=all once every ISR member has record 1: %v, high watermark %d", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode), highWater())
	}
}
