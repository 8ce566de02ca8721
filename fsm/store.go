package fsm

import (
	"cmp"
	"slices"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// store is what apply needs from an image: the committed Image implements
// it, and so does a Txn layered over another store. Keeping apply on this
// interface means the controller validates a proposal with exactly the
// rules every voter will apply to it.
type store interface {
	topic(id rl.TopicID) *Topic
	// writableTopic returns a topic the caller may change in place.
	writableTopic(id rl.TopicID) *Topic
	putTopic(t *Topic)
	deleteTopic(t *Topic)
	topicIDByName(name string) (rl.TopicID, bool)
	partition(id rl.TopicID, p int32) *Partition
	// partitionIn is partition for t, a topic just returned by topic:
	// valid only until the next write.
	partitionIn(t *Topic, p int32) *Partition
	partitionSlots(id rl.TopicID) int32
	// setPartition replaces partition p; appendPartition adds the next one.
	setPartition(id rl.TopicID, p int32, v Partition)
	appendPartition(id rl.TopicID, v Partition)
	// staged reports whether a Txn (at any level) staged partitions of
	// the topic, or the topic itself; the Image never has.
	staged(id rl.TopicID) bool
	broker(id int32) *Broker
	putBroker(b *Broker)
	deleteBroker(id int32)
	controller() (epoch, node int32)
	setController(epoch, node int32)
	addPartitionCount(delta int)
	// security returns the current credentials and rules; setSecurity
	// installs a new set (a Security is never changed in place).
	security() *Security
	setSecurity(s *Security)
	// brokerConfigs returns the dynamic broker configs; setBrokerConfigs
	// installs a new set (a BrokerConfigs is never changed in place).
	brokerConfigs() *BrokerConfigs
	setBrokerConfigs(c *BrokerConfigs)
	// features returns the finalized feature levels; setFeatures installs
	// a new set (a Features is never changed in place).
	features() *Features
	setFeatures(f *Features)
	// clusterID returns the recorded cluster id ("" for none).
	clusterID() string
	setClusterID(id string)
}

func (im *Image) topic(id rl.TopicID) *Topic {
	if h := im.hot; h != nil && h.ID == id {
		return h
	}
	return im.topics[id]
}

func (im *Image) writableTopic(id rl.TopicID) *Topic { return im.mutableTopic(id) }
func (im *Image) broker(id int32) *Broker            { return im.brokers[id] }

func (im *Image) controller() (int32, int32)                { return im.controllerEpoch, im.controllerNode }
func (im *Image) setController(e, n int32)                  { im.controllerEpoch, im.controllerNode = e, n }
func (im *Image) addPartitionCount(d int)                   { im.partitions += d }
func (im *Image) topicIDByName(n string) (rl.TopicID, bool) { id, ok := im.byName[n]; return id, ok }

func (im *Image) putTopic(t *Topic) {
	im.hot = nil
	t.gen = im.snapGen
	im.topics[t.ID] = t
	im.byName[t.Name] = t.ID
}

func (im *Image) deleteTopic(t *Topic) {
	im.hot = nil
	delete(im.topics, t.ID)
	delete(im.byName, t.Name)
}

func (im *Image) partition(id rl.TopicID, p int32) *Partition {
	if h := im.hot; h != nil && h.ID == id {
		return h.partition(p)
	}
	return im.Partition(id, p)
}

func (im *Image) partitionIn(t *Topic, p int32) *Partition { return t.partition(p) }

func (im *Image) partitionSlots(id rl.TopicID) int32 { return im.PartitionCount(id) }

func (im *Image) setPartition(id rl.TopicID, p int32, v Partition) {
	im.mutableTopic(id).parts[p] = v
}

func (im *Image) appendPartition(id rl.TopicID, v Partition) {
	t := im.mutableTopic(id)
	if len(t.parts) == cap(t.parts) && (len(im.grown) == 0 || im.grown[len(im.grown)-1] != t) {
		im.grown = append(im.grown, t)
	}
	t.parts = append(t.parts, v)
}

// trimGrown gives each topic whose partitions grew in the entry just
// applied an array of exactly its size: append doubles a small one, and
// most topics are created whole in one entry and never grow again, so the
// room append left would stay empty for good (a quarter of the image's
// partition bytes, for topics of 100 partitions).
func (im *Image) trimGrown() {
	for _, t := range im.grown {
		if n := len(t.parts); cap(t.parts)-n > n/16 {
			t.parts = append(make([]Partition, 0, n), t.parts...)
		}
	}
	clear(im.grown)
	im.grown = im.grown[:0]
}

func (im *Image) staged(rl.TopicID) bool { return false }

// putBroker and deleteBroker change brokers and replace brokerList with a
// copy that has the change: readers may hold the old one.
func (im *Image) putBroker(b *Broker) {
	im.brokers[b.ID] = b
	list := im.brokerList
	i, found := brokerAt(list, b.ID)
	out := make([]*Broker, 0, len(list)+1)
	out = append(append(out, list[:i]...), b)
	if found {
		i++
	}
	im.brokerList = append(out, list[i:]...)
}

func (im *Image) deleteBroker(id int32) {
	delete(im.brokers, id)
	list := im.brokerList
	i, found := brokerAt(list, id)
	if !found {
		return
	}
	out := make([]*Broker, 0, len(list)-1)
	im.brokerList = append(append(out, list[:i]...), list[i+1:]...)
}

func brokerAt(list []*Broker, id int32) (int, bool) {
	return slices.BinarySearchFunc(list, id, func(b *Broker, id int32) int { return cmp.Compare(b.ID, id) })
}
