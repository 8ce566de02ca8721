package fsm

import (
	"fmt"
	"slices"
	"sort"
	"strconv"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// topicStage holds what a Txn staged for the partitions of one topic.
type topicStage struct {
	// parts holds the staged partitions by number (nil: not staged). It
	// is dense: a topic's partitions are numbered from 0 and a Txn only
	// stages partitions that exist, so a slice indexed by number does the
	// job of a map at a fraction of the cost.
	parts []*Partition
	// slots is the topic's partition slot count once this Txn changed it.
	slots    int32
	hasSlots bool
	// gone: the topic was deleted in this Txn (and not created again).
	gone bool
	// fresh: the topic was created in this Txn, so parts holds all of its
	// partitions and none of the base's count.
	fresh bool
}

// Txn stages records over a base image without changing it. Records are
// checked by the same apply functions the FSM runs, so a record a Txn
// accepts is one every voter will accept at the same position in the log.
//
// The controller opens one Txn per round of events and, per event, a child
// Txn that it merges into the round only if all of the event's records
// apply: an event is in the batch whole or not at all.
//
// A Txn copies only what it changes: a topic's own fields on first write,
// and single partitions. Reads of anything else go to the base, which must
// not change while the Txn is in use (hold the FSM's view).
type Txn struct {
	base    store
	img     *Image // base, when the base is an Image
	index   uint64
	topics  map[rl.TopicID]*Topic // nil value: deleted in this Txn
	names   map[string]rl.TopicID // zero id: name freed in this Txn
	brokers map[int32]*Broker     // nil value: deleted in this Txn
	stages  map[rl.TopicID]*topicStage
	ctrlSet bool
	ctrl    [2]int32
	delta   int
	sec     *Security      // nil: the base's
	bcfg    *BrokerConfigs // nil: the base's
	feats   *Features      // nil: the base's
	cluster *string        // nil: the base's
	records []rl.Record
	// n counts the staged records as Len does.
	n int
	// open is the PartitionChanges record StagePartitionChange packs
	// into while it is the last record; deltas holds its changes (and
	// those of earlier packs), packOff where open's begin.
	open    *rl.PartitionChanges
	deltas  []rl.PartitionDelta
	packOff int
	// A large event works through one topic after another: the last
	// topic's stage (nil: nothing staged) and base topic are kept at hand.
	lastSet   bool
	lastID    rl.TopicID
	lastStage *topicStage
	lastBase  *Topic
	// alloc hands out the Txn's partition copies and change chunks.
	alloc *txnAlloc
}

// txnAlloc hands out the partition copies and the chunks of packed
// changes of a Txn and of every Txn opened over it (Child, and each
// Apply's own), from blocks they share: an event stages a few records
// through several levels of Txn, and blocks of their own would be mostly
// empty. What it hands out never overlaps; what a discarded Txn took is
// left unused.
type txnAlloc struct {
	parts  []Partition
	deltas []rl.PartitionDelta
}

func (a *txnAlloc) partition(v Partition) *Partition {
	if len(a.parts) == cap(a.parts) {
		a.parts = make([]Partition, 0, min(max(2*cap(a.parts), 16), 4096))
	}
	a.parts = append(a.parts, v)
	return &a.parts[len(a.parts)-1]
}

// deltaChunk returns an empty slice with room for n changes.
func (a *txnAlloc) deltaChunk(n int) []rl.PartitionDelta {
	if cap(a.deltas)-len(a.deltas) < n {
		a.deltas = make([]rl.PartitionDelta, 0, max(n, min(max(2*cap(a.deltas), 64), 4096)))
	}
	i := len(a.deltas)
	a.deltas = a.deltas[:i+n]
	return a.deltas[i : i : i+n]
}

// NewTxn opens a Txn over im. index is the raft index the records are
// expected to be committed at (it only affects broker epochs and change
// indexes inside the Txn).
func NewTxn(im *Image, index uint64) *Txn {
	tx := newTxn(im, index, &txnAlloc{})
	tx.img = im
	return tx
}

// newTxn opens a Txn over base. Its maps are made on first write: most
// Txns (one per staged record) change one topic or none.
func newTxn(base store, index uint64, alloc *txnAlloc) *Txn {
	return &Txn{base: base, index: index, alloc: alloc}
}

// put sets m[k] = v, making m first if need be.
func put[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = map[K]V{}
	}
	(*m)[k] = v
}

// stage returns what this Txn staged for the topic's partitions, or nil.
func (tx *Txn) stage(id rl.TopicID) *topicStage {
	if tx.lastSet && tx.lastID == id {
		return tx.lastStage
	}
	st := tx.stages[id]
	tx.lastSet, tx.lastID, tx.lastStage, tx.lastBase = true, id, st, nil
	if tx.img != nil {
		tx.lastBase = tx.img.topics[id]
	}
	return st
}

// touch returns the topic's stage, creating it.
func (tx *Txn) touch(id rl.TopicID) *topicStage {
	if st := tx.stage(id); st != nil {
		return st
	}
	st := &topicStage{}
	put(&tx.stages, id, st)
	tx.lastStage = st
	return st
}

// get returns the staged partition p, or nil.
func (st *topicStage) get(p int32) *Partition {
	if p < 0 || int(p) >= len(st.parts) {
		return nil
	}
	return st.parts[p]
}

// put stages v as partition p (p >= 0: only existing or appended
// partitions are staged).
func (st *topicStage) put(p int32, v *Partition) {
	if int(p) >= len(st.parts) {
		st.parts = append(st.parts, make([]*Partition, int(p)+1-len(st.parts))...)
	}
	st.parts[p] = v
}

// newPartition returns a Partition of the Txn's own holding v.
func (tx *Txn) newPartition(v Partition) *Partition { return tx.alloc.partition(v) }

// Child opens a Txn over this one; Merge folds it back.
func (tx *Txn) Child() *Txn { return newTxn(tx, tx.index, tx.alloc) }

// Rebase puts the image in place of this Txn's parent once the parent's
// changes are all in the image: the controller computes a round over the
// round being committed, and once that one has committed, computes the
// next over this one with the image below. It is only valid when the
// image holds exactly the parent's changes over the parent's own base.
func (tx *Txn) Rebase(im *Image) {
	tx.base, tx.img = im, im
	tx.lastSet, tx.lastStage, tx.lastBase = false, nil, nil
}

// Apply stages records in order, all or none: on the first rejected record
// it returns that record's error and the Txn is as it was.
func (tx *Txn) Apply(records ...rl.Record) error {
	child := tx.Child()
	for i, r := range records {
		if err := applyRecord(child, tx.index, r); err != nil {
			return &Rejection{Record: i, Type: r.Type(), Err: err}
		}
	}
	child.records = records
	for _, r := range records {
		child.n += Weight(r)
	}
	tx.absorb(child)
	return nil
}

// Merge folds a child Txn (from Child) into its parent.
func (tx *Txn) Merge(child *Txn) {
	if child.base != store(tx) {
		panic("fsm: Merge of a Txn that is not a child of this one")
	}
	tx.absorb(child)
}

func (tx *Txn) absorb(c *Txn) {
	tx.lastSet = false
	tx.n += c.n
	if tx.isEmpty() {
		// The common case of one big event: take its maps as they are.
		tx.topics, tx.names, tx.brokers, tx.stages = c.topics, c.names, c.brokers, c.stages
		tx.ctrlSet, tx.ctrl, tx.delta = c.ctrlSet, c.ctrl, c.delta
		tx.sec, tx.bcfg, tx.feats, tx.cluster = c.sec, c.bcfg, c.feats, c.cluster
		tx.records = append(tx.records, c.records...)
		return
	}
	for k, v := range c.topics {
		put(&tx.topics, k, v)
	}
	for k, v := range c.names {
		put(&tx.names, k, v)
	}
	for k, v := range c.brokers {
		put(&tx.brokers, k, v)
	}
	for id, cs := range c.stages {
		st := tx.stages[id]
		if st == nil || cs.fresh {
			put(&tx.stages, id, cs)
			continue
		}
		for p, v := range cs.parts {
			if v != nil {
				st.put(int32(p), v)
			}
		}
		if cs.hasSlots {
			st.slots, st.hasSlots = cs.slots, true
		}
		if cs.gone {
			st.gone = true
		}
	}
	if c.ctrlSet {
		tx.ctrlSet, tx.ctrl = true, c.ctrl
	}
	tx.delta += c.delta
	if c.sec != nil {
		tx.sec = c.sec
	}
	if c.bcfg != nil {
		tx.bcfg = c.bcfg
	}
	if c.feats != nil {
		tx.feats = c.feats
	}
	if c.cluster != nil {
		tx.cluster = c.cluster
	}
	tx.records = append(tx.records, c.records...)
}

// Empty reports whether nothing is staged.
func (tx *Txn) Empty() bool { return tx.isEmpty() }

func (tx *Txn) isEmpty() bool {
	return len(tx.topics) == 0 && len(tx.names) == 0 && len(tx.brokers) == 0 && len(tx.stages) == 0 &&
		!tx.ctrlSet && tx.delta == 0 && tx.sec == nil && tx.bcfg == nil && tx.feats == nil && tx.cluster == nil
}

// Records returns the staged records in the order they were applied.
func (tx *Txn) Records() []rl.Record { return tx.records }

// Grow makes room for n more staged records, for a caller about to stage
// many.
func (tx *Txn) Grow(n int) { tx.records = slices.Grow(tx.records, n) }

// Len is the number of staged records, a PartitionChanges counting one
// for each of its changes (see Weight): the positions a caller numbers
// records by, however StagePartitionChange packed them.
func (tx *Txn) Len() int { return tx.n }

// Weight is what a record counts for in Len: one per change for a
// PartitionChanges, one for any other record.
func Weight(r rl.Record) int {
	if pcs, ok := r.(*rl.PartitionChanges); ok {
		return len(pcs.Changes)
	}
	return 1
}

func (e *Rejection) Error() string {
	return "record " + strconv.Itoa(e.Record) + " (" + e.Type.String() + "): " + e.Err.Error()
}

func (e *Rejection) Unwrap() error { return e.Err }

// store implementation.

func (tx *Txn) topic(id rl.TopicID) *Topic {
	if len(tx.topics) > 0 {
		if t, ok := tx.topics[id]; ok {
			return t
		}
	}
	return tx.baseTopic(id)
}

func (tx *Txn) baseTopic(id rl.TopicID) *Topic {
	if tx.img != nil {
		tx.stage(id)
		return tx.lastBase
	}
	return tx.base.topic(id)
}

func (tx *Txn) writableTopic(id rl.TopicID) *Topic {
	if t, ok := tx.topics[id]; ok {
		return t
	}
	b := tx.base.topic(id)
	if b == nil {
		return nil
	}
	// Partitions are staged one by one in tx.parts; the copy shares the
	// base's partition slice and never writes to it.
	c := *b
	if b.Reassignments != nil {
		c.Reassignments = make(map[int32]Reassignment, len(b.Reassignments))
		for k, v := range b.Reassignments {
			c.Reassignments[k] = v
		}
	}
	c.Configs = append([]rl.ConfigEntry(nil), b.Configs...)
	put(&tx.topics, id, &c)
	return &c
}

func (tx *Txn) putTopic(t *Topic) {
	st := tx.touch(t.ID)
	st.parts = nil
	st.slots, st.hasSlots, st.gone, st.fresh = 0, true, false, true
	put(&tx.topics, t.ID, t)
	put(&tx.names, t.Name, t.ID)
}

func (tx *Txn) deleteTopic(t *Topic) {
	tx.touch(t.ID).gone = true
	put(&tx.topics, t.ID, nil)
	put(&tx.names, t.Name, rl.TopicID{})
}

func (tx *Txn) topicIDByName(name string) (rl.TopicID, bool) {
	if id, ok := tx.names[name]; ok {
		return id, !id.IsZero()
	}
	return tx.base.topicIDByName(name)
}

func (tx *Txn) partition(id rl.TopicID, p int32) *Partition {
	if st := tx.stage(id); st != nil {
		if st.gone {
			return nil
		}
		if v := st.get(p); v != nil {
			if v.State == rl.NonExistentPartition {
				return nil
			}
			return v
		}
		if st.hasSlots && p >= st.slots {
			return nil
		}
	}
	if tx.img != nil {
		if t := tx.lastBase; t != nil {
			return t.partition(p)
		}
		return nil
	}
	return tx.base.partition(id, p)
}

func (tx *Txn) partitionIn(t *Topic, p int32) *Partition { return tx.partition(t.ID, p) }

func (tx *Txn) partitionSlots(id rl.TopicID) int32 {
	if st := tx.stage(id); st != nil {
		if st.gone {
			return 0
		}
		if st.hasSlots {
			return st.slots
		}
	}
	if tx.img != nil {
		if t := tx.lastBase; t != nil {
			return int32(len(t.parts))
		}
		return 0
	}
	return tx.base.partitionSlots(id)
}

func (tx *Txn) setPartition(id rl.TopicID, p int32, v Partition) {
	st := tx.touch(id)
	if cur := st.get(p); cur != nil {
		*cur = v // this Txn's own copy: overwrite rather than allocate
		return
	}
	if len(st.parts) == 0 && !st.hasSlots && p >= 0 {
		// First partition staged for a topic of the base: size the
		// slice for all of its partitions at once, unless the topic is
		// large enough that one staged partition should not cost a
		// slot for each (put grows the slice as needed).
		if n := tx.partitionSlots(id); p < n {
			st.parts = make([]*Partition, min(n, max(p+1, 1024)))
		}
	}
	st.put(p, tx.newPartition(v))
}

func (tx *Txn) staged(id rl.TopicID) bool { return tx.stage(id) != nil || tx.base.staged(id) }

// EachPartition implements Reader.
func (tx *Txn) EachPartition(id rl.TopicID, fn func(int32, *Partition) bool) {
	if !tx.staged(id) {
		tx.base.(Reader).EachPartition(id, fn)
		return
	}
	n := tx.partitionSlots(id)
	for i := int32(0); i < n; i++ {
		if p := tx.partition(id, i); p != nil && !fn(i, p) {
			return
		}
	}
}

func (tx *Txn) appendPartition(id rl.TopicID, v Partition) {
	st := tx.touch(id)
	n := tx.partitionSlots(id)
	st.put(n, tx.newPartition(v))
	st.slots, st.hasSlots = n+1, true
}

func (tx *Txn) broker(id int32) *Broker {
	if b, ok := tx.brokers[id]; ok {
		return b
	}
	return tx.base.broker(id)
}

func (tx *Txn) putBroker(b *Broker)     { put(&tx.brokers, b.ID, b) }
func (tx *Txn) deleteBroker(id int32)   { put(&tx.brokers, id, nil) }
func (tx *Txn) addPartitionCount(d int) { tx.delta += d }

func (tx *Txn) controller() (int32, int32) {
	if tx.ctrlSet {
		return tx.ctrl[0], tx.ctrl[1]
	}
	return tx.base.controller()
}

func (tx *Txn) setController(e, n int32) { tx.ctrlSet, tx.ctrl = true, [2]int32{e, n} }

// Reader implementation.

func (tx *Txn) ControllerEpoch() (int32, int32)             { return tx.controller() }
func (tx *Txn) Broker(id int32) *Broker                     { return tx.broker(id) }
func (tx *Txn) Topic(id rl.TopicID) *Topic                  { return tx.topic(id) }
func (tx *Txn) Partition(id rl.TopicID, p int32) *Partition { return tx.partition(id, p) }
func (tx *Txn) PartitionCount(id rl.TopicID) int32          { return tx.partitionSlots(id) }

func (tx *Txn) TopicByName(name string) *Topic {
	if id, ok := tx.topicIDByName(name); ok {
		return tx.topic(id)
	}
	return nil
}

func (tx *Txn) NumPartitions() int { return tx.base.(Reader).NumPartitions() + tx.delta }

// Brokers returns the brokers as staged, in ascending id order: the
// base's own slice when no broker is staged, so read it, do not change it.
func (tx *Txn) Brokers() []*Broker {
	base := tx.base.(Reader).Brokers()
	if len(tx.brokers) == 0 {
		return base
	}
	out := make([]*Broker, 0, len(base)+len(tx.brokers))
	for _, b := range base {
		if _, staged := tx.brokers[b.ID]; !staged {
			out = append(out, b)
		}
	}
	for _, b := range tx.brokers {
		if b != nil {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (tx *Txn) ForEachTopic(fn func(*Topic) bool) {
	for _, t := range tx.topics {
		if t != nil && !fn(t) {
			return
		}
	}
	tx.base.(Reader).ForEachTopic(func(t *Topic) bool {
		if _, staged := tx.topics[t.ID]; staged {
			return true
		}
		return fn(t)
	})
}

// Stage applies one record directly to this Txn. A rejected record changes
// nothing, but records staged before it stay: use it inside a Txn that is
// discarded as a whole on error (an event's own Txn), and Apply elsewhere.
func (tx *Txn) Stage(r rl.Record) error {
	if err := applyRecord(tx, tx.index, r); err != nil {
		return &Rejection{Record: tx.Len(), Type: r.Type(), Err: err}
	}
	tx.records = append(tx.records, r)
	tx.n += Weight(r)
	return nil
}

// nextDeltaChunk is the size of the next chunk of packed changes: one for
// the many events that change a single partition (a topic creation),
// doubling up to 4096 for the few that change hundreds of thousands.
func (tx *Txn) nextDeltaChunk() int {
	return min(max(2*cap(tx.deltas), 1), 4096)
}

// StagePartitionChange stages the change d of partition d.Partition of
// topic id as Stage stages a PartitionChange record, with the same checks
// and the same rejection. Consecutive changes of one topic in ascending
// partition order are packed into one PartitionChanges record, which the
// FSM applies as it would apply them one by one: a large event stages
// hundreds of thousands of changes, and this saves a record each. The
// caller may cut a packed record anywhere between changes.
func (tx *Txn) StagePartitionChange(id rl.TopicID, d rl.PartitionDelta) error {
	reject := func(err error) error {
		return &Rejection{Record: tx.Len(), Type: rl.TypePartitionChange, Err: err}
	}
	t := tx.topic(id)
	if t == nil {
		return reject(fmt.Errorf("%w: %s", ErrUnknownTopic, id))
	}
	cur, err := checkPartitionChange(tx, t, &d)
	if err != nil {
		return reject(err)
	}
	commitPartitionChange(tx, id, tx.index, cur, &d)
	tx.n++
	if pc := tx.open; pc != nil && len(tx.records) > 0 && tx.records[len(tx.records)-1] == rl.Record(pc) &&
		pc.TopicID == id && pc.Changes[len(pc.Changes)-1].Partition < d.Partition {
		if len(tx.deltas) == cap(tx.deltas) {
			// Move the open record's changes to a larger chunk.
			fresh := tx.alloc.deltaChunk(max(tx.nextDeltaChunk(), 2*len(pc.Changes)))
			tx.packOff = 0
			tx.deltas = append(fresh, pc.Changes...)
		}
		tx.deltas = append(tx.deltas, d)
		pc.Changes = tx.deltas[tx.packOff:len(tx.deltas):len(tx.deltas)]
		return nil
	}
	if len(tx.deltas) == cap(tx.deltas) {
		tx.deltas = tx.alloc.deltaChunk(tx.nextDeltaChunk())
	}
	tx.packOff = len(tx.deltas)
	tx.deltas = append(tx.deltas, d)
	tx.open = &rl.PartitionChanges{TopicID: id, Changes: tx.deltas[tx.packOff:len(tx.deltas):len(tx.deltas)]}
	tx.records = append(tx.records, tx.open)
	return nil
}
