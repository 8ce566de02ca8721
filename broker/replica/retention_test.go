package replica_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/server"
)

// Retention by the topic's configs: retention.bytes deletes the oldest
// closed segments of every replica, ListOffsets' earliest and a fetch
// below the start follow the new log start; a follower that was away
// while its leader deleted what it lacked starts again at the leader's
// start; retention.ms set while the brokers run deletes by time.
func TestRetentionByTopicConfigs(t *testing.T) {
	c := newClusterSession(t, 3, server.BrokerData{ReplicaLagTime: time.Second}, 3*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.peers[0].Listener))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	segment, keep := "1024", "4096"
	if _, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"segment.bytes": &segment, "retention.bytes": &keep}, "kept"); err != nil {
		t.Fatal(err)
	}
	leader := c.leaderOf("kept", 0)
	// Uncompressed, so that the sizes below are the records'.
	cl := c.client(kgo.RecordRetries(1000), kgo.RetryTimeout(30*time.Second), kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := strings.Repeat("v", 200)
	produceN := func(n int) int64 {
		t.Helper()
		var last int64
		for i := 0; i < n; i++ {
			o, err := produce(ctx, cl, "kept", 0, fmt.Sprintf("%d-%s", i, value))
			if err != nil {
				t.Fatal(err)
			}
			last = o
		}
		return last + 1
	}
	end := produceN(60)
	replicaOf := func(id int32) (start, logEnd int64) {
		for _, r := range c.broker(id).Replicas.Replicas() {
			if r.Topic == "kept" {
				return r.LogStart, r.LogEnd
			}
		}
		return -1, -1
	}
	var start int64
	testkit.WaitFor(t, 30*time.Second, "every replica trimmed to retention.bytes", func() bool {
		// About 4 KiB of ~260-byte records stay (16 to 19 of them: a
		// segment of three more would be more than it needs).
		for id := int32(1); id <= 3; id++ {
			s, e := replicaOf(id)
			if s <= 0 || e != end || end-s > 20 {
				return false
			}
			if id == leader {
				start = s
			}
		}
		return true
	})
	if end-start < int64(4096/(len(value)+100)) {
		t.Fatalf("log [%d, %d) kept less than retention.bytes", start, end)
	}
	starts, err := kadm.NewClient(cl).ListStartOffsets(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("kept", 0); o.Err != nil || o.Offset != start {
		t.Fatalf("ListOffsets earliest %d (%v), want the leader's log start %d", o.Offset, o.Err, start)
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "kept"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 0, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(ctx, cl.Broker(int(leader))); err != nil {
		t.Fatal(err)
	} else if got := resp.Topics[0].Partitions[0]; got.ErrorCode != kerr.OffsetOutOfRange.Code || got.LogStartOffset != start {
		t.Fatalf("fetch at 0: %v with log start %d, want OFFSET_OUT_OF_RANGE and %d", kerr.ErrorForCode(got.ErrorCode), got.LogStartOffset, start)
	}

	// A follower away while the leader deletes everything it has.
	away := int32(1)
	for away == leader {
		away++
	}
	_, awayEnd := replicaOf(away)
	c.kill(away)
	end = produceN(60)
	testkit.WaitFor(t, 30*time.Second, "the leader's log to start past the end the away follower had", func() bool {
		s, _ := replicaOf(leader)
		return s > awayEnd
	})
	c.start(away)
	testkit.WaitFor(t, 60*time.Second, "the follower back, caught up from the leader's log start", func() bool {
		b := c.broker(away)
		if b == nil {
			return false
		}
		// Its log could not go on from where it ended: it starts past it.
		s, e := replicaOf(away)
		return e == end && s > awayEnd
	})

	// retention.ms set at run time: everything but the active segment goes.
	zero := "1"
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &zero}}, "kept"); err != nil {
		t.Fatal(err)
	}
	// Polled here rather than with testkit.WaitFor, to say what the
	// replicas were if it never happens.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s, e := replicaOf(leader)
		// segment.bytes 1024 holds at most 5 of these records.
		if e == end && end-s <= 5 {
			break
		}
		if time.Now().After(deadline) {
			var all []string
			for id := int32(1); id <= 3; id++ {
				if b := c.broker(id); b != nil {
					all = append(all, fmt.Sprintf("broker %d: %+v", id, b.Replicas.Replicas()))
				}
			}
			t.Fatalf("retention.ms 1 left the leader %d with [%d, %d), want its active segment only (end %d); replicas %v", leader, s, e, end, all)
		}
	}
}

// A follower's log start follows its leader's: with log.retention.bytes
// set for the leader's broker alone, the followers, which keep
// everything by their own configs, delete what the leader deleted.
func TestFollowerLogStartFollowsLeader(t *testing.T) {
	c := newCluster(t, 3, server.BrokerData{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.peers[0].Listener))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	segment := "1024"
	if _, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"segment.bytes": &segment}, "followed"); err != nil {
		t.Fatal(err)
	}
	leader := c.leaderOf("followed", 0)
	keep := "4096"
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.bytes", Value: &keep}}, leader)
	if err == nil {
		err = rs[0].Err
	}
	if err != nil {
		t.Fatal(err)
	}
	cl := c.client(kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := 0; i < 40; i++ {
		if _, err := produce(ctx, cl, "followed", 0, fmt.Sprintf("%d-%s", i, strings.Repeat("f", 200))); err != nil {
			t.Fatal(err)
		}
	}
	start := func(id int32) int64 {
		for _, r := range c.broker(id).Replicas.Replicas() {
			if r.Topic == "followed" {
				return r.LogStart
			}
		}
		return -1
	}
	testkit.WaitFor(t, 30*time.Second, "every follower's log start past 0, at or below the leader's", func() bool {
		ls := start(leader)
		for id := int32(1); id <= 3; id++ {
			if s := start(id); s <= 0 || s > ls {
				return false
			}
		}
		return true
	})
}
