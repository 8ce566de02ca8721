package broker

import (
	"fmt"
	"slices"
	"sort"
	"sync"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// PartitionState is a partition as the controller last described it to
// this broker.
type PartitionState struct {
	Topic     string
	TopicID   rl.TopicID
	Partition int32
	// Leader is the leader's broker id, -1 for none.
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
	Replicas       []int32
	Adding         []int32
	Removing       []int32
	// IsNew is set when a LeaderAndIsr created this replica.
	IsNew bool
	// ControllerEpoch is the epoch of the controller that sent it.
	ControllerEpoch int32
}

// Host is what the broker process that embeds an Agent does with the
// control requests the agent accepted. The agent calls it from the
// goroutine serving the controller's connection, one request at a time,
// and answers the controller only when the calls return: a Host that
// blocks makes this broker slow for the controller, never the others.
// The slices of a PartitionState are shared with the agent's cache: a
// Host may keep them but must not modify them.
type Host interface {
	// BecomeLeader makes the local replica the partition's leader.
	BecomeLeader(p PartitionState)
	// BecomeFollower makes the local replica a follower of p.Leader (or
	// of nobody, for leader -1).
	BecomeFollower(p PartitionState)
	// StopReplica stops the local replica and, with delete, removes its
	// data. An error is reported to the controller for that partition.
	StopReplica(topic string, id rl.TopicID, partition int32, delete bool) error
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// Role is what a MemoryHost replica does.
type Role int

const (
	// NoRole is a replica the host does not run (never started, or stopped).
	NoRole Role = iota
	Leader
	Follower
)

func (r Role) String() string {
	switch r {
	case Leader:
		return "leader"
	case Follower:
		return "follower"
	default:
		return "none"
	}
}

// Replica is a MemoryHost replica.
type Replica struct {
	Role  Role
	State PartitionState
}

// MemoryHost is a Host that only remembers: the role of each local
// replica, the stops and the deletions, in order. Simulated brokers and
// tests use it.
type MemoryHost struct {
	// StopErr, if set, is consulted by StopReplica: a non-nil error is
	// returned to the controller and the replica is left as it was.
	StopErr func(topic string, partition int32, delete bool) error

	mu       sync.Mutex
	replicas map[TopicPartition]Replica
	stops    []TopicPartition
	deletes  []TopicPartition
	calls    int
}

// NewMemoryHost returns an empty MemoryHost.
func NewMemoryHost() *MemoryHost {
	return &MemoryHost{replicas: map[TopicPartition]Replica{}}
}

func (h *MemoryHost) set(p PartitionState, r Role) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.replicas == nil {
		h.replicas = map[TopicPartition]Replica{}
	}
	h.replicas[TopicPartition{p.Topic, p.Partition}] = Replica{Role: r, State: p}
	h.calls++
}

// BecomeLeader implements Host.
func (h *MemoryHost) BecomeLeader(p PartitionState) { h.set(p, Leader) }

// BecomeFollower implements Host.
func (h *MemoryHost) BecomeFollower(p PartitionState) { h.set(p, Follower) }

// StopReplica implements Host.
func (h *MemoryHost) StopReplica(topic string, _ rl.TopicID, partition int32, del bool) error {
	if h.StopErr != nil {
		if err := h.StopErr(topic, partition, del); err != nil {
			return err
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	tp := TopicPartition{topic, partition}
	delete(h.replicas, tp)
	h.stops = append(h.stops, tp)
	if del {
		h.deletes = append(h.deletes, tp)
	}
	h.calls++
	return nil
}

// Replica returns the local replica of a partition.
func (h *MemoryHost) Replica(topic string, partition int32) (Replica, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.replicas[TopicPartition{topic, partition}]
	return r, ok
}

func (h *MemoryHost) withRole(role Role) []TopicPartition {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []TopicPartition
	for tp, r := range h.replicas {
		if r.Role == role {
			out = append(out, tp)
		}
	}
	sortTPs(out)
	return out
}

// Leading returns the partitions whose local replica leads, sorted.
func (h *MemoryHost) Leading() []TopicPartition { return h.withRole(Leader) }

// Following returns the partitions whose local replica follows, sorted.
func (h *MemoryHost) Following() []TopicPartition { return h.withRole(Follower) }

// Stopped returns every StopReplica the host ran, in order.
func (h *MemoryHost) Stopped() []TopicPartition {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.stops)
}

// Deleted returns every deletion the host ran, in order.
func (h *MemoryHost) Deleted() []TopicPartition {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.deletes)
}

// Calls counts every callback the host received.
func (h *MemoryHost) Calls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

func sortTPs(s []TopicPartition) {
	sort.Slice(s, func(i, j int) bool {
		if s[i].Topic != s[j].Topic {
			return s[i].Topic < s[j].Topic
		}
		return s[i].Partition < s[j].Partition
	})
}
