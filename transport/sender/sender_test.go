package sender_test

import (
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/transport/sender"
)

// requestRecords returns the records of whole requests, in order.
func requestRecords(a *broker.Agent) []broker.ControlRecord {
	var out []broker.ControlRecord
	for _, r := range a.ControlLog() {
		if r.Partition < 0 {
			out = append(out, r)
		}
	}
	return out
}

// TestDeliveryOrder: every set arrives as LeaderAndIsr, UpdateMetadata,
// StopReplica; sets arrive in the order sent (leader epochs of a
// partition only go up, no stop is lost); the offset a broker reports is
// only that of a fully delivered set.
func TestDeliveryOrder(t *testing.T) {
	g := newGate()
	a := startAgent(t, broker.Config{BrokerID: 1, Host: g})
	bk := newBook()
	bk.set(1, a.Addr())
	p := newPool(t, bk, sender.Config{QueueLimit: 8})
	live := []controller.LiveBroker{{ID: 1, Endpoints: endpoint(a.Addr())}}

	const n = 60
	// The first set blocks in the host, so later ones queue up and are
	// delivered both one by one and coalesced.
	for i := 1; i <= n; i++ {
		parts := []controller.PartitionState{ps("t", topicID, int32(i%3), 1, int32(i), 1)}
		p.Send(set(1, hdr(1, uint64(i)), live, parts, controller.StopPartition{Topic: "s", Partition: int32(i), LeaderEpoch: -1}))
		if i == 1 {
			<-g.entered
		}
		if i == n/2 {
			g.release()
		}
	}
	waitFor(t, "every set delivered", func() bool {
		s := p.Stats().Brokers[1]
		return a.Status().MetadataOffset == n && s.Pending == 0 && s.InFlight == 0
	})

	recs := requestRecords(a)
	kinds := []int16{broker.KeyLeaderAndIsr, broker.KeyUpdateMetadata, broker.KeyStopReplica}
	if len(recs)%3 != 0 {
		t.Fatalf("%d request records, not whole sets", len(recs))
	}
	var prev uint64 // offset of the last whole set
	for i, r := range recs {
		if !r.Accepted || r.Key != kinds[i%3] {
			t.Fatalf("record %d: %v, want API key %d", i, r, kinds[i%3])
		}
		// Only the last request of a set carries the set's offset; the
		// ones before it carry the previous set's.
		if i%3 < 2 && r.MetadataOffset != prev {
			t.Fatalf("record %d: %v carries offset %d, want the previous set's %d", i, r, r.MetadataOffset, prev)
		}
		if i%3 == 2 {
			if r.MetadataOffset <= prev {
				t.Fatalf("set offset did not go up: %v after %d", r, prev)
			}
			prev = r.MetadataOffset
		}
	}
	if len(recs) >= 3*n {
		t.Fatalf("%d requests for %d sets: nothing was coalesced", len(recs), n)
	}
	leaderEpochs := map[int32]int32{}
	stops := map[int32]int{}
	for _, r := range a.ControlLog() {
		switch {
		case r.Partition < 0:
		case r.Key == broker.KeyLeaderAndIsr:
			if r.LeaderEpoch <= leaderEpochs[r.Partition] {
				t.Fatalf("leader epoch of t-%d did not go up: %v after %d", r.Partition, r, leaderEpochs[r.Partition])
			}
			leaderEpochs[r.Partition] = r.LeaderEpoch
		case r.Key == broker.KeyStopReplica:
			stops[r.Partition]++
		}
	}
	for i := int32(1); i <= n; i++ {
		if stops[i] != 1 {
			t.Fatalf("stop of s-%d arrived %d times", i, stops[i])
		}
	}
	for part, want := range map[int32]int32{0: n, 1: n - 2, 2: n - 1} {
		if st, _ := a.Partition("t", part); st.LeaderEpoch != want {
			t.Fatalf("t-%d leader epoch %d, want %d", part, st.LeaderEpoch, want)
		}
	}
	s := p.Stats()
	balanced(t, s)
	if b := s.Brokers[1]; b.Queued != 3*n || b.Dropped != 0 || b.Refused != 0 || b.Pending != 0 || b.InFlight != 0 || b.Coalesced == 0 {
		t.Fatalf("stats %+v", b)
	}
}

// TestSlowBrokerIsCoalesced: while a broker's host blocks, the queue
// never holds more than the limit, Send never waits, and once the broker
// moves again it gets the newest state in a handful of requests.
func TestSlowBrokerIsCoalesced(t *testing.T) {
	g := newGate()
	a := startAgent(t, broker.Config{BrokerID: 1, Host: g})
	bk := newBook()
	bk.set(1, a.Addr())
	const limit = 4
	p := newPool(t, bk, sender.Config{QueueLimit: limit})
	live := []controller.LiveBroker{{ID: 1, Endpoints: endpoint(a.Addr())}}
	parts := func(le int32) []controller.PartitionState {
		var out []controller.PartitionState
		for i := int32(0); i < 10; i++ {
			out = append(out, ps("t", topicID, i, 1, le, 1, 2))
		}
		return out
	}
	p.Send(set(1, hdr(1, 1), live, parts(1)))
	<-g.entered // the first LeaderAndIsr is stuck in the host

	const n = 500
	start := time.Now()
	for le := int32(2); le <= n; le++ {
		p.Send(set(1, hdr(1, uint64(le)), live, parts(le)))
		if s := p.Stats().Brokers[1]; s.Pending > 2*(limit+1) {
			t.Fatalf("queue grew to %d requests (limit %d sets)", s.Pending, limit)
		}
	}
	took := time.Since(start)
	s := p.Stats().Brokers[1]
	if s.InFlight == 0 || s.Sent != 0 || s.Coalesced < n {
		t.Fatalf("while blocked: %+v", s)
	}
	g.release()
	waitFor(t, "the newest state", func() bool { return a.Status().MetadataOffset == n })
	for i := int32(0); i < 10; i++ {
		if st, _ := a.Partition("t", i); st.LeaderEpoch != n {
			t.Fatalf("t-%d: %+v", i, st)
		}
	}
	if got := len(requestRecords(a)); got > 8 {
		t.Fatalf("the broker got %d requests for %d sets", got, n)
	}
	s = p.Stats().Brokers[1]
	balanced(t, p.Stats())
	if s.Queued != 2*n || s.Dropped != 0 {
		t.Fatalf("after: %+v", s)
	}
	t.Logf("%d sends in %v while the broker was stuck; %d requests delivered", n-1, took, s.Sent)
}

// blackhole accepts connections and never answers.
func blackhole(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var conns []net.Conn
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestDeadBrokerDoesNotStallOthers: one broker never answers (its first
// request hangs for good), another refuses connections; the live one gets
// everything, and Close does not wait for the hung one.
func TestDeadBrokerDoesNotStallOthers(t *testing.T) {
	a := startAgent(t, broker.Config{BrokerID: 1})
	bk := newBook()
	bk.set(1, a.Addr())
	bk.set(2, blackhole(t))
	bk.set(3, closedPort(t))
	p := sender.New(sender.Config{Resolve: bk.resolve, Logger: testLogger(t), RequestTimeout: time.Hour, QueueLimit: 4,
		MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	live := []controller.LiveBroker{{ID: 1, Endpoints: endpoint(a.Addr())}}
	const n = 100
	for i := 1; i <= n; i++ {
		for b := int32(1); b <= 3; b++ {
			p.Send(set(b, hdr(1, uint64(i)), live, []controller.PartitionState{ps("t", topicID, 0, 1, int32(i), 1, 2, 3)}))
		}
	}
	waitFor(t, "broker 1 to get everything", func() bool { return a.Status().MetadataOffset == n })
	waitFor(t, "broker 3 to be retried", func() bool { return p.Stats().Brokers[3].Retries >= 3 })
	waitFor(t, "broker 2 to hang", func() bool { return p.Stats().Brokers[2].InFlight > 0 })
	s := p.Stats()
	balanced(t, s)
	if s.Brokers[2].Sent != 0 || s.Brokers[2].InFlight == 0 || s.Brokers[3].Sent != 0 {
		t.Fatalf("dead brokers: %+v %+v", s.Brokers[2], s.Brokers[3])
	}
	for _, b := range []int32{2, 3} {
		if s.Brokers[b].Pending > 2*5 {
			t.Fatalf("broker %d queue: %+v", b, s.Brokers[b])
		}
	}
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for a hung request")
	}
	balanced(t, p.Stats())
	if s := p.Stats().Brokers[2]; s.Pending != 0 || s.InFlight != 0 || s.Dropped == 0 {
		t.Fatalf("after Close: %+v", s)
	}
}

// TestReconnectsAfterRestart: a broker that restarts (same address) gets
// what was sent while it was down; one that comes back elsewhere is found
// through Resolve.
func TestReconnectsAfterRestart(t *testing.T) {
	a := startAgent(t, broker.Config{BrokerID: 1})
	addr := a.Addr()
	bk := newBook()
	bk.set(1, addr)
	p := newPool(t, bk, sender.Config{})
	live := []controller.LiveBroker{{ID: 1, Endpoints: endpoint(addr)}}
	send := func(i int) {
		p.Send(set(1, hdr(1, uint64(i)), live, []controller.PartitionState{ps("t", topicID, 0, 1, int32(i), 1)}))
	}
	send(1)
	waitFor(t, "first delivery", func() bool { return a.Status().MetadataOffset == 1 })
	if !p.Stats().Brokers[1].Connected {
		t.Fatal("not connected")
	}
	a.Close()
	send(2)
	waitFor(t, "retries while the broker is down", func() bool { return p.Stats().Brokers[1].Retries >= 2 })

	b := startAgent(t, broker.Config{BrokerID: 1, Listener: addr})
	waitFor(t, "delivery after the restart", func() bool { return b.Status().MetadataOffset == 2 })
	if st, _ := b.Partition("t", 0); st.LeaderEpoch != 2 {
		t.Fatalf("restarted broker has %+v", st)
	}

	// The broker moves: Resolve says where, the sender follows.
	c := startAgent(t, broker.Config{BrokerID: 1})
	bk.set(1, c.Addr())
	send(3)
	waitFor(t, "delivery at the new address", func() bool { return c.Status().MetadataOffset == 3 })
	if b.Status().MetadataOffset != 2 {
		t.Fatal("the old address still got requests")
	}
	waitFor(t, "six requests answered", func() bool { return p.Stats().Brokers[1].Sent == 6 })
	if s := p.Stats().Brokers[1]; s.Addr != c.Addr() || s.Queued != 6 {
		t.Fatalf("stats %+v", s)
	}
}

// TestOlderControllerEpochIsDropped: requests of an older controller
// epoch than one queued or sent never reach the broker, and the
// deletions they carried are reported as dropped.
func TestOlderControllerEpochIsDropped(t *testing.T) {
	g := newGate()
	a := startAgent(t, broker.Config{BrokerID: 1, Host: g})
	bk := newBook()
	bk.set(1, a.Addr())
	rec := &recorder{}
	p := newPool(t, bk, sender.Config{Responses: rec})
	live := []controller.LiveBroker{{ID: 1, Endpoints: endpoint(a.Addr())}}
	parts := []controller.PartitionState{ps("t", topicID, 0, 1, 1, 1)}
	p.Send(set(1, hdr(5, 1), live, parts))
	<-g.entered
	// Queued under epoch 5, then epoch 6 arrives: the epoch-5 set goes.
	// Its deletion is reported for the broker registration it was meant
	// for.
	withStop := hdr(5, 2)
	withStop.BrokerEpoch = 7
	p.Send(set(1, withStop, live, parts, controller.StopPartition{Topic: "d", TopicID: topicID, Partition: 3, LeaderEpoch: 1, Delete: true}))
	p.Send(set(1, hdr(6, 3), live, []controller.PartitionState{ps("t", topicID, 0, 1, 2, 1)}))
	// Epoch 4 after epoch 6: dropped at once.
	p.Send(set(1, hdr(4, 4), live, []controller.PartitionState{ps("t", topicID, 0, 1, 9, 1)}))
	if s := p.Stats().Brokers[1]; s.Dropped != 3+2 {
		t.Fatalf("dropped %d, want 5: %+v", s.Dropped, s)
	}
	g.release()
	waitFor(t, "epoch 6 delivered", func() bool { return a.Status().MetadataOffset == 3 })
	for _, r := range a.ControlLog() {
		if r.ControllerEpoch == 4 || r.MetadataOffset == 2 || r.Key == broker.KeyStopReplica {
			t.Fatalf("a dropped request reached the broker: %v", r)
		}
	}
	waitFor(t, "the dropped deletion reported", func() bool { return len(rec.results(1)) == 1 })
	if r := rec.results(1)[0]; r.Topic != "d" || r.Partition != 3 || r.TopicID != topicID || !errors.Is(r.Err, sender.ErrDropped) || r.BrokerEpoch != 7 {
		t.Fatalf("report %+v", r)
	}
	balanced(t, p.Stats())
}

// TestStopReplicaResponses: deletions are reported with the broker's
// per-partition outcome; stops without delete are not reported; requests
// for a broker that cannot be resolved are dropped and reported.
func TestStopReplicaResponses(t *testing.T) {
	host := broker.NewMemoryHost()
	host.StopErr = func(_ string, p int32, _ bool) error {
		if p == 2 {
			return errors.New("disk gone")
		}
		return nil
	}
	a := startAgent(t, broker.Config{BrokerID: 1, Host: host})
	bk := newBook()
	bk.set(1, a.Addr())
	rec := &recorder{}
	p := newPool(t, bk, sender.Config{Responses: rec})
	sr := &controller.StopReplica{Header: hdr(1, 1), Partitions: []controller.StopPartition{
		{Topic: "d", TopicID: topicID, Partition: 0, LeaderEpoch: 1, Delete: true},
		{Topic: "d", TopicID: topicID, Partition: 1, LeaderEpoch: 1, Delete: false},
		{Topic: "d", TopicID: topicID, Partition: 2, LeaderEpoch: 1, Delete: true},
	}}
	p.Send(controller.Requests{Broker: 1, StopReplica: sr})
	p.Send(controller.Requests{Broker: 9, StopReplica: sr})
	waitFor(t, "both answers", func() bool {
		return len(rec.results(1)) == 2 && len(rec.results(9)) == 2 && p.Stats().Brokers[1].Sent == 1
	})
	got := rec.results(1)
	if got[0].Partition != 0 || got[0].Err != nil || got[0].TopicID != topicID || got[1].Partition != 2 || !errors.Is(got[1].Err, kerr.KafkaStorageError) {
		t.Fatalf("broker 1: %+v", got)
	}
	if got := rec.results(9); !errors.Is(got[0].Err, sender.ErrDropped) || got[1].Partition != 2 {
		t.Fatalf("unknown broker: %+v", got)
	}
	if !slices.Equal(host.Deleted(), []broker.TopicPartition{{Topic: "d", Partition: 0}}) || len(host.Stopped()) != 2 {
		t.Fatalf("host: stopped %v deleted %v", host.Stopped(), host.Deleted())
	}
	s := p.Stats()
	balanced(t, s)
	if s.Brokers[9].Dropped != 1 || s.Brokers[1].Sent != 1 {
		t.Fatalf("stats %+v", s.Brokers)
	}
}

// TestRefusedRequestsAreCounted: a broker that saw a newer controller
// refuses; the sender counts it and moves on to the next set.
func TestRefusedRequestsAreCounted(t *testing.T) {
	a := startAgent(t, broker.Config{BrokerID: 1})
	bk := newBook()
	bk.set(1, a.Addr())
	live := []controller.LiveBroker{{ID: 1, Endpoints: endpoint(a.Addr())}}
	newer := newPool(t, bk, sender.Config{})
	newer.Send(set(1, hdr(7, 10), live, nil))
	waitFor(t, "epoch 7 delivered", func() bool { return a.Status().ControllerEpoch == 7 })
	// A deposed controller's pool (epoch 6) is refused.
	old := newPool(t, bk, sender.Config{})
	old.Send(set(1, hdr(6, 11), live, []controller.PartitionState{ps("t", topicID, 0, 1, 1, 1)}))
	waitFor(t, "the refusals", func() bool { return old.Stats().Brokers[1].Refused == 2 })
	if _, ok := a.Partition("t", 0); ok || a.Status().MetadataOffset != 10 {
		t.Fatalf("a deposed controller changed the broker: %+v", a.Status())
	}
	balanced(t, old.Stats())
}

// TestOlderIncarnationIsDropped: once a set for a newer incarnation of a
// broker (a higher broker epoch) is queued, sets for the older one are
// dropped, queued or not.
func TestOlderIncarnationIsDropped(t *testing.T) {
	bk := newBook()
	bk.set(1, blackhole(t)) // the first request hangs: the rest queue
	rec := &recorder{}
	p := newPool(t, bk, sender.Config{Responses: rec, RequestTimeout: time.Hour})
	h := func(be int64, off uint64) controller.Header {
		return controller.Header{ControllerID: 1, ControllerEpoch: 3, BrokerEpoch: be, MetadataOffset: off}
	}
	parts := []controller.PartitionState{ps("t", topicID, 0, 1, 1, 1)}
	p.Send(set(1, h(5, 1), nil, parts))
	waitFor(t, "the first set in flight", func() bool { return p.Stats().Brokers[1].InFlight == 2 })
	p.Send(set(1, h(5, 2), nil, parts, controller.StopPartition{Topic: "t", TopicID: topicID, Partition: 0, Delete: true}))
	p.Send(set(1, h(9, 3), nil, parts))
	p.Send(set(1, h(5, 4), nil, parts))
	s := p.Stats().Brokers[1]
	if s.Dropped != 3+2 || s.Pending != 2 {
		t.Fatalf("stats %+v", s)
	}
	waitFor(t, "the dropped deletion reported", func() bool { return len(rec.results(1)) == 1 })
	if r := rec.results(1)[0]; !errors.Is(r.Err, sender.ErrDropped) {
		t.Fatalf("%+v", r)
	}
	balanced(t, p.Stats())
}

// TestLargeUpdateMetadataGoesInChunks: an UpdateMetadata with more
// partitions than Config.MaxPartitionsPerRequest reaches the broker as
// several requests within the limit; only the last carries the set's
// offset, so the broker reports it only once it has every partition.
func TestLargeUpdateMetadataGoesInChunks(t *testing.T) {
	a := startAgent(t, broker.Config{BrokerID: 1})
	bk := newBook()
	bk.set(1, a.Addr())
	p := newPool(t, bk, sender.Config{MaxPartitionsPerRequest: 4})
	live := []controller.LiveBroker{{ID: 1, Endpoints: endpoint(a.Addr())}}
	var parts []controller.PartitionState
	for i := int32(0); i < 10; i++ {
		parts = append(parts, ps("t", topicID, i, 1, 1, 1))
	}
	p.Send(controller.Requests{Broker: 1, UpdateMetadata: &controller.UpdateMetadata{Header: hdr(1, 7), Partitions: parts, LiveBrokers: live}})
	waitFor(t, "the set delivered", func() bool { return a.Status().MetadataOffset == 7 })
	if n := a.NumPartitions(); n != 10 {
		t.Fatalf("%d partitions cached, want 10", n)
	}
	var offsets []uint64
	perRequest := map[uint64]int{}
	seq := uint64(0)
	for _, r := range a.ControlLog() {
		if r.Partition < 0 {
			seq++
			offsets = append(offsets, r.MetadataOffset)
			continue
		}
		perRequest[seq]++
	}
	if !slices.Equal(offsets, []uint64{0, 0, 7}) {
		t.Fatalf("request offsets %v, want three requests with the set's offset on the last", offsets)
	}
	for i, n := range perRequest {
		if n > 4 {
			t.Fatalf("request %d carried %d partitions, more than 4", i, n)
		}
	}
	balanced(t, p.Stats())
}
