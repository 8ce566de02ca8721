package controller

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// TestClusterManagerRegisterHeartbeatFence: a broker registers (fenced,
// its epoch the index of the entry), is unfenced by a caught-up
// heartbeat, and is fenced when its session runs out; each handler's
// records are replayed into the image, and its session changes applied
// as the loop would.
func TestClusterManagerRegisterHeartbeatFence(t *testing.T) {
	e := newManagerEnv(t)
	cm := e.m.cluster
	reg1 := BrokerRegistration{BrokerID: 1, IncarnationID: rl.IncarnationID{1, 1}, Rack: "a"}

	var reg result[int64]
	w, err := e.call(func(w *work) (err error) { reg, err = cm.register(w, reg1); return err })
	if err != nil {
		t.Fatal(err)
	}
	if got := recordTypes(w); got != "RegisterBroker" {
		t.Fatalf("registration staged %s", got)
	}
	deadline := e.now.Add(managerEnvSessionTimeout)
	if reg.response != -1 || !reg.endRound || !slices.Equal(reg.sessions, []sessionChange{renewal(1, deadline, renewCaughtUp)}) {
		t.Fatalf("registration result %+v", reg)
	}
	if _, ok := cm.sessions.deadline[1]; ok {
		t.Fatal("the handler changed the sessions itself")
	}
	epoch := int64(e.replay(w))
	e.joined(reg.effects)
	if b := e.broker(1); b == nil || b.Epoch != epoch || !b.Fenced || b.Rack != "a" {
		t.Fatalf("broker after the registration: %+v", b)
	}
	if !cm.sessions.alive(1, e.now) {
		t.Fatal("no session after the registration joined its round")
	}

	// The same incarnation again: its epoch back, the session renewed,
	// nothing staged.
	w, err = e.call(func(w *work) (err error) { reg, err = cm.register(w, reg1); return err })
	if err != nil || reg.response != epoch || len(w.records()) != 0 || reg.endRound {
		t.Fatalf("registering again: %+v %v, staged %s", reg, err, recordTypes(w))
	}

	// A heartbeat with the wrong epoch is refused.
	if _, err := e.call(func(w *work) error {
		_, err := cm.heartbeat(w, Heartbeat{BrokerID: 1, BrokerEpoch: epoch + 1})
		return err
	}); ErrorCode(err) != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("stale epoch: %v", err)
	}

	// A caught-up heartbeat unfences it; as a new incarnation it is sent
	// the whole image (a catch-up from offset 0).
	var hb result[HeartbeatResponse]
	w, err = e.call(func(w *work) (err error) {
		hb, err = cm.heartbeat(w, Heartbeat{BrokerID: 1, BrokerEpoch: epoch, MetadataOffset: uint64(epoch)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if hb.response != (HeartbeatResponse{IsCaughtUp: true}) || recordTypes(w) != "UnfenceBroker" {
		t.Fatalf("heartbeat: %+v, staged %s", hb.response, recordTypes(w))
	}
	if from, ok := w.plan.catchUp[1]; !ok || from != 0 || !w.plan.updateMetadataToAll {
		t.Fatalf("heartbeat plan: catch-up %v %v, to all %v", from, ok, w.plan.updateMetadataToAll)
	}
	if len(hb.committed) != 0 {
		t.Fatalf("no catch-up mark to clear, got %+v", hb.committed)
	}
	e.replay(w)
	e.joined(hb.effects)
	if b := e.broker(1); b.Fenced {
		t.Fatal("still fenced after a caught-up heartbeat")
	}

	// Another incarnation while the session is live is refused.
	if _, err := e.call(func(w *work) error {
		_, err := cm.register(w, BrokerRegistration{BrokerID: 1, IncarnationID: rl.IncarnationID{1, 2}})
		return err
	}); ErrorCode(err) != kerr.DuplicateBrokerRegistration.Code {
		t.Fatalf("a new incarnation with the old session live: %v", err)
	}

	// Before the deadline the session check fences nothing; at it, the
	// broker is fenced.
	e.now = deadline.Add(-1)
	checkSessions := func(w *work) error { _, err := cm.checkSessions(w); return err }
	w, err = e.call(checkSessions)
	if err != nil || len(w.records()) != 0 {
		t.Fatalf("session check before the deadline: %v, staged %s", err, recordTypes(w))
	}
	e.now = deadline
	w = e.run(checkSessions)
	if got := recordTypes(w); got != "FenceBroker" || !w.plan.updateMetadataToAll {
		t.Fatalf("session check staged %s", got)
	}
	if b := e.broker(1); !b.Fenced {
		t.Fatal("not fenced after its session ran out")
	}
	// Fenced already: the next check stages nothing.
	w, err = e.call(checkSessions)
	if err != nil || len(w.records()) != 0 {
		t.Fatalf("second session check: %v, staged %s", err, recordTypes(w))
	}
}

// TestClusterManagerCatchUpMark: a new term's activation marks every
// unfenced broker as awaiting its first heartbeat; that heartbeat plans a
// catch-up from the offset it reports and leaves the mark to be cleared
// once its round has committed (effects.committed), not before.
func TestClusterManagerCatchUpMark(t *testing.T) {
	e := newManagerEnv(t)
	epoch := e.addBroker(1, "")
	behind := e.fsm.AppliedIndex()
	e.addBroker(2, "")

	// A new term: fresh managers, the activation's handlers.
	e.m = newManagers(1, managerEnvSessionTimeout)
	cm := e.m.cluster
	var act result[int]
	var ctrl result[int32]
	w := e.run(func(w *work) (err error) {
		if ctrl, err = e.m.quorum.activate(w); err != nil {
			return err
		}
		act = cm.activate(w)
		return nil
	})
	if recordTypes(w) != "ControllerEpoch" || ctrl.epoch != 1 || act.response != 2 || !w.plan.fullUpdateMetadata {
		t.Fatalf("activation: staged %s, epoch %d, %d sessions, full %v", recordTypes(w), ctrl.epoch, act.response, w.plan.fullUpdateMetadata)
	}
	e.joined(act.effects)
	cm.activated(e.fsm.AppliedIndex())
	if !cm.sessions.needCatchUp[1] || !cm.sessions.needCatchUp[2] {
		t.Fatalf("catch-up marks after activation: %v", cm.sessions.needCatchUp)
	}

	var hb result[HeartbeatResponse]
	w = e.run(func(w *work) (err error) {
		hb, err = cm.heartbeat(w, Heartbeat{BrokerID: 1, BrokerEpoch: epoch, MetadataOffset: behind})
		return err
	})
	if from, ok := w.plan.catchUp[1]; !ok || from != behind {
		t.Fatalf("first heartbeat plans no catch-up from %d: %v", behind, w.plan.catchUp)
	}
	if !slices.Equal(hb.committed, []sessionChange{{broker: 1, op: caughtUp}}) {
		t.Fatalf("first heartbeat: committed %+v", hb.committed)
	}
	e.joined(hb.effects)
	if !cm.sessions.needCatchUp[1] {
		t.Fatal("the mark went before the round committed")
	}
	e.committed(hb.effects)
	if cm.sessions.needCatchUp[1] {
		t.Fatal("the mark is still there after the commit")
	}
	w = e.run(func(w *work) (err error) {
		hb, err = cm.heartbeat(w, Heartbeat{BrokerID: 1, BrokerEpoch: epoch, MetadataOffset: behind})
		return err
	})
	if len(w.plan.catchUp) != 0 || len(hb.committed) != 0 {
		t.Fatalf("second heartbeat: catch-up %v, committed %+v", w.plan.catchUp, hb.committed)
	}
}

// TestClusterManagerUnregister: an unfenced broker is fenced and removed
// in one work, and its session forgotten.
func TestClusterManagerUnregister(t *testing.T) {
	e := newManagerEnv(t)
	e.addBroker(1, "")
	var res result[any]
	w := e.run(func(w *work) (err error) { res, err = e.m.cluster.unregister(w, 1); return err })
	if got := recordTypes(w); got != "FenceBroker UnregisterBroker" {
		t.Fatalf("unregistration staged %s", got)
	}
	if e.broker(1) != nil {
		t.Fatal("broker still registered")
	}
	e.joined(res.effects)
	if _, ok := e.m.cluster.sessions.deadline[1]; ok {
		t.Fatal("session kept")
	}
	if _, err := e.call(func(w *work) error { _, err := e.m.cluster.unregister(w, 1); return err }); ErrorCode(err) != kerr.BrokerIDNotRegistered.Code {
		t.Fatalf("unregistering again: %v", err)
	}
}

// TestQuorumManagerRaiseEpoch: an import raises the controller epoch one
// record per step, and every live broker hears of it.
func TestQuorumManagerRaiseEpoch(t *testing.T) {
	e := newManagerEnv(t)
	var res result[int32]
	w := e.run(func(w *work) (err error) { res, err = e.m.quorum.raiseEpoch(w, 3); return err })
	if got := recordTypes(w); got != "ControllerEpoch ControllerEpoch ControllerEpoch" || res.epoch != 3 || !w.plan.updateMetadataToAll {
		t.Fatalf("raise to 3: staged %s, epoch %d", got, res.epoch)
	}
	w = e.run(func(w *work) (err error) { res, err = e.m.quorum.raiseEpoch(w, 2); return err })
	if len(w.records()) != 0 || res.epoch != 0 || res.response != 3 {
		t.Fatalf("raise to 2 from 3: staged %s, %+v", recordTypes(w), res)
	}
}
