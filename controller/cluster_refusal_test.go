package controller

import (
	"fmt"
	"slices"
	"testing"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// addBrokerAt is addBroker for a broker that registers a listener at
// 127.0.0.<id>:9092, with incarnation inc.
func (e *managerEnv) addBrokerAt(id int32, inc byte) int64 {
	e.t.Helper()
	return e.registerAndUnfence(BrokerRegistration{BrokerID: id, IncarnationID: rl.IncarnationID{byte(id), inc},
		Endpoints: []rl.Endpoint{{Name: "PLAINTEXT", Host: fmt.Sprintf("127.0.0.%d", id), Port: 9092}}})
}

func recordStrings(w *work) []string {
	var out []string
	for _, r := range w.records() {
		out = append(out, fmt.Sprintf("%T %+v", r, r))
	}
	return out
}

// TestClusterManagerListenerRefused: a refusal of a broker's registered
// listener at its current epoch stages exactly what its session expiry
// would (the fence, the re-election of what it led, its replicas
// offline); a refusal of an earlier epoch (the broker restarted and
// registered again), of another address, or of a broker fenced already
// stages nothing; a broker in controlled shutdown is fenced with the
// shutdown named as the outcome.
func TestClusterManagerListenerRefused(t *testing.T) {
	e := newManagerEnv(t)
	cm := e.m.cluster
	epochs := map[int32]int64{}
	for id := int32(1); id <= 3; id++ {
		epochs[id] = e.addBrokerAt(id, 1)
	}
	e.run(func(w *work) error {
		_, err := e.m.replication.createTopic(w, CreateTopic{Name: "orders", NumPartitions: 3, ReplicationFactor: 3}, false)
		return err
	})
	led := 0
	for p := int32(0); p < 3; p++ {
		if e.partition("orders", p).Leader == 1 {
			led++
		}
	}
	if led == 0 {
		t.Fatal("broker 1 leads nothing: the test would show no re-election")
	}

	refuse := func(r ListenerRefusal) (*work, RefusalOutcome) {
		t.Helper()
		var res result[RefusalOutcome]
		w, err := e.call(func(w *work) (err error) { res, err = cm.listenerRefused(w, r); return err })
		if err != nil {
			t.Fatalf("refusal %+v: %v", r, err)
		}
		if len(res.sessions) != 0 || len(res.committed) != 0 || res.endRound {
			t.Fatalf("refusal %+v changes sessions: %+v", r, res.effects)
		}
		return w, res.response
	}
	at := ListenerRefusal{BrokerID: 1, BrokerEpoch: epochs[1], Addr: "127.0.0.1:9092"}

	// What the session check stages once broker 1's session has run out
	// (broker 2 and 3 renewed theirs).
	saved := e.now
	e.now = e.now.Add(managerEnvSessionTimeout)
	for id := int32(2); id <= 3; id++ {
		var hb result[HeartbeatResponse]
		e.run(func(w *work) (err error) {
			hb, err = cm.heartbeat(w, Heartbeat{BrokerID: id, BrokerEpoch: epochs[id], MetadataOffset: e.fsm.AppliedIndex()})
			return err
		})
		e.joined(hb.effects)
	}
	expiry, err := e.call(func(w *work) error { _, err := cm.checkSessions(w); return err })
	if err != nil {
		t.Fatal(err)
	}
	e.now = saved

	w, out := refuse(at)
	if out != RefusalFenced {
		t.Fatalf("refusal at the current epoch: %s", out)
	}
	got, want := recordStrings(w), recordStrings(expiry)
	if !slices.Contains(want, fmt.Sprintf("%T %+v", &rl.FenceBroker{}, &rl.FenceBroker{BrokerID: 1, BrokerEpoch: epochs[1]})) {
		t.Fatalf("the session expiry fenced something else: %v", want)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("refusal staged\n%v\nsession expiry staged\n%v", got, want)
	}
	if !w.plan.updateMetadataToAll || !slices.Equal(keysOf(plannedLeaderAndIsr(w)), keysOf(plannedLeaderAndIsr(expiry))) {
		t.Fatalf("refusal plan differs from the expiry's: %v / %v", plannedLeaderAndIsr(w), plannedLeaderAndIsr(expiry))
	}

	// Not the registered listener, or not the current epoch: nothing.
	for _, r := range []ListenerRefusal{
		{BrokerID: 1, BrokerEpoch: epochs[1], Addr: "127.0.0.1:9093"},
		{BrokerID: 1, BrokerEpoch: epochs[1] - 1, Addr: at.Addr},
		{BrokerID: 9, BrokerEpoch: epochs[1], Addr: at.Addr},
	} {
		w, out := refuse(r)
		if len(w.records()) != 0 || !w.plan.empty() || (out != RefusalOtherAddress && out != RefusalStale) {
			t.Fatalf("refusal %+v: %s, staged %s", r, out, recordTypes(w))
		}
	}

	// The fence commits; broker 1 restarts and registers again, and a
	// refusal about its old process is handled after that (a second
	// probe's): the new incarnation is not fenced by it.
	e.replay(w)
	e.addBrokerAt(1, 2)
	w, out = refuse(at)
	if out != RefusalStale || len(w.records()) != 0 || !w.plan.empty() {
		t.Fatalf("stale refusal after re-registration: %s, staged %s", out, recordTypes(w))
	}
	if e.broker(1).Fenced {
		t.Fatal("the new incarnation is fenced")
	}

	// Broker 2 asks for a controlled shutdown, then stops: fenced, as a
	// clean stop.
	e.run(func(w *work) error {
		_, err := cm.heartbeat(w, Heartbeat{BrokerID: 2, BrokerEpoch: epochs[2], MetadataOffset: e.fsm.AppliedIndex(), WantShutDown: true})
		return err
	})
	w, out = refuse(ListenerRefusal{BrokerID: 2, BrokerEpoch: epochs[2], Addr: "127.0.0.2:9092"})
	if out != RefusalFencedAfterShutdown || recordTypes(w) == "" || w.records()[0].Type() != rl.TypeFenceBroker {
		t.Fatalf("refusal after controlled shutdown: %s, staged %s", out, recordTypes(w))
	}
	e.replay(w)
	if !e.broker(2).Fenced {
		t.Fatal("broker 2 not fenced")
	}
	// Fenced already: nothing.
	w, out = refuse(ListenerRefusal{BrokerID: 2, BrokerEpoch: epochs[2], Addr: "127.0.0.2:9092"})
	if out != RefusalAlreadyFenced || len(w.records()) != 0 {
		t.Fatalf("refusal of a fenced broker: %s, staged %s", out, recordTypes(w))
	}
}

func keysOf(m map[int32][]string) []string {
	var out []string
	for b, ps := range m {
		for _, p := range ps {
			out = append(out, fmt.Sprintf("%d:%s", b, p))
		}
	}
	slices.Sort(out)
	return out
}
