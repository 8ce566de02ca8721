package controller

import (
	"slices"
	"strconv"
	"strings"
)

// Brokers answers whether a broker belongs to some group (live, shutting
// down, registered). Decisions take this rather than a concrete type so the
// controller can hand in a view over its metadata image without copying it.
// Has must depend only on id: the selectors call it in assignment order and
// rely on getting the same answer for the same id.
//
// A nil Brokers is the empty group.
type Brokers interface {
	Has(id int32) bool
}

// has treats a nil group as empty, so that callers may leave ShuttingDown
// (or any other group) unset when it does not apply.
func has(b Brokers, id int32) bool {
	return b != nil && b.Has(id)
}

// oneBroker is the group of a single broker.
type oneBroker int32

func (b oneBroker) Has(id int32) bool { return int32(b) == id }

// BrokerSet is an immutable sorted set of broker ids. It is a value type so
// that it can be shared between the event loop and pure decision functions
// without locks; every method that "changes" it returns a new set.
//
// Being sorted, its iteration order is fixed, which keeps any decision that
// walks it deterministic across replicas.
type BrokerSet struct {
	ids []int32 // ascending, no duplicates; never mutated after construction
}

var _ Brokers = BrokerSet{}

// NewBrokerSet builds a set from ids in any order; duplicates collapse. The
// argument is copied, so the caller may reuse it.
func NewBrokerSet(ids ...int32) BrokerSet {
	if len(ids) == 0 {
		return BrokerSet{}
	}
	s := slices.Clone(ids)
	slices.Sort(s)
	return BrokerSet{ids: slices.Compact(s)}
}

// Has reports whether id is in the set.
func (s BrokerSet) Has(id int32) bool {
	_, ok := slices.BinarySearch(s.ids, id)
	return ok
}

// Len is the number of brokers in the set.
func (s BrokerSet) Len() int { return len(s.ids) }

// IDs returns the members in ascending order, as a fresh slice the caller
// owns.
func (s BrokerSet) IDs() []int32 {
	if len(s.ids) == 0 {
		return nil
	}
	return slices.Clone(s.ids)
}

// With returns s plus ids.
func (s BrokerSet) With(ids ...int32) BrokerSet {
	if len(ids) == 0 {
		return s
	}
	all := make([]int32, 0, len(s.ids)+len(ids))
	all = append(all, s.ids...)
	all = append(all, ids...)
	return NewBrokerSet(all...)
}

// Without returns s minus ids.
func (s BrokerSet) Without(ids ...int32) BrokerSet {
	if len(ids) == 0 || len(s.ids) == 0 {
		return s
	}
	drop := NewBrokerSet(ids...)
	out := make([]int32, 0, len(s.ids))
	for _, id := range s.ids {
		if !drop.Has(id) {
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return BrokerSet{}
	}
	return BrokerSet{ids: out}
}

// String prints the set as Kafka tools print broker lists, e.g. "[1,2,3]".
func (s BrokerSet) String() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, id := range s.ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(int64(id), 10))
	}
	b.WriteByte(']')
	return b.String()
}
