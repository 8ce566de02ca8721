package controller

import (
	"math/rand"
	"sort"
	"testing"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

func TestSearchStatesMatchesBinarySearch(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 200; round++ {
		n := rng.Intn(60)
		var s []PartitionState
		for i := 0; i < n; i++ {
			var id rl.TopicID
			id[0], id[15] = byte(rng.Intn(4)), byte(rng.Intn(3))
			s = append(s, PartitionState{TopicID: id, Partition: int32(rng.Intn(5))})
		}
		sortStates(s)
		from := 0
		for q := 0; q < 30; q++ {
			var id rl.TopicID
			id[0], id[15] = byte(rng.Intn(5)), byte(rng.Intn(3))
			ref := partRef{id: id, part: int32(rng.Intn(6))}
			want := sort.Search(len(s), func(k int) bool { return !lessRef(stateRef(&s[k]), ref) })
			if want < from {
				continue // the cursor only moves on: queries come sorted
			}
			if got := searchStates(s, from, ref); got != want {
				t.Fatalf("searchStates(%d, %v) = %d, want %d", from, ref, got, want)
			}
			from = want
		}
	}
}

func TestSortedUniqueMergesRuns(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for round := 0; round < 300; round++ {
		var refs []partRef
		for r := rng.Intn(20); r >= 0; r-- {
			var run []partRef
			for i := rng.Intn(30); i > 0; i-- {
				var id rl.TopicID
				id[0], id[15] = byte(rng.Intn(4)), byte(rng.Intn(3))
				run = append(run, partRef{id: id, part: int32(rng.Intn(5))})
			}
			sort.Slice(run, func(i, j int) bool { return lessRef(run[i], run[j]) })
			refs = append(refs, run...)
		}
		want := map[partRef]struct{}{}
		for _, r := range refs {
			want[r] = struct{}{}
		}
		got := sortedUnique(append([]partRef(nil), refs...))
		if len(got) != len(want) {
			t.Fatalf("got %d refs, want %d", len(got), len(want))
		}
		for i := range got {
			if _, ok := want[got[i]]; !ok || (i > 0 && !lessRef(got[i-1], got[i])) {
				t.Fatalf("refs not sorted and unique at %d: %v", i, got)
			}
		}
	}
}
