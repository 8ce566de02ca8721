package controller

import (
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Kafka's sentinels for a topic queued for deletion (its
// LeaderAndIsr.LeaderDuringDelete and EpochDuringDelete): an
// UpdateMetadata state with leader LeaderDuringDelete tells a broker to
// drop the partition from its metadata cache at once, and a StopReplica
// with leader epoch EpochDuringDelete stops the replica whatever its epoch.
const (
	LeaderDuringDelete int32 = -2
	EpochDuringDelete  int32 = -2
)

// PartitionState is one partition as a control request carries it, read
// from the committed image after the decision that produced it committed.
// A partition of a topic being deleted has leader LeaderDuringDelete.
type PartitionState struct {
	Topic          string
	TopicID        rl.TopicID
	Partition      int32
	Leader         int32
	LeaderEpoch    int32
	ISR            []int32
	PartitionEpoch int32
	Replicas       []int32
	Adding         []int32
	Removing       []int32
	// IsNew is set in a LeaderAndIsr for a replica that was just created.
	IsNew bool
}

// LiveBroker is a broker as UpdateMetadata and LeaderAndIsr list it.
type LiveBroker struct {
	ID        int32
	Epoch     int64
	Rack      string
	Endpoints []rl.Endpoint
	Fenced    bool
}

// Header is what every control request carries. A broker refuses a request
// whose ControllerEpoch is lower than the highest it has seen; that is what
// fences a deposed controller.
type Header struct {
	ControllerID    int32
	ControllerEpoch int32
	// BrokerEpoch is the receiving broker's epoch: a request meant for an
	// earlier incarnation is refused by the new one.
	BrokerEpoch int64
	// MetadataOffset is the raft index the request reflects. Brokers report
	// the highest one they applied in their heartbeats.
	MetadataOffset uint64
}

// LeaderAndIsr tells a broker the leader and ISR of partitions it hosts.
type LeaderAndIsr struct {
	Header
	// Partitions point at states that other requests of the same round
	// share (the UpdateMetadata list, other brokers' LeaderAndIsr): they
	// are read-only.
	Partitions []*PartitionState
	// Leaders are the live brokers that lead one of Partitions.
	Leaders []LiveBroker
}

// StopPartition is one replica a StopReplica stops (and with Delete,
// deletes). A replica of a topic being deleted (or already removed) has
// leader epoch EpochDuringDelete.
type StopPartition struct {
	Topic       string
	TopicID     rl.TopicID
	Partition   int32
	LeaderEpoch int32
	Delete      bool
}

// StopReplica tells a broker to stop (and maybe delete) replicas.
type StopReplica struct {
	Header
	Partitions []StopPartition
}

// UpdateMetadata gives a broker the cluster's brokers and changed partitions.
type UpdateMetadata struct {
	Header
	// Partitions is shared between the requests of all brokers of a batch:
	// treat it as read-only.
	Partitions  []PartitionState
	LiveBrokers []LiveBroker
	// Full marks a catch-up (Kafka's full UpdateMetadata, type 2): Topics
	// then names every topic of the image, and the broker forgets every
	// topic it caches that is not among them once it has applied
	// Partitions. That is how a broker that missed a deletion (it was
	// down, or the controller that deleted the topic is gone) drops the
	// topic. Full is unset, and Topics nil, on every other UpdateMetadata.
	Full   bool
	Topics []TopicName
}

// TopicName names a topic in a full UpdateMetadata.
type TopicName struct {
	Name string
	ID   rl.TopicID
}

// Requests is what one broker is sent for one committed batch: at most one
// of each kind, to be delivered in the order LeaderAndIsr, UpdateMetadata,
// StopReplica.
type Requests struct {
	Broker         int32
	LeaderAndIsr   *LeaderAndIsr
	UpdateMetadata *UpdateMetadata
	StopReplica    *StopReplica
}

// Sender delivers control requests to brokers. Send must not block: the
// transport queues per broker and coalesces for a slow one. It is only
// called for decisions that have committed.
type Sender interface {
	Send(r Requests)
}
