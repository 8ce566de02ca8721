package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// A PartitionChanges record packed while staging is cut where a log entry
// ends, so entries hold MaxRecordsPerEntry changes as if each had been a
// record of its own, and a piece of one change is written as a
// PartitionChange.
func TestProposeCutsPacksAtEntryEnds(t *testing.T) {
	f := fsm.New(fsm.Options{Halt: func(err error) { t.Errorf("fsm halted: %v", err) }})
	log := NewMemLog(f)
	steadyStateImage(200, 3, func(batch []rl.Record) {
		data, err := rl.EncodeBatch(batch)
		if err != nil {
			t.Fatal(err)
		}
		if res := log.Apply(data, time.Second).Response().(*fsm.ApplyResult); res.Err() != nil {
			t.Fatal(res.Err())
		}
	})
	log.Keep = true
	var ids []rl.TopicID
	f.View(func(im *fsm.Image) {
		for _, tp := range sortedTopics(im) {
			ids = append(ids, tp.ID)
		}
	})
	change := func(id rl.TopicID, p int32) rl.PartitionDelta {
		var d rl.PartitionDelta
		f.View(func(im *fsm.Image) {
			cur := im.Partition(id, p)
			d = rl.PartitionDelta{Partition: p, PartitionEpoch: cur.PartitionEpoch, Set: rl.ChangeISR, ISR: cur.Replicas[:2]}
		})
		return d
	}
	pack := &rl.PartitionChanges{TopicID: ids[0]}
	for p := int32(0); p < 7; p++ {
		pack.Changes = append(pack.Changes, change(ids[0], p))
	}
	other := change(ids[1], 0)
	records := []rl.Record{pack, &rl.PartitionChanges{TopicID: ids[1], Changes: []rl.PartitionDelta{other}}}

	c := &Controller{cfg: Config{MaxRecordsPerEntry: 3, Log: log, ApplyTimeout: time.Second}}
	indexes, rejected, err := c.propose(records, []int{0})
	if err != nil || len(rejected) > 0 {
		t.Fatalf("propose: %v %v", err, rejected)
	}
	if len(indexes) != 3 || len(log.Entries) != 3 {
		t.Fatalf("%d indexes, %d entries, want 3", len(indexes), len(log.Entries))
	}
	var got [][]int32
	for _, data := range log.Entries {
		batch, err := rl.DecodeBatch(data)
		if err != nil {
			t.Fatal(err)
		}
		var parts []int32
		for _, r := range batch {
			switch r := r.(type) {
			case *rl.PartitionChanges:
				for _, d := range r.Changes {
					parts = append(parts, d.Partition)
				}
			case *rl.PartitionChange:
				parts = append(parts, 100+r.Partition)
			default:
				t.Fatalf("unexpected %T", r)
			}
		}
		got = append(got, parts)
	}
	// Entry 3: partition 6 of the first topic and partition 0 of the
	// second, each a PartitionChange of its own.
	if want := [][]int32{{0, 1, 2}, {3, 4, 5}, {106, 100}}; !equalLists(got, want) {
		t.Fatalf("entries hold %v, want %v", got, want)
	}
	f.View(func(im *fsm.Image) {
		for p := int32(0); p < 7; p++ {
			if n := len(im.Partition(ids[0], p).ISR); n != 2 {
				t.Fatalf("partition %d: ISR of %d", p, n)
			}
		}
	})
}

func equalLists(a, b [][]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
