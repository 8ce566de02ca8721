package raftlog

import (
	"encoding/hex"
	"fmt"
)

// NoLeader is the leader id of a partition that has none.
const NoLeader int32 = -1

// TopicID is a topic's 16-byte id. A topic re-created under the same name
// gets a new id, which is how brokers tell the two apart.
type TopicID [16]byte

// IsZero reports whether the id is unset.
func (id TopicID) IsZero() bool { return id == TopicID{} }

func (id TopicID) String() string { return hex.EncodeToString(id[:]) }

// ParseTopicID parses the 32 hex digits that String prints.
func ParseTopicID(s string) (TopicID, error) {
	var id TopicID
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("topic id %q: want 32 hex digits", s)
	}
	copy(id[:], b)
	return id, nil
}

// IncarnationID identifies one run of a broker process. A broker that
// restarts registers again with a new one.
type IncarnationID [16]byte

func (id IncarnationID) String() string { return hex.EncodeToString(id[:]) }

// ReplicaState is the state of one replica (topic, partition, broker) in the
// replica state machine. The zero value is NonExistentReplica, so a replica
// with no recorded state counts as non-existent.
type ReplicaState uint8

const (
	NonExistentReplica ReplicaState = iota
	NewReplica
	OnlineReplica
	OfflineReplica
	ReplicaDeletionStarted
	ReplicaDeletionSuccessful
	ReplicaDeletionIneligible
	numReplicaStates
)

var replicaStateNames = [...]string{
	NonExistentReplica:        "NonExistentReplica",
	NewReplica:                "NewReplica",
	OnlineReplica:             "OnlineReplica",
	OfflineReplica:            "OfflineReplica",
	ReplicaDeletionStarted:    "ReplicaDeletionStarted",
	ReplicaDeletionSuccessful: "ReplicaDeletionSuccessful",
	ReplicaDeletionIneligible: "ReplicaDeletionIneligible",
}

func (s ReplicaState) String() string {
	if s < numReplicaStates {
		return replicaStateNames[s]
	}
	return fmt.Sprintf("ReplicaState(%d)", uint8(s))
}

// Valid reports whether s is one of the seven states.
func (s ReplicaState) Valid() bool { return s < numReplicaStates }

// AllReplicaStates lists the seven states in declaration order.
func AllReplicaStates() []ReplicaState {
	out := make([]ReplicaState, numReplicaStates)
	for i := range out {
		out[i] = ReplicaState(i)
	}
	return out
}

// PartitionState is the state of a partition in the partition state machine.
// The zero value is NonExistentPartition.
type PartitionState uint8

const (
	NonExistentPartition PartitionState = iota
	NewPartition
	OnlinePartition
	OfflinePartition
	numPartitionStates
)

var partitionStateNames = [...]string{
	NonExistentPartition: "NonExistentPartition",
	NewPartition:         "NewPartition",
	OnlinePartition:      "OnlinePartition",
	OfflinePartition:     "OfflinePartition",
}

func (s PartitionState) String() string {
	if s < numPartitionStates {
		return partitionStateNames[s]
	}
	return fmt.Sprintf("PartitionState(%d)", uint8(s))
}

// Valid reports whether s is one of the four states.
func (s PartitionState) Valid() bool { return s < numPartitionStates }

// AllPartitionStates lists the four states in declaration order.
func AllPartitionStates() []PartitionState {
	out := make([]PartitionState, numPartitionStates)
	for i := range out {
		out[i] = PartitionState(i)
	}
	return out
}

// Endpoint is one listener a broker advertises.
type Endpoint struct {
	_msgpack         struct{} `msgpack:",as_array"`
	Name             string
	Host             string
	Port             uint16
	SecurityProtocol int16
}

// ConfigEntry is one topic configuration key and its value.
type ConfigEntry struct {
	_msgpack struct{} `msgpack:",as_array"`
	Key      string
	Value    string
}

// ReplicaRef names one replica of a topic: a partition and a broker.
type ReplicaRef struct {
	_msgpack  struct{} `msgpack:",as_array"`
	Partition int32
	Broker    int32
}
