package sender

import (
	"slices"
	"testing"

	"github.com/ctrlquorum/ctrlquorum/controller"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

var tid = rl.TopicID{1}

func st(p, le, pe int32, isNew bool) controller.PartitionState {
	return controller.PartitionState{Topic: "t", TopicID: tid, Partition: p, Leader: 1, LeaderEpoch: le, PartitionEpoch: pe, IsNew: isNew, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
}

func h(ce int32, off uint64) controller.Header {
	return controller.Header{ControllerID: 3, ControllerEpoch: ce, BrokerEpoch: 10, MetadataOffset: off}
}

// ptrs takes the address of each state, as a LeaderAndIsr holds them.
func ptrs(s ...controller.PartitionState) []*controller.PartitionState {
	out := make([]*controller.PartitionState, len(s))
	for i := range s {
		out[i] = &s[i]
	}
	return out
}

func stop(p, le int32, del bool) controller.StopPartition {
	return controller.StopPartition{Topic: "t", TopicID: tid, Partition: p, LeaderEpoch: le, Delete: del}
}

func TestMergeKeepsTheNewestStatePerPartition(t *testing.T) {
	live1 := []controller.LiveBroker{{ID: 1}}
	live2 := []controller.LiveBroker{{ID: 1}, {ID: 2}}
	umParts := []controller.PartitionState{st(0, 1, 1, false), st(1, 5, 5, false)}
	sets := []controller.Requests{
		{Broker: 1,
			LeaderAndIsr:   &controller.LeaderAndIsr{Header: h(2, 10), Partitions: ptrs(st(0, 1, 1, true), st(1, 5, 5, false)), Leaders: live1},
			UpdateMetadata: &controller.UpdateMetadata{Header: h(2, 10), Partitions: umParts, LiveBrokers: live1},
			StopReplica:    &controller.StopReplica{Header: h(2, 10), Partitions: []controller.StopPartition{stop(2, 3, false), stop(3, 1, true)}},
		},
		{Broker: 1,
			// p0: newer leader epoch; p1: an older state queued later (kept out).
			LeaderAndIsr:   &controller.LeaderAndIsr{Header: h(2, 11), Partitions: ptrs(st(0, 2, 2, false), st(1, 4, 9, false), st(2, 4, 4, false)), Leaders: live2},
			UpdateMetadata: &controller.UpdateMetadata{Header: h(2, 11), Partitions: []controller.PartitionState{st(0, 2, 2, false)}, LiveBrokers: live2},
			StopReplica:    &controller.StopReplica{Header: h(2, 11), Partitions: []controller.StopPartition{stop(3, 2, false), stop(4, 1, false)}},
		},
		{Broker: 1,
			// p0: same leader epoch, newer partition epoch (an ISR change).
			UpdateMetadata: &controller.UpdateMetadata{Header: h(2, 12), Partitions: []controller.PartitionState{st(0, 2, 3, false)}, LiveBrokers: live2},
		},
	}
	umBefore := slices.Clone(umParts)
	m := merge(sets)

	lai := m.LeaderAndIsr
	if lai == nil || lai.MetadataOffset != 12 || lai.ControllerEpoch != 2 || len(lai.Partitions) != 3 {
		t.Fatalf("LeaderAndIsr %+v", lai)
	}
	if p := lai.Partitions[0]; p.LeaderEpoch != 2 || !p.IsNew {
		t.Fatalf("p0: newest state, still new: %+v", p)
	}
	if p := lai.Partitions[1]; p.LeaderEpoch != 5 {
		t.Fatalf("p1: an older leader epoch must not win: %+v", p)
	}
	if len(lai.Leaders) != 1 || lai.Leaders[0].ID != 1 {
		t.Fatalf("leaders %+v", lai.Leaders)
	}
	um := m.UpdateMetadata
	if um == nil || len(um.LiveBrokers) != 2 || len(um.Partitions) != 2 || um.Partitions[0].PartitionEpoch != 3 || um.Partitions[1].LeaderEpoch != 5 {
		t.Fatalf("UpdateMetadata %+v", um)
	}
	sr := m.StopReplica
	// p2's stop came before a newer LeaderAndIsr for p2: dropped. p3:
	// delete sticks, newest epoch. p4: kept.
	if sr == nil || len(sr.Partitions) != 2 {
		t.Fatalf("StopReplica %+v", sr)
	}
	if p := sr.Partitions[0]; p.Partition != 3 || !p.Delete || p.LeaderEpoch != 2 {
		t.Fatalf("p3 stop %+v", p)
	}
	if p := sr.Partitions[1]; p.Partition != 4 || p.Delete {
		t.Fatalf("p4 stop %+v", p)
	}
	if !slices.EqualFunc(umParts, umBefore, func(a, b controller.PartitionState) bool {
		return a.LeaderEpoch == b.LeaderEpoch && a.PartitionEpoch == b.PartitionEpoch
	}) {
		t.Fatal("merge modified a shared UpdateMetadata partition list")
	}
}

func TestMergeANewerControllerEpochWins(t *testing.T) {
	sets := []controller.Requests{
		{Broker: 1, LeaderAndIsr: &controller.LeaderAndIsr{Header: h(3, 20), Partitions: ptrs(st(0, 9, 9, false))}},
		{Broker: 1, LeaderAndIsr: &controller.LeaderAndIsr{Header: h(4, 21), Partitions: ptrs(st(0, 8, 8, false))}},
	}
	m := merge(sets)
	if p := m.LeaderAndIsr.Partitions[0]; p.LeaderEpoch != 8 || m.LeaderAndIsr.ControllerEpoch != 4 {
		t.Fatalf("%+v / %+v", m.LeaderAndIsr.Header, p)
	}
}

func TestMergeDropsAStopThatALaterLeaderAndIsrUndoes(t *testing.T) {
	sets := []controller.Requests{
		{Broker: 1, StopReplica: &controller.StopReplica{Header: h(1, 1), Partitions: []controller.StopPartition{stop(0, 1, false)}}},
		{Broker: 1, LeaderAndIsr: &controller.LeaderAndIsr{Header: h(1, 2), Partitions: ptrs(st(0, 2, 2, false))}},
	}
	if m := merge(sets); m.StopReplica != nil || m.LeaderAndIsr == nil {
		t.Fatalf("%+v", m)
	}
	// The other way round both stay: delivered LeaderAndIsr first, then the stop.
	sets[0], sets[1] = sets[1], sets[0]
	if m := merge(sets); m.StopReplica == nil || m.LeaderAndIsr == nil {
		t.Fatalf("%+v", m)
	}
}

func TestSetHeader(t *testing.T) {
	r := controller.Requests{
		LeaderAndIsr:   &controller.LeaderAndIsr{Header: h(2, 5)},
		UpdateMetadata: &controller.UpdateMetadata{Header: controller.Header{ControllerID: 9, ControllerEpoch: 3, BrokerEpoch: 11, MetadataOffset: 4}},
	}
	got := setHeader(&r)
	if got.ControllerEpoch != 3 || got.ControllerID != 9 || got.BrokerEpoch != 11 || got.MetadataOffset != 5 {
		t.Fatalf("%+v", got)
	}
}

// TestMergeKeepsADeletion: a queue coalesced while a topic's deletion
// started keeps the deletion: the partitions go out with leader
// LeaderDuringDelete, not an older state, and the stops with leader
// epoch EpochDuringDelete, even merged with an earlier stop of the same
// replica at a real epoch.
func TestMergeKeepsADeletion(t *testing.T) {
	del := func(p, le, pe int32) controller.PartitionState {
		s := st(p, le, pe, false)
		s.Leader = controller.LeaderDuringDelete
		return s
	}
	sets := []controller.Requests{
		{Broker: 1,
			LeaderAndIsr:   &controller.LeaderAndIsr{Header: h(2, 10), Partitions: ptrs(st(0, 4, 4, false), st(1, 3, 3, false))},
			UpdateMetadata: &controller.UpdateMetadata{Header: h(2, 10), Partitions: []controller.PartitionState{st(0, 4, 4, false), st(1, 3, 3, false)}},
			// The replica of p1 went offline (a fence): a stop at its epoch.
			StopReplica: &controller.StopReplica{Header: h(2, 10), Partitions: []controller.StopPartition{stop(1, 3, false)}},
		},
		{Broker: 1,
			// The deletion: leader -2 at the same epochs for p1, newer for p0.
			UpdateMetadata: &controller.UpdateMetadata{Header: h(2, 11), Partitions: []controller.PartitionState{del(0, 5, 5), del(1, 3, 3)}},
			StopReplica: &controller.StopReplica{Header: h(2, 11), Partitions: []controller.StopPartition{
				stop(0, controller.EpochDuringDelete, true), stop(1, controller.EpochDuringDelete, true)}},
		},
		{Broker: 1,
			// A stop at a real epoch queued after the deletion's.
			StopReplica: &controller.StopReplica{Header: h(2, 12), Partitions: []controller.StopPartition{stop(0, 5, false)}},
		},
	}
	m := merge(sets)
	if um := m.UpdateMetadata; um == nil || len(um.Partitions) != 2 {
		t.Fatalf("UpdateMetadata %+v", um)
	}
	for _, p := range m.UpdateMetadata.Partitions {
		if p.Leader != controller.LeaderDuringDelete {
			t.Fatalf("t-%d: the deletion lost to an older state: %+v", p.Partition, p)
		}
	}
	if sr := m.StopReplica; sr == nil || len(sr.Partitions) != 2 {
		t.Fatalf("StopReplica %+v", sr)
	}
	for _, p := range m.StopReplica.Partitions {
		if !p.Delete || p.LeaderEpoch != controller.EpochDuringDelete {
			t.Fatalf("t-%d: stop %+v, want delete with leader epoch %d", p.Partition, p, controller.EpochDuringDelete)
		}
	}
}

// TestMergeKeepsACatchUpFull: a full UpdateMetadata (a catch-up) merged
// with what came before and after stays full, and names the topics of the
// catch-up and those created since, but not those deleted since.
func TestMergeKeepsACatchUpFull(t *testing.T) {
	named := func(name string, id byte) controller.TopicName {
		return controller.TopicName{Name: name, ID: rl.TopicID{id}}
	}
	state := func(name string, id byte, leader int32) controller.PartitionState {
		return controller.PartitionState{Topic: name, TopicID: rl.TopicID{id}, Leader: leader, LeaderEpoch: 1, PartitionEpoch: 1}
	}
	sets := []controller.Requests{
		// Before the catch-up: a topic since removed.
		{Broker: 1, UpdateMetadata: &controller.UpdateMetadata{Header: h(2, 10), Partitions: []controller.PartitionState{state("gone", 9, 1)}}},
		{Broker: 1,
			LeaderAndIsr: &controller.LeaderAndIsr{Header: h(2, 11), Partitions: ptrs(state("t", 1, 1))},
			UpdateMetadata: &controller.UpdateMetadata{Header: h(2, 11), Partitions: []controller.PartitionState{state("t", 1, 1)},
				Full: true, Topics: []controller.TopicName{named("t", 1), named("d", 4), named("quiet", 2)}},
		},
		// After it: a topic created, another one's deletion started.
		{Broker: 1, UpdateMetadata: &controller.UpdateMetadata{Header: h(2, 12), Partitions: []controller.PartitionState{state("new", 3, 1)}}},
		{Broker: 1, UpdateMetadata: &controller.UpdateMetadata{Header: h(2, 13), Partitions: []controller.PartitionState{state("d", 4, controller.LeaderDuringDelete)}}},
	}
	m := merge(sets)
	um := m.UpdateMetadata
	if um == nil || !um.Full || um.MetadataOffset != 13 {
		t.Fatalf("UpdateMetadata %+v", um)
	}
	want := []controller.TopicName{named("t", 1), named("quiet", 2), named("new", 3)}
	if !slices.Equal(um.Topics, want) {
		t.Fatalf("full UpdateMetadata names %v, want %v", um.Topics, want)
	}
	// Without a full one among them, the merge is not full.
	if m := merge([]controller.Requests{sets[0], sets[2]}); m.UpdateMetadata.Full || m.UpdateMetadata.Topics != nil {
		t.Fatalf("merged incremental requests became full: %+v", m.UpdateMetadata)
	}
}
