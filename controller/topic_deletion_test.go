package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// newResponderHarness is a harness whose brokers confirm every deletion
// at once (see deleteResponder); what they are sent is still recorded.
func newResponderHarness(t testing.TB) (*harness, *deleteResponder) {
	h := &harness{t: t, clock: &fakeClock{now: time.Unix(1_700_000_000, 0)}, sender: NewRecordingSender(), epochs: map[int32]int64{}, ctx: context.Background()}
	h.fsm = fsm.New(fsm.Options{Halt: func(err error) { t.Errorf("fsm halted: %v", err) }})
	h.log = NewMemLog(h.fsm)
	resp := newDeleteResponder(h.sender)
	logger := hclog.NewNullLogger()
	if testing.Verbose() {
		logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Name: "test"})
	}
	h.c = New(Config{NodeID: 1, FSM: h.fsm, Log: h.log, Sender: resp, Clock: h.clock, Logger: logger, SessionTimeout: time.Hour})
	resp.c.Store(h.c)
	h.c.Activate()
	if err := h.c.WaitReady(h.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.c.Deactivate)
	return h, resp
}

func topicExists(h *harness, name string) bool {
	var ok bool
	h.fsm.View(func(im *fsm.Image) { ok = im.TopicByName(name) != nil })
	return ok
}

func TestDeleteTopicsRequestErrors(t *testing.T) {
	h := newHarness(t)
	h.register(1, "")
	id := admTopic(h, "a", []int32{1})
	res := h.c.DeleteTopics(h.ctx, []DeleteTopic{
		{Name: "a", TopicID: id},     // both
		{},                           // neither
		{Name: "dup"}, {Name: "dup"}, // twice by name
		{TopicID: id}, {TopicID: id}, // twice by id
		{Name: "nosuch"},                  // unknown name
		{TopicID: rl.TopicID{1, 2, 3, 4}}, // unknown id
	})
	want := []*kerr.Error{kerr.InvalidRequest, kerr.InvalidRequest, kerr.InvalidRequest, kerr.InvalidRequest,
		kerr.InvalidRequest, kerr.InvalidRequest, kerr.UnknownTopicOrPartition, kerr.UnknownTopicID}
	for i, w := range want {
		if !errors.Is(res[i].Err, w) {
			t.Errorf("request %d: got %v, want %s", i, res[i].Err, w.Message)
		}
	}
	if !topicExists(h, "a") {
		t.Fatal("a refused request deleted the topic")
	}
	h.fsm.View(func(im *fsm.Image) {
		if im.TopicByName("a").Deleting {
			t.Fatal("a refused request queued the topic for deletion")
		}
	})
}

func TestDeleteTopicsNotController(t *testing.T) {
	h := newHarness(t)
	h.register(1, "")
	admTopic(h, "a", []int32{1})
	h.c.Deactivate()
	res := h.c.DeleteTopics(h.ctx, []DeleteTopic{{Name: "a"}})
	if !errors.Is(res[0].Err, kerr.NotController) {
		t.Fatalf("got %v, want NOT_CONTROLLER", res[0].Err)
	}
	// Answers reaching a node that is not active are dropped quietly.
	h.c.HandleStopReplicaResponse(1, []StopReplicaResult{{Topic: "a"}})
}

// TestDeleteTopicsEndToEnd deletes topics with brokers that confirm at
// once, and checks the result by id, the answers, and that each broker was
// told to delete exactly its replicas.
func TestDeleteTopicsEndToEnd(t *testing.T) {
	h, resp := newResponderHarness(t)
	for b := int32(1); b <= 3; b++ {
		h.register(b, "")
	}
	ids := map[string]rl.TopicID{}
	for i := 0; i < 5; i++ {
		name := fmt.Sprintf("t%d", i)
		ids[name] = admTopic(h, name, []int32{1, 2, 3}, []int32{2, 3, 1})
	}
	var req []DeleteTopic
	for i := 0; i < 5; i++ {
		name := fmt.Sprintf("t%d", i)
		if i%2 == 0 {
			req = append(req, DeleteTopic{Name: name})
		} else {
			req = append(req, DeleteTopic{TopicID: ids[name]})
		}
	}
	res := h.c.DeleteTopics(h.ctx, req)
	for i, r := range res {
		name := fmt.Sprintf("t%d", i)
		if r.Err != nil || r.Name != name || r.TopicID != ids[name] {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	waitFor(t, 10*time.Second, "every topic removed", func() bool {
		var n int
		h.fsm.View(func(im *fsm.Image) { n = im.NumTopics() + im.NumPartitions() })
		return n == 0
	})
	if got := resp.answered.Load(); got != 5*2*3 {
		t.Fatalf("%d replica deletions confirmed, want 30", got)
	}
	for b := int32(1); b <= 3; b++ {
		deletes := 0
		for _, r := range h.sender.Sent(b) {
			if r.StopReplica != nil {
				for _, p := range r.StopReplica.Partitions {
					if p.Delete {
						deletes++
					}
				}
			}
		}
		if deletes != 10 {
			t.Errorf("broker %d was told to delete %d replicas, want 10", b, deletes)
		}
	}
	// The names are free again, under new ids.
	for i := 0; i < 5; i++ {
		name := fmt.Sprintf("t%d", i)
		if id := admTopic(h, name, []int32{1}); id == ids[name] {
			t.Fatalf("%s re-created with its old id", name)
		}
	}
}

// TestDeleteTopicMidReassignment deletes a topic whose partition is being
// reassigned: every replica, old and new, is deleted, and the reassignment
// is no longer listed.
func TestDeleteTopicMidReassignment(t *testing.T) {
	h, _ := newResponderHarness(t)
	for b := int32(1); b <= 4; b++ {
		h.register(b, "")
	}
	admTopic(h, "m", []int32{1, 2, 3})
	if r := h.c.AlterPartitionReassignments(h.ctx, []Reassign{{Topic: "m", Replicas: []int32{2, 3, 4}}}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	var listed int
	h.fsm.View(func(im *fsm.Image) { listed = len(ListReassignments(im, nil)) })
	if listed != 1 {
		t.Fatalf("%d reassignments listed, want 1", listed)
	}
	if r := h.c.DeleteTopics(h.ctx, []DeleteTopic{{Name: "m"}}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	h.fsm.View(func(im *fsm.Image) { listed = len(ListReassignments(im, nil)) })
	if listed != 0 {
		t.Fatalf("a topic being deleted still lists its reassignment")
	}
	if r := h.c.AlterPartitionReassignments(h.ctx, []Reassign{{Topic: "m"}}); !errors.Is(r[0].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("cancel on a topic being deleted: %v", r[0].Err)
	}
	waitFor(t, 10*time.Second, "topic removed", func() bool { return !topicExists(h, "m") })
}

// TestStopReplicaResponseOnlyMovesStartedReplicas checks that answers for
// replicas not waiting for one change nothing.
func TestStopReplicaResponseOnlyMovesStartedReplicas(t *testing.T) {
	h := newHarness(t)
	for b := int32(1); b <= 2; b++ {
		h.register(b, "")
	}
	admTopic(h, "live", []int32{1, 2})
	before := admSnap(h)
	h.c.HandleStopReplicaResponse(1, []StopReplicaResult{{Topic: "live", Partition: 0}, {Topic: "nosuch", Partition: 0}, {Topic: "live", Partition: 9}})
	// The answer is an event: a later call's round comes after it.
	if err := h.c.CheckSessions(h.ctx); err != nil {
		t.Fatal(err)
	}
	if after := admSnap(h); after != before {
		t.Fatal("a stale answer changed the image")
	}
}
