package controller

// int32Arena hands out broker-id lists carved from shared blocks. An
// event that elects leaders for, or shrinks the ISR of, hundreds of
// thousands of partitions makes two or three short lists for each; taken
// from a block they cost one allocation per few thousand lists, and the
// garbage collector has a few blocks to trace instead of a million tiny
// objects. A nil arena allocates each list on its own.
type int32Arena struct {
	block []int32
}

const int32ArenaBlock = 8192

// make returns an empty list with room for exactly n ids: appending past
// n moves the list out of the block instead of overwriting its neighbour.
func (a *int32Arena) make(n int) []int32 {
	if a == nil || n > int32ArenaBlock/8 {
		return make([]int32, 0, n)
	}
	if cap(a.block)-len(a.block) < n {
		a.block = make([]int32, 0, int32ArenaBlock)
	}
	at := len(a.block)
	a.block = a.block[:at+n]
	return a.block[at : at : at+n]
}
