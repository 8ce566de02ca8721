package raftlog

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// NoLeader is the leader id of a partition that has none.
const NoLeader int32 = -1

// TopicID is a topic's 16-byte id. A topic re-created under the same name
// gets a new id, which is how brokers tell the two apart.
type TopicID [16]byte

// IsZero reports whether the id is unset.
func (id TopicID) IsZero() bool { return id == TopicID{} }

// String prints the id as Kafka prints a Uuid: URL-safe base64 without
// padding, 22 characters.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// ParseTopicID parses what String prints, and the forms a user may paste
// from older output or other tools: padded URL-safe or standard base64, and
// 32 hex digits (with or without a UUID's dashes).
func ParseTopicID(s string) (TopicID, error) {
	var id TopicID
	t := strings.TrimSpace(s)
	var b []byte
	var err error
	switch {
	case len(t) == 22 || (len(t) == 24 && strings.HasSuffix(t, "==")):
		t = strings.TrimRight(t, "=")
		if strings.ContainsAny(t, "+/") {
			b, err = base64.RawStdEncoding.DecodeString(t)
		} else {
			b, err = base64.RawURLEncoding.DecodeString(t)
		}
	case len(t) == 32 || (len(t) == 36 && strings.Count(t, "-") == 4):
		b, err = hex.DecodeString(strings.ReplaceAll(t, "-", ""))
	default:
		err = fmt.Errorf("bad length")
	}
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("topic id %q: want 22 characters of URL-safe base64 (or 32 hex digits)", s)
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
