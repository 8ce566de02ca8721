package sender_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/controller"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
	"github.com/ctrlquorum/ctrlquorum/transport/sender"
)

// wire encodes a request and decodes it again, as it crosses the network.
func wire(t *testing.T, req kmsg.Request) kmsg.Request {
	t.Helper()
	b := req.AppendTo(nil)
	back := kmsg.RequestForKey(req.Key())
	back.SetVersion(req.GetVersion())
	if err := back.ReadFrom(b); err != nil {
		t.Fatalf("%s v%d does not decode: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return back
}

// TestEveryVersionReachesTheAgent maps controller requests to every
// version kmsg knows and has an agent apply them: the states, the stops
// and the deletes arrive whatever the version (topic ids only where the
// version has them).
func TestEveryVersionReachesTheAgent(t *testing.T) {
	host := broker.NewMemoryHost()
	a := startAgent(t, broker.Config{BrokerID: 1, Host: host})
	ctx := context.Background()
	live := []controller.LiveBroker{{ID: 1, Rack: "r", Endpoints: endpoint(a.Addr())}, {ID: 2, Endpoints: endpoint("127.0.0.1:1")}}
	epoch := int32(0)
	handle := func(req kmsg.Request, offset uint64) kmsg.Response {
		t.Helper()
		resp, err := a.Handle(ctx, &kafkawire.Conn{ClientID: kafkaclient.ControlClientID(1, offset), Version: req.GetVersion()}, wire(t, req))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	for v := int16(0); v <= (&kmsg.LeaderAndISRRequest{}).MaxVersion(); v++ {
		epoch++
		topic := "lai"
		l := &controller.LeaderAndIsr{Header: hdr(epoch, uint64(epoch)), Leaders: live, Partitions: statePtrs([]controller.PartitionState{
			ps(topic, topicID, 0, 1, epoch, 1, 2), ps(topic, topicID, 1, 2, epoch, 2, 1)})}
		l.Partitions[0].IsNew = true
		l.Partitions[1].Adding = []int32{1}
		resp := handle(sender.EncodeLeaderAndIsr(l, v), uint64(epoch)).(*kmsg.LeaderAndISRResponse)
		codes := 0
		for _, p := range resp.Partitions {
			codes += int(p.ErrorCode)
		}
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				codes += int(p.ErrorCode)
			}
			if rl.TopicID(tp.TopicID) != topicID {
				t.Fatalf("v%d: response topic id %x", v, tp.TopicID)
			}
		}
		if resp.ErrorCode != 0 || codes != 0 || len(resp.Partitions)+len(resp.Topics) == 0 {
			t.Fatalf("LeaderAndIsr v%d: %+v", v, resp)
		}
		st, ok := a.Partition(topic, 1)
		if !ok || st.Leader != 2 || st.LeaderEpoch != epoch || st.PartitionEpoch != epoch || !slices.Equal(st.Replicas, []int32{2, 1}) {
			t.Fatalf("LeaderAndIsr v%d: cached %+v", v, st)
		}
		if v >= 3 && !slices.Equal(st.Adding, []int32{1}) {
			t.Fatalf("LeaderAndIsr v%d: adding replicas lost: %+v", v, st)
		}
		if v >= 5 && st.TopicID != topicID {
			t.Fatalf("LeaderAndIsr v%d: topic id lost: %+v", v, st)
		}
		if r, _ := host.Replica(topic, 0); r.Role != broker.Leader || r.State.LeaderEpoch != epoch || (v >= 1 && !r.State.IsNew) {
			t.Fatalf("LeaderAndIsr v%d: host has %+v", v, r)
		}
	}

	for v := int16(0); v <= (&kmsg.UpdateMetadataRequest{}).MaxVersion(); v++ {
		epoch++
		topic := "um"
		u := &controller.UpdateMetadata{Header: hdr(epoch, uint64(epoch)), LiveBrokers: live, Partitions: []controller.PartitionState{
			ps(topic, topicID, 0, 2, epoch, 2, 3)}}
		if resp := handle(sender.EncodeUpdateMetadata(u, v), uint64(epoch)).(*kmsg.UpdateMetadataResponse); resp.ErrorCode != 0 {
			t.Fatalf("UpdateMetadata v%d: %d", v, resp.ErrorCode)
		}
		st, ok := a.Partition(topic, 0)
		if !ok || st.Leader != 2 || st.LeaderEpoch != epoch || (v >= 7 && st.TopicID != topicID) {
			t.Fatalf("UpdateMetadata v%d: cached %+v", v, st)
		}
		bs := a.Brokers()
		if len(bs) != 2 || bs[0].ID != 1 || bs[1].Port != 1 || (v >= 2 && (bs[0].Rack == nil || *bs[0].Rack != "r")) {
			t.Fatalf("UpdateMetadata v%d: brokers %+v", v, bs)
		}
		if a.Status().MetadataOffset != uint64(epoch) {
			t.Fatalf("UpdateMetadata v%d: offset %d", v, a.Status().MetadataOffset)
		}
	}

	for v := int16(0); v <= (&kmsg.StopReplicaRequest{}).MaxVersion(); v++ {
		epoch++
		before, beforeDel := len(host.Stopped()), len(host.Deleted())
		s := &controller.StopReplica{Header: hdr(epoch, uint64(epoch)), Partitions: []controller.StopPartition{
			{Topic: "sr", TopicID: topicID, Partition: 0, LeaderEpoch: 1, Delete: false},
			{Topic: "sr", TopicID: topicID, Partition: 1, LeaderEpoch: 1, Delete: true},
		}}
		reqs := sender.EncodeStopReplica(s, v)
		if want := map[bool]int{true: 1, false: 2}[v >= 3]; len(reqs) != want {
			t.Fatalf("StopReplica v%d: %d requests, want %d", v, len(reqs), want)
		}
		for _, r := range reqs {
			resp := handle(r, uint64(epoch)).(*kmsg.StopReplicaResponse)
			if resp.ErrorCode != 0 {
				t.Fatalf("StopReplica v%d: %+v", v, resp)
			}
		}
		stopped, deleted := host.Stopped()[before:], host.Deleted()[beforeDel:]
		if len(stopped) != 2 || len(deleted) != 1 || deleted[0].Partition != 1 {
			t.Fatalf("StopReplica v%d: stopped %v deleted %v", v, stopped, deleted)
		}
	}
}

// TestFullUpdateMetadataReachesTheAgent: from v8 a full UpdateMetadata
// (a catch-up) is of type full and names every topic, those without a
// partition in the request too; the agent then keeps only those and
// forgets the rest, including a topic whose only states are deletions.
// Before v8 the type cannot travel and the agent drops nothing.
func TestFullUpdateMetadataReachesTheAgent(t *testing.T) {
	ctx := context.Background()
	stay, gone, deleting := rl.TopicID{0x51}, rl.TopicID{0x52}, rl.TopicID{0x53}
	for v := int16(5); v <= (&kmsg.UpdateMetadataRequest{}).MaxVersion(); v++ {
		a := startAgent(t, broker.Config{BrokerID: 1})
		live := []controller.LiveBroker{{ID: 1, Endpoints: endpoint(a.Addr())}}
		handle := func(u *controller.UpdateMetadata) {
			t.Helper()
			req := wire(t, sender.EncodeUpdateMetadata(u, v)).(*kmsg.UpdateMetadataRequest)
			if got, want := kafkaclient.UpdateMetadataType(req), map[bool]int8{true: kafkaclient.UpdateMetadataFull}[u.Full && v >= 8]; got != want {
				t.Fatalf("v%d: type %d on the wire, want %d", v, got, want)
			}
			resp, err := a.Handle(ctx, &kafkawire.Conn{ClientID: kafkaclient.ControlClientID(1, 1), Version: v}, req)
			if err != nil || resp.(*kmsg.UpdateMetadataResponse).ErrorCode != 0 {
				t.Fatalf("v%d: %v %+v", v, err, resp)
			}
		}
		handle(&controller.UpdateMetadata{Header: hdr(1, 1), LiveBrokers: live, Partitions: []controller.PartitionState{
			ps("stay", stay, 0, 1, 1, 1), ps("stay", stay, 1, 1, 1, 1), ps("gone", gone, 0, 1, 1, 1),
			ps("deleting", deleting, 0, 1, 1, 1), ps("deleting", deleting, 1, 1, 1, 1)}})
		if n := a.NumPartitions(); n != 5 {
			t.Fatalf("v%d: %d partitions cached", v, n)
		}
		del := ps("deleting", deleting, 0, controller.LeaderDuringDelete, 1, 1)
		handle(&controller.UpdateMetadata{Header: hdr(1, 2), LiveBrokers: live, Partitions: []controller.PartitionState{del},
			Full: true, Topics: []controller.TopicName{{Name: "stay", ID: stay}}})
		var got []string
		for _, p := range a.Partitions() {
			got = append(got, p.Topic)
		}
		want := []string{"gone", "deleting", "stay", "stay"}
		if v >= 8 {
			want = []string{"stay", "stay"}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("v%d: after a full UpdateMetadata the agent caches %v, want %v", v, got, want)
		}
	}
}

// TestChunkedUpdateMetadataReachesTheAgent: an UpdateMetadata with more
// partitions than a request may carry goes as several requests, in
// order, each within the limit; only the last is full (from v8), so the
// agent, applying them one by one, ends with every partition of the
// topics the full one names and forgets only the others.
func TestChunkedUpdateMetadataReachesTheAgent(t *testing.T) {
	ctx := context.Background()
	a, b, gone := rl.TopicID{0x61}, rl.TopicID{0x62}, rl.TopicID{0x63}
	for v := int16(5); v <= (&kmsg.UpdateMetadataRequest{}).MaxVersion(); v++ {
		agent := startAgent(t, broker.Config{BrokerID: 1})
		live := []controller.LiveBroker{{ID: 1, Endpoints: endpoint(agent.Addr())}}
		apply := func(req *kmsg.UpdateMetadataRequest) {
			t.Helper()
			resp, err := agent.Handle(ctx, &kafkawire.Conn{ClientID: kafkaclient.ControlClientID(1, 1), Version: v}, wire(t, req))
			if err != nil || resp.(*kmsg.UpdateMetadataResponse).ErrorCode != 0 {
				t.Fatalf("v%d: %v %+v", v, err, resp)
			}
		}
		apply(sender.EncodeUpdateMetadata(&controller.UpdateMetadata{Header: hdr(1, 1), LiveBrokers: live,
			Partitions: []controller.PartitionState{ps("gone", gone, 0, 1, 1, 1)}}, v))

		var parts []controller.PartitionState
		for i := int32(0); i < 4; i++ {
			parts = append(parts, ps("a", a, i, 1, 1, 1))
		}
		for i := int32(0); i < 3; i++ {
			parts = append(parts, ps("b", b, i, 1, 1, 1))
		}
		full := &controller.UpdateMetadata{Header: hdr(1, 2), LiveBrokers: live, Partitions: parts, Full: true,
			Topics: []controller.TopicName{{Name: "a", ID: a}, {Name: "b", ID: b}}}
		reqs := sender.EncodeUpdateMetadataChunks(full, v, 3)
		if len(reqs) != 3 {
			t.Fatalf("v%d: 7 partitions at most 3 a request went as %d requests", v, len(reqs))
		}
		for i, req := range reqs {
			n := len(req.PartitionStates)
			for _, ts := range req.TopicStates {
				n += len(ts.PartitionStates)
			}
			wantFull := i == len(reqs)-1 && v >= 8
			if n > 3 || (kafkaclient.UpdateMetadataType(req) == kafkaclient.UpdateMetadataFull) != wantFull {
				t.Fatalf("v%d: request %d carries %d partitions, full %v", v, i, n, !wantFull)
			}
			if i < len(reqs)-1 && agent.NumPartitions() > 1+3*i {
				t.Fatalf("v%d: %d partitions cached before request %d", v, agent.NumPartitions(), i)
			}
			apply(req)
		}
		var got []string
		for _, p := range agent.Partitions() {
			got = append(got, fmt.Sprintf("%s-%d", p.Topic, p.Partition))
		}
		slices.Sort(got)
		want := []string{"a-0", "a-1", "a-2", "a-3", "b-0", "b-1", "b-2"}
		if v < 8 {
			want = append(want, "gone-0")
		}
		if !slices.Equal(got, want) {
			t.Fatalf("v%d: after the chunks the agent caches %v, want %v", v, got, want)
		}
	}
	// Within the limit: one request, as EncodeUpdateMetadata makes it.
	one := &controller.UpdateMetadata{Header: hdr(1, 1), Partitions: []controller.PartitionState{ps("a", a, 0, 1, 1, 1)}}
	if reqs := sender.EncodeUpdateMetadataChunks(one, 8, 1); len(reqs) != 1 {
		t.Fatalf("one partition at most one a request went as %d requests", len(reqs))
	}
}
