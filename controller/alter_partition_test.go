package controller

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// admTopic creates a topic with an explicit assignment and returns its id.
func admTopic(h *harness, name string, assignment ...[]int32) rl.TopicID {
	h.t.Helper()
	res := h.c.CreateTopics(h.ctx, []CreateTopic{{Name: name, NumPartitions: -1, ReplicationFactor: -1, Assignment: assignment}}, false)
	if res[0].Err != nil {
		h.t.Fatalf("create %q: %v", name, res[0].Err)
	}
	return res[0].TopicID
}

// admState is the state hash and applied index, to show that a refused
// request changed nothing.
type admState struct {
	hash  fsm.StateHash
	index uint64
}

func admSnap(h *harness) admState {
	s, i := h.fsm.StateHash()
	return admState{s, i}
}

func admUnchanged(t *testing.T, h *harness, before admState) {
	t.Helper()
	if after := admSnap(h); after != before {
		t.Fatalf("state changed: index %d -> %d", before.index, after.index)
	}
}

// admFence fences a broker the way it asks for it itself.
func admFence(h *harness, id int32) {
	h.t.Helper()
	if _, err := h.c.Heartbeat(h.ctx, Heartbeat{BrokerID: id, BrokerEpoch: h.epochs[id], MetadataOffset: h.log.Index(), WantFence: true}); err != nil {
		h.t.Fatal(err)
	}
	if !h.broker(id).Fenced {
		h.t.Fatalf("broker %d not fenced", id)
	}
}

// admShutdown puts a broker in controlled shutdown.
func admShutdown(h *harness, id int32) {
	h.t.Helper()
	if _, err := h.c.Heartbeat(h.ctx, Heartbeat{BrokerID: id, BrokerEpoch: h.epochs[id], MetadataOffset: h.log.Index(), WantShutDown: true}); err != nil {
		h.t.Fatal(err)
	}
}

// admRun runs fn as an event on the loop, for setting up states that no
// public call produces directly.
func admRun(h *harness, fn func(m *managers, w *work) error) {
	h.t.Helper()
	if _, _, err := h.c.submit(h.ctx, "test", func(m *managers, w *work) (eventOutcome, error) { return answer(nil, fn(m, w)) }, nil); err != nil {
		h.t.Fatal(err)
	}
}

func admRef(h *harness, name string, p int32) partRef {
	h.t.Helper()
	var ref partRef
	h.fsm.View(func(im *fsm.Image) {
		t := im.TopicByName(name)
		if t == nil {
			h.t.Fatalf("no topic %q", name)
		}
		ref = partRef{id: t.ID, name: name, part: p}
	})
	return ref
}

// admCode checks err against a Kafka error (nil: no error).
func admCode(t *testing.T, what string, err error, want *kerr.Error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("%s: unexpected error %v", what, err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %s", what, err, want.Message)
	}
}

// apSetup is four live brokers and topic "t" with two partitions on
// brokers 1-3, led by brokers 1 and 2, all replicas in sync.
func apSetup(t *testing.T) *harness {
	h := newHarness(t)
	for id := int32(1); id <= 4; id++ {
		h.register(id, "")
	}
	admTopic(h, "t", []int32{1, 2, 3}, []int32{2, 3, 1})
	return h
}

// apShrink is the request broker 1 sends to drop broker 3 from t-0.
func apShrink(h *harness) AlterPartitionRequest {
	p := h.partition("t", 0)
	return AlterPartitionRequest{BrokerID: 1, BrokerEpoch: h.epochs[1], Partitions: []AlterPartitionItem{{
		Topic: "t", Partition: 0, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: []int32{1, 2},
	}}}
}

func TestAlterPartitionRefused(t *testing.T) {
	cases := []struct {
		name string
		// setup runs before the request is built.
		setup  func(h *harness)
		mutate func(h *harness, r *AlterPartitionRequest)
		// top is the request-level error; item the partition's.
		top, item *kerr.Error
		msg       string // the error message must contain it
	}{
		{name: "stale broker epoch", mutate: func(h *harness, r *AlterPartitionRequest) { r.BrokerEpoch-- },
			top: kerr.StaleBrokerEpoch, msg: "broker 1"},
		{name: "unknown broker", mutate: func(h *harness, r *AlterPartitionRequest) { r.BrokerID = 9 },
			top: kerr.StaleBrokerEpoch, msg: "broker 9"},
		{name: "unknown topic name", mutate: func(h *harness, r *AlterPartitionRequest) { r.Partitions[0].Topic = "nope" },
			item: kerr.UnknownTopicOrPartition, msg: "nope"},
		{name: "unknown topic id", mutate: func(h *harness, r *AlterPartitionRequest) { r.Partitions[0].TopicID = rl.TopicID{9, 9} },
			item: kerr.UnknownTopicID},
		{name: "unknown partition", mutate: func(h *harness, r *AlterPartitionRequest) { r.Partitions[0].Partition = 7 },
			item: kerr.UnknownTopicOrPartition, msg: "t-7"},
		{name: "unknown partition by topic id", mutate: func(h *harness, r *AlterPartitionRequest) {
			r.Partitions[0].TopicID = admRef(h, "t", 0).id
			r.Partitions[0].Topic = ""
			r.Partitions[0].Partition = 7
		}, item: kerr.UnknownTopicOrPartition, msg: "t-7"},
		{name: "topic being deleted", setup: func(h *harness) {
			admRun(h, func(m *managers, w *work) error {
				return w.stageEach(&rl.BeginDeleteTopic{TopicID: w.img().TopicByName("t").ID})
			})
		}, item: kerr.UnknownTopicOrPartition},
		{name: "requester is not the leader", mutate: func(h *harness, r *AlterPartitionRequest) {
			r.BrokerID, r.BrokerEpoch = 2, h.epochs[2]
			r.Partitions[0].NewISR = []int32{2, 1}
		}, item: kerr.NotLeaderForPartition, msg: "broker 2 is not the leader"},
		{name: "lower leader epoch", mutate: func(h *harness, r *AlterPartitionRequest) { r.Partitions[0].LeaderEpoch-- },
			item: kerr.FencedLeaderEpoch},
		{name: "higher leader epoch", mutate: func(h *harness, r *AlterPartitionRequest) { r.Partitions[0].LeaderEpoch++ },
			item: kerr.UnknownLeaderEpoch},
		{name: "lower partition epoch", mutate: func(h *harness, r *AlterPartitionRequest) { r.Partitions[0].PartitionEpoch-- },
			item: kerr.InvalidUpdateVersion, msg: "partition epoch"},
		{name: "higher partition epoch", mutate: func(h *harness, r *AlterPartitionRequest) { r.Partitions[0].PartitionEpoch++ },
			item: kerr.InvalidUpdateVersion},
		{name: "ISR member outside the replicas", mutate: func(h *harness, r *AlterPartitionRequest) { r.Partitions[0].NewISR = []int32{1, 4} },
			item: kerr.InvalidRequest, msg: "broker 4"},
		{name: "ISR lists a broker twice", mutate: func(h *harness, r *AlterPartitionRequest) { r.Partitions[0].NewISR = []int32{1, 2, 2} },
			item: kerr.InvalidRequest, msg: "twice"},
		{name: "ISR without the leader", mutate: func(h *harness, r *AlterPartitionRequest) { r.Partitions[0].NewISR = []int32{2, 3} },
			item: kerr.InvalidRequest, msg: "leader 1"},
		{name: "empty ISR", mutate: func(h *harness, r *AlterPartitionRequest) { r.Partitions[0].NewISR = nil },
			item: kerr.InvalidRequest},
		{name: "new member is fenced", setup: func(h *harness) { admFence(h, 3) },
			mutate: func(h *harness, r *AlterPartitionRequest) { r.Partitions[0].NewISR = []int32{1, 2, 3} },
			item:   kerr.IneligibleReplica, msg: "fenced"},
		{name: "new member is shutting down", setup: func(h *harness) { admShutdown(h, 3) },
			mutate: func(h *harness, r *AlterPartitionRequest) { r.Partitions[0].NewISR = []int32{1, 2, 3} },
			item:   kerr.IneligibleReplica, msg: "controlled shutdown"},
		{name: "new member's replica is offline", setup: func(h *harness) {
			admRun(h, func(m *managers, w *work) error {
				_, err := m.replication.handleReplicaStateChanges(w, []replica{{ref: admRef(h, "t", 0), broker: 3}}, rl.OfflineReplica)
				return err
			})
		}, mutate: func(h *harness, r *AlterPartitionRequest) { r.Partitions[0].NewISR = []int32{1, 2, 3} },
			item: kerr.IneligibleReplica, msg: "OfflineReplica"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := apSetup(t)
			if tc.setup != nil {
				tc.setup(h)
			}
			req := apShrink(h)
			if tc.mutate != nil {
				tc.mutate(h, &req)
			}
			before := admSnap(h)
			res, err := h.c.AlterPartition(h.ctx, req)
			admCode(t, "request", err, tc.top)
			if tc.top != nil {
				if res != nil {
					t.Fatalf("results with a request-level error: %+v", res)
				}
				if !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("message %q does not mention %q", err, tc.msg)
				}
			} else {
				if len(res) != 1 {
					t.Fatalf("%d results", len(res))
				}
				admCode(t, "partition", res[0].Err, tc.item)
				if !strings.Contains(res[0].Err.Error(), tc.msg) {
					t.Fatalf("message %q does not mention %q", res[0].Err, tc.msg)
				}
			}
			admUnchanged(t, h, before)
		})
	}
}

func TestAlterPartitionShrinkAndExpand(t *testing.T) {
	h := apSetup(t)
	before := h.partition("t", 0)
	other := h.partition("t", 1)
	h.sender.Reset()
	res, err := h.c.AlterPartition(h.ctx, apShrink(h))
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if r.Topic != "t" || r.TopicID != admRef(h, "t", 0).id || r.Partition != 0 {
		t.Fatalf("result names %q/%s-%d", r.Topic, r.TopicID, r.Partition)
	}
	after := h.partition("t", 0)
	if !slices.Equal(after.ISR, []int32{1, 2}) || after.Leader != 1 || after.LeaderEpoch != before.LeaderEpoch || after.PartitionEpoch != before.PartitionEpoch+1 {
		t.Fatalf("committed %+v (was %+v)", after, before)
	}
	if r.Leader != after.Leader || r.LeaderEpoch != after.LeaderEpoch || r.PartitionEpoch != after.PartitionEpoch || !slices.Equal(r.ISR, after.ISR) {
		t.Fatalf("result %+v does not match committed %+v", r, after)
	}
	if got := h.partition("t", 1); got.PartitionEpoch != other.PartitionEpoch {
		t.Fatalf("other partition changed: %+v", got)
	}
	// Every live replica hears the new ISR; broker 4, not a replica, gets
	// UpdateMetadata only.
	for _, b := range []int32{1, 2, 3} {
		sent := h.sender.Sent(b)
		if len(sent) != 1 || sent[0].LeaderAndIsr == nil || sent[0].UpdateMetadata == nil {
			t.Fatalf("broker %d was sent %+v", b, sent)
		}
		ps := sent[0].LeaderAndIsr.Partitions
		if len(ps) != 1 || ps[0].Partition != 0 || !slices.Equal(ps[0].ISR, []int32{1, 2}) || ps[0].PartitionEpoch != after.PartitionEpoch {
			t.Fatalf("broker %d LeaderAndIsr %+v", b, ps)
		}
	}
	if sent := h.sender.Sent(4); len(sent) != 1 || sent[0].LeaderAndIsr != nil || sent[0].UpdateMetadata == nil {
		t.Fatalf("broker 4 was sent %+v", sent)
	}

	// The same request again is stale now.
	res, err = h.c.AlterPartition(h.ctx, AlterPartitionRequest{BrokerID: 1, BrokerEpoch: h.epochs[1], Partitions: []AlterPartitionItem{{
		Topic: "t", LeaderEpoch: before.LeaderEpoch, PartitionEpoch: before.PartitionEpoch, NewISR: []int32{1, 2},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	admCode(t, "replayed request", res[0].Err, kerr.InvalidUpdateVersion)

	// Broker 3 caught up: the leader adds it back, addressing by id.
	res, err = h.c.AlterPartition(h.ctx, AlterPartitionRequest{BrokerID: 1, BrokerEpoch: h.epochs[1], Partitions: []AlterPartitionItem{{
		TopicID: admRef(h, "t", 0).id, LeaderEpoch: after.LeaderEpoch, PartitionEpoch: after.PartitionEpoch, NewISR: []int32{1, 2, 3},
	}}})
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	if got := h.partition("t", 0); !slices.Equal(got.ISR, []int32{1, 2, 3}) || got.PartitionEpoch != after.PartitionEpoch+1 || res[0].Topic != "t" {
		t.Fatalf("after expand %+v, result %+v", got, res[0])
	}
}

func TestAlterPartitionMixedRequest(t *testing.T) {
	h := apSetup(t)
	p0 := h.partition("t", 0)
	p1 := h.partition("t", 1)
	// Broker 1 leads t-0 but not t-1: t-0 changes, t-1 is refused.
	req := AlterPartitionRequest{BrokerID: 1, BrokerEpoch: h.epochs[1], Partitions: []AlterPartitionItem{
		{Topic: "t", Partition: 1, LeaderEpoch: p1.LeaderEpoch, PartitionEpoch: p1.PartitionEpoch, NewISR: []int32{1}},
		{Topic: "t", Partition: 0, LeaderEpoch: p0.LeaderEpoch, PartitionEpoch: p0.PartitionEpoch, NewISR: []int32{1}},
		{Topic: "gone", Partition: 0, NewISR: []int32{1}},
	}}
	idx := h.log.Index()
	res, err := h.c.AlterPartition(h.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	admCode(t, "t-1", res[0].Err, kerr.NotLeaderForPartition)
	admCode(t, "t-0", res[1].Err, nil)
	admCode(t, "gone-0", res[2].Err, kerr.UnknownTopicOrPartition)
	if res[0].Partition != 1 || res[1].Partition != 0 || res[2].Topic != "gone" {
		t.Fatalf("results out of order: %+v", res)
	}
	if got := h.partition("t", 0); !slices.Equal(got.ISR, []int32{1}) {
		t.Fatalf("t-0 ISR %v", got.ISR)
	}
	if got := h.partition("t", 1); got.PartitionEpoch != p1.PartitionEpoch || !slices.Equal(got.ISR, p1.ISR) {
		t.Fatalf("t-1 changed: %+v", got)
	}
	if n := h.log.Index() - idx; n != 1 {
		t.Fatalf("one request took %d log entries", n)
	}
}

func TestAlterPartitionUnchangedISR(t *testing.T) {
	h := apSetup(t)
	p := h.partition("t", 0)
	before := admSnap(h)
	res, err := h.c.AlterPartition(h.ctx, AlterPartitionRequest{BrokerID: 1, BrokerEpoch: h.epochs[1], Partitions: []AlterPartitionItem{{
		Topic: "t", LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: slices.Clone(p.ISR),
	}}})
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	if res[0].PartitionEpoch != p.PartitionEpoch || !slices.Equal(res[0].ISR, p.ISR) {
		t.Fatalf("result %+v", res[0])
	}
	admUnchanged(t, h, before)
}

// A replica a reassignment is adding is NewReplica until it has caught
// up: it must be able to join the ISR.
func TestAlterPartitionNewReplicaMayJoin(t *testing.T) {
	h := apSetup(t)
	admRun(h, func(m *managers, w *work) error {
		ref := admRef(h, "t", 0)
		p := w.img().Partition(ref.id, 0)
		if err := w.stageEach(&rl.PartitionChange{TopicID: ref.id, Partition: 0, PartitionEpoch: p.PartitionEpoch,
			Set: rl.ChangeReplicas | rl.ChangeReassignment, Replicas: []int32{1, 2, 3, 4}, Adding: []int32{4}}); err != nil {
			return err
		}
		_, err := m.replication.handleReplicaStateChanges(w, []replica{{ref: ref, broker: 4}}, rl.NewReplica)
		return err
	})
	p := h.partition("t", 0)
	if p.ReplicaState(4) != rl.NewReplica {
		t.Fatalf("setup: replica 4 is %s", p.ReplicaState(4))
	}
	res, err := h.c.AlterPartition(h.ctx, AlterPartitionRequest{BrokerID: 1, BrokerEpoch: h.epochs[1], Partitions: []AlterPartitionItem{{
		Topic: "t", LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: []int32{1, 2, 3, 4},
	}}})
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	if got := h.partition("t", 0); !got.InISR(4) {
		t.Fatalf("ISR %v", got.ISR)
	}
}

func TestAlterPartitionNotController(t *testing.T) {
	h := apSetup(t)
	req := apShrink(h)
	h.c.Deactivate()
	before := admSnap(h)
	_, err := h.c.AlterPartition(h.ctx, req)
	admCode(t, "inactive", err, kerr.NotController)
	admUnchanged(t, h, before)
}
