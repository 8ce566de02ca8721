package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// elSetup is three live brokers and topic "t" whose partitions are led by
// their preferred replicas 1, 2 and 3.
func elSetup(t *testing.T) *harness {
	h := newHarness(t)
	for id := int32(1); id <= 3; id++ {
		h.register(id, "")
	}
	admTopic(h, "t", []int32{1, 2, 3}, []int32{2, 3, 1}, []int32{3, 1, 2})
	return h
}

// elImbalance moves t-0's leadership off broker 1 (fenced, then back),
// leaving broker 1 live but out of the ISR.
func elImbalance(h *harness) {
	h.t.Helper()
	admFence(h, 1)
	h.heartbeat(1)
	if p := h.partition("t", 0); p.Leader != 2 || p.InISR(1) || h.broker(1).Fenced {
		h.t.Fatalf("setup: t-0 %+v", p)
	}
}

// elRejoin has t-0's leader add broker 1 back to the ISR.
func elRejoin(h *harness) {
	h.t.Helper()
	p := h.partition("t", 0)
	res, err := h.c.AlterPartition(h.ctx, AlterPartitionRequest{BrokerID: p.Leader, BrokerEpoch: h.epochs[p.Leader], Partitions: []AlterPartitionItem{{
		Topic: "t", LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: append(slices.Clone(p.ISR), 1),
	}}})
	if err != nil || res[0].Err != nil {
		h.t.Fatal(err, res)
	}
}

// elLeaderless leaves topic "u" (replicas 1, 2) with no leader and ISR
// [1], broker 1 fenced and broker 2 live: only an unclean election can
// bring it back.
func elLeaderless(h *harness) {
	h.t.Helper()
	admTopic(h, "u", []int32{1, 2})
	admFence(h, 2)
	admFence(h, 1)
	h.heartbeat(2)
	if p := h.partition("u", 0); p.Leader != rl.NoLeader || !slices.Equal(p.ISR, []int32{1}) || h.broker(2).Fenced {
		h.t.Fatalf("setup: u-0 %+v", p)
	}
}

func elKey(topic string, p int32) string { return fmt.Sprintf("%s-%d", topic, p) }

func TestElectLeaders(t *testing.T) {
	cases := []struct {
		name  string
		setup func(h *harness)
		typ   ElectionType
		parts []TopicPartition
		// want lists every result expected, in order (nil: no error).
		want []string
		errs map[string]*kerr.Error
		// leaders after the call, for the partitions that must change.
		leaders map[string]int32
		same    bool // the image must not change
	}{
		{name: "preferred moves leadership back", setup: func(h *harness) { elImbalance(h); elRejoin(h) },
			typ: PreferredLeaderElection, parts: []TopicPartition{{"t", 0}},
			want: []string{"t-0"}, leaders: map[string]int32{"t-0": 1}},
		{name: "preferred already leads", typ: PreferredLeaderElection, parts: []TopicPartition{{"t", 1}},
			want: []string{"t-1"}, errs: map[string]*kerr.Error{"t-1": kerr.ElectionNotNeeded}, same: true},
		{name: "preferred not in ISR", setup: elImbalance, typ: PreferredLeaderElection, parts: []TopicPartition{{"t", 0}},
			want: []string{"t-0"}, errs: map[string]*kerr.Error{"t-0": kerr.PreferredLeaderNotAvailable}, same: true},
		{name: "preferred fenced", setup: func(h *harness) { admFence(h, 1) }, typ: PreferredLeaderElection, parts: []TopicPartition{{"t", 0}},
			want: []string{"t-0"}, errs: map[string]*kerr.Error{"t-0": kerr.PreferredLeaderNotAvailable}, same: true},
		{name: "unknown topic and partition", typ: PreferredLeaderElection, parts: []TopicPartition{{"nope", 0}, {"t", 9}},
			want: []string{"nope-0", "t-9"}, errs: map[string]*kerr.Error{"nope-0": kerr.UnknownTopicOrPartition, "t-9": kerr.UnknownTopicOrPartition}, same: true},
		{name: "topic being deleted", setup: func(h *harness) {
			admRun(h, func(m *managers, w *work) error {
				return w.stageEach(&rl.BeginDeleteTopic{TopicID: w.img().TopicByName("t").ID})
			})
		}, typ: UncleanLeaderElection, parts: []TopicPartition{{"t", 0}},
			want: []string{"t-0"}, errs: map[string]*kerr.Error{"t-0": kerr.UnknownTopicOrPartition}, same: true},
		{name: "a partition named twice is answered once", setup: func(h *harness) { elImbalance(h); elRejoin(h) },
			typ: PreferredLeaderElection, parts: []TopicPartition{{"t", 0}, {"t", 1}, {"t", 0}},
			want: []string{"t-0", "t-1"}, errs: map[string]*kerr.Error{"t-1": kerr.ElectionNotNeeded}, leaders: map[string]int32{"t-0": 1}},
		{name: "preferred for all: only imbalanced partitions", setup: func(h *harness) { elImbalance(h); elRejoin(h) },
			typ: PreferredLeaderElection, want: []string{"t-0"}, leaders: map[string]int32{"t-0": 1}},
		{name: "preferred for all, all balanced", typ: PreferredLeaderElection, want: nil, same: true},
		{name: "preferred for all reports failures", setup: elImbalance, typ: PreferredLeaderElection,
			want: []string{"t-0"}, errs: map[string]*kerr.Error{"t-0": kerr.PreferredLeaderNotAvailable}, same: true},
		{name: "unclean with a leader", typ: UncleanLeaderElection, parts: []TopicPartition{{"t", 2}},
			want: []string{"t-2"}, errs: map[string]*kerr.Error{"t-2": kerr.ElectionNotNeeded}, same: true},
		{name: "unclean takes a live replica outside the ISR", setup: elLeaderless,
			typ: UncleanLeaderElection, parts: []TopicPartition{{"u", 0}},
			want: []string{"u-0"}, leaders: map[string]int32{"u-0": 2}},
		{name: "unclean for all: only leaderless partitions", setup: elLeaderless,
			typ: UncleanLeaderElection, want: []string{"u-0"}, leaders: map[string]int32{"u-0": 2}},
		{name: "unclean with no live replica", setup: func(h *harness) { elLeaderless(h); admFence(h, 2) },
			typ: UncleanLeaderElection, parts: []TopicPartition{{"u", 0}},
			want: []string{"u-0"}, errs: map[string]*kerr.Error{"u-0": kerr.EligibleLeadersNotAvailable}, same: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := elSetup(t)
			if tc.setup != nil {
				tc.setup(h)
			}
			before := admSnap(h)
			epochs := map[string]int32{}
			for k := range tc.leaders {
				name, p := elSplitKey(t, k)
				epochs[k] = h.partition(name, p).LeaderEpoch
			}
			res, err := h.c.ElectLeaders(h.ctx, tc.typ, tc.parts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range res {
				k := elKey(r.Topic, r.Partition)
				got = append(got, k)
				admCode(t, k, r.Err, tc.errs[k])
				if r.Err != nil && !strings.Contains(r.Err.Error(), k) {
					t.Fatalf("%s: message %q does not name the partition", k, r.Err)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("results for %v, want %v", got, tc.want)
			}
			if tc.same {
				admUnchanged(t, h, before)
			}
			for k, l := range tc.leaders {
				name, p := elSplitKey(t, k)
				q := h.partition(name, p)
				if q.Leader != l || q.LeaderEpoch != epochs[k]+1 || q.State != rl.OnlinePartition {
					t.Fatalf("%s after election: %+v", k, q)
				}
			}
		})
	}
}

func elSplitKey(t *testing.T, k string) (string, int32) {
	i := strings.LastIndexByte(k, '-')
	var p int32
	if _, err := fmt.Sscan(k[i+1:], &p); err != nil {
		t.Fatal(err)
	}
	return k[:i], p
}

func TestElectLeadersPreferredSends(t *testing.T) {
	h := elSetup(t)
	elImbalance(h)
	elRejoin(h)
	isr := h.partition("t", 0).ISR
	h.sender.Reset()
	if _, err := h.c.ElectLeaders(h.ctx, PreferredLeaderElection, []TopicPartition{{"t", 0}}); err != nil {
		t.Fatal(err)
	}
	p := h.partition("t", 0)
	if !slices.Equal(p.ISR, isr) {
		t.Fatalf("preferred election changed the ISR: %v -> %v", isr, p.ISR)
	}
	for _, b := range []int32{1, 2, 3} {
		sent := h.sender.Sent(b)
		if len(sent) != 1 || sent[0].LeaderAndIsr == nil || sent[0].UpdateMetadata == nil {
			t.Fatalf("broker %d was sent %+v", b, sent)
		}
		if ps := sent[0].LeaderAndIsr.Partitions; len(ps) != 1 || ps[0].Leader != 1 || ps[0].LeaderEpoch != p.LeaderEpoch {
			t.Fatalf("broker %d LeaderAndIsr %+v", b, ps)
		}
	}
}

func TestElectLeadersUncleanKeepsLiveISR(t *testing.T) {
	h := elSetup(t)
	// t-0 without a leader while ISR members are live (a state that only
	// a failover in the middle of an election leaves behind).
	admRun(h, func(m *managers, w *work) error {
		ref := admRef(h, "t", 0)
		p := w.img().Partition(ref.id, 0)
		if err := w.stageEach(&rl.PartitionChange{TopicID: ref.id, Partition: 0, PartitionEpoch: p.PartitionEpoch, Set: rl.ChangeLeader, Leader: rl.NoLeader}); err != nil {
			return err
		}
		_, err := m.replication.handlePartitionStateChanges(w, []partRef{ref}, rl.OfflinePartition, 0, nil)
		return err
	})
	admFence(h, 1)
	res, err := h.c.ElectLeaders(h.ctx, UncleanLeaderElection, []TopicPartition{{"t", 0}})
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	if p := h.partition("t", 0); p.Leader != 2 || !slices.Equal(p.ISR, []int32{2, 3}) {
		t.Fatalf("unclean election with a live ISR member: %+v", p)
	}
}

func TestElectLeadersUncleanISR(t *testing.T) {
	h := elSetup(t)
	elLeaderless(h)
	if _, err := h.c.ElectLeaders(h.ctx, UncleanLeaderElection, []TopicPartition{{"u", 0}}); err != nil {
		t.Fatal(err)
	}
	if p := h.partition("u", 0); !slices.Equal(p.ISR, []int32{2}) {
		t.Fatalf("unclean leader's ISR %v, want only itself", p.ISR)
	}
}

func TestElectLeadersRequestErrors(t *testing.T) {
	h := elSetup(t)
	before := admSnap(h)
	_, err := h.c.ElectLeaders(h.ctx, ElectionType(5), nil)
	admCode(t, "unknown type", err, kerr.InvalidRequest)
	h.c.Deactivate()
	_, err = h.c.ElectLeaders(h.ctx, PreferredLeaderElection, nil)
	admCode(t, "inactive", err, kerr.NotController)
	admUnchanged(t, h, before)
}
