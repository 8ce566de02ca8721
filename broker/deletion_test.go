package broker_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/controller"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/sender"
)

// allTopics asks addr for Metadata of every topic, as kafkajs does (a
// null topic list), and returns the answer by topic name.
func allTopics(t testing.TB, addr string) map[string]kmsg.MetadataResponseTopic {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest() // Topics nil: all of them
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("Metadata from %s: %v", addr, err)
	}
	out := map[string]kmsg.MetadataResponseTopic{}
	for _, mt := range resp.(*kmsg.MetadataResponse).Topics {
		if mt.Topic != nil {
			out[*mt.Topic] = mt
		}
	}
	return out
}

// cachedTopics is the set of topics an agent's cache holds.
func cachedTopics(a *broker.Agent) []string {
	var out []string
	for _, p := range a.Partitions() {
		if !slices.Contains(out, p.Topic) {
			out = append(out, p.Topic)
		}
	}
	return out
}

// checkGone fails unless neither the agent's cache nor its Metadata
// answer (for all topics, and for the topic by name) names topic, and
// unless every topic it still serves has a leader for every partition.
func checkGone(t testing.TB, a *broker.Agent, topic string) {
	t.Helper()
	if got := cachedTopics(a); slices.Contains(got, topic) {
		t.Fatalf("the agent still caches %s: %v", topic, a.Partitions())
	}
	md := allTopics(t, a.Addr())
	if mt, ok := md[topic]; ok {
		t.Fatalf("the agent's Metadata still lists %s: %+v", topic, mt)
	}
	for name, mt := range md {
		for _, p := range mt.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("the agent's Metadata lists %s-%d with %v", name, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}
	if byName := clientMetadata(t, a.Addr(), topic); !errors.Is(byName.Topics[topic].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("Metadata for %s by name: %+v", topic, byName.Topics[topic])
	}
}

// TestDeletedTopicLeavesTheAgent feeds an agent the control requests of
// topic deletions: the topic leaves its cache and its Metadata answers
// with UpdateMetadata leader -2 (LeaderDuringDelete), with a StopReplica
// deleting at leader epoch -2 when that UpdateMetadata was missed, and
// with a full UpdateMetadata (a catch-up) that does not name the topic.
// A replica deleted for a reassignment leaves its partition listed.
func TestDeletedTopicLeavesTheAgent(t *testing.T) {
	host := broker.NewMemoryHost()
	a := startAgent(t, broker.Config{BrokerID: 1, Host: host})
	ctl := controlClient(t, a.Addr(), 0)
	brokers := []liveBroker{{1, a.Addr()}}
	reps := []int32{1}
	create := func(name string, id rl.TopicID, n int32) []part {
		var ps []part
		for i := int32(0); i < n; i++ {
			ps = append(ps, part{topic: name, id: id, p: i, leader: 1, le: 3, pe: 3, isr: reps, reps: reps})
		}
		send[*kmsg.LeaderAndISRResponse](t, ctl, lai(1, -1, ps...))
		send[*kmsg.UpdateMetadataResponse](t, ctl, um(1, -1, brokers, ps...))
		if md := allTopics(t, a.Addr()); len(md[name].Partitions) != int(n) {
			t.Fatalf("%s is not served after its creation: %+v", name, md[name])
		}
		return ps
	}
	keep := create("keep", topicB, 1)[0]

	// The controller starts the deletion: UpdateMetadata with leader -2
	// for every partition, then StopReplica deleting each replica.
	g := create("g", topicA, 3)
	for i := range g {
		g[i].leader, g[i].le, g[i].pe = -2, 4, 4
	}
	send[*kmsg.UpdateMetadataResponse](t, ctl, um(1, -1, brokers, g...))
	checkGone(t, a, "g")
	for i := range g {
		if resp := send[*kmsg.StopReplicaResponse](t, ctl, stopReq(1, -1, "g", int32(i), controller.EpochDuringDelete, true)); resp.ErrorCode != 0 || resp.Partitions[0].ErrorCode != 0 {
			t.Fatalf("delete g-%d: %+v", i, resp)
		}
	}
	checkGone(t, a, "g")
	if got := host.Deleted(); len(got) != 3 {
		t.Fatalf("the host deleted %v", got)
	}

	// The UpdateMetadata with leader -2 never came: deleting the replica
	// of a topic being deleted (leader epoch -2) forgets it too.
	h := create("h", rl.TopicID{0xd}, 2)
	for i := range h {
		send[*kmsg.StopReplicaResponse](t, ctl, stopReq(1, -1, "h", int32(i), controller.EpochDuringDelete, true))
	}
	checkGone(t, a, "h")

	// A replica deleted for a reassignment (at its leader epoch) is gone
	// from the host, but its partition lives on elsewhere and stays
	// listed.
	send[*kmsg.StopReplicaResponse](t, ctl, stopReq(1, -1, "keep", 0, keep.le, true))
	if _, ok := host.Replica("keep", 0); ok {
		t.Fatal("keep-0 still runs after its deletion")
	}
	if md := allTopics(t, a.Addr()); len(md["keep"].Partitions) != 1 {
		t.Fatalf("a reassignment's replica deletion dropped keep from the Metadata answer: %+v", md["keep"])
	}

	// The broker missed a whole deletion: the full UpdateMetadata of its
	// catch-up names every topic there is, and x is not among them.
	create("x", rl.TopicID{0xe}, 2)
	full := sender.EncodeUpdateMetadata(&controller.UpdateMetadata{
		Header:      controller.Header{ControllerID: 1, ControllerEpoch: 1, BrokerEpoch: -1},
		LiveBrokers: []controller.LiveBroker{{ID: 1, Endpoints: []rl.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 1}}}},
		Full:        true, Topics: []controller.TopicName{{Name: "keep", ID: topicB}},
	}, 8)
	if resp := send[*kmsg.UpdateMetadataResponse](t, ctl, full); resp.ErrorCode != 0 {
		t.Fatalf("full UpdateMetadata: %+v", resp)
	}
	checkGone(t, a, "x")
	if st, ok := a.Partition("keep", 0); !ok || st.Leader != keep.leader || st.LeaderEpoch != keep.le {
		t.Fatalf("a topic the full UpdateMetadata named was changed: %+v %v", st, ok)
	}

	recs := a.ControlLog()
	checkControlLog(t, recs)
	forgotten := map[string]int{}
	for _, r := range recs {
		if r.Key == broker.KeyUpdateMetadata && r.Partition >= 0 && r.Deleted && r.Accepted {
			forgotten[r.Topic]++
		}
	}
	if forgotten["g"] != 3 || forgotten["x"] != 2 {
		t.Fatalf("the control log records the partitions forgotten by UpdateMetadata as %v", forgotten)
	}
}
