package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ctrlquorum/ctrlquorum/fsm"
)

// TestBrokerSlicesChangeNothing checks that taking a broker's partitions
// through their transitions a slice at a time ends where one pass over
// all of them does: the same partitions (leader, epochs, ISR, replica and
// partition states) and the same control requests for every broker,
// for a controlled shutdown and then a fence.
func TestBrokerSlicesChangeNothing(t *testing.T) {
	run := func(slice int) (image string, sent map[int32]string) {
		saved := brokerSlice
		brokerSlice = slice
		defer func() { brokerSlice = saved }()
		h := newHarness(t)
		for id := int32(1); id <= 6; id++ {
			h.register(id, "")
		}
		h.loadImage(6_000, 6) // broker 1 hosts 3 000 replicas and leads 1 000
		h.sender.Reset()
		r, err := h.c.Heartbeat(context.Background(), Heartbeat{BrokerID: 1, BrokerEpoch: h.epochs[1], MetadataOffset: h.log.Index(), WantShutDown: true})
		if err != nil || !r.ShouldShutDown {
			t.Fatalf("controlled shutdown: %+v %v", r, err)
		}
		if _, _, err := h.c.submit(context.Background(), "fence", func(m *managers, w *work) (eventOutcome, error) {
			return answer(nil, m.cluster.fence(w, w.img().Broker(3)))
		}, nil); err != nil {
			t.Fatal(err)
		}
		return dumpPartitions(h.fsm), dumpSent(h.sender)
	}
	wantImage, wantSent := run(1 << 30)
	gotImage, gotSent := run(brokerSlice)
	if gotImage != wantImage {
		t.Errorf("partitions differ after slicing:\n%s", firstDiff(gotImage, wantImage))
	}
	for b := int32(1); b <= 6; b++ {
		if gotSent[b] != wantSent[b] {
			t.Errorf("broker %d was sent something else after slicing:\n%s", b, firstDiff(gotSent[b], wantSent[b]))
		}
	}
	if len(wantSent[2]) == 0 {
		t.Fatal("broker 2 was sent nothing: the test exercises nothing")
	}
}

// dumpPartitions lists every partition without the index of its last
// change (which moves with the number of records).
func dumpPartitions(f *fsm.FSM) string {
	var lines []string
	f.View(func(im *fsm.Image) {
		im.ForEachTopic(func(t *fsm.Topic) bool {
			for i := int32(0); i < im.PartitionCount(t.ID); i++ {
				p := im.Partition(t.ID, i)
				lines = append(lines, fmt.Sprintf("%s/%d leader=%d le=%d pe=%d isr=%v replicas=%v states=%v %v",
					t.Name, i, p.Leader, p.LeaderEpoch, p.PartitionEpoch, p.ISR, p.Replicas, p.ReplicaStates, p.State))
			}
			return true
		})
	})
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// dumpSent lists, per broker, the partitions of every LeaderAndIsr and
// StopReplica it was sent, sorted (a slice at a time may split one
// request into several).
func dumpSent(s *RecordingSender) map[int32]string {
	out := map[int32]string{}
	for _, b := range s.Brokers() {
		var lines []string
		for _, r := range s.Sent(b) {
			if r.LeaderAndIsr != nil {
				for _, ps := range r.LeaderAndIsr.Partitions {
					lines = append(lines, fmt.Sprintf("LeaderAndIsr %s/%d leader=%d le=%d pe=%d isr=%v new=%v", ps.Topic, ps.Partition, ps.Leader, ps.LeaderEpoch, ps.PartitionEpoch, ps.ISR, ps.IsNew))
				}
			}
			if r.StopReplica != nil {
				for _, sp := range r.StopReplica.Partitions {
					lines = append(lines, fmt.Sprintf("stop %s/%d le=%d delete=%v", sp.Topic, sp.Partition, sp.LeaderEpoch, sp.Delete))
				}
			}
			if r.UpdateMetadata != nil {
				for _, ps := range r.UpdateMetadata.Partitions {
					lines = append(lines, fmt.Sprintf("UpdateMetadata %s/%d leader=%d le=%d isr=%v", ps.Topic, ps.Partition, ps.Leader, ps.LeaderEpoch, ps.ISR))
				}
			}
		}
		slices.Sort(lines)
		out[b] = strings.Join(lines, "\n")
	}
	return out
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d: got %q, want %q", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("got %d lines, want %d", len(g), len(w))
}
