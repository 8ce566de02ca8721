package controller

import (
	"testing"
)

// TestCatchUpAfterFailover: a new controller sends no partition state at
// activation; a broker whose first heartbeat reports an offset from before
// some changes gets exactly the partitions changed since, with
// LeaderAndIsr for those it hosts; a broker that is current gets nothing.
func TestCatchUpAfterFailover(t *testing.T) {
	h := newHarness(t)
	for id := int32(1); id <= 3; id++ {
		h.register(id, "")
	}
	if r := h.c.CreateTopics(h.ctx, []CreateTopic{{Name: "early", NumPartitions: 2, ReplicationFactor: -1, Assignment: nil}}, false); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	mark := h.log.Index()
	if r := h.c.CreateTopics(h.ctx, []CreateTopic{{Name: "late", NumPartitions: -1, ReplicationFactor: -1, Assignment: [][]int32{{2, 3}}}}, false); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}

	// Failover: a new activation of the same image.
	h.c.Deactivate()
	h.sender.Reset()
	h.start()
	for _, b := range []int32{1, 2, 3} {
		for _, r := range h.sender.Sent(b) {
			if r.LeaderAndIsr != nil || (r.UpdateMetadata != nil && len(r.UpdateMetadata.Partitions) > 0) {
				t.Fatalf("activation sent partition state to broker %d: %+v", b, r)
			}
		}
	}
	h.sender.Reset()

	// Broker 2 applied up to before "late"; broker 3 is current.
	if _, err := h.c.Heartbeat(h.ctx, Heartbeat{BrokerID: 2, BrokerEpoch: h.epochs[2], MetadataOffset: mark}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.Heartbeat(h.ctx, Heartbeat{BrokerID: 3, BrokerEpoch: h.epochs[3], MetadataOffset: h.log.Index()}); err != nil {
		t.Fatal(err)
	}
	sent2 := h.sender.Sent(2)
	if len(sent2) != 1 || sent2[0].UpdateMetadata == nil || sent2[0].LeaderAndIsr == nil {
		t.Fatalf("broker 2 got %+v", sent2)
	}
	updated := sent2[0].UpdateMetadata.Partitions
	if len(updated) != 1 || updated[0].Topic != "late" {
		t.Fatalf("broker 2's catch-up UpdateMetadata: %+v", updated)
	}
	if led := sent2[0].LeaderAndIsr.Partitions; len(led) != 1 || led[0].Topic != "late" || led[0].Leader != 2 {
		t.Fatalf("broker 2's catch-up LeaderAndIsr: %+v", led)
	}
	if got := h.sender.Sent(3); len(got) != 0 {
		t.Fatalf("current broker 3 was sent %+v", got)
	}
	// Only the first heartbeat after activation catches up.
	h.sender.Reset()
	if _, err := h.c.Heartbeat(h.ctx, Heartbeat{BrokerID: 2, BrokerEpoch: h.epochs[2], MetadataOffset: mark}); err != nil {
		t.Fatal(err)
	}
	if got := h.sender.Sent(2); len(got) != 0 {
		t.Fatalf("second heartbeat caught up again: %+v", got)
	}
}
