package controller

import (
	"slices"
	"testing"
)

// TestInt32ArenaListsStayApart checks that lists from one block never
// share memory: filling one, and appending past its size, leaves its
// neighbours as they were.
func TestInt32ArenaListsStayApart(t *testing.T) {
	var a int32Arena
	var lists [][]int32
	for i := range 3000 { // several blocks
		n := 1 + i%4
		l := a.make(n)
		if len(l) != 0 || cap(l) != n {
			t.Fatalf("make(%d) gave len %d cap %d", n, len(l), cap(l))
		}
		for j := range n {
			l = append(l, int32(i*10+j))
		}
		lists = append(lists, l)
	}
	lists[7] = append(lists[7], 99, 98) // past its size: moves out
	for i, l := range lists {
		n := 1 + i%4
		want := make([]int32, 0, n+2)
		for j := range n {
			want = append(want, int32(i*10+j))
		}
		if i == 7 {
			want = append(want, 99, 98)
		}
		if !slices.Equal(l, want) {
			t.Fatalf("list %d is %v, want %v", i, l, want)
		}
	}
	var nilArena *int32Arena
	if l := nilArena.make(3); len(l) != 0 || cap(l) != 3 {
		t.Fatalf("a nil arena's make(3) gave len %d cap %d", len(l), cap(l))
	}
}
