package replica_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/server"
)

// produce sends one record with acks=all and returns its offset.
func produce(ctx context.Context, cl *kgo.Client, topic string, partition int32, value string) (int64, error) {
	r := &kgo.Record{Topic: topic, Partition: partition, Value: []byte(value)}
	err := cl.ProduceSync(ctx, r).FirstErr()
	return r.Offset, err
}

func TestProduceConsumeAcksAll(t *testing.T) {
	c := newCluster(t, 3, server.BrokerData{})
	c.createTopic("orders", 2, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	want := map[int32]map[int64]string{0: {}, 1: {}}
	for i := 0; i < 100; i++ {
		p := int32(i % 2)
		v := fmt.Sprintf("order-%d", i)
		o, err := produce(ctx, cl, "orders", p, v)
		if err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		if o != int64(len(want[p])) {
			t.Fatalf("record %d of partition %d acknowledged at offset %d", len(want[p]), p, o)
		}
		want[p][o] = v
	}
	for p, w := range want {
		got := consumeAll(t, c.seeds(), "orders", p, int64(len(w)))
		for o, v := range w {
			if got[o] != v {
				t.Fatalf("partition %d offset %d: read %q, acknowledged %q", p, o, got[o], v)
			}
		}
	}
	// Every replica reaches the leader's log end and high watermark.
	testkit.WaitFor(t, 10*time.Second, "replicas caught up", func() bool {
		for id := int32(1); id <= 3; id++ {
			for _, r := range c.broker(id).Replicas.Replicas() {
				if r.LogEnd != 50 || r.HighWater != 50 {
					return false
				}
			}
		}
		return true
	})
}

// A leader killed while a producer writes with acks=all: the controller
// elects another ISR member, the producer goes on, the old leader comes
// back as a follower and truncates what it had that the new leader has
// not, and every acknowledged record is read back at its offset exactly
// once.
func TestLeaderKilledKeepsAcknowledged(t *testing.T) {
	c := newCluster(t, 3, server.BrokerData{ReplicaLagTime: 2 * time.Second})
	c.createTopic("events", 1, 3)
	first := c.leaderOf("events", 0)
	cl := c.client(kgo.RecordRetries(1000), kgo.RetryTimeout(30*time.Second))

	var mu sync.Mutex
	acked := map[int64]string{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			v := fmt.Sprintf("event-%d", i)
			o, err := produce(ctx, cl, "events", 0, v)
			if err != nil {
				continue // not acknowledged; sent again as a new record
			}
			mu.Lock()
			if old, dup := acked[o]; dup {
				t.Errorf("offset %d acknowledged twice: %q and %q", o, old, v)
			}
			acked[o] = v
			mu.Unlock()
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	testkit.WaitFor(t, 20*time.Second, "records acknowledged", func() bool { return count() >= 50 })
	c.kill(first)
	t.Logf("killed broker %d, the leader, after %d acknowledged records", first, count())
	var second int32
	testkit.WaitFor(t, 30*time.Second, "a new leader", func() bool {
		for id := int32(1); id <= 3; id++ {
			if b := c.broker(id); b != nil {
				if st, ok := b.Agent.Partition("events", 0); ok && st.Leader >= 0 && st.Leader != first {
					second = st.Leader
					return true
				}
			}
		}
		return false
	})
	n := count()
	testkit.WaitFor(t, 30*time.Second, "records acknowledged by the new leader", func() bool { return count() >= n+50 })
	c.start(first)
	c.waitLive(3)
	n = count()
	testkit.WaitFor(t, 30*time.Second, "more records with the old leader back", func() bool { return count() >= n+30 })
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	var end int64
	for o := range acked {
		end = max(end, o+1)
	}
	got := consumeAll(t, c.seeds(), "events", 0, end)
	for o, v := range acked {
		if got[o] != v {
			t.Fatalf("offset %d: read %q, acknowledged %q (leaders %d then %d)", o, got[o], v, first, second)
		}
	}
	// The replicas agree: all three reach the same log end.
	testkit.WaitFor(t, 20*time.Second, "replicas converged", func() bool {
		var ends []int64
		for id := int32(1); id <= 3; id++ {
			for _, r := range c.broker(id).Replicas.Replicas() {
				ends = append(ends, r.LogEnd)
			}
		}
		return len(ends) == 3 && ends[0] == ends[1] && ends[1] == ends[2]
	})
	t.Logf("%d records acknowledged across leaders %d and %d, all read back", len(acked), first, second)
}

// With min.insync.replicas 3, a lost follower leaves the ISR after the
// lag time, well before its session expires (the leader's AlterPartition,
// not the controller's fencing, takes it out), and acks=all is refused
// with NOT_ENOUGH_REPLICAS; once it is back and caught up it rejoins and
// produce works again (after its old session expired: the controller
// takes no second registration of a live broker).
func TestISRShrinkAndExpand(t *testing.T) {
	c := newClusterSession(t, 3, server.BrokerData{ReplicaLagTime: time.Second, MinInsyncReplicas: 3}, 8*time.Second)
	c.createTopic("strict", 1, 3)
	leader := c.leaderOf("strict", 0)
	cl := c.client(kgo.RecordRetries(0), kgo.RequestRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := produce(ctx, cl, "strict", 0, "before"); err != nil {
		t.Fatal(err)
	}
	follower := int32(1)
	for follower == leader {
		follower++
	}
	// The follower's replica manager stops (its fetchers with it) while
	// its agent goes on heartbeating: killing the whole broker would have
	// it fenced at once, by the refused connection to its listener.
	if err := c.broker(follower).Replicas.Close(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "the leader's ISR without the stopped follower", func() bool {
		rs := c.broker(leader).Replicas.Replicas()
		return len(rs) == 1 && len(rs[0].ISR) == 2 && !slices.Contains(rs[0].ISR, follower)
	})
	c.voter.Node.FSM.View(func(im *fsm.Image) {
		if b := im.Broker(follower); b == nil || b.Fenced {
			t.Fatalf("broker %d fenced: the ISR shrank by its session, not by its lag", follower)
		}
	})
	_, err := produce(ctx, cl, "strict", 0, "refused")
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with an ISR of 2 below min.insync.replicas 3: %v", err)
	}
	c.kill(follower)
	c.start(follower)
	testkit.WaitFor(t, 30*time.Second, "the follower back in the leader's ISR", func() bool {
		rs := c.broker(leader).Replicas.Replicas()
		return len(rs) == 1 && len(rs[0].ISR) == 3
	})
	if o, err := produce(ctx, cl, "strict", 0, "after"); err != nil || o != 1 {
		t.Fatalf("produce with the ISR whole again: offset %d, %v", o, err)
	}
}

// Leader epochs are checked on every request; a broker that does not
// lead says so, and a partition nobody has is unknown.
func TestEpochAndLeaderChecks(t *testing.T) {
	c := newCluster(t, 2, server.BrokerData{})
	c.createTopic("checked", 1, 2)
	leader := c.leaderOf("checked", 0)
	follower := 3 - leader
	st, _ := c.broker(leader).Agent.Partition("checked", 0)
	cl := c.client()
	ask := func(broker int32, topic string, epoch int32) int16 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = 0, epoch, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, cl.Broker(int(broker)))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	for _, tc := range []struct {
		name   string
		broker int32
		topic  string
		epoch  int32
		want   int16
	}{
		{"current epoch", leader, "checked", st.LeaderEpoch, 0},
		{"no epoch", leader, "checked", -1, 0},
		{"older epoch", leader, "checked", st.LeaderEpoch - 1, kerr.FencedLeaderEpoch.Code},
		{"newer epoch", leader, "checked", st.LeaderEpoch + 1, kerr.UnknownLeaderEpoch.Code},
		{"follower", follower, "checked", -1, kerr.NotLeaderForPartition.Code},
		{"unknown topic", leader, "nothing-here", -1, kerr.UnknownTopicOrPartition.Code},
	} {
		if got := ask(tc.broker, tc.topic, tc.epoch); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
	}
}

// acks=0 gets no response at all (a response would be taken for the
// next request's), acks=1 an offset once the leader has the records.
func TestAcksZeroAndOne(t *testing.T) {
	c := newCluster(t, 1, server.BrokerData{})
	c.createTopic("loose", 1, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fire := c.client(kgo.RequiredAcks(kgo.NoAck()))
	for i := 0; i < 10; i++ {
		if _, err := produce(ctx, fire, "loose", 0, fmt.Sprintf("fire-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	one := c.client(kgo.RequiredAcks(kgo.LeaderAck()))
	testkit.WaitFor(t, 10*time.Second, "the acks=0 records in the log", func() bool {
		rs := c.broker(1).Replicas.Replicas()
		return len(rs) == 1 && rs[0].LogEnd == 10
	})
	o, err := produce(ctx, one, "loose", 0, "one")
	if err != nil || o != 10 {
		t.Fatalf("acks=1 after ten acks=0 records: offset %d, %v", o, err)
	}
	got := consumeAll(t, c.seeds(), "loose", 0, 11)
	if got[0] != "fire-0" || got[9] != "fire-9" || got[10] != "one" {
		t.Fatalf("read back %v", got)
	}
}

// Deleting a topic removes every replica's directory (StopReplica with
// delete), and a topic created again under the name starts empty.
func TestDeleteTopicRemovesData(t *testing.T) {
	c := newCluster(t, 2, server.BrokerData{})
	c.createTopic("doomed", 1, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := c.client()
	for i := 0; i < 5; i++ {
		if _, err := produce(ctx, cl, "doomed", 0, fmt.Sprintf("old-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	dirs := []string{filepath.Join(c.dir, "broker-1", "doomed-0"), filepath.Join(c.dir, "broker-2", "doomed-0")}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("replica directory before the deletion: %v", err)
		}
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.peers[0].Listener))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := kadm.NewClient(admin).DeleteTopic(ctx, "doomed"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "both replica directories removed", func() bool {
		for _, d := range dirs {
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				return false
			}
		}
		return true
	})
	testkit.WaitFor(t, 30*time.Second, "the topic gone from the controller", func() bool {
		_, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 2, nil, "doomed")
		return err == nil
	})
	c.leaderOf("doomed", 0)
	if o, err := produce(ctx, cl, "doomed", 0, "new"); err != nil || o != 0 {
		t.Fatalf("first record of the topic created again: offset %d, %v", o, err)
	}
}
