package controller

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

func raHarness(t *testing.T, brokers int32) *harness {
	h := newHarness(t)
	for b := int32(1); b <= brokers; b++ {
		h.register(b, "")
	}
	return h
}

func raAlter(h *harness, reqs ...Reassign) []error {
	h.t.Helper()
	var out []error
	for _, r := range h.c.AlterPartitionReassignments(h.ctx, reqs) {
		out = append(out, r.Err)
	}
	return out
}

// raJoin has the leader of topic-0 add broker b to its ISR.
func raJoin(h *harness, topic string, b int32) {
	h.t.Helper()
	p := h.partition(topic, 0)
	res, err := h.c.AlterPartition(h.ctx, AlterPartitionRequest{BrokerID: p.Leader, BrokerEpoch: h.epochs[p.Leader], Partitions: []AlterPartitionItem{{
		Topic: topic, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: append(slices.Clone(p.ISR), b)}}})
	if err != nil || res[0].Err != nil {
		h.t.Fatal(err, res)
	}
}

func TestReassignRequestErrors(t *testing.T) {
	h := raHarness(t, 3)
	admTopic(h, "r", []int32{1, 2}, []int32{2, 3})
	before := admSnap(h)
	errs := raAlter(h,
		Reassign{Topic: "r", Partition: 0, Replicas: []int32{1, 3}},
		Reassign{Topic: "r", Partition: 0, Replicas: []int32{2, 3}},
		Reassign{Topic: "r", Partition: 1, Replicas: []int32{-1, 2}},
	)
	errs = append(errs, raAlter(h, Reassign{Topic: "r", Partition: 1, Replicas: []int32{}})...)
	want := []*kerr.Error{kerr.InvalidRequest, kerr.InvalidRequest, kerr.InvalidReplicaAssignment, kerr.InvalidReplicaAssignment}
	for i, w := range want {
		if !errors.Is(errs[i], w) {
			t.Errorf("request %d: %v, want %s", i, errs[i], w.Message)
		}
	}
	admUnchanged(t, h, before)
}

// TestCancelRefusedWithoutInSyncReplica: the only in-sync replica left is
// one being added; cancelling would need an unclean election.
func TestCancelRefusedWithoutInSyncReplica(t *testing.T) {
	h := raHarness(t, 5)
	admTopic(h, "r", []int32{1, 2, 3})
	if errs := raAlter(h, Reassign{Topic: "r", Replicas: []int32{4, 5}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	raJoin(h, "r", 4)
	for _, b := range []int32{1, 2, 3} {
		admFence(h, b)
	}
	if p := h.partition("r", 0); p.Leader != 4 || !slices.Equal(p.ISR, []int32{4}) {
		t.Fatalf("setup: %+v", p)
	}
	before := admSnap(h)
	if errs := raAlter(h, Reassign{Topic: "r"}); !errors.Is(errs[0], kerr.InvalidReplicaAssignment) {
		t.Fatalf("cancel: %v, want INVALID_REPLICA_ASSIGNMENT", errs[0])
	}
	admUnchanged(t, h, before)
	// A new target that keeps broker 4 is fine.
	if errs := raAlter(h, Reassign{Topic: "r", Replicas: []int32{4, 1}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	var list []ReassignmentStatus
	h.fsm.View(func(im *fsm.Image) { list = ListReassignments(im, nil) })
	if len(list) != 1 || !slices.Equal(list[0].Replicas, []int32{4, 1, 2, 3}) || !slices.Equal(list[0].Adding, []int32{4}) ||
		!slices.Equal(list[0].Removing, []int32{2, 3}) {
		t.Fatalf("listed %+v", list)
	}
	if p := h.partition("r", 0); p.ReplicaState(5) != rl.ReplicaDeletionIneligible && p.ReplicaState(5) != rl.ReplicaDeletionStarted {
		t.Fatalf("broker 5's dropped replica is %s", p.ReplicaState(5))
	}
}

// TestReassignOntoFencedBroker: a replica added on a fenced broker waits
// as NewReplica; the broker's return brings it online and tells it
// (LeaderAndIsr isNew); once it joins the ISR the move completes.
func TestReassignOntoFencedBroker(t *testing.T) {
	h := raHarness(t, 4)
	admTopic(h, "r", []int32{1, 2, 3})
	admFence(h, 4)
	if errs := raAlter(h, Reassign{Topic: "r", Replicas: []int32{1, 2, 4}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if p := h.partition("r", 0); p.ReplicaState(4) != rl.NewReplica {
		t.Fatalf("replica on the fenced broker is %s", p.ReplicaState(4))
	}
	h.sender.Reset()
	h.heartbeat(4)
	if p := h.partition("r", 0); p.ReplicaState(4) != rl.OnlineReplica {
		t.Fatalf("after the return the replica is %s", p.ReplicaState(4))
	}
	told := false
	for _, r := range h.sender.Sent(4) {
		if r.LeaderAndIsr != nil {
			for _, p := range r.LeaderAndIsr.Partitions {
				told = told || (p.Topic == "r" && p.IsNew && slices.Equal(p.Adding, []int32{4}))
			}
		}
	}
	if !told {
		t.Fatal("the returning broker was not told of its new replica")
	}
	raJoin(h, "r", 4)
	p := h.partition("r", 0)
	if p.ReplicaState(3) != rl.ReplicaDeletionStarted || !slices.Equal(p.ISR, []int32{1, 2, 4}) {
		t.Fatalf("after completion: %+v", p)
	}
}

func TestListReassignmentsFilter(t *testing.T) {
	h := raHarness(t, 4)
	admTopic(h, "a", []int32{1, 2}, []int32{2, 3})
	admTopic(h, "b", []int32{3, 4})
	if errs := raAlter(h, Reassign{Topic: "a", Partition: 1, Replicas: []int32{3, 4}}, Reassign{Topic: "b", Replicas: []int32{1, 4}}); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	var all, some []ReassignmentStatus
	h.fsm.View(func(im *fsm.Image) {
		all = ListReassignments(im, nil)
		some = ListReassignments(im, []TopicPartition{{"b", 0}, {"a", 0}, {"nosuch", 0}, {"b", 0}, {"a", 7}})
	})
	if len(all) != 2 || all[0].Topic != "a" || all[0].Partition != 1 || all[1].Topic != "b" {
		t.Fatalf("all: %+v", all)
	}
	if !slices.Equal(all[0].Replicas, []int32{3, 4, 2}) || !slices.Equal(all[0].Adding, []int32{4}) || !slices.Equal(all[0].Removing, []int32{2}) {
		t.Fatalf("a-1: %+v", all[0])
	}
	if len(some) != 1 || some[0].Topic != "b" {
		t.Fatalf("filtered: %+v", some)
	}
}
