package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// The *_manager_test.go files call handlers directly: no loop, log, queue
// or clock. managerEnv is what they need instead: an image and a term's
// managers. A test calls a handler with a work over the image, checks
// what it returns (the response, the records it staged, the plan, the
// effects), and replays the records into the image as the log would.

type managerEnv struct {
	t   *testing.T
	fsm *fsm.FSM
	m   *managers
	now time.Time
}

const managerEnvSessionTimeout = 10 * time.Second

func newManagerEnv(t *testing.T) *managerEnv {
	t.Helper()
	return &managerEnv{
		t:   t,
		fsm: fsm.New(fsm.Options{Halt: func(err error) { t.Errorf("fsm halted: %v", err) }}),
		m:   newManagers(1, managerEnvSessionTimeout),
		now: time.Unix(1_700_000_000, 0),
	}
}

// call runs fn with a work over the committed image, as the loop runs a
// round's first event, and returns the work without replaying it.
func (e *managerEnv) call(fn func(w *work) error) (*work, error) {
	var w *work
	var err error
	e.fsm.View(func(im *fsm.Image) {
		w = newWork(fsm.NewTxn(im, im.AppliedIndex()+1), e.now, hclog.NewNullLogger())
		err = fn(w)
	})
	return w, err
}

// run is call for a handler that must succeed, followed by replay.
func (e *managerEnv) run(fn func(w *work) error) *work {
	e.t.Helper()
	w, err := e.call(fn)
	if err != nil {
		e.t.Fatal(err)
	}
	e.replay(w)
	return w
}

// replay applies the records w staged to the image as one log entry, the
// next, and fails the test if the FSM refuses any. It returns the entry's
// index (the applied index when there is nothing to replay).
func (e *managerEnv) replay(w *work) uint64 {
	e.t.Helper()
	if len(w.records()) == 0 {
		return e.fsm.AppliedIndex()
	}
	data, err := rl.EncodeBatch(w.records())
	if err != nil {
		e.t.Fatal(err)
	}
	idx := e.fsm.AppliedIndex() + 1
	res, _ := e.fsm.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}).(*fsm.ApplyResult)
	if res == nil || res.Err() != nil {
		e.t.Fatalf("replaying %s: %v", recordTypes(w), res.Err())
	}
	return idx
}

// joined applies a handler's effects as the loop does when its event
// joins its round, and committed those it applies after the commit.
func (e *managerEnv) joined(ef effects)    { e.m.cluster.sessions.apply(ef.sessions) }
func (e *managerEnv) committed(ef effects) { e.m.cluster.sessions.apply(ef.committed) }

func (e *managerEnv) image(fn func(im *fsm.Image)) { e.fsm.View(fn) }

func (e *managerEnv) broker(id int32) *fsm.Broker {
	var b *fsm.Broker
	e.image(func(im *fsm.Image) { b = im.Broker(id) })
	return b
}

func (e *managerEnv) partition(topic string, p int32) *fsm.Partition {
	e.t.Helper()
	var out *fsm.Partition
	e.image(func(im *fsm.Image) {
		if t := im.TopicByName(topic); t != nil {
			out = im.Partition(t.ID, p)
		}
	})
	if out == nil {
		e.t.Fatalf("no partition %s-%d", topic, p)
	}
	return out
}

// addBroker registers broker id and unfences it with a caught-up
// heartbeat, through the cluster manager's handlers, and returns its
// epoch.
func (e *managerEnv) addBroker(id int32, rack string) int64 {
	e.t.Helper()
	return e.registerAndUnfence(BrokerRegistration{BrokerID: id, IncarnationID: rl.IncarnationID{byte(id), 1}, Rack: rack})
}

// registerAndUnfence registers r and unfences the broker with a
// caught-up heartbeat, and returns its epoch.
func (e *managerEnv) registerAndUnfence(r BrokerRegistration) int64 {
	e.t.Helper()
	id := r.BrokerID
	var reg result[int64]
	w, err := e.call(func(w *work) (err error) {
		reg, err = e.m.cluster.register(w, r)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	epoch := int64(e.replay(w))
	e.joined(reg.effects)
	e.run(func(w *work) error {
		_, err := e.m.cluster.heartbeat(w, Heartbeat{BrokerID: id, BrokerEpoch: epoch, MetadataOffset: uint64(epoch)})
		return err
	})
	return epoch
}

// recordTypes names the records w staged, in order.
func recordTypes(w *work) string {
	var out []string
	for _, r := range w.records() {
		out = append(out, r.Type().String())
	}
	return strings.Join(out, " ")
}

// plannedLeaderAndIsr lists, per broker, the partitions w's plan sends it in
// LeaderAndIsr, as "topic-partition", sorted.
func plannedLeaderAndIsr(w *work) map[int32][]string {
	out := map[int32][]string{}
	for b, items := range w.plan.leaderAndIsrTo {
		for _, it := range items {
			ref := w.plan.updateMetadataPartitions[it>>1]
			out[b] = append(out[b], fmt.Sprintf("%s-%d", ref.name, ref.part))
		}
		slices.Sort(out[b])
		out[b] = slices.Compact(out[b])
	}
	return out
}
