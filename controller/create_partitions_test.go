package controller

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// cpSetup is three live brokers and topic "t": two partitions, RF 2.
func cpSetup(t *testing.T) *harness {
	h := newHarness(t)
	for id := int32(1); id <= 3; id++ {
		h.register(id, "")
	}
	admTopic(h, "t", []int32{2, 3}, []int32{3, 1})
	return h
}

func cpCount(h *harness, name string) int32 {
	ref := admRef(h, name, 0)
	var n int32
	h.fsm.View(func(im *fsm.Image) { n = im.PartitionCount(ref.id) })
	return n
}

func TestCreatePartitionsRefused(t *testing.T) {
	cases := []struct {
		name  string
		setup func(h *harness)
		reqs  []CreatePartitions
		want  []*kerr.Error
		msg   string
		// validate asks for validateOnly.
		validate bool
	}{
		{name: "unknown topic", reqs: []CreatePartitions{{Topic: "nope", Count: 3}},
			want: []*kerr.Error{kerr.UnknownTopicOrPartition}, msg: "nope"},
		{name: "topic being deleted", setup: func(h *harness) {
			admRun(h, func(m *managers, w *work) error {
				return w.stageEach(&rl.BeginDeleteTopic{TopicID: w.img().TopicByName("t").ID})
			})
		}, reqs: []CreatePartitions{{Topic: "t", Count: 3}}, want: []*kerr.Error{kerr.UnknownTopicOrPartition}},
		{name: "same count", reqs: []CreatePartitions{{Topic: "t", Count: 2}},
			want: []*kerr.Error{kerr.InvalidPartitions}, msg: "has 2 partitions and 2 were requested"},
		{name: "fewer", reqs: []CreatePartitions{{Topic: "t", Count: 1}},
			want: []*kerr.Error{kerr.InvalidPartitions}, msg: "has 2 partitions and 1 were requested"},
		{name: "negative", reqs: []CreatePartitions{{Topic: "t", Count: -1}},
			want: []*kerr.Error{kerr.InvalidPartitions}},
		{name: "too many at once", reqs: []CreatePartitions{{Topic: "t", Count: 1 << 30}},
			want: []*kerr.Error{kerr.InvalidPartitions}, msg: "the limit is"},
		{name: "assignment too short", reqs: []CreatePartitions{{Topic: "t", Count: 4, Assignment: [][]int32{{1, 2}}}},
			want: []*kerr.Error{kerr.InvalidReplicaAssignment}, msg: "adding 2 partitions (from 2 to 4) but 1 replica lists"},
		{name: "assignment too long", reqs: []CreatePartitions{{Topic: "t", Count: 3, Assignment: [][]int32{{1, 2}, {2, 3}}}},
			want: []*kerr.Error{kerr.InvalidReplicaAssignment}},
		{name: "assignment with another replication factor", reqs: []CreatePartitions{{Topic: "t", Count: 3, Assignment: [][]int32{{1, 2, 3}}}},
			want: []*kerr.Error{kerr.InvalidReplicaAssignment}, msg: "partition 2 has 3 replicas"},
		{name: "assignment with an unknown broker", reqs: []CreatePartitions{{Topic: "t", Count: 3, Assignment: [][]int32{{1, 9}}}},
			want: []*kerr.Error{kerr.InvalidReplicaAssignment}, msg: "broker 9"},
		{name: "assignment with a broker twice", reqs: []CreatePartitions{{Topic: "t", Count: 3, Assignment: [][]int32{{1, 1}}}},
			want: []*kerr.Error{kerr.InvalidReplicaAssignment}, msg: "more than once"},
		{name: "too few live brokers", setup: func(h *harness) { admFence(h, 3); admFence(h, 2) },
			reqs: []CreatePartitions{{Topic: "t", Count: 3}}, want: []*kerr.Error{kerr.InvalidReplicationFactor}, msg: "replication factor 2"},
		{name: "brokers in controlled shutdown do not count", setup: func(h *harness) { admShutdown(h, 3); admShutdown(h, 2) },
			reqs: []CreatePartitions{{Topic: "t", Count: 3}}, want: []*kerr.Error{kerr.InvalidReplicationFactor}},
		{name: "topic named twice", reqs: []CreatePartitions{{Topic: "t", Count: 3}, {Topic: "t", Count: 4}},
			want: []*kerr.Error{kerr.InvalidRequest, kerr.InvalidRequest}, msg: "more than once"},
		{name: "validate only", reqs: []CreatePartitions{{Topic: "t", Count: 5}}, want: []*kerr.Error{nil}, validate: true},
		{name: "validate only still checks", reqs: []CreatePartitions{{Topic: "t", Count: 5, Assignment: [][]int32{{1, 2}}}},
			want: []*kerr.Error{kerr.InvalidReplicaAssignment}, validate: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := cpSetup(t)
			if tc.setup != nil {
				tc.setup(h)
			}
			before := admSnap(h)
			res := h.c.CreatePartitions(h.ctx, tc.reqs, tc.validate)
			if len(res) != len(tc.reqs) {
				t.Fatalf("%d results for %d topics", len(res), len(tc.reqs))
			}
			for i, r := range res {
				if r.Topic != tc.reqs[i].Topic {
					t.Fatalf("result %d names %q", i, r.Topic)
				}
				admCode(t, r.Topic, r.Err, tc.want[i])
				if r.Err != nil && !strings.Contains(r.Err.Error(), tc.msg) {
					t.Fatalf("message %q does not mention %q", r.Err, tc.msg)
				}
			}
			admUnchanged(t, h, before)
		})
	}
}

func TestCreatePartitionsPlaced(t *testing.T) {
	cases := []struct {
		name   string
		req    CreatePartitions
		expect func(h *harness) [][]int32
	}{
		{name: "explicit", req: CreatePartitions{Topic: "t", Count: 4, Assignment: [][]int32{{1, 2}, {3, 2}}},
			expect: func(*harness) [][]int32 { return [][]int32{{1, 2}, {3, 2}} }},
		{name: "placed by the controller, continuing the layout", req: CreatePartitions{Topic: "t", Count: 5},
			expect: func(h *harness) [][]int32 {
				brokers := []BrokerInfo{{ID: 1}, {ID: 2}, {ID: 3}}
				a, err := AssignReplicas(brokers, 3, 2, ContinuationStartIndex(brokers, 2), 2)
				if err != nil {
					h.t.Fatal(err)
				}
				return a
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := cpSetup(t)
			h.sender.Reset()
			res := h.c.CreatePartitions(h.ctx, []CreatePartitions{tc.req}, false)
			if res[0].Err != nil {
				t.Fatal(res[0].Err)
			}
			if n := cpCount(h, "t"); n != tc.req.Count {
				t.Fatalf("topic has %d partitions, want %d", n, tc.req.Count)
			}
			want := tc.expect(h)
			for i, reps := range want {
				p := h.partition("t", 2+int32(i))
				if !slices.Equal(p.Replicas, reps) {
					t.Fatalf("partition %d replicas %v, want %v", 2+i, p.Replicas, reps)
				}
				if p.Leader != reps[0] || !slices.Equal(p.ISR, reps) || p.State != rl.OnlinePartition {
					t.Fatalf("partition %d not online: %+v", 2+i, p)
				}
				for _, b := range reps {
					if p.ReplicaState(b) != rl.OnlineReplica {
						t.Fatalf("partition %d replica %d is %s", 2+i, b, p.ReplicaState(b))
					}
					found := false
					for _, r := range h.sender.Sent(b) {
						if r.LeaderAndIsr == nil {
							continue
						}
						for _, ps := range r.LeaderAndIsr.Partitions {
							found = found || (ps.Partition == 2+int32(i) && ps.IsNew)
						}
					}
					if !found {
						t.Fatalf("broker %d got no LeaderAndIsr for new partition %d", b, 2+i)
					}
				}
			}
			if p := h.partition("t", 0); !slices.Equal(p.Replicas, []int32{2, 3}) {
				t.Fatalf("existing partition changed: %+v", p)
			}
		})
	}
}

// One bad topic does not hold back another in the same request.
func TestCreatePartitionsIndependent(t *testing.T) {
	h := cpSetup(t)
	admTopic(h, "u", []int32{1})
	res := h.c.CreatePartitions(h.ctx, []CreatePartitions{{Topic: "t", Count: 1}, {Topic: "u", Count: 3}}, false)
	admCode(t, "t", res[0].Err, kerr.InvalidPartitions)
	admCode(t, "u", res[1].Err, nil)
	if cpCount(h, "t") != 2 || cpCount(h, "u") != 3 {
		t.Fatalf("counts t=%d u=%d", cpCount(h, "t"), cpCount(h, "u"))
	}
	if p := h.partition("u", 2); len(p.Replicas) != 1 {
		t.Fatalf("u-2 replicas %v: replication factor not kept", p.Replicas)
	}
}

func TestCreatePartitionsNotController(t *testing.T) {
	h := cpSetup(t)
	h.c.Deactivate()
	before := admSnap(h)
	res := h.c.CreatePartitions(h.ctx, []CreatePartitions{{Topic: "t", Count: 3}}, false)
	admCode(t, "inactive", res[0].Err, kerr.NotController)
	admUnchanged(t, h, before)
}
