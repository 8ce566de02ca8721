package controller

import (
	"slices"
	"testing"
	"time"
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

// TestRequestsBeforeCatchUpCarryNoOffset: a new controller's requests to
// a broker it has not caught up yet carry no metadata offset, so they do
// not move the offset the broker reports. Were they to carry the round's
// offset, a broker that missed a change the previous controller committed
// and never sent would report itself current in its first heartbeat and
// never get that change (the jepsen broker-metadata check saw brokers keep
// a leader two elections old).
func TestRequestsBeforeCatchUpCarryNoOffset(t *testing.T) {
	h := newHarness(t)
	for id := int32(1); id <= 3; id++ {
		h.register(id, "")
	}
	mark := h.log.Index()
	// Committed by the old controller, never delivered to broker 2.
	if r := h.c.CreateTopics(h.ctx, []CreateTopic{{Name: "missed", NumPartitions: -1, ReplicationFactor: -1, Assignment: [][]int32{{2, 3}}}}, false); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}

	h.c.Deactivate()
	h.sender.Reset()
	h.start()
	// A change under the new controller before any broker's first
	// heartbeat.
	if r := h.c.CreateTopics(h.ctx, []CreateTopic{{Name: "after", NumPartitions: -1, ReplicationFactor: -1, Assignment: [][]int32{{2, 1}}}}, false); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	for _, b := range []int32{1, 2, 3} {
		sent := h.sender.Sent(b)
		if len(sent) == 0 {
			t.Fatalf("broker %d was sent nothing since the activation", b)
		}
		for _, r := range sent {
			if off := requestOffset(r); off != 0 {
				t.Fatalf("broker %d, not caught up yet, was sent a request at offset %d: %+v", b, off, r)
			}
		}
	}
	h.sender.Reset()

	// Broker 2's first heartbeat reports the offset it had: its catch-up
	// holds the change it missed, at the offset of the round that sends it.
	if _, err := h.c.Heartbeat(h.ctx, Heartbeat{BrokerID: 2, BrokerEpoch: h.epochs[2], MetadataOffset: mark}); err != nil {
		t.Fatal(err)
	}
	sent2 := h.sender.Sent(2)
	if len(sent2) != 1 || sent2[0].UpdateMetadata == nil {
		t.Fatalf("broker 2 got %+v", sent2)
	}
	topics := map[string]bool{}
	for _, p := range sent2[0].UpdateMetadata.Partitions {
		topics[p.Topic] = true
	}
	if !topics["missed"] || !topics["after"] {
		t.Fatalf("broker 2's catch-up names %v, want missed and after", topics)
	}
	if off := requestOffset(sent2[0]); off == 0 || off < mark {
		t.Fatalf("broker 2's catch-up carries offset %d", off)
	}
	// Caught up, broker 2's next requests carry their offsets again, while
	// broker 1, which has not sent a heartbeat, still gets none.
	h.sender.Reset()
	if r := h.c.CreateTopics(h.ctx, []CreateTopic{{Name: "later", NumPartitions: -1, ReplicationFactor: -1, Assignment: [][]int32{{2, 1}}}}, false); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	for _, r := range h.sender.Sent(2) {
		if requestOffset(r) == 0 {
			t.Fatalf("caught-up broker 2 was sent a request with no offset: %+v", r)
		}
	}
	for _, r := range h.sender.Sent(1) {
		if off := requestOffset(r); off != 0 {
			t.Fatalf("broker 1, not caught up yet, was sent offset %d", off)
		}
	}
}

// requestOffset is the metadata offset of a broker's set of requests.
func requestOffset(r Requests) uint64 {
	var off uint64
	if r.LeaderAndIsr != nil {
		off = max(off, r.LeaderAndIsr.MetadataOffset)
	}
	if r.UpdateMetadata != nil {
		off = max(off, r.UpdateMetadata.MetadataOffset)
	}
	if r.StopReplica != nil {
		off = max(off, r.StopReplica.MetadataOffset)
	}
	return off
}

// TestFencedBrokerCatchesUpWhatItMissed: a fenced broker is still sent a
// request or two (the fence's StopReplica), but not the changes made while
// it is fenced, so those requests carry no metadata offset; when it is
// unfenced with the offset it had, its catch-up holds the topic created
// meanwhile (the jepsen broker-metadata check found a broker that never
// learned of a topic created while it was fenced).
func TestFencedBrokerCatchesUpWhatItMissed(t *testing.T) {
	h := newHarness(t)
	for id := int32(1); id <= 3; id++ {
		h.register(id, "")
	}
	if r := h.c.CreateTopics(h.ctx, []CreateTopic{{Name: "before", NumPartitions: -1, ReplicationFactor: -1, Assignment: [][]int32{{3, 1}}}}, false); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	mark := h.log.Index()

	// Broker 3's session lapses.
	h.clock.Advance(2 * time.Hour)
	h.heartbeat(1)
	h.heartbeat(2)
	h.sender.Reset()
	if err := h.c.CheckSessions(h.ctx); err != nil {
		t.Fatal(err)
	}
	if !h.broker(3).Fenced {
		t.Fatal("broker 3 was not fenced")
	}
	if r := h.c.CreateTopics(h.ctx, []CreateTopic{{Name: "meanwhile", NumPartitions: -1, ReplicationFactor: -1, Assignment: [][]int32{{1, 2}}}}, false); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	sent3 := h.sender.Sent(3)
	if len(sent3) == 0 {
		t.Fatal("the fence sent broker 3 nothing (a StopReplica was expected)")
	}
	for _, r := range sent3 {
		if off := requestOffset(r); off != 0 {
			t.Fatalf("fenced broker 3 was sent a request at offset %d: %+v", off, r)
		}
	}

	h.sender.Reset()
	if _, err := h.c.Heartbeat(h.ctx, Heartbeat{BrokerID: 3, BrokerEpoch: h.epochs[3], MetadataOffset: max(mark, uint64(h.epochs[3]))}); err != nil {
		t.Fatal(err)
	}
	if h.broker(3).Fenced {
		t.Fatal("broker 3 was not unfenced")
	}
	var named []string
	for _, r := range h.sender.Sent(3) {
		if r.UpdateMetadata != nil {
			for _, p := range r.UpdateMetadata.Partitions {
				named = append(named, p.Topic)
			}
		}
	}
	if !slices.Contains(named, "meanwhile") {
		t.Fatalf("broker 3's catch-up on unfence names %v, not the topic created while it was fenced", named)
	}
}
