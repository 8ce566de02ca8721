package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/vmihailenco/msgpack/v5"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Snapshot stream layout (all integers varints unless noted):
//
//	header:  "CQSNAP" | format version (1 byte) | applied index
//	body:    controller epoch | controller node
//	         broker count | brokers (length-prefixed msgpack each)
//	         topic count | partition slots in all
//	         per topic: length-prefixed msgpack topic header,
//	                    then its partitions in the compact form below
//	         (format 2 on) SCRAM credential count | credentials (msgpack each)
//	         ACL rule count | rules (msgpack each)
//	         (format 3 on) broker config resource count |
//	         resources (msgpack each: broker name, configs)
//	         feature count | features (msgpack each) | features epoch
//	         (format 4 on) cluster id (msgpack string)
//	trailer: CRC-32C of header and body (4 bytes, big endian)
//
// Partitions use a hand-rolled varint form rather than msgpack: they are
// nearly all of a large image, and this keeps them near 20 bytes each and
// quick to write and read. The state hash is SHA-256 over the body, which
// is canonical: brokers sorted by id, topics by id, partitions by number.
//
// Format 3 adds each broker's supported features, the broker configs and
// the finalized feature levels. It is written only once the image holds
// any of them, which takes
// metadata.version 2: an image at level 1 is written in format 2, which
// the release before feature levels reads, so a voter of that release can
// still be sent a snapshot during a rolling upgrade. Format 4 adds the
// cluster id the log recorded (a ClusterID record, also level 2), and is
// written only once the image holds one.
const (
	snapshotMagic         = "CQSNAP"
	snapshotFormatVersion = 4
	// maxEntryBytes bounds one length-prefixed broker or topic header.
	maxEntryBytes = 16 << 20
)

type brokerEntry struct {
	_msgpack     struct{} `msgpack:",as_array"`
	ID           int32
	Incarnation  rl.IncarnationID
	Epoch        int64
	Endpoints    []rl.Endpoint
	Rack         string
	Fenced       bool
	ShuttingDown bool
}

// brokerEntryV3 is a broker in format 3: brokerEntry and its features.
type brokerEntryV3 struct {
	_msgpack     struct{} `msgpack:",as_array"`
	ID           int32
	Incarnation  rl.IncarnationID
	Epoch        int64
	Endpoints    []rl.Endpoint
	Rack         string
	Fenced       bool
	ShuttingDown bool
	Features     []rl.FeatureRange
}

type reassignEntry struct {
	_msgpack  struct{} `msgpack:",as_array"`
	Partition int32
	Adding    []int32
	Removing  []int32
}

type topicEntry struct {
	_msgpack      struct{} `msgpack:",as_array"`
	ID            rl.TopicID
	Name          string
	Configs       []rl.ConfigEntry
	Deleting      bool
	Partitions    int32
	Reassignments []reassignEntry
}

// frozenImage is the part of an image a snapshot or state hash reads. Its
// topics are shared with the live image until apply clones them.
type frozenImage struct {
	appliedIndex    uint64
	controllerEpoch int32
	controllerNode  int32
	brokers         []*Broker
	topics          []*Topic
	sec             *Security
	bcfg            *BrokerConfigs
	feats           *Features
	cluster         string
}

// format is the snapshot format the image is written in: 4 once it holds a
// cluster id, 3 once it holds feature levels, a broker's features or
// broker configs, which all take metadata.version 2, and 2 before (see
// snapshotFormatVersion).
func (fr *frozenImage) format() byte {
	if fr.cluster != "" {
		return 4
	}
	if fr.feats.Recorded() || len(fr.bcfg.Resources()) > 0 {
		return 3
	}
	for _, b := range fr.brokers {
		if len(b.Features) > 0 {
			return 3
		}
	}
	return 2
}

// freeze must run under the write lock: it starts a new snapshot
// generation so that apply clones any topic before changing it, until
// the view is thawed (FSM.thaw) and no other is left.
func (im *Image) freeze() *frozenImage {
	im.snapGen++
	im.frozen++
	fr := &frozenImage{
		appliedIndex:    im.appliedIndex,
		controllerEpoch: im.controllerEpoch,
		controllerNode:  im.controllerNode,
		brokers:         make([]*Broker, 0, len(im.brokers)),
		topics:          make([]*Topic, 0, len(im.topics)),
		sec:             im.sec,
		bcfg:            im.bcfg,
		feats:           im.feats,
		cluster:         im.cluster,
	}
	for _, b := range im.brokers {
		fr.brokers = append(fr.brokers, b)
	}
	for _, t := range im.topics {
		fr.topics = append(fr.topics, t)
	}
	return fr
}

func (fr *frozenImage) sort() {
	sort.Slice(fr.brokers, func(i, j int) bool { return fr.brokers[i].ID < fr.brokers[j].ID })
	sort.Slice(fr.topics, func(i, j int) bool { return lessID(fr.topics[i].ID, fr.topics[j].ID) })
}

func lessID(a, b rl.TopicID) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// chunkWriter batches small appends into large writes.
type chunkWriter struct {
	w   io.Writer
	buf []byte
	err error
}

func (c *chunkWriter) flushIfFull() {
	if len(c.buf) >= 64<<10 {
		c.flush()
	}
}

func (c *chunkWriter) flush() {
	if c.err == nil && len(c.buf) > 0 {
		_, c.err = c.w.Write(c.buf)
	}
	c.buf = c.buf[:0]
}

func (c *chunkWriter) uvarint(v uint64) { c.buf = binary.AppendUvarint(c.buf, v) }
func (c *chunkWriter) varint(v int64)   { c.buf = binary.AppendVarint(c.buf, v) }

func (c *chunkWriter) msgpack(v any) {
	b, err := msgpack.Marshal(v)
	if err != nil && c.err == nil {
		c.err = err
	}
	c.uvarint(uint64(len(b)))
	c.buf = append(c.buf, b...)
}

// writeBody writes the canonical body of a frozen image in the given
// format (2 to 4, fr.format()).
func (fr *frozenImage) writeBody(w io.Writer, format byte) error {
	c := &chunkWriter{w: w, buf: make([]byte, 0, 128<<10)}
	c.varint(int64(fr.controllerEpoch))
	c.varint(int64(fr.controllerNode))
	c.uvarint(uint64(len(fr.brokers)))
	for _, b := range fr.brokers {
		if format >= 3 {
			c.msgpack(&brokerEntryV3{ID: b.ID, Incarnation: b.Incarnation, Epoch: b.Epoch, Endpoints: b.Endpoints,
				Rack: b.Rack, Fenced: b.Fenced, ShuttingDown: b.ShuttingDown, Features: b.Features})
			continue
		}
		c.msgpack(&brokerEntry{ID: b.ID, Incarnation: b.Incarnation, Epoch: b.Epoch, Endpoints: b.Endpoints,
			Rack: b.Rack, Fenced: b.Fenced, ShuttingDown: b.ShuttingDown})
	}
	slots := 0
	for _, t := range fr.topics {
		slots += len(t.parts)
	}
	c.uvarint(uint64(len(fr.topics)))
	c.uvarint(uint64(slots))
	for _, t := range fr.topics {
		te := &topicEntry{ID: t.ID, Name: t.Name, Configs: t.Configs, Deleting: t.Deleting, Partitions: int32(len(t.parts))}
		for _, p := range t.ReassigningPartitions() {
			r := t.Reassignments[p]
			te.Reassignments = append(te.Reassignments, reassignEntry{Partition: p, Adding: r.Adding, Removing: r.Removing})
		}
		c.msgpack(te)
		for i := range t.parts {
			appendPartition(c, &t.parts[i])
			c.flushIfFull()
		}
		c.flushIfFull()
	}
	writeSecurity(c, fr.sec)
	if format >= 3 {
		writeBrokerConfigs(c, fr.bcfg)
		writeFeatures(c, fr.feats)
	}
	if format >= 4 {
		c.msgpack(fr.cluster)
	}
	c.flush()
	return c.err
}

func appendPartition(c *chunkWriter, p *Partition) {
	c.uvarint(uint64(len(p.Replicas)))
	for _, b := range p.Replicas {
		c.varint(int64(b))
	}
	for _, s := range p.ReplicaStates {
		c.buf = append(c.buf, byte(s))
	}
	c.uvarint(uint64(len(p.ISR)))
	for _, b := range p.ISR {
		c.varint(int64(b))
	}
	c.varint(int64(p.Leader))
	c.varint(int64(p.LeaderEpoch))
	c.varint(int64(p.PartitionEpoch))
	c.buf = append(c.buf, byte(p.State))
	c.uvarint(p.ChangedAt)
}

// reader decodes a snapshot held in memory, remembering the first error.
// Partition slices are carved from shared arenas: a million small
// allocations would dominate restore time, and since partition slices are
// never changed in place, sharing a backing array is safe (each slice is
// capped so an append cannot reach its neighbour).
type reader struct {
	b      []byte
	pos    int
	err    error
	ints   []int32
	states []rl.ReplicaState
	// version is the snapshot's format version: 1 has no security
	// section, 2 no broker config section.
	version byte
}

const arenaSize = 64 << 10

func (r *reader) allocInts(n int) []int32 {
	if n > len(r.ints) {
		r.ints = make([]int32, max(n, arenaSize))
	}
	s := r.ints[:n:n]
	r.ints = r.ints[n:]
	return s
}

func (r *reader) allocStates(n int) []rl.ReplicaState {
	if n > len(r.states) {
		r.states = make([]rl.ReplicaState, max(n, arenaSize))
	}
	s := r.states[:n:n]
	r.states = r.states[n:]
	return s
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("snapshot byte %d: %s", r.pos, fmt.Sprintf(format, args...))
	}
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.pos:])
	if n <= 0 {
		r.fail("bad %s", what)
		return 0
	}
	r.pos += n
	return v
}

func (r *reader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.pos:])
	if n <= 0 {
		r.fail("bad %s", what)
		return 0
	}
	r.pos += n
	return v
}

func (r *reader) int32(what string) int32 {
	v := r.varint(what)
	if v < -1<<31 || v > 1<<31-1 {
		r.fail("%s %d out of range", what, v)
		return 0
	}
	return int32(v)
}

func (r *reader) byte(what string) byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.b) {
		r.fail("truncated at %s", what)
		return 0
	}
	r.pos++
	return r.b[r.pos-1]
}

// count reads an element count and refuses one that could not fit in the
// bytes left at minBytes each.
func (r *reader) count(what string, minBytes int) int {
	n := r.uvarint(what)
	if r.err == nil && n > uint64((len(r.b)-r.pos)/minBytes) {
		r.fail("%s %d cannot fit in %d bytes", what, n, len(r.b)-r.pos)
		return 0
	}
	return int(n)
}

func (r *reader) msgpack(what string, v any) {
	n := r.uvarint(what + " length")
	if r.err != nil {
		return
	}
	if n > maxEntryBytes || n > uint64(len(r.b)-r.pos) {
		r.fail("%s length %d exceeds what is left", what, n)
		return
	}
	b := r.b[r.pos : r.pos+int(n)]
	if err := rl.CheckMsgpack(b, 1); err != nil {
		r.fail("%s: %v", what, err)
		return
	}
	if err := msgpack.Unmarshal(b, v); err != nil {
		r.fail("%s: %v", what, err)
		return
	}
	r.pos += int(n)
}

func (r *reader) int32s(what string) []int32 {
	n := r.count(what, 1)
	if n == 0 || r.err != nil {
		return nil
	}
	out := r.allocInts(n)
	for i := range out {
		out[i] = r.int32(what)
	}
	return out
}

var errSnapshotChecksum = errors.New("snapshot checksum mismatch")

// readBody decodes a body written by writeBody into a fresh image.
func readBody(r *reader) (*Image, error) {
	im := newImage()
	im.controllerEpoch = r.int32("controller epoch")
	im.controllerNode = r.int32("controller node")
	nb := r.count("broker count", 1)
	for i := 0; i < nb && r.err == nil; i++ {
		var be brokerEntryV3
		if r.version >= 3 {
			r.msgpack("broker", &be)
		} else {
			var old brokerEntry
			r.msgpack("broker", &old)
			be = brokerEntryV3{ID: old.ID, Incarnation: old.Incarnation, Epoch: old.Epoch, Endpoints: old.Endpoints,
				Rack: old.Rack, Fenced: old.Fenced, ShuttingDown: old.ShuttingDown}
		}
		if r.err != nil {
			break
		}
		if _, dup := im.brokers[be.ID]; dup {
			r.fail("broker %d appears twice", be.ID)
			break
		}
		im.brokers[be.ID] = &Broker{ID: be.ID, Incarnation: be.Incarnation, Epoch: be.Epoch, Endpoints: be.Endpoints,
			Rack: be.Rack, Fenced: be.Fenced, ShuttingDown: be.ShuttingDown, Features: be.Features}
	}
	im.listBrokers()
	nt := r.count("topic count", 1)
	slots := r.count("partition count", 1)
	seen := 0
	for i := 0; i < nt && r.err == nil; i++ {
		var te topicEntry
		r.msgpack("topic", &te)
		if r.err != nil {
			break
		}
		if te.Partitions < 0 || int(te.Partitions) > slots-seen {
			r.fail("topic %q claims %d partitions, %d left", te.Name, te.Partitions, slots-seen)
			break
		}
		if _, dup := im.topics[te.ID]; dup {
			r.fail("topic %s appears twice", te.ID)
			break
		}
		if _, dup := im.byName[te.Name]; dup {
			r.fail("topic name %q appears twice", te.Name)
			break
		}
		t := &Topic{ID: te.ID, Name: te.Name, Configs: te.Configs, Deleting: te.Deleting,
			parts: make([]Partition, te.Partitions)}
		for _, ra := range te.Reassignments {
			if ra.Partition < 0 || ra.Partition >= te.Partitions {
				r.fail("topic %q: reassignment of partition %d out of range", te.Name, ra.Partition)
				break
			}
			setReassignment(t, ra.Partition, Reassignment{Adding: ra.Adding, Removing: ra.Removing})
		}
		for j := range t.parts {
			readPartition(r, &t.parts[j])
			if t.parts[j].State != rl.NonExistentPartition {
				im.partitions++
			}
		}
		seen += int(te.Partitions)
		im.topics[t.ID] = t
		im.byName[t.Name] = t.ID
	}
	if r.err == nil && seen != slots {
		r.fail("header counts %d partitions, topics hold %d", slots, seen)
	}
	if r.err == nil && r.version >= 2 {
		im.sec = readSecurity(r)
	}
	if r.err == nil && r.version >= 3 {
		im.bcfg = readBrokerConfigs(r)
		im.feats = readFeatures(r)
	}
	if r.err == nil && r.version >= 4 {
		r.msgpack("cluster id", &im.cluster)
		if r.err == nil && (im.cluster == "" || len(im.cluster) > rl.MaxClusterIDBytes) {
			r.fail("cluster id of %d bytes", len(im.cluster))
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return im, nil
}

func readPartition(r *reader, p *Partition) {
	p.Replicas = r.int32s("replicas")
	if len(p.Replicas) > 0 {
		p.ReplicaStates = r.allocStates(len(p.Replicas))
		for i := range p.ReplicaStates {
			s := rl.ReplicaState(r.byte("replica state"))
			if !s.Valid() {
				r.fail("replica state %d", s)
			}
			p.ReplicaStates[i] = s
		}
	}
	p.ISR = r.int32s("isr")
	if len(p.ISR) > 0 && slices.Equal(p.ISR, p.Replicas) {
		p.ISR = p.Replicas // one list for both, as apply keeps them
	}
	p.Leader = r.int32("leader")
	p.LeaderEpoch = r.int32("leader epoch")
	p.PartitionEpoch = r.int32("partition epoch")
	p.State = rl.PartitionState(r.byte("partition state"))
	if !p.State.Valid() {
		r.fail("partition state %d", p.State)
	}
	p.ChangedAt = r.uvarint("changed-at index")
}

// writeFeatures writes the finalized feature levels (sorted by name) and
// the index of the last FeatureLevel record.
func writeFeatures(c *chunkWriter, f *Features) {
	c.uvarint(uint64(len(f.levels)))
	for i := range f.levels {
		c.msgpack(&f.levels[i])
	}
	c.uvarint(f.epoch)
}

func readFeatures(r *reader) *Features {
	n := r.count("feature count", 1)
	f := &Features{}
	for i := 0; i < n && r.err == nil; i++ {
		var l rl.FeatureLevel
		r.msgpack("feature", &l)
		if r.err != nil {
			break
		}
		if l.Name == "" || l.Level == 0 {
			r.fail("feature %q at level %d", l.Name, l.Level)
			break
		}
		if i > 0 && f.levels[i-1].Name >= l.Name {
			r.fail("feature %q out of order", l.Name)
			break
		}
		f.levels = append(f.levels, l)
	}
	f.epoch = r.uvarint("features epoch")
	return f
}
