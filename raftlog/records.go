package raftlog

import "fmt"

// RecordType is the first byte of every encoded record.
type RecordType uint8

// Record types. The numbers are part of the on-disk format: never reuse or
// renumber one.
const (
	TypeControllerEpoch  RecordType = 1
	TypeRegisterBroker   RecordType = 2
	TypeFenceBroker      RecordType = 3
	TypeUnfenceBroker    RecordType = 4
	TypeBrokerShutdown   RecordType = 5
	TypeUnregisterBroker RecordType = 6
	TypeTopic            RecordType = 7
	TypeTopicConfig      RecordType = 8
	TypePartition        RecordType = 9
	TypePartitionChange  RecordType = 10
	TypeReplicaState     RecordType = 11
	TypePartitionState   RecordType = 12
	TypeBeginDeleteTopic RecordType = 13
	TypeRemoveTopic      RecordType = 14

	TypeScramCredential       RecordType = 15
	TypeDeleteScramCredential RecordType = 16
	TypeAclChange             RecordType = 17
	TypePartitionChanges      RecordType = 18

	TypeBrokerConfig RecordType = 20
	TypeFeatureLevel RecordType = 19
)

var recordTypeNames = map[RecordType]string{
	TypeControllerEpoch:  "ControllerEpoch",
	TypeRegisterBroker:   "RegisterBroker",
	TypeFenceBroker:      "FenceBroker",
	TypeUnfenceBroker:    "UnfenceBroker",
	TypeBrokerShutdown:   "BrokerShutdown",
	TypeUnregisterBroker: "UnregisterBroker",
	TypeTopic:            "Topic",
	TypeTopicConfig:      "TopicConfig",
	TypePartition:        "Partition",
	TypePartitionChange:  "PartitionChange",
	TypeReplicaState:     "ReplicaState",
	TypePartitionState:   "PartitionState",
	TypeBeginDeleteTopic: "BeginDeleteTopic",
	TypeRemoveTopic:      "RemoveTopic",

	TypeScramCredential:       "ScramCredential",
	TypeDeleteScramCredential: "DeleteScramCredential",
	TypeAclChange:             "AclChange",
	TypePartitionChanges:      "PartitionChanges",

	TypeBrokerConfig: "BrokerConfig",
	TypeFeatureLevel: "FeatureLevel",

	TypeStateChangeCause: "StateChangeCause",
	TypeClusterID:        "ClusterID",
}

func (t RecordType) String() string {
	if n, ok := recordTypeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("unknown(%d)", uint8(t))
}

// Record is one metadata change. Each concrete type is a plain struct; the
// codec adds the type byte and version.
type Record interface {
	Type() RecordType
}

// ControllerEpoch is committed by a node when it becomes the active
// controller. It applies only as the successor of the current epoch, so two
// nodes racing for the same epoch cannot both win.
type ControllerEpoch struct {
	_msgpack struct{} `msgpack:",as_array"`
	Epoch    int32
	NodeID   int32
}

// RegisterBroker registers a broker. Its broker epoch is the raft index of
// the entry that carries this record. A new incarnation replaces (and so
// fences) the previous one. A registered broker starts fenced: it becomes
// usable with UnfenceBroker once it has caught up.
//
// Version 2 adds Features, the feature levels the broker supports; a
// record with no Features is written as version 1 (see registerbroker.go).
type RegisterBroker struct {
	BrokerID      int32
	IncarnationID IncarnationID
	Endpoints     []Endpoint
	Rack          string
	Features      []FeatureRange // version 2
}

// FenceBroker fences a broker (session expired or replaced). BrokerEpoch must
// be the broker's current epoch.
type FenceBroker struct {
	_msgpack    struct{} `msgpack:",as_array"`
	BrokerID    int32
	BrokerEpoch int64
}

// UnfenceBroker makes a fenced broker usable again.
type UnfenceBroker struct {
	_msgpack    struct{} `msgpack:",as_array"`
	BrokerID    int32
	BrokerEpoch int64
}

// BrokerShutdown marks a broker as in controlled shutdown.
type BrokerShutdown struct {
	_msgpack    struct{} `msgpack:",as_array"`
	BrokerID    int32
	BrokerEpoch int64
}

// UnregisterBroker removes a broker from the image.
type UnregisterBroker struct {
	_msgpack    struct{} `msgpack:",as_array"`
	BrokerID    int32
	BrokerEpoch int64
}

// Topic creates a topic with no partitions yet.
type Topic struct {
	_msgpack struct{} `msgpack:",as_array"`
	TopicID  TopicID
	Name     string
	Configs  []ConfigEntry
}

// TopicConfig sets (or with Delete removes) one configuration key.
type TopicConfig struct {
	_msgpack struct{} `msgpack:",as_array"`
	TopicID  TopicID
	Key      string
	Value    string
	Delete   bool
}

// Partition adds a partition to a topic in NewPartition state, with its
// replicas in NewReplica state. Replicas[0] is the preferred leader.
type Partition struct {
	_msgpack  struct{} `msgpack:",as_array"`
	TopicID   TopicID
	Partition int32
	Replicas  []int32
}

// Fields of a PartitionChange that are set. A field that is not set stays as
// it is.
const (
	ChangeLeader uint8 = 1 << iota
	ChangeISR
	ChangeReplicas
	ChangeReassignment
)

// BrokerConfig sets (or with Delete removes) one dynamic broker config
// key, Kafka's ConfigRecord for a BROKER resource: Broker is the broker id
// in decimal, or empty for the cluster-wide default every broker falls
// back to. A broker id need not be registered, as in Kafka: an operator
// may configure a broker before it first starts.
type BrokerConfig struct {
	_msgpack struct{} `msgpack:",as_array"`
	Broker   string
	Key      string
	Value    string
	Delete   bool
}

// PartitionChange changes a partition's leader, ISR, assignment or ongoing
// reassignment. It carries the partition epoch it was computed from and
// applies only if that is still current (ZooKeeper's conditional setData).
// Applying it bumps the partition epoch, and the leader epoch when the leader
// changes.
type PartitionChange struct {
	_msgpack       struct{} `msgpack:",as_array"`
	TopicID        TopicID
	Partition      int32
	PartitionEpoch int32
	Set            uint8
	Leader         int32
	ISR            []int32
	Replicas       []int32
	Adding         []int32
	Removing       []int32
}

// Has reports whether the change sets the given field.
func (c *PartitionChange) Has(field uint8) bool { return c.Set&field != 0 }

// PartitionChanges carries changes to distinct partitions of one topic:
// the records of a broker event, hundreds of thousands of partition
// changes, take far less room and work this way than one PartitionChange
// each. It applies exactly as the same changes as PartitionChange records
// one after another would, except that it applies all or none: one change
// that does not apply rejects the record. A partition may appear only once.
type PartitionChanges struct {
	_msgpack struct{} `msgpack:",as_array"`
	TopicID  TopicID
	Changes  []PartitionDelta
}

// PartitionDelta is one change of a PartitionChanges: a PartitionChange
// without the topic.
type PartitionDelta struct {
	_msgpack       struct{} `msgpack:",as_array"`
	Partition      int32
	PartitionEpoch int32
	Set            uint8
	Leader         int32
	ISR            []int32
	Replicas       []int32
	Adding         []int32
	Removing       []int32
}

// Has reports whether the change sets the given field.
func (d *PartitionDelta) Has(field uint8) bool { return d.Set&field != 0 }

// Delta returns the change without its topic.
func (c *PartitionChange) Delta() PartitionDelta {
	return PartitionDelta{Partition: c.Partition, PartitionEpoch: c.PartitionEpoch, Set: c.Set, Leader: c.Leader,
		ISR: c.ISR, Replicas: c.Replicas, Adding: c.Adding, Removing: c.Removing}
}

// ReplicaStateChange moves replicas of one topic to State. Each transition is
// checked against the replica state machine; an invalid one rejects the
// record.
type ReplicaStateChange struct {
	_msgpack struct{} `msgpack:",as_array"`
	TopicID  TopicID
	State    ReplicaState
	Replicas []ReplicaRef
}

// PartitionStateChange moves partitions of one topic to State.
type PartitionStateChange struct {
	_msgpack   struct{} `msgpack:",as_array"`
	TopicID    TopicID
	State      PartitionState
	Partitions []int32
}

// BeginDeleteTopic queues a topic for deletion.
type BeginDeleteTopic struct {
	_msgpack struct{} `msgpack:",as_array"`
	TopicID  TopicID
}

// RemoveTopic removes a topic whose deletion has finished: every replica is
// NonExistentReplica.
type RemoveTopic struct {
	_msgpack struct{} `msgpack:",as_array"`
	TopicID  TopicID
}

func (*ControllerEpoch) Type() RecordType      { return TypeControllerEpoch }
func (*RegisterBroker) Type() RecordType       { return TypeRegisterBroker }
func (*FenceBroker) Type() RecordType          { return TypeFenceBroker }
func (*UnfenceBroker) Type() RecordType        { return TypeUnfenceBroker }
func (*BrokerShutdown) Type() RecordType       { return TypeBrokerShutdown }
func (*UnregisterBroker) Type() RecordType     { return TypeUnregisterBroker }
func (*Topic) Type() RecordType                { return TypeTopic }
func (*TopicConfig) Type() RecordType          { return TypeTopicConfig }
func (*Partition) Type() RecordType            { return TypePartition }
func (*PartitionChange) Type() RecordType      { return TypePartitionChange }
func (*ReplicaStateChange) Type() RecordType   { return TypeReplicaState }
func (*PartitionStateChange) Type() RecordType { return TypePartitionState }
func (*BeginDeleteTopic) Type() RecordType     { return TypeBeginDeleteTopic }
func (*RemoveTopic) Type() RecordType          { return TypeRemoveTopic }
func (*PartitionChanges) Type() RecordType     { return TypePartitionChanges }

func (*ScramCredential) Type() RecordType       { return TypeScramCredential }
func (*DeleteScramCredential) Type() RecordType { return TypeDeleteScramCredential }
func (*AclChange) Type() RecordType             { return TypeAclChange }
func (*FeatureLevel) Type() RecordType          { return TypeFeatureLevel }

func (*BrokerConfig) Type() RecordType { return TypeBrokerConfig }

// recordVersions is the newest version of each type this binary knows. A
// record with a higher version is refused.
var recordVersions = map[RecordType]uint8{
	TypeControllerEpoch:  1,
	TypeRegisterBroker:   2,
	TypeFenceBroker:      1,
	TypeUnfenceBroker:    1,
	TypeBrokerShutdown:   1,
	TypeUnregisterBroker: 1,
	TypeTopic:            1,
	TypeTopicConfig:      1,
	TypePartition:        1,
	TypePartitionChange:  1,
	TypeReplicaState:     1,
	TypePartitionState:   1,
	TypeBeginDeleteTopic: 1,
	TypeRemoveTopic:      1,

	TypeScramCredential:       1,
	TypeDeleteScramCredential: 1,
	TypeAclChange:             1,
	TypePartitionChanges:      1,

	TypeBrokerConfig: 1,
	TypeFeatureLevel: 1,

	TypeStateChangeCause: 1,
	TypeClusterID:        1,
}

// newRecord returns a zero record of type t, or nil if t is unknown.
func newRecord(t RecordType) Record {
	switch t {
	case TypeControllerEpoch:
		return &ControllerEpoch{}
	case TypeRegisterBroker:
		return &RegisterBroker{}
	case TypeFenceBroker:
		return &FenceBroker{}
	case TypeUnfenceBroker:
		return &UnfenceBroker{}
	case TypeBrokerShutdown:
		return &BrokerShutdown{}
	case TypeUnregisterBroker:
		return &UnregisterBroker{}
	case TypeTopic:
		return &Topic{}
	case TypeTopicConfig:
		return &TopicConfig{}
	case TypePartition:
		return &Partition{}
	case TypePartitionChange:
		return &PartitionChange{}
	case TypeReplicaState:
		return &ReplicaStateChange{}
	case TypePartitionState:
		return &PartitionStateChange{}
	case TypeBeginDeleteTopic:
		return &BeginDeleteTopic{}
	case TypeRemoveTopic:
		return &RemoveTopic{}
	case TypeScramCredential:
		return &ScramCredential{}
	case TypeDeleteScramCredential:
		return &DeleteScramCredential{}
	case TypeAclChange:
		return &AclChange{}
	case TypePartitionChanges:
		return &PartitionChanges{}
	case TypeBrokerConfig:
		return &BrokerConfig{}
	case TypeFeatureLevel:
		return &FeatureLevel{}
	case TypeClusterID:
		return &ClusterID{}
	case TypeStateChangeCause:
		return &StateChangeCause{}
	}
	return nil
}
