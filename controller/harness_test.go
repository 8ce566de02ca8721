package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// fakeClock is a Clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }
func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

// harness is one active controller over an in-memory log.
type harness struct {
	t      testing.TB
	fsm    *fsm.FSM
	log    *MemLog
	sender *RecordingSender
	clock  *fakeClock
	c      *Controller
	epochs map[int32]int64
	ctx    context.Context
}

func newHarness(t testing.TB) *harness {
	h := &harness{t: t, clock: &fakeClock{now: time.Unix(1_700_000_000, 0)}, sender: NewRecordingSender(), epochs: map[int32]int64{}, ctx: context.Background()}
	h.fsm = fsm.New(fsm.Options{Halt: func(err error) { t.Errorf("fsm halted: %v", err) }})
	h.log = NewMemLog(h.fsm)
	h.start()
	return h
}

func (h *harness) start() {
	logger := hclog.NewNullLogger()
	if testing.Verbose() {
		logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Name: "test"})
	}
	h.c = New(Config{NodeID: 1, FSM: h.fsm, Log: h.log, Sender: h.sender, Clock: h.clock, Logger: logger,
		SessionTimeout: time.Hour /* tests expire sessions by moving the clock */})
	h.c.Activate()
	if err := h.c.WaitReady(h.ctx); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(h.c.Deactivate)
}

// register registers broker id and unfences it with a caught-up heartbeat.
func (h *harness) register(id int32, rack string) {
	h.t.Helper()
	e, err := h.c.RegisterBroker(h.ctx, BrokerRegistration{BrokerID: id, IncarnationID: rl.IncarnationID{byte(id), 1}, Rack: rack,
		Endpoints: []rl.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: uint16(9000 + id)}}})
	if err != nil {
		h.t.Fatal(err)
	}
	h.epochs[id] = e
	h.heartbeat(id)
}

func (h *harness) heartbeat(id int32) HeartbeatResponse {
	h.t.Helper()
	r, err := h.c.Heartbeat(h.ctx, Heartbeat{BrokerID: id, BrokerEpoch: h.epochs[id], MetadataOffset: h.log.Index()})
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) partition(name string, p int32) fsm.Partition {
	h.t.Helper()
	var out fsm.Partition
	h.fsm.View(func(im *fsm.Image) {
		tp := im.TopicByName(name)
		if tp == nil {
			h.t.Fatalf("no topic %q", name)
		}
		out = *im.Partition(tp.ID, p)
	})
	return out
}

func (h *harness) broker(id int32) fsm.Broker {
	var out fsm.Broker
	h.fsm.View(func(im *fsm.Image) { out = *im.Broker(id) })
	return out
}

func TestSmokeCreateFenceUnfence(t *testing.T) {
	h := newHarness(t)
	for id := int32(1); id <= 3; id++ {
		h.register(id, "")
	}
	for id := int32(1); id <= 3; id++ {
		if h.broker(id).Fenced {
			t.Fatalf("broker %d still fenced after a caught-up heartbeat", id)
		}
	}
	res := h.c.CreateTopics(h.ctx, []CreateTopic{{Name: "orders", NumPartitions: 3, ReplicationFactor: 3}}, false)
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	p := h.partition("orders", 0)
	if p.Leader != p.Replicas[0] || len(p.ISR) != 3 || p.State != rl.OnlinePartition {
		t.Fatalf("new partition: %+v", p)
	}
	for _, s := range p.ReplicaStates {
		if s != rl.OnlineReplica {
			t.Fatalf("replica states %v", p.ReplicaStates)
		}
	}
	leader := p.Leader
	// The leader's session expires: it is fenced and a new leader elected.
	h.clock.Advance(2 * time.Hour)
	for id := int32(1); id <= 3; id++ {
		if id != leader {
			h.heartbeat(id)
		}
	}
	if err := h.c.CheckSessions(h.ctx); err != nil {
		t.Fatal(err)
	}
	if !h.broker(leader).Fenced {
		t.Fatal("expired broker not fenced")
	}
	q := h.partition("orders", 0)
	if q.Leader == leader || q.Leader == rl.NoLeader || q.LeaderEpoch != p.LeaderEpoch+1 || q.InISR(leader) {
		t.Fatalf("after fence: %+v (was %+v)", q, p)
	}
	if q.ReplicaState(leader) != rl.OfflineReplica {
		t.Fatalf("fenced broker's replica is %s", q.ReplicaState(leader))
	}
	// It comes back: unfenced, replica online.
	h.heartbeat(leader)
	q = h.partition("orders", 0)
	if h.broker(leader).Fenced || q.ReplicaState(leader) != rl.OnlineReplica {
		t.Fatalf("after return: fenced=%v replica=%s", h.broker(leader).Fenced, q.ReplicaState(leader))
	}
	if len(h.sender.Sent(q.Leader)) == 0 {
		t.Fatal("new leader was sent nothing")
	}
}
