package fsm

import (
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Reader is read access to an image: the committed Image, or a Txn that
// adds staged changes on top of one. The controller decides against a
// Reader, so a decision sees the changes earlier events of the same round
// made but that are not committed yet.
type Reader interface {
	ControllerEpoch() (epoch, node int32)
	Broker(id int32) *Broker
	// Brokers returns all brokers in ascending id order.
	Brokers() []*Broker
	Topic(id rl.TopicID) *Topic
	TopicByName(name string) *Topic
	// ForEachTopic visits topics in no particular order until fn returns false.
	ForEachTopic(fn func(*Topic) bool)
	Partition(id rl.TopicID, p int32) *Partition
	PartitionCount(id rl.TopicID) int32
	// EachPartition visits the existing partitions of a topic in order
	// until fn returns false. It is the fast way to scan: it walks the
	// image's own slice wherever the Txn staged nothing for the topic.
	EachPartition(id rl.TopicID, fn func(p int32, part *Partition) bool)
	NumPartitions() int
	// Security returns the credentials and authorization rules.
	Security() *Security
	// BrokerConfigs returns the dynamic broker configs and the cluster
	// defaults.
	BrokerConfigs() *BrokerConfigs
	// Features returns the finalized feature levels.
	Features() *Features
	// ClusterID returns the cluster id the log recorded, "" for none.
	ClusterID() string
}

var (
	_ Reader = (*Image)(nil)
	_ Reader = (*Txn)(nil)
)
