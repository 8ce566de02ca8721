package controller

import (
	"cmp"
	"encoding/binary"
	"slices"
	"sort"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// partRef names a partition in a plan. The name travels with the id so a
// StopReplica can still name a topic that the same batch removed.
type partRef struct {
	id   rl.TopicID
	name string
	part int32
}

func lessRef(a, b partRef) bool { return compareRef(a, b) < 0 }

// compareRef orders partitions by topic id (as bytes) and then number.
func compareRef(a, b partRef) int {
	if c := compareIDs(a.id, b.id); c != 0 {
		return c
	}
	return cmp.Compare(a.part, b.part)
}

// compareIDs compares topic ids as byte strings, eight bytes at a time.
func compareIDs(a, b rl.TopicID) int {
	if c := cmp.Compare(binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])); c != 0 {
		return c
	}
	return cmp.Compare(binary.BigEndian.Uint64(a[8:]), binary.BigEndian.Uint64(b[8:]))
}

type stopEntry struct {
	delete      bool
	leaderEpoch int32
}

// leaderAndIsrItem is an index into plan.updateMetadataPartitions, shifted
// left by one, with the low bit set for a new replica.
type leaderAndIsrItem uint32

type stopItem struct {
	ref partRef
	stopEntry
}

// plan records which control requests a round of events calls for: which
// partitions go to which broker in which kind of request. It holds no
// partition contents: those are read from the committed image once the
// round's records commit, so a request can only ever carry committed state.
//
// Entries are appended, duplicates and all, and sorted and merged once at
// materialize: a large event plans hundreds of thousands of entries, and
// appending is far cheaper than keeping sets.
type plan struct {
	// leaderAndIsrTo lists, per broker, the partitions it gets in
	// LeaderAndIsr.
	leaderAndIsrTo map[int32][]leaderAndIsrItem
	stop           map[int32][]stopItem
	// updateMetadataPartitions holds partitions every live broker gets in
	// UpdateMetadata; a LeaderAndIsr names its partitions by their index
	// here.
	updateMetadataPartitions []partRef
	// updateMetadataToAll sends UpdateMetadata to every live broker even with no
	// partitions: the broker list itself changed.
	updateMetadataToAll bool
	// fullUpdateMetadata makes the UpdateMetadata of every live broker full (see
	// UpdateMetadata.Full), as a catch-up's is: a new controller's first,
	// so that every broker forgets the topics removed under an earlier
	// one that it may still cache.
	fullUpdateMetadata bool
	// updateMetadataTo adds brokers that get UpdateMetadata whatever else happens.
	updateMetadataTo map[int32]struct{}
	// catchUp asks for every partition changed after the given offset to
	// be sent to the broker.
	catchUp map[int32]uint64
}

// newPlan returns an empty plan. Its maps are made on first write (see
// leaderAndIsrByBroker, stops and catchUpFrom): a round makes a plan per event, and most
// events plan no StopReplica and no catch-up.
func newPlan() *plan { return &plan{} }

func (p *plan) leaderAndIsrByBroker() map[int32][]leaderAndIsrItem {
	if p.leaderAndIsrTo == nil {
		p.leaderAndIsrTo = map[int32][]leaderAndIsrItem{}
	}
	return p.leaderAndIsrTo
}

func (p *plan) stops() map[int32][]stopItem {
	if p.stop == nil {
		p.stop = map[int32][]stopItem{}
	}
	return p.stop
}

// catchUpFrom asks for every partition changed after offset to be sent to
// broker b. With keepLower, an earlier request from a lower offset stands.
func (p *plan) catchUpFrom(b int32, offset uint64, keepLower bool) {
	if p.catchUp == nil {
		p.catchUp = map[int32]uint64{}
	}
	if cur, ok := p.catchUp[b]; keepLower && ok && cur < offset {
		return
	}
	p.catchUp[b] = offset
}

func (p *plan) empty() bool {
	return len(p.leaderAndIsrTo) == 0 && len(p.stop) == 0 && len(p.updateMetadataPartitions) == 0 && !p.updateMetadataToAll && !p.fullUpdateMetadata && len(p.updateMetadataTo) == 0 && len(p.catchUp) == 0
}

// leaderAndIsr sends a LeaderAndIsr for the partition to each broker, and,
// as every LeaderAndIsr does, the partition to all live brokers in
// UpdateMetadata.
func (p *plan) leaderAndIsr(ref partRef, brokers []int32, isNew bool) {
	it := leaderAndIsrItem(len(p.updateMetadataPartitions)) << 1
	if isNew {
		it |= 1
	}
	to := p.leaderAndIsrByBroker()
	for _, b := range brokers {
		to[b] = append(to[b], it)
	}
	p.updateMetadataPartitions = append(p.updateMetadataPartitions, ref)
}

// reserve makes room for n more UpdateMetadata partitions.
func (p *plan) reserve(n int) {
	p.updateMetadataPartitions = slices.Grow(p.updateMetadataPartitions, n)
}

// updateMetadata sends the partition to all live brokers.
func (p *plan) updateMetadata(ref partRef) {
	p.updateMetadataPartitions = append(p.updateMetadataPartitions, ref)
}

// reserveStop makes room for n more StopReplica partitions to broker b.
func (p *plan) reserveStop(b int32, n int) { p.stops()[b] = slices.Grow(p.stop[b], n) }

func (p *plan) stopReplica(ref partRef, broker int32, del bool, leaderEpoch int32) {
	p.stops()[broker] = append(p.stop[broker], stopItem{ref: ref, stopEntry: stopEntry{delete: del, leaderEpoch: leaderEpoch}})
}

// merge adds o to p. A round's first event usually brings most of the
// work, so an empty p simply takes o's contents.
func (p *plan) merge(o *plan) {
	if p.empty() {
		*p = *o
		return
	}
	shift := leaderAndIsrItem(len(p.updateMetadataPartitions)) << 1
	for b, items := range o.leaderAndIsrTo {
		to := p.leaderAndIsrByBroker()
		for _, it := range items {
			to[b] = append(to[b], it+shift)
		}
	}
	for b, items := range o.stop {
		p.stops()[b] = append(p.stop[b], items...)
	}
	p.updateMetadataPartitions = append(p.updateMetadataPartitions, o.updateMetadataPartitions...)
	p.updateMetadataToAll = p.updateMetadataToAll || o.updateMetadataToAll
	p.fullUpdateMetadata = p.fullUpdateMetadata || o.fullUpdateMetadata
	for b := range o.updateMetadataTo {
		if p.updateMetadataTo == nil {
			p.updateMetadataTo = map[int32]struct{}{}
		}
		p.updateMetadataTo[b] = struct{}{}
	}
	for b, off := range o.catchUp {
		p.catchUpFrom(b, off, true)
	}
}

// sortRuns sorts s stably and returns it (possibly in another array). A
// plan appends its entries in a few sorted runs, one per pass over the
// image: those are merged rather than sorted again.
func sortRuns[T any](s []T, cmp func(a, b T) int) []T {
	var starts []int
	for i := 1; i < len(s); i++ {
		if cmp(s[i-1], s[i]) > 0 {
			starts = append(starts, i)
			if len(starts) > 16 {
				slices.SortStableFunc(s, cmp)
				return s
			}
		}
	}
	if len(starts) == 0 {
		return s
	}
	bounds := append(append([]int{0}, starts...), len(s))
	buf := make([]T, len(s))
	for len(bounds) > 2 {
		next := []int{0}
		for i := 0; i+1 < len(bounds); i += 2 {
			lo, mid := bounds[i], bounds[i+1]
			hi := mid
			if i+2 < len(bounds) {
				hi = bounds[i+2]
			}
			a, b, o := lo, mid, lo
			for a < mid && b < hi {
				if cmp(s[b], s[a]) < 0 {
					buf[o] = s[b]
					b++
				} else {
					buf[o] = s[a]
					a++
				}
				o++
			}
			o += copy(buf[o:], s[a:mid])
			copy(buf[o:], s[b:hi])
			next = append(next, hi)
		}
		s, buf, bounds = buf, s, next
	}
	return s
}

func sortedRefs[V any](m map[partRef]V) []partRef {
	out := make([]partRef, 0, len(m))
	for r := range m {
		out = append(out, r)
	}
	slices.SortFunc(out, compareRef)
	return out
}

// partitionState reads a partition's state from the image. A partition
// of a topic queued for deletion has leader LeaderDuringDelete, so that
// every broker that hears of it drops it from its metadata cache (Kafka's
// UpdateMetadata for a topic being deleted): such a state goes out in
// UpdateMetadata only, never in LeaderAndIsr.
func partitionState(im fsm.Reader, ref partRef) (PartitionState, bool) {
	p := im.Partition(ref.id, ref.part)
	if p == nil {
		return PartitionState{}, false
	}
	ps := PartitionState{
		Topic: ref.name, TopicID: ref.id, Partition: ref.part,
		Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, ISR: p.ISR, PartitionEpoch: p.PartitionEpoch,
		Replicas: p.Replicas,
	}
	if t := im.Topic(ref.id); t != nil {
		if ra, ok := t.Reassignments[ref.part]; ok {
			ps.Adding, ps.Removing = ra.Adding, ra.Removing
		}
		if t.Deleting {
			ps.Leader = LeaderDuringDelete
		}
	}
	return ps, true
}

// stopEpoch is the leader epoch a StopReplica carries for a partition:
// EpochDuringDelete for a topic queued for deletion or already removed
// (Kafka's sentinel: the broker stops the replica whatever its epoch and
// drops it from its metadata cache), otherwise the partition's leader
// epoch as committed, or the planned one if higher. The request goes out
// after the round committed, behind the round's LeaderAndIsr and
// UpdateMetadata: a leader elected later in the round (a reassignment
// that completes elects one and then stops the replicas it dropped) has
// already reached the broker, which refuses a stop at an older epoch
// with FENCED_LEADER_EPOCH.
func stopEpoch(im fsm.Reader, ref partRef, planned int32) int32 {
	if t := im.Topic(ref.id); t == nil || t.Deleting {
		return EpochDuringDelete
	}
	if p := im.Partition(ref.id, ref.part); p != nil && p.LeaderEpoch > planned {
		return p.LeaderEpoch
	}
	return planned
}

// topicNames lists the topics a full UpdateMetadata names, by id: every
// topic of the image but those queued for deletion, which brokers are to
// forget at once.
func topicNames(im *fsm.Image) []TopicName {
	var out []TopicName
	im.ForEachTopic(func(t *fsm.Topic) bool {
		if !t.Deleting {
			out = append(out, TopicName{Name: t.Name, ID: t.ID})
		}
		return true
	})
	slices.SortFunc(out, func(a, b TopicName) int { return compareIDs(a.ID, b.ID) })
	return out
}

func liveBrokers(im fsm.Reader) []LiveBroker {
	var out []LiveBroker
	for _, b := range im.Brokers() {
		if b.Live() {
			out = append(out, liveBroker(b))
		}
	}
	return out
}

func liveBroker(b *fsm.Broker) LiveBroker {
	return LiveBroker{ID: b.ID, Epoch: b.Epoch, Rack: b.Rack, Endpoints: b.Endpoints, Fenced: b.Fenced}
}

// materialize turns a plan into requests, reading partition contents from
// the committed image at offset. Brokers are visited in id order and
// partitions in (topic id, partition) order, so the same plan over the same
// image gives the same requests.
//
// A request's metadata offset tells a broker that it has been sent
// everything up to it, which holds only for a live broker this controller
// has caught up: every change goes to every live broker. Requests to any
// other broker carry no offset unless the plan catches it up: to a broker
// awaitingCatchUp names (nil: none), which an earlier controller may not
// have sent all it committed, and to one that is not live, which gets a
// fence's StopReplica and the like but not the changes made meanwhile.
// The offset such a broker then reports is the one it had, and its
// catch-up (first heartbeat after a failover, unfence) starts there.
func (p *plan) materialize(im *fsm.Image, hdr Header, awaitingCatchUp func(broker int32) bool) []Requests {
	live := liveBrokers(im)
	byID := map[int32]*LiveBroker{}
	for i := range live {
		byID[live[i].ID] = &live[i]
	}
	out := map[int32]*Requests{}
	get := func(b int32) *Requests {
		r := out[b]
		if r == nil {
			r = &Requests{Broker: b}
			out[b] = r
		}
		return r
	}
	header := func(b int32) Header {
		h := hdr
		if br := im.Broker(b); br != nil {
			h.BrokerEpoch = br.Epoch
		}
		if _, catchUp := p.catchUp[b]; !catchUp && (byID[b] == nil || (awaitingCatchUp != nil && awaitingCatchUp(b))) {
			h.MetadataOffset = 0
		}
		return h
	}

	// Sort the UpdateMetadata partitions through a permutation, so that
	// at[i] can tell where updateMetadataPartitions[i] ended up among the states.
	order := make([]int32, len(p.updateMetadataPartitions))
	for i := range order {
		order[i] = int32(i)
	}
	order = sortRuns(order, func(a, b int32) int { return compareRef(p.updateMetadataPartitions[a], p.updateMetadataPartitions[b]) })
	at := make([]int32, len(p.updateMetadataPartitions)) // index in shared, -1 for a partition gone
	shared := make([]PartitionState, 0, len(order))
	for i, k := range order {
		if i > 0 && compareRef(p.updateMetadataPartitions[order[i-1]], p.updateMetadataPartitions[k]) == 0 {
			at[k] = at[order[i-1]]
			continue
		}
		at[k] = -1
		if ps, ok := partitionState(im, p.updateMetadataPartitions[k]); ok {
			at[k] = int32(len(shared))
			shared = append(shared, ps)
		}
	}
	for b, items := range p.leaderAndIsrTo {
		if byID[b] == nil {
			continue // fenced or gone since: it will catch up when it returns
		}
		// Each item becomes its state's index in shared, shifted, with
		// the new-replica bit: sorted, repeats of a partition are next to
		// each other.
		keys := make([]uint32, 0, len(items))
		for _, it := range items {
			// A topic queued for deletion gets no LeaderAndIsr.
			if k := at[it>>1]; k >= 0 && shared[k].Leader != LeaderDuringDelete {
				keys = append(keys, uint32(k)<<1|uint32(it&1))
			}
		}
		keys = sortRuns(keys, cmp.Compare[uint32])
		req := &LeaderAndIsr{Header: header(b), Partitions: make([]*PartitionState, 0, len(keys))}
		// A new replica's state is a copy; they share one array, sized
		// for every key with the bit so pointers into it stay put.
		news := 0
		for _, k := range keys {
			news += int(k & 1)
		}
		copies := make([]PartitionState, 0, news)
		leaders := map[int32]bool{}
		for i := 0; i < len(keys); {
			k := keys[i] >> 1
			isNew := keys[i]&1 == 1
			j := i + 1
			for ; j < len(keys) && keys[j]>>1 == k; j++ {
				isNew = isNew || keys[j]&1 == 1
			}
			i = j
			// Brokers share the states: only a new replica's differs.
			ps := &shared[k]
			if isNew {
				copies = append(copies, *ps)
				ps = &copies[len(copies)-1]
				ps.IsNew = true
			}
			req.Partitions = append(req.Partitions, ps)
			if l := byID[ps.Leader]; l != nil && !leaders[ps.Leader] {
				leaders[ps.Leader] = true
				req.Leaders = append(req.Leaders, *l)
			}
		}
		sort.Slice(req.Leaders, func(i, j int) bool { return req.Leaders[i].ID < req.Leaders[j].ID })
		if len(req.Partitions) > 0 {
			get(b).LeaderAndIsr = req
		}
	}

	updateMetadataTargets := map[int32]bool{}
	if len(shared) > 0 || p.updateMetadataToAll || p.fullUpdateMetadata {
		for _, l := range live {
			updateMetadataTargets[l.ID] = true
		}
	}
	for b := range p.updateMetadataTo {
		if byID[b] != nil {
			updateMetadataTargets[b] = true
		}
	}
	for b := range p.catchUp {
		if byID[b] != nil {
			updateMetadataTargets[b] = true
		}
	}
	var roster []TopicName // read once, for the first full UpdateMetadata
	for b := range updateMetadataTargets {
		update := &UpdateMetadata{Header: header(b), Partitions: shared, LiveBrokers: live}
		from, catchUp := p.catchUp[b]
		if catchUp {
			parts := catchUpPartitions(im, b, from, get, header(b), byID)
			update.Partitions = mergeStates(shared, parts)
		}
		if catchUp || p.fullUpdateMetadata {
			// A catch-up is a full UpdateMetadata: it names every topic,
			// so the broker also forgets the topics removed while it was
			// not hearing from this controller.
			if roster == nil {
				roster = topicNames(im)
				if roster == nil {
					roster = []TopicName{}
				}
			}
			update.Full, update.Topics = true, roster
		}
		get(b).UpdateMetadata = update
	}

	for b, items := range p.stop {
		items = sortRuns(items, func(a, b stopItem) int { return compareRef(a.ref, b.ref) })
		req := &StopReplica{Header: header(b), Partitions: make([]StopPartition, 0, len(items))}
		for i := 0; i < len(items); {
			it := items[i]
			j := i + 1
			for ; j < len(items) && items[j].ref.id == it.ref.id && items[j].ref.part == it.ref.part; j++ {
				it.delete = it.delete || items[j].delete
				it.leaderEpoch = items[j].leaderEpoch
			}
			i = j
			req.Partitions = append(req.Partitions, StopPartition{Topic: it.ref.name, TopicID: it.ref.id, Partition: it.ref.part,
				LeaderEpoch: stopEpoch(im, it.ref, it.leaderEpoch), Delete: it.delete})
		}
		get(b).StopReplica = req
	}

	ids := make([]int32, 0, len(out))
	for b := range out {
		ids = append(ids, b)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	reqs := make([]Requests, 0, len(ids))
	for _, b := range ids {
		reqs = append(reqs, *out[b])
	}
	return reqs
}

// catchUpPartitions collects the partitions changed after offset `from` for
// a broker that reported it had applied only that far, and adds a
// LeaderAndIsr for those it hosts (but those of topics being deleted,
// which go out with leader LeaderDuringDelete in UpdateMetadata only).
func catchUpPartitions(im *fsm.Image, broker int32, from uint64, get func(int32) *Requests, hdr Header, byID map[int32]*LiveBroker) []PartitionState {
	var parts []PartitionState
	var hosted []*PartitionState
	im.ForEachTopic(func(t *fsm.Topic) bool {
		n := im.PartitionCount(t.ID)
		for i := int32(0); i < n; i++ {
			p := im.Partition(t.ID, i)
			if p == nil || p.ChangedAt <= from {
				continue
			}
			ps, _ := partitionState(im, partRef{id: t.ID, name: t.Name, part: i})
			parts = append(parts, ps)
			if t.Deleting {
				continue
			}
			for _, r := range p.Replicas {
				if r == broker {
					hosted = append(hosted, &ps)
				}
			}
		}
		return true
	})
	sortStates(parts)
	if len(hosted) > 0 {
		slices.SortFunc(hosted, func(a, b *PartitionState) int { return compareRef(stateRef(a), stateRef(b)) })
		req := get(broker)
		if req.LeaderAndIsr == nil {
			req.LeaderAndIsr = &LeaderAndIsr{Header: hdr}
		}
		req.LeaderAndIsr.Partitions = mergeStates(req.LeaderAndIsr.Partitions, hosted)
		seen := map[int32]bool{}
		req.LeaderAndIsr.Leaders = req.LeaderAndIsr.Leaders[:0]
		for _, ps := range req.LeaderAndIsr.Partitions {
			if l := byID[ps.Leader]; l != nil && !seen[ps.Leader] {
				seen[ps.Leader] = true
				req.LeaderAndIsr.Leaders = append(req.LeaderAndIsr.Leaders, *l)
			}
		}
		sort.Slice(req.LeaderAndIsr.Leaders, func(i, j int) bool { return req.LeaderAndIsr.Leaders[i].ID < req.LeaderAndIsr.Leaders[j].ID })
	}
	return parts
}

func stateRef(ps *PartitionState) partRef { return partRef{id: ps.TopicID, part: ps.Partition} }

func sortStates(s []PartitionState) {
	slices.SortFunc(s, func(a, b PartitionState) int { return compareRef(stateRef(&a), stateRef(&b)) })
}

// mergeStates merges two sorted lists, dropping duplicates.
func mergeStates[S PartitionState | *PartitionState](a, b []S) []S {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	ref := func(s *S) partRef {
		switch v := any(s).(type) {
		case *PartitionState:
			return stateRef(v)
		case **PartitionState:
			return stateRef(*v)
		}
		panic("unreachable")
	}
	out := make([]S, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j >= len(b):
			out = append(out, a[i])
			i++
		case i >= len(a):
			out = append(out, b[j])
			j++
		default:
			ra, rb := ref(&a[i]), ref(&b[j])
			switch {
			case lessRef(ra, rb):
				out = append(out, a[i])
				i++
			case lessRef(rb, ra):
				out = append(out, b[j])
				j++
			default:
				out = append(out, a[i])
				i++
				j++
			}
		}
	}
	return out
}
