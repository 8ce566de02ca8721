package fsm

import (
	"bytes"
	"slices"
	"sort"

	"github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Broker is a registered broker.
type Broker struct {
	ID          int32
	Incarnation raftlog.IncarnationID
	// Epoch is the raft index of the broker's registration record.
	Epoch     int64
	Endpoints []raftlog.Endpoint
	Rack      string
	// Features is the feature levels the broker supports, as it reported
	// them at registration (nil: registered at metadata.version 1, which
	// carries none).
	Features     []raftlog.FeatureRange
	Fenced       bool
	ShuttingDown bool
}

// Live reports whether the broker can host leaders: registered, unfenced.
func (b *Broker) Live() bool { return b != nil && !b.Fenced }

// Partition is one partition of a topic. Its slices are never changed in
// place; apply installs new ones.
type Partition struct {
	// Replicas is the assignment, preferred leader first. During a
	// reassignment it holds the union of the old and the target replicas.
	Replicas []int32
	ISR      []int32
	// ReplicaStates runs parallel to Replicas.
	ReplicaStates  []raftlog.ReplicaState
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	State          raftlog.PartitionState
	// ChangedAt is the raft index of the last change to leader, ISR or
	// assignment: a broker that has applied up to that index needs nothing
	// about this partition.
	ChangedAt uint64
}

// ReplicaState returns the state of the replica on broker b, and
// NonExistentReplica for a broker outside the assignment.
func (p *Partition) ReplicaState(b int32) raftlog.ReplicaState {
	if i := slices.Index(p.Replicas, b); i >= 0 {
		return p.ReplicaStates[i]
	}
	return raftlog.NonExistentReplica
}

// InISR reports whether broker b is in the ISR.
func (p *Partition) InISR(b int32) bool { return slices.Index(p.ISR, b) >= 0 }

// Reassignment is an ongoing reassignment of one partition (KIP-455):
// Adding joins the assignment, Removing leaves it when the reassignment
// completes.
type Reassignment struct {
	Adding   []int32
	Removing []int32
}

// Topic is a topic's own metadata. Its partitions are read through a
// Reader (Partition, PartitionCount), which also sees a Txn's staged
// changes.
type Topic struct {
	ID      raftlog.TopicID
	Name    string
	Configs []raftlog.ConfigEntry // sorted by key
	// parts holds partition i at index i; a removed partition keeps its
	// slot in NonExistentPartition state until the topic goes.
	parts []Partition
	// Deleting is set once the topic is queued for deletion.
	Deleting bool
	// Reassignments holds the partitions with a reassignment in progress.
	Reassignments map[int32]Reassignment

	// gen is the snapshot generation the topic belongs to; a topic of an
	// older generation may be shared with a snapshot and is cloned before
	// it changes.
	gen uint64
}

// Config returns the value of a topic config key.
func (t *Topic) Config(key string) (string, bool) {
	i := sort.Search(len(t.Configs), func(i int) bool { return t.Configs[i].Key >= key })
	if i < len(t.Configs) && t.Configs[i].Key == key {
		return t.Configs[i].Value, true
	}
	return "", false
}

func (t *Topic) partition(p int32) *Partition {
	if p < 0 || int(p) >= len(t.parts) || t.parts[p].State == raftlog.NonExistentPartition {
		return nil
	}
	return &t.parts[p]
}

// ReassigningPartitions returns the partitions with a reassignment in
// progress, in ascending order.
func (t *Topic) ReassigningPartitions() []int32 {
	out := make([]int32, 0, len(t.Reassignments))
	for p := range t.Reassignments {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (t *Topic) clone(gen uint64) *Topic {
	c := *t
	c.gen = gen
	c.parts = append([]Partition(nil), t.parts...)
	if t.Reassignments != nil {
		c.Reassignments = make(map[int32]Reassignment, len(t.Reassignments))
		for k, v := range t.Reassignments {
			c.Reassignments[k] = v
		}
	}
	return &c
}

// Image is the controller's metadata: brokers, topics, partitions, replica
// and partition states, the controller epoch and pending deletions.
type Image struct {
	controllerEpoch int32
	controllerNode  int32
	brokers         map[int32]*Broker
	// brokerList holds brokers in ascending id order, for the many
	// readers that walk them all; replaced on every change, never
	// changed in place, so a reader may keep the slice it was given.
	brokerList   []*Broker
	topics       map[raftlog.TopicID]*Topic
	byName       map[string]raftlog.TopicID
	partitions   int // existing partitions over all topics
	appliedIndex uint64
	snapGen      uint64
	sec          *Security
	bcfg         *BrokerConfigs
	feats        *Features
	cluster      string // the recorded cluster id (a ClusterID record), "" before
	// frozen counts the frozen views (snapshots being written, state
	// hashes) that may still read topics of an older generation.
	frozen int
	// hot is the topic apply last made ready to change: records come
	// topic after topic, so most lookups are for it. Only apply, under
	// the FSM's write lock, sets it; readers may use it.
	hot *Topic
	// grown lists the topics whose partition array apply has grown in
	// the entry being applied, to trim at its end (trimGrown).
	grown []*Topic
}

func newImage() *Image {
	return &Image{
		controllerNode: -1,
		brokers:        map[int32]*Broker{},
		topics:         map[raftlog.TopicID]*Topic{},
		byName:         map[string]raftlog.TopicID{},
		sec:            emptySecurity,
		bcfg:           emptyBrokerConfigs,
		feats:          emptyFeatures,
	}
}

// ControllerEpoch returns the current controller epoch and the node that
// holds it (-1 before the first).
func (im *Image) ControllerEpoch() (epoch, node int32) { return im.controllerEpoch, im.controllerNode }

// AppliedIndex is the raft index of the last applied entry.
func (im *Image) AppliedIndex() uint64 { return im.appliedIndex }

// Broker returns broker id, or nil.
func (im *Image) Broker(id int32) *Broker { return im.brokers[id] }

// Brokers returns all brokers in ascending id order. The slice is
// shared: read it, do not change it.
func (im *Image) Brokers() []*Broker { return im.brokerList }

// listBrokers builds brokerList from brokers (a restored image).
func (im *Image) listBrokers() {
	out := make([]*Broker, 0, len(im.brokers))
	for _, b := range im.brokers {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	im.brokerList = out
}

// Topic returns the topic with the given id, or nil.
func (im *Image) Topic(id raftlog.TopicID) *Topic { return im.topics[id] }

// TopicByName returns the topic with the given name, or nil.
func (im *Image) TopicByName(name string) *Topic {
	if id, ok := im.byName[name]; ok {
		return im.topics[id]
	}
	return nil
}

// Partition returns partition p of topic id, or nil if it does not exist.
func (im *Image) Partition(id raftlog.TopicID, p int32) *Partition {
	if t := im.topics[id]; t != nil {
		return t.partition(p)
	}
	return nil
}

// PartitionCount returns the number of partition slots of a topic: its
// partitions are 0..PartitionCount-1, some of which may have been removed.
func (im *Image) PartitionCount(id raftlog.TopicID) int32 {
	if t := im.topics[id]; t != nil {
		return int32(len(t.parts))
	}
	return 0
}

// EachPartition implements Reader.
func (im *Image) EachPartition(id raftlog.TopicID, fn func(int32, *Partition) bool) {
	t := im.topics[id]
	if t == nil {
		return
	}
	for i := range t.parts {
		if t.parts[i].State == raftlog.NonExistentPartition {
			continue
		}
		if !fn(int32(i), &t.parts[i]) {
			return
		}
	}
}

// NumTopics and NumPartitions count what exists.
func (im *Image) NumTopics() int     { return len(im.topics) }
func (im *Image) NumPartitions() int { return im.partitions }

// Topics returns all topics sorted by name.
func (im *Image) Topics() []*Topic {
	out := im.topicsByID()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// topicsByID returns all topics sorted by id: the canonical order of
// snapshots and the state hash.
func (im *Image) topicsByID() []*Topic {
	out := make([]*Topic, 0, len(im.topics))
	for _, t := range im.topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].ID[:], out[j].ID[:]) < 0 })
	return out
}

// ForEachTopic calls fn for every topic in no particular order until fn
// returns false. For output that must be ordered use Topics.
func (im *Image) ForEachTopic(fn func(*Topic) bool) {
	for _, t := range im.topics {
		if !fn(t) {
			return
		}
	}
}

// mutableTopic returns topic id ready to be changed, cloning it first if a
// snapshot may still be reading it.
func (im *Image) mutableTopic(id raftlog.TopicID) *Topic {
	if h := im.hot; h != nil && h.ID == id && h.gen == im.snapGen {
		return h
	}
	t := im.topics[id]
	if t == nil {
		return nil
	}
	if t.gen != im.snapGen {
		if im.frozen == 0 {
			// Every frozen view is done with it: no clone needed.
			t.gen = im.snapGen
		} else {
			t = t.clone(im.snapGen)
			im.topics[id] = t
		}
	}
	im.hot = t
	return t
}
