package broker_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// checkControlLog verifies the invariants a checker relies on: an accepted
// request never carries a controller epoch lower than one accepted before
// it, and the leader epoch of a partition never goes back among accepted
// LeaderAndIsr/UpdateMetadata partitions of the same topic id.
func checkControlLog(t testing.TB, recs []broker.ControlRecord) {
	t.Helper()
	var highest int32 = -1
	type key struct {
		id rl.TopicID
		p  int32
	}
	le := map[key]int32{}
	for i, r := range recs {
		if i > 0 && r.Seq != recs[i-1].Seq+1 {
			t.Fatalf("control log has a gap: %v after %v", r, recs[i-1])
		}
		if !r.Accepted {
			continue
		}
		if r.ControllerEpoch < highest {
			t.Fatalf("accepted a stale controller epoch: %v (highest accepted %d)", r, highest)
		}
		highest = r.ControllerEpoch
		if r.Partition < 0 || r.Key == broker.KeyStopReplica || r.Deleted {
			continue
		}
		k := key{r.TopicID, r.Partition}
		if cur, ok := le[k]; ok && r.LeaderEpoch < cur {
			t.Fatalf("leader epoch went back: %v (had %d)", r, cur)
		}
		le[k] = r.LeaderEpoch
	}
}

func TestStaleControllerEpochIsRefused(t *testing.T) {
	host := broker.NewMemoryHost()
	a := startAgent(t, broker.Config{BrokerID: 1, Host: host})
	cl := controlClient(t, a.Addr(), 7)

	p := part{topic: "a", id: topicA, p: 0, leader: 1, le: 3, pe: 3, isr: []int32{1, 2}, reps: []int32{1, 2}}
	if resp := send[*kmsg.LeaderAndISRResponse](t, cl, lai(5, -1, p)); resp.ErrorCode != 0 || laiCodes(resp)["0a-0"] != 0 {
		t.Fatalf("epoch 5 refused: %+v", resp)
	}
	calls := host.Calls()

	// A deposed controller (epoch 4) is refused on every request kind,
	// even with a newer leader epoch.
	newer := p
	newer.leader, newer.le, newer.pe = 2, 9, 9
	if resp := send[*kmsg.LeaderAndISRResponse](t, cl, lai(4, -1, newer)); resp.ErrorCode != kerr.StaleControllerEpoch.Code {
		t.Fatalf("LeaderAndIsr from epoch 4: error %d", resp.ErrorCode)
	}
	if resp := send[*kmsg.UpdateMetadataResponse](t, cl, um(4, -1, nil, newer)); resp.ErrorCode != kerr.StaleControllerEpoch.Code {
		t.Fatalf("UpdateMetadata from epoch 4: error %d", resp.ErrorCode)
	}
	if resp := send[*kmsg.StopReplicaResponse](t, cl, stopReq(4, -1, "a", 0, 9, true)); resp.ErrorCode != kerr.StaleControllerEpoch.Code {
		t.Fatalf("StopReplica from epoch 4: error %d", resp.ErrorCode)
	}
	if host.Calls() != calls {
		t.Fatalf("host was called for refused requests: %d calls, had %d", host.Calls(), calls)
	}
	if st, _ := a.Partition("a", 0); st.Leader != 1 || st.LeaderEpoch != 3 {
		t.Fatalf("cache changed by a stale controller: %+v", st)
	}
	if r, ok := host.Replica("a", 0); !ok || r.Role != broker.Leader {
		t.Fatalf("replica: %+v %v", r, ok)
	}
	if s := a.Status(); s.ControllerEpoch != 5 || s.MetadataOffset != 7 {
		t.Fatalf("status: %+v", s)
	}

	// The same epoch and a newer one pass.
	if resp := send[*kmsg.LeaderAndISRResponse](t, cl, lai(6, -1, newer)); resp.ErrorCode != 0 {
		t.Fatalf("epoch 6 refused: %d", resp.ErrorCode)
	}
	recs := a.ControlLog()
	checkControlLog(t, recs)
	var refused, accepted int
	for _, r := range recs {
		if r.Partition >= 0 {
			continue
		}
		if r.Accepted {
			accepted++
		} else if r.ErrorCode == kerr.StaleControllerEpoch.Code && r.ControllerEpoch == 4 {
			refused++
		}
	}
	if refused != 3 || accepted != 2 {
		t.Fatalf("control log: %d refused, %d accepted requests: %v", refused, accepted, recs)
	}
}

func TestLeaderEpochFencing(t *testing.T) {
	host := broker.NewMemoryHost()
	a := startAgent(t, broker.Config{BrokerID: 1, Host: host})
	cl := controlClient(t, a.Addr(), 0)
	p0 := part{topic: "a", id: topicA, p: 0, leader: 1, le: 3, pe: 5, isr: []int32{1, 2}, reps: []int32{1, 2}}
	p1 := part{topic: "a", id: topicA, p: 1, leader: 2, le: 1, pe: 1, isr: []int32{2, 1}, reps: []int32{2, 1}}
	send[*kmsg.LeaderAndISRResponse](t, cl, lai(1, -1, p0, p1))
	if got := host.Leading(); !slices.Equal(got, []broker.TopicPartition{{"a", 0}}) {
		t.Fatalf("leading %v", got)
	}
	if got := host.Following(); !slices.Equal(got, []broker.TopicPartition{{"a", 1}}) {
		t.Fatalf("following %v", got)
	}

	cases := []struct {
		name string
		le   int32
		pe   int32
		want int16
	}{
		{"older leader epoch", 2, 9, kerr.FencedLeaderEpoch.Code},
		{"same leader epoch, older partition epoch", 3, 4, kerr.FencedLeaderEpoch.Code},
		{"same leader epoch, newer partition epoch (ISR change)", 3, 6, 0},
		{"newer leader epoch", 4, 7, 0},
		{"back to the older one", 3, 8, kerr.FencedLeaderEpoch.Code},
	}
	for _, c := range cases {
		p := p0
		p.le, p.pe, p.leader = c.le, c.pe, 2
		p.isr = []int32{2}
		// p1 rides along with its current epochs and must pass either way.
		resp := send[*kmsg.LeaderAndISRResponse](t, cl, lai(1, -1, p, p1))
		codes := laiCodes(resp)
		if resp.ErrorCode != 0 || codes["0a-0"] != c.want || codes["0a-1"] != 0 {
			t.Fatalf("%s: top %d partition codes %v, want %d for a-0", c.name, resp.ErrorCode, codes, c.want)
		}
		st, _ := a.Partition("a", 0)
		if c.want == 0 && (st.LeaderEpoch != c.le || st.PartitionEpoch != c.pe) {
			t.Fatalf("%s: cache %+v", c.name, st)
		}
		if c.want != 0 && st.LeaderEpoch == c.le && st.PartitionEpoch == c.pe {
			t.Fatalf("%s: refused state was cached: %+v", c.name, st)
		}
	}
	// The last accepted state made broker 2 the leader: a-0 follows now.
	if r, _ := host.Replica("a", 0); r.Role != broker.Follower || r.State.LeaderEpoch != 4 {
		t.Fatalf("a-0 replica: %+v", r)
	}
	// UpdateMetadata with an older leader epoch is skipped, not applied.
	old := p0
	old.le, old.leader = 1, 1
	if resp := send[*kmsg.UpdateMetadataResponse](t, cl, um(1, -1, nil, old)); resp.ErrorCode != 0 {
		t.Fatalf("UpdateMetadata: %d", resp.ErrorCode)
	}
	if st, _ := a.Partition("a", 0); st.LeaderEpoch != 4 || st.Leader != 2 {
		t.Fatalf("stale UpdateMetadata applied: %+v", st)
	}
	// A replica this broker does not host is refused.
	other := part{topic: "a", id: topicA, p: 2, leader: 2, le: 1, isr: []int32{2, 3}, reps: []int32{2, 3}}
	if codes := laiCodes(send[*kmsg.LeaderAndISRResponse](t, cl, lai(1, -1, other))); codes["0a-2"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("foreign partition: %v", codes)
	}
	checkControlLog(t, a.ControlLog())
}

func TestStopReplica(t *testing.T) {
	host := broker.NewMemoryHost()
	host.StopErr = func(topic string, p int32, del bool) error {
		if p == 2 {
			return errors.New("disk on fire")
		}
		return nil
	}
	a := startAgent(t, broker.Config{BrokerID: 1, Host: host})
	cl := controlClient(t, a.Addr(), 0)
	reps := []int32{1, 2}
	send[*kmsg.LeaderAndISRResponse](t, cl, lai(1, -1,
		part{topic: "a", id: topicA, p: 0, leader: 1, le: 5, isr: reps, reps: reps},
		part{topic: "a", id: topicA, p: 1, leader: 2, le: 5, isr: reps, reps: reps},
		part{topic: "a", id: topicA, p: 2, leader: 2, le: 5, isr: reps, reps: reps}))

	// Deleting with the current leader epoch calls the host.
	if resp := send[*kmsg.StopReplicaResponse](t, cl, stopReq(1, -1, "a", 0, 5, true)); resp.ErrorCode != 0 || resp.Partitions[0].ErrorCode != 0 {
		t.Fatalf("delete a-0: %+v", resp)
	}
	if got := host.Deleted(); !slices.Equal(got, []broker.TopicPartition{{"a", 0}}) {
		t.Fatalf("deleted %v", got)
	}
	if _, ok := host.Replica("a", 0); ok {
		t.Fatal("a-0 still runs after its deletion")
	}
	// An older leader epoch is fenced and the host is not called.
	if resp := send[*kmsg.StopReplicaResponse](t, cl, stopReq(1, -1, "a", 1, 4, true)); resp.Partitions[0].ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("stale stop a-1: %+v", resp)
	}
	if _, ok := host.Replica("a", 1); !ok || len(host.Stopped()) != 1 {
		t.Fatalf("stale stop reached the host: %v", host.Stopped())
	}
	// -2 (during delete) passes whatever the epoch; a stop without delete
	// stops without deleting.
	send[*kmsg.StopReplicaResponse](t, cl, stopReq(1, -1, "a", 1, -2, false))
	if got := host.Stopped(); len(got) != 2 || len(host.Deleted()) != 1 {
		t.Fatalf("stopped %v deleted %v", got, host.Deleted())
	}
	// A host failure is the partition's error.
	if resp := send[*kmsg.StopReplicaResponse](t, cl, stopReq(1, -1, "a", 2, 5, true)); resp.Partitions[0].ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("failing stop: %+v", resp)
	}
	var sawDelete bool
	for _, r := range a.ControlLog() {
		if r.Key == broker.KeyStopReplica && r.Partition == 0 && r.Deleted && r.Accepted && r.TopicID == topicA {
			sawDelete = true
		}
	}
	if !sawDelete {
		t.Fatal("the deletion of a-0 is not in the control log")
	}
}

func TestMetadataCacheServedToClients(t *testing.T) {
	a := startAgent(t, broker.Config{BrokerID: 1, ClusterID: "c1"})
	ctl := controlClient(t, a.Addr(), 0)
	brokers := []liveBroker{{1, a.Addr()}, {2, "127.0.0.1:1"}}
	send[*kmsg.UpdateMetadataResponse](t, ctl, um(3, -1, brokers,
		part{topic: "orders", id: topicA, p: 0, leader: 1, le: 4, pe: 6, isr: []int32{1, 2}, reps: []int32{1, 2, 3}},
		part{topic: "orders", id: topicA, p: 1, leader: 2, le: 2, pe: 2, isr: []int32{2}, reps: []int32{2, 1}},
		part{topic: "gone", id: topicB, p: 0, leader: -1, le: 7, pe: 8, isr: []int32{3}, reps: []int32{3}}))

	md := clientMetadata(t, a.Addr())
	if md.Cluster != "c1" || md.Controller != 1 || len(md.Brokers) != 2 || md.Brokers[0].NodeID != 1 || md.Brokers[1].Port != 1 {
		t.Fatalf("cluster: %q controller %d brokers %+v", md.Cluster, md.Controller, md.Brokers)
	}
	orders := md.Topics["orders"]
	if orders.Err != nil || orders.ID != kadm.TopicID(topicA) || len(orders.Partitions) != 2 {
		t.Fatalf("orders: %+v", orders)
	}
	p0 := orders.Partitions[0]
	if p0.Leader != 1 || p0.LeaderEpoch != 4 || !slices.Equal(p0.ISR, []int32{1, 2}) || !slices.Equal(p0.Replicas, []int32{1, 2, 3}) || !slices.Equal(p0.OfflineReplicas, []int32{3}) {
		t.Fatalf("orders-0: %+v", p0)
	}
	if p1 := orders.Partitions[1]; p1.Leader != 2 || p1.LeaderEpoch != 2 {
		t.Fatalf("orders-1: %+v", p1)
	}
	if g := md.Topics["gone"].Partitions[0]; g.Leader != -1 || !errors.Is(g.Err, kerr.LeaderNotAvailable) {
		t.Fatalf("gone-0: %+v", g)
	}

	// Deletion (leader -2) removes the topic; a topic re-created under the
	// same name with a new id replaces the old one, leader epochs and all.
	send[*kmsg.UpdateMetadataResponse](t, ctl, um(3, -1, brokers,
		part{topic: "gone", id: topicB, p: 0, leader: -2, le: 7, pe: 8, isr: []int32{3}, reps: []int32{3}},
		part{topic: "orders", id: rl.TopicID{0xc}, p: 0, leader: 2, le: 0, pe: 0, isr: []int32{2}, reps: []int32{2}}))
	md = clientMetadata(t, a.Addr())
	if _, ok := md.Topics["gone"]; ok {
		t.Fatalf("deleted topic still listed: %+v", md.Topics["gone"])
	}
	orders = md.Topics["orders"]
	if orders.ID != kadm.TopicID(rl.TopicID{0xc}) || len(orders.Partitions) != 1 || orders.Partitions[0].Leader != 2 || orders.Partitions[0].LeaderEpoch != 0 {
		t.Fatalf("re-created orders: %+v", orders)
	}
	// A topic asked for by name that is not cached.
	md = clientMetadata(t, a.Addr(), "missing")
	if !errors.Is(md.Topics["missing"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("missing: %+v", md.Topics["missing"])
	}
}

func TestRegistrationHeartbeatsAndRediscovery(t *testing.T) {
	q := newFakeQuorum(t, 2)
	a := startAgent(t, broker.Config{BrokerID: 7, Rack: "r1", Controllers: q.addrs()[1:], HeartbeatInterval: 10 * time.Millisecond})
	waitFor(t, "registration and a heartbeat", func() bool { return a.Status().Heartbeats > 0 })
	regs, hbs := q.snapshot()
	r := regs[0]
	host, port, _ := net.SplitHostPort(a.Addr())
	if r.BrokerID != 7 || *r.Rack != "r1" || rl.IncarnationID(r.IncarnationID) != a.IncarnationID() || len(r.Listeners) != 1 ||
		r.Listeners[0].Name != "PLAINTEXT" || r.Listeners[0].Host != host || port != strconv.Itoa(int(r.Listeners[0].Port)) {
		t.Fatalf("registration: %+v", r)
	}
	epoch := a.Status().BrokerEpoch
	if epoch != 101 || hbs[0].BrokerEpoch != 101 || hbs[0].CurrentMetadataOffset < 101 {
		t.Fatalf("epoch %d, heartbeat %+v", epoch, hbs[0])
	}
	if a.Status().Fenced {
		t.Fatal("still fenced after a caught-up heartbeat")
	}

	// A control request with a higher offset moves the heartbeat offset.
	ctl := controlClient(t, a.Addr(), 5000)
	if resp := send[*kmsg.UpdateMetadataResponse](t, ctl, um(1, epoch, nil)); resp.ErrorCode != 0 {
		t.Fatalf("UpdateMetadata with the agent's epoch: %d", resp.ErrorCode)
	}
	waitFor(t, "a heartbeat reporting offset 5000", func() bool {
		_, hbs := q.snapshot()
		return hbs[len(hbs)-1].CurrentMetadataOffset == 5000
	})
	// Another broker epoch is refused.
	if resp := send[*kmsg.UpdateMetadataResponse](t, ctl, um(1, epoch-1, nil)); resp.ErrorCode != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("stale broker epoch: %d", resp.ErrorCode)
	}

	// The controller forgot the registration: register again (same
	// incarnation, new epoch).
	q.mu.Lock()
	q.staleNext = kerr.StaleBrokerEpoch.Code
	q.mu.Unlock()
	waitFor(t, "re-registration", func() bool { return a.Status().BrokerEpoch == 102 })
	regs, _ = q.snapshot()
	if len(regs) != 2 || regs[1].IncarnationID != regs[0].IncarnationID {
		t.Fatalf("registrations: %d", len(regs))
	}

	// It found node 1001 through node 1002's Metadata. Clients are never
	// told of a voter: the agent knows no live broker (the UpdateMetadata
	// above listed none), so it lists none and names no controller.
	if q.heartbeatsTo(1002) != 0 || q.heartbeatsTo(1001) == 0 {
		t.Fatalf("heartbeats went to the wrong node: %v", q.hbBy)
	}
	if md := clientMetadata(t, a.Addr()); md.Controller != -1 || len(md.Brokers) != 0 {
		t.Fatalf("agent metadata: controller %d brokers %+v", md.Controller, md.Brokers)
	}

	// The active controller moves: NOT_CONTROLLER, then the agent finds
	// node 1002 and heartbeats there.
	q.setActive(1)
	waitFor(t, "heartbeats to the new controller", func() bool { return q.heartbeatsTo(1002) > 3 })
	// The new fake controller knows the epoch from the shared state, so
	// the agent kept its registration.
	if e := a.Status().BrokerEpoch; e != 102 {
		t.Fatalf("epoch after moving: %d", e)
	}
}

func TestControlledShutdownWaitsForPermission(t *testing.T) {
	q := newFakeQuorum(t, 1)
	q.shutdownAfter = 3
	a := startAgent(t, broker.Config{BrokerID: 1, Controllers: q.addrs(), HeartbeatInterval: 10 * time.Millisecond})
	waitFor(t, "registration", func() bool { return a.Status().Heartbeats > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	asks := q.shutdownAsks
	q.mu.Unlock()
	if asks != 4 {
		t.Fatalf("shut down after %d asks, want 4 (permission on the 4th)", asks)
	}
	if c, err := net.DialTimeout("tcp", a.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatal("listener still open after shutdown")
	}

	// Without permission, the context ends the wait.
	q2 := newFakeQuorum(t, 1)
	q2.shutdownAfter = 1 << 30
	b := startAgent(t, broker.Config{BrokerID: 2, Controllers: q2.addrs(), HeartbeatInterval: 10 * time.Millisecond})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if err := b.Shutdown(ctx2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shutdown without permission: %v", err)
	}
}

func TestAlterPartition(t *testing.T) {
	q := newFakeQuorum(t, 1)
	q.alter = func(r *kmsg.AlterPartitionRequest) *kmsg.AlterPartitionResponse {
		resp := r.ResponseKind().(*kmsg.AlterPartitionResponse)
		rt := kmsg.NewAlterPartitionResponseTopic()
		rt.TopidID, rt.Topic = r.Topics[0].TopicID, r.Topics[0].Topic
		in := r.Topics[0].Partitions[0]
		rp := kmsg.NewAlterPartitionResponseTopicPartition()
		rp.Partition, rp.LeaderID, rp.LeaderEpoch, rp.PartitionEpoch = in.Partition, r.BrokerID, in.LeaderEpoch, in.PartitionEpoch+1
		for _, e := range in.NewEpochISR {
			rp.ISR = append(rp.ISR, e.BrokerID)
		}
		if r.Version < 3 {
			rp.ISR = in.NewISR
		}
		if in.PartitionEpoch == 99 {
			rp.ErrorCode = kerr.InvalidUpdateVersion.Code
		}
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp
	}
	a := startAgent(t, broker.Config{BrokerID: 1, Controllers: q.addrs(), HeartbeatInterval: 10 * time.Millisecond})
	waitFor(t, "registration", func() bool { return a.Status().Heartbeats > 0 })
	epoch := a.Status().BrokerEpoch
	ctl := controlClient(t, a.Addr(), 0)
	send[*kmsg.LeaderAndISRResponse](t, ctl, lai(1, epoch,
		part{topic: "a", id: topicA, p: 0, leader: 1, le: 4, pe: 10, isr: []int32{1, 2, 3}, reps: []int32{1, 2, 3}},
		part{topic: "a", id: topicA, p: 1, leader: 2, le: 4, pe: 10, isr: []int32{2, 1}, reps: []int32{2, 1}},
		part{topic: "a", id: topicA, p: 2, leader: 1, le: 4, pe: 99, isr: []int32{1, 2}, reps: []int32{1, 2}}))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := a.AlterPartition(ctx, "a", 0, []int32{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if st.PartitionEpoch != 11 || !slices.Equal(st.ISR, []int32{1, 2}) {
		t.Fatalf("result %+v", st)
	}
	if c, _ := a.Partition("a", 0); c.PartitionEpoch != 11 || !slices.Equal(c.ISR, []int32{1, 2}) || c.LeaderEpoch != 4 {
		t.Fatalf("cache after the ISR change: %+v", c)
	}
	q.mu.Lock()
	sent := q.alters[0]
	q.mu.Unlock()
	sp := sent.Topics[0].Partitions[0]
	if sent.BrokerID != 1 || sent.BrokerEpoch != epoch || rl.TopicID(sent.Topics[0].TopicID) != topicA || sp.LeaderEpoch != 4 || sp.PartitionEpoch != 10 {
		t.Fatalf("sent %+v", sent)
	}
	// Not the leader: refused locally.
	if _, err := a.AlterPartition(ctx, "a", 1, []int32{2}); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("follower AlterPartition: %v", err)
	}
	// A refusal from the controller is returned.
	if _, err := a.AlterPartition(ctx, "a", 2, []int32{1}); !errors.Is(err, kerr.InvalidUpdateVersion) {
		t.Fatalf("stale partition epoch: %v", err)
	}
}

func TestEachStartIsANewIncarnation(t *testing.T) {
	a := startAgent(t, broker.Config{BrokerID: 1})
	b := startAgent(t, broker.Config{BrokerID: 1})
	if a.IncarnationID() == b.IncarnationID() || a.IncarnationID() == (rl.IncarnationID{}) {
		t.Fatalf("incarnations %s %s", a.IncarnationID(), b.IncarnationID())
	}
}

func TestControlLogKeepsTheNewest(t *testing.T) {
	a := startAgent(t, broker.Config{BrokerID: 1, ControlLogLimit: 5})
	cl := controlClient(t, a.Addr(), 0)
	var parts []part
	for i := int32(0); i < 10; i++ {
		parts = append(parts, part{topic: "a", id: topicA, p: i, leader: 1, le: 1, isr: []int32{1}, reps: []int32{1}})
	}
	send[*kmsg.LeaderAndISRResponse](t, cl, lai(1, -1, parts...))
	send[*kmsg.UpdateMetadataResponse](t, cl, um(1, -1, nil, parts[:2]...))
	recs := a.ControlLog()
	if len(recs) != 5 || recs[0].Seq != 10 || recs[4].Seq != 14 {
		t.Fatalf("%v", recs)
	}
	// The last five: a-8, a-9 of LeaderAndIsr, then UpdateMetadata itself, a-0, a-1.
	if recs[0].Partition != 8 || recs[2].Partition != -1 || recs[2].Key != broker.KeyUpdateMetadata || recs[4].Partition != 1 {
		t.Fatalf("%v", recs)
	}
	checkControlLog(t, recs)
}
