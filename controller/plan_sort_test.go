package controller

import (
	"math/rand"
	"slices"
	"testing"
)

func TestSortRunsSortsStably(t *testing.T) {
	type item struct{ key, seq int }
	byKey := func(a, b item) int { return a.key - b.key }
	rng := rand.New(rand.NewSource(2))
	for round := 0; round < 300; round++ {
		var s []item
		// A few sorted runs, or (sometimes) many.
		for r := rng.Intn(25); r >= 0; r-- {
			var run []item
			for i := rng.Intn(30); i > 0; i-- {
				run = append(run, item{key: rng.Intn(20)})
			}
			slices.SortFunc(run, byKey)
			s = append(s, run...)
		}
		for i := range s {
			s[i].seq = i
		}
		want := slices.Clone(s)
		slices.SortStableFunc(want, byKey)
		if got := sortRuns(s, byKey); !slices.Equal(got, want) {
			t.Fatalf("sortRuns = %v, want %v", got, want)
		}
	}
}
