package controller

import (
	"reflect"
	"testing"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

func TestCoalescePacksRunsOfOneTopic(t *testing.T) {
	a, b := rl.TopicID{1}, rl.TopicID{2}
	pc := func(id rl.TopicID, p int32) *rl.PartitionChange {
		return &rl.PartitionChange{TopicID: id, Partition: p, PartitionEpoch: p + 10, Set: rl.ChangeLeader | rl.ChangeISR, Leader: 1, ISR: []int32{1, 2}}
	}
	fence := &rl.FenceBroker{BrokerID: 3, BrokerEpoch: 4}
	records := []rl.Record{
		fence,
		pc(a, 0), pc(a, 1), pc(a, 5), // one run
		pc(b, 0),                     // alone: another topic
		pc(a, 2),                     // alone: the run after it starts again at 2
		pc(a, 2), pc(a, 7), pc(a, 8), // a run again
		&rl.PartitionStateChange{TopicID: a, State: rl.OnlinePartition, Partitions: []int32{0}},
	}
	out, origin := coalesce(records, seq(0, len(records)), []int{0})
	if want := []int{0, 1, 4, 5, 6, 9}; !reflect.DeepEqual(origin, want) {
		t.Fatalf("origin = %v, want %v", origin, want)
	}
	deltas := func(recs ...rl.Record) []rl.PartitionDelta {
		var out []rl.PartitionDelta
		for _, r := range recs {
			out = append(out, r.(*rl.PartitionChange).Delta())
		}
		return out
	}
	want := []rl.Record{
		fence,
		&rl.PartitionChanges{TopicID: a, Changes: deltas(records[1:4]...)},
		records[4], records[5],
		&rl.PartitionChanges{TopicID: a, Changes: deltas(records[6:9]...)},
		records[9],
	}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("coalesce = %v, want %v", out, want)
	}
}

func TestCoalesceStopsAtEventStarts(t *testing.T) {
	a := rl.TopicID{1}
	var records []rl.Record
	for p := int32(0); p < 6; p++ {
		records = append(records, &rl.PartitionChange{TopicID: a, Partition: p, Set: rl.ChangeLeader, Leader: 1})
	}
	// The chunk holds round records 10..15; events start at 3, 12 and 14.
	out, origin := coalesce(records, seq(10, len(records)), []int{3, 12, 14})
	if want := []int{10, 12, 14}; !reflect.DeepEqual(origin, want) {
		t.Fatalf("origin = %v, want %v", origin, want)
	}
	for i, r := range out {
		if pcs, ok := r.(*rl.PartitionChanges); !ok || len(pcs.Changes) != 2 {
			t.Fatalf("record %d = %v, want two changes packed", i, r)
		}
	}
}

// seq returns n positions counting up from first.
func seq(first, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = first + i
	}
	return out
}

func TestCoalesceWritesStagedPacks(t *testing.T) {
	a, b := rl.TopicID{1}, rl.TopicID{2}
	d := func(p int32) rl.PartitionDelta {
		return rl.PartitionDelta{Partition: p, PartitionEpoch: 3, Set: rl.ChangeISR, ISR: []int32{1}}
	}
	pack := &rl.PartitionChanges{TopicID: a, Changes: []rl.PartitionDelta{d(0), d(1), d(2)}}
	single := &rl.PartitionChanges{TopicID: b, Changes: []rl.PartitionDelta{d(4)}}
	fence := &rl.FenceBroker{BrokerID: 3, BrokerEpoch: 4}
	// Positions count a pack's changes: fence at 5, pack at 6..8, single at 9.
	out, origin := coalesce([]rl.Record{fence, pack, single}, []int{5, 6, 9}, []int{5})
	if want := []int{5, 6, 9}; !reflect.DeepEqual(origin, want) {
		t.Fatalf("origin = %v, want %v", origin, want)
	}
	want := []rl.Record{fence, pack, &rl.PartitionChange{TopicID: b, Partition: 4, PartitionEpoch: 3, Set: rl.ChangeISR, ISR: []int32{1}}}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("coalesce = %v, want %v", out, want)
	}
}
