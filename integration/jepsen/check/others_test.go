package check

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

func final(ms int, topics ...history.TopicInfo) FinalRead {
	f := FinalRead{Time: at(ms), Topics: map[string]history.TopicInfo{}}
	for _, t := range topics {
		f.Topics[t.Name] = t
	}
	return f
}

func TestLostWritesNoneLost(t *testing.T) {
	var h hist
	h.create(0, "kept", 0, 10, "k1")
	h.create(0, "gone", 0, 10, "g1")
	h.delete(1, "gone", 20, 30)
	fail(h.create(2, "never", 0, 10, ""), kerr.InvalidReplicationFactor)
	r := LostWrites(h.ops, final(100, history.TopicInfo{Name: "kept", TopicID: "k1"}))
	wantValid(t, r)
	if !strings.Contains(r.Checked, "3 acknowledged") {
		t.Errorf("checked = %q", r.Checked)
	}
}

func TestLostWritesAcknowledgedCreateLost(t *testing.T) {
	var h hist
	h.create(0, "a", 0, 10, "a1")
	h.create(0, "b", 0, 10, "b1")
	r := LostWrites(h.ops, final(100, history.TopicInfo{Name: "b", TopicID: "b1"}))
	wantViolation(t, r, 1, `acknowledged creation of "a" lost`, "#1")
	if v := r.Violations[0]; v.Topic != "a" || len(v.Ops) != 1 || v.Ops[0] != 1 {
		t.Errorf("violation = %+v", v)
	}
}

func TestLostWritesAcknowledgedDeleteLost(t *testing.T) {
	var h hist
	h.create(0, "a", 0, 10, "a1")
	h.delete(0, "a", 20, 30)
	wantViolation(t, LostWrites(h.ops, final(100, history.TopicInfo{Name: "a", TopicID: "a1"})), 1, `acknowledged deletion of "a" lost`)
}

func TestLostWritesLaterCallsExplainTheFinalState(t *testing.T) {
	// An unanswered delete after the acknowledged create may have run.
	var h hist
	h.create(0, "a", 0, 10, "a1")
	unknown(h.delete(1, "a", 20, 0))
	wantValid(t, LostWrites(h.ops, final(100)))
	// So may a delete answered NOT_CONTROLLER.
	var h2 hist
	h2.create(0, "a", 0, 10, "a1")
	fail(h2.delete(1, "a", 20, 30), kerr.NotController)
	wantValid(t, LostWrites(h2.ops, final(100)))
	// A delete refused with UNKNOWN_TOPIC_OR_PARTITION did not run.
	var h3 hist
	h3.create(0, "a", 0, 10, "a1")
	fail(h3.delete(1, "a", 20, 30), kerr.UnknownTopicOrPartition)
	wantViolation(t, LostWrites(h3.ops, final(100)), 1, `creation of "a" lost`)
	// A delete concurrent with a re-create: either may have come last.
	var h4 hist
	h4.create(0, "a", 0, 10, "a1")
	h4.delete(0, "a", 20, 60)
	h4.create(1, "a", 30, 50, "a2")
	wantValid(t, LostWrites(h4.ops, final(100)))
	wantValid(t, LostWrites(h4.ops, final(100, history.TopicInfo{Name: "a", TopicID: "a2"})))
}

func TestLostWritesPhantomAndReplacedTopics(t *testing.T) {
	var h hist
	h.create(0, "a", 0, 10, "a1")
	r := LostWrites(h.ops, final(100, history.TopicInfo{Name: "a", TopicID: "a9"}, history.TopicInfo{Name: "ghost"}))
	if r.Valid || len(r.Violations) != 2 {
		t.Fatalf("want 2 violations, got:\n%s", r)
	}
	if !strings.Contains(r.Violations[0].Description, `creation of "a" replaced`) ||
		!strings.Contains(r.Violations[1].Description, `"ghost" is present in the final read but no call ever tried to create it`) {
		t.Fatalf("violations:\n%s", r)
	}
}

// obs builds an accepted partition observation.
func obs(broker int32, seq uint64, ms int, ce int32, topic string, part, leader, le, pe int32) history.Observation {
	return history.Observation{Broker: broker, Incarnation: "i1", Seq: seq, Time: at(ms), Request: history.LeaderAndIsr,
		ControllerID: 1, ControllerEpoch: ce, Topic: topic, TopicID: topic + "-id", Partition: part, Leader: leader,
		LeaderEpoch: le, PartitionEpoch: pe, ISR: []int32{leader}, Accepted: true}
}

func whole(broker int32, seq uint64, ms int, ce int32, accepted bool) history.Observation {
	o := history.Observation{Broker: broker, Incarnation: "i1", Seq: seq, Time: at(ms), Request: history.UpdateMetadata,
		ControllerEpoch: ce, Partition: -1, Accepted: accepted}
	if !accepted {
		o.ErrorCode = kerr.StaleControllerEpoch.Code
	}
	return o
}

func refused(o history.Observation, e *kerr.Error) history.Observation {
	o.Accepted, o.ErrorCode = false, e.Code
	return o
}

func TestOneLeaderPerEpoch(t *testing.T) {
	good := []history.Observation{
		obs(1, 1, 0, 1, "t", 0, 1, 1, 1),
		obs(2, 1, 1, 1, "t", 0, 1, 1, 1),
		obs(1, 2, 5, 1, "t", 0, 2, 2, 2),
		obs(2, 2, 6, 1, "t", 0, 2, 2, 2),
		// Refused states do not count.
		refused(obs(3, 1, 7, 1, "t", 0, 3, 2, 2), kerr.FencedLeaderEpoch),
		// Deletions carry no leader.
		{Broker: 1, Seq: 3, Time: at(8), Request: history.StopReplica, Topic: "t", TopicID: "t-id", Partition: 0, Leader: -2, LeaderEpoch: 2, Deleted: true, Accepted: true},
	}
	// A topic re-created under the same name starts over at epoch 0 with
	// another id.
	again := obs(1, 4, 9, 1, "t", 0, 3, 1, 0)
	again.TopicID = "t-id-2"
	good = append(good, again)
	r := OneLeaderPerEpoch(good)
	wantValid(t, r)

	bad := append(good, obs(3, 2, 10, 2, "t", 0, 3, 2, 3)) // leader 3 at epoch 2, where 2 led
	r = OneLeaderPerEpoch(bad)
	wantViolation(t, r, 1, "has 2 leaders at leader epoch 2", "leader 2", "leader 3")
	if v := r.Violations[0]; v.Topic != "t" || v.Partition != 0 || len(v.Brokers) != 2 || v.Brokers[0] != 1 || v.Brokers[1] != 3 {
		t.Errorf("violation = %+v", v)
	}
}

func TestControllerEpochFencing(t *testing.T) {
	good := []history.Observation{
		whole(1, 1, 0, 3, true),
		whole(1, 2, 5, 4, true),
		whole(1, 3, 6, 3, false), // refused: right
		whole(1, 4, 7, 4, true),
		whole(2, 1, 0, 4, true),
	}
	// An agent that restarted has seen nothing yet.
	restarted := whole(1, 1, 20, 2, true)
	restarted.Incarnation = "i2"
	good = append(good, restarted)
	wantValid(t, ControllerEpochFencing(good))

	stale := whole(1, 5, 8, 3, true)
	part := obs(1, 6, 8, 3, "t", 0, 1, 5, 5) // a partition of that request: not reported again
	r := ControllerEpochFencing(append(good, stale, part))
	wantViolation(t, r, 1, "broker 1 accepted a UpdateMetadata with controller epoch 3 after accepting epoch 4")

	// An agent that records partitions only is judged on those.
	r = ControllerEpochFencing([]history.Observation{obs(5, 1, 0, 7, "t", 0, 5, 1, 1), obs(5, 2, 1, 6, "t", 0, 5, 1, 1)})
	wantViolation(t, r, 1, "controller epoch 6 after accepting epoch 7")
}

func TestEpochsMonotonic(t *testing.T) {
	good := []history.Observation{
		obs(1, 1, 0, 1, "t", 0, 1, 1, 1),
		obs(1, 2, 1, 1, "t", 0, 1, 1, 1), // the same state again
		obs(1, 3, 2, 1, "t", 0, 1, 1, 2), // ISR change
		obs(1, 4, 3, 1, "t", 0, 2, 2, 3),
		refused(obs(1, 5, 4, 1, "t", 0, 1, 1, 1), kerr.FencedLeaderEpoch),
		{Broker: 1, Incarnation: "i1", Seq: 6, Time: at(5), Request: history.StopReplica, Topic: "t", TopicID: "t-id", Partition: 0, Leader: -1, LeaderEpoch: -2, Deleted: true, Accepted: true},
		obs(1, 7, 6, 1, "t", 0, 1, 0, 0), // re-created: starts over
		obs(2, 1, 0, 1, "t", 0, 1, 5, 5),
	}
	wantValid(t, EpochsMonotonic(good))

	r := EpochsMonotonic(append(good, obs(2, 2, 10, 1, "t", 0, 1, 4, 6)))
	wantViolation(t, r, 1, "broker 2: leader epoch of t-0", "went back from 5 to 4")

	r = EpochsMonotonic(append(good, obs(2, 2, 10, 1, "t", 0, 1, 5, 4)))
	wantViolation(t, r, 1, "broker 2: partition epoch of t-0", "went back from 5 to 4")

	// A restarted agent has no memory: no violation across incarnations.
	fresh := obs(2, 1, 20, 1, "t", 0, 1, 3, 3)
	fresh.Incarnation = "i2"
	wantValid(t, EpochsMonotonic(append(good, fresh)))
}

func TestStateHashes(t *testing.T) {
	wantValid(t, StateHashes(map[string]history.VoterHash{
		"1": {Index: 40, Hash: "abc"}, "2": {Index: 40, Hash: "abc"}, "3": {Index: 40, Hash: "abc"},
	}))
	r := StateHashes(map[string]history.VoterHash{
		"1": {Index: 40, Hash: "abc"}, "2": {Index: 40, Hash: "abd"}, "3": {Index: 40, Hash: "abc"},
	})
	wantViolation(t, r, 1, "voters diverged", "2: abd at index 40")
	r = StateHashes(map[string]history.VoterHash{"1": {Index: 40, Hash: "abc"}, "2": {Index: 39, Hash: "abb"}})
	wantViolation(t, r, 1, "did not reach the same index")
	wantViolation(t, StateHashes(nil), 1, "no voter")
}

func fault(id int, kind string, start, heal int) []history.FaultEvent {
	ev := []history.FaultEvent{{Fault: id, Kind: kind, Phase: history.Start, Time: at(start), Nodes: []int{1}}}
	if heal >= 0 {
		ev = append(ev, history.FaultEvent{Fault: id, Kind: kind, Phase: history.Heal, Time: at(heal), Nodes: []int{1}})
	}
	return ev
}

func sample(ms int, live []int32, parts ...history.PartitionSample) history.ClusterSample {
	return history.ClusterSample{Time: at(ms), Live: live, Partitions: parts}
}

func TestRecoveryTimes(t *testing.T) {
	var h hist
	h.create(0, "a", 900, 1000, "a1")                                             // before the heal
	fail(h.create(0, "b", 1100, 1200, ""), kerr.NotController)                    // not a success
	h.present(1, "a", 1100, 1150, "a1")                                           // a read: does not count
	h.create(0, "c", 1300, 1500, "c1")                                            // first success: 500ms
	faults := append(fault(1, "kill", 0, 1000), fault(2, "pause", 3000, 4000)...) // fault 2 never recovered from
	samples := []history.ClusterSample{
		sample(1100, []int32{1, 2}, history.PartitionSample{Topic: "a", Partition: 0, Leader: -1, ISR: []int32{2}}),   // leadable, no leader
		sample(1200, []int32{1, 2}, history.PartitionSample{Topic: "a", Partition: 0, Leader: 3, ISR: []int32{2, 3}}), // leader not live
		sample(1800, []int32{1, 2},
			history.PartitionSample{Topic: "a", Partition: 0, Leader: 2, ISR: []int32{2}},
			history.PartitionSample{Topic: "a", Partition: 1, Leader: -1, ISR: []int32{3}}), // 3 is down: cannot be led
		sample(4500, []int32{1, 2}, history.PartitionSample{Topic: "a", Partition: 0, Leader: -1, ISR: []int32{2}}),
	}
	r, recs := RecoveryTimes(faults, h.ops, samples, RecoveryOptions{End: at(6000)})
	if len(recs) != 2 {
		t.Fatalf("recoveries = %v", recs)
	}
	one := recs[0]
	if !one.AdminRecovered || one.Admin != 500*time.Millisecond || one.AdminOp != 4 || !one.LedRecovered || one.Led != 800*time.Millisecond || one.Interrupted {
		t.Errorf("first heal: %+v", one)
	}
	if recs[1].AdminRecovered || recs[1].LedRecovered {
		t.Errorf("second heal recovered: %+v", recs[1])
	}
	wantViolation(t, r, 1, "no recovery after the heal of fault 2 (pause)", "no successful admin call")
	if !strings.Contains(strings.Join(r.Notes, "\n"), "median 500ms") {
		t.Errorf("notes = %v", r.Notes)
	}

	// A heal followed by another fault before recovery is interrupted, not
	// a violation; a fault never healed is.
	faults = append(fault(1, "kill", 0, 1000), fault(2, "partition-leader", 1100, -1)...)
	r, recs = RecoveryTimes(faults, h.ops, nil, RecoveryOptions{End: at(6000)})
	if len(recs) != 1 || !recs[0].Interrupted || !recs[0].NoSamples {
		t.Errorf("recoveries = %+v", recs)
	}
	wantViolation(t, r, 1, "fault 2 (partition-leader", "never healed")

	// A limit on the recovery time.
	r, _ = RecoveryTimes(fault(1, "kill", 0, 1000), h.ops, nil, RecoveryOptions{Max: 100 * time.Millisecond})
	wantViolation(t, r, 1, "slow recovery after fault 1 (kill)", "500ms")
}
