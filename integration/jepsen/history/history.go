// Package history is the record of a jepsen-style run: every admin call a
// client made (invoked, completed, with its outcome), every produce and
// consumed record of the data workload (data.go), every control
// request a broker agent accepted or refused, the nemesis' fault timeline
// and samples of the cluster's partition leadership. The checkers in
// ../check read nothing else, so a run can be checked again from its
// report folder.
//
// Everything is written and read as JSON lines, one value per line.
package history

import (
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Kind is what an admin call does.
type Kind string

const (
	// Create creates Topic with Args.Partitions and Args.ReplicationFactor.
	Create Kind = "create"
	// Delete deletes Topic.
	Delete Kind = "delete"
	// Describe reads Topic: present (Result.TopicID, Result.Partitions and
	// every partition's leader, leader epoch and replicas in Result.Parts)
	// or absent (ok with Result.Absent, or fail UNKNOWN_TOPIC_OR_PARTITION).
	Describe Kind = "describe"
	// List reads every topic: Result.Topics is the whole list.
	List Kind = "list"
	// CreatePartitions raises Topic's partition count to Args.Partitions.
	CreatePartitions Kind = "create-partitions"
	// Elect runs a leader election (Args.Election) for Topic's Args.Partition.
	Elect Kind = "elect"
	// Reassign moves Topic's Args.Partition to Args.Replicas.
	Reassign Kind = "reassign"
	// CancelReassign cancels the reassignment of Topic's Args.Partition.
	CancelReassign Kind = "cancel-reassign"
)

// Mutating reports whether a call of this kind changes the cluster when it
// succeeds.
func (k Kind) Mutating() bool {
	switch k {
	case Create, Delete, CreatePartitions, Elect, Reassign, CancelReassign:
		return true
	}
	return false
}

// Outcome is how a call ended.
type Outcome string

const (
	// OK: the cluster answered success.
	OK Outcome = "ok"
	// Fail: the cluster answered with an error code (Op.Code). Whether the
	// call took effect depends on the code: TOPIC_ALREADY_EXISTS says it
	// did not, REQUEST_TIMED_OUT does not say, nor does NOT_CONTROLLER
	// unless Op.Refused (see check.Definite).
	Fail Outcome = "fail"
	// Unknown: no answer (timeout, connection lost, the process running
	// the call stopped). The call may or may not have taken effect, at any
	// time after it was invoked.
	Unknown Outcome = "unknown"
)

// Args are a call's arguments; which are used depends on the kind.
type Args struct {
	Partitions        int32   `json:"partitions,omitempty"`
	ReplicationFactor int16   `json:"replication_factor,omitempty"`
	Partition         int32   `json:"partition,omitempty"`
	Replicas          []int32 `json:"replicas,omitempty"`
	// Election is "preferred" or "unclean" for Elect.
	Election string `json:"election,omitempty"`
}

// TopicInfo is one topic as a read saw it.
type TopicInfo struct {
	Name       string `json:"name"`
	TopicID    string `json:"topic_id,omitempty"`
	Partitions int32  `json:"partitions,omitempty"`
}

// PartitionInfo is one partition as a describe saw it.
type PartitionInfo struct {
	Partition int32 `json:"partition"`
	// Leader is -1 when the partition has no leader or its leader cannot
	// be reached (LEADER_NOT_AVAILABLE): the leader epoch is still the
	// partition's.
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
}

func (p PartitionInfo) String() string {
	return fmt.Sprintf("%d:L%d@%d%v", p.Partition, p.Leader, p.LeaderEpoch, p.Replicas)
}

// Result is what a successful call returned.
type Result struct {
	// TopicID is the topic's id (hex) as a create or describe returned it.
	TopicID string `json:"topic_id,omitempty"`
	// Partitions is the partition count a describe saw (0: not known).
	Partitions int32 `json:"partitions,omitempty"`
	// Parts are a describe's partitions, by number (nil: not recorded).
	Parts []PartitionInfo `json:"parts,omitempty"`
	// Absent is set by a describe that saw no such topic and reported it
	// as success rather than as UNKNOWN_TOPIC_OR_PARTITION.
	Absent bool `json:"absent,omitempty"`
	// Topics is a list's answer: every topic the cluster reported.
	Topics []TopicInfo `json:"topics,omitempty"`
	// Leader is the leader an election reported (-1: none).
	Leader *int32 `json:"leader,omitempty"`
}

// Op is one admin call.
type Op struct {
	// ID numbers the calls of a run from 1.
	ID int64 `json:"id"`
	// Client is the worker that made the call, from 0. One client makes
	// one call at a time.
	Client int    `json:"client"`
	Kind   Kind   `json:"kind"`
	Topic  string `json:"topic,omitempty"`
	Args   Args   `json:"args,omitzero"`
	// Node is the address the call went to, when the client chose one.
	Node string `json:"node,omitempty"`

	Invoke time.Time `json:"invoke"`
	// Complete is when the answer came; zero for Unknown (the call may
	// take effect at any time after Invoke).
	Complete time.Time `json:"complete,omitzero"`
	Outcome  Outcome   `json:"outcome"`
	// Code is the Kafka error code of a Fail.
	Code int16 `json:"code,omitempty"`
	// Error describes a Fail or Unknown: the error name and message (the
	// cluster's own message after the name, when it sent one).
	Error string `json:"error,omitempty"`
	// Refused marks a Fail whose answer says the request was turned away
	// before anything was proposed (a standby voter's NOT_CONTROLLER to
	// the only write of the request): it did nothing, whatever its code.
	Refused bool    `json:"refused,omitempty"`
	Result  *Result `json:"result,omitempty"`
	// Writes is how many times the client wrote the request, when more
	// than once (its own retries after NOT_CONTROLLER or a lost
	// connection): an earlier write may have taken effect too.
	Writes int `json:"writes,omitempty"`
}

// ErrorName is the Kafka name of the op's error code (TOPIC_ALREADY_EXISTS),
// or "" for none.
func (o Op) ErrorName() string { return CodeName(o.Code) }

// CodeName is the Kafka name of an error code, "" for 0.
func CodeName(code int16) string {
	if code == 0 {
		return ""
	}
	if e := kerr.TypedErrorForCode(code); e != nil {
		return e.Message
	}
	return fmt.Sprintf("ERROR_%d", code)
}

// CodeOf is the code of a Kafka error name (as CodeName returns it), 0
// when the name is unknown.
func CodeOf(name string) int16 {
	for code := int16(-1); code < 200; code++ {
		if code != 0 && CodeName(code) == name {
			return code
		}
	}
	return 0
}

func (o Op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d c%d %s", o.ID, o.Client, o.Kind)
	if o.Topic != "" {
		fmt.Fprintf(&b, " %s", o.Topic)
	}
	switch o.Kind {
	case Create:
		fmt.Fprintf(&b, " p=%d rf=%d", o.Args.Partitions, o.Args.ReplicationFactor)
	case CreatePartitions:
		fmt.Fprintf(&b, " p=%d", o.Args.Partitions)
	case Elect:
		fmt.Fprintf(&b, "-%d %s", o.Args.Partition, o.Args.Election)
	case Reassign:
		fmt.Fprintf(&b, "-%d to %v", o.Args.Partition, o.Args.Replicas)
	case CancelReassign:
		fmt.Fprintf(&b, "-%d", o.Args.Partition)
	}
	b.WriteString(" → ")
	switch o.Outcome {
	case OK:
		b.WriteString("ok")
		if r := o.Result; r != nil {
			switch {
			case o.Kind == List:
				fmt.Fprintf(&b, " %d topics", len(r.Topics))
			case r.Absent:
				b.WriteString(" absent")
			case r.TopicID != "" || r.Partitions != 0:
				fmt.Fprintf(&b, " id=%s p=%d", shortID(r.TopicID), r.Partitions)
				for _, p := range r.Parts {
					fmt.Fprintf(&b, " %s", p)
				}
			}
		}
	case Fail:
		fmt.Fprintf(&b, "fail %s", o.ErrorName())
		if o.Refused {
			b.WriteString(" (refused before any proposal)")
		}
	default:
		b.WriteString(string(o.Outcome))
		if o.Error != "" {
			fmt.Fprintf(&b, " (%s)", o.Error)
		}
	}
	fmt.Fprintf(&b, " [%s", o.Invoke.Format("15:04:05.000"))
	if !o.Complete.IsZero() {
		fmt.Fprintf(&b, " +%s", o.Complete.Sub(o.Invoke).Round(time.Millisecond))
	}
	b.WriteString("]")
	return b.String()
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	if id == "" {
		return "?"
	}
	return id
}

// Request names of the control requests.
const (
	LeaderAndIsr   = "LeaderAndIsr"
	StopReplica    = "StopReplica"
	UpdateMetadata = "UpdateMetadata"
)

// Observation is a broker agent's decision about one control request: the
// request as a whole (Partition -1) or one partition of it.
type Observation struct {
	Broker int32 `json:"broker"`
	// Incarnation tells the agent's process lifetimes apart: an agent that
	// was killed and restarted starts with no memory of the epochs it had
	// seen, so the checkers compare observations of one incarnation only.
	Incarnation string `json:"incarnation,omitempty"`
	// Seq orders one incarnation's observations (from 1, no gaps).
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`

	Request         string `json:"request"`
	ControllerID    int32  `json:"controller_id"`
	ControllerEpoch int32  `json:"controller_epoch"`
	BrokerEpoch     int64  `json:"broker_epoch"`

	Topic string `json:"topic,omitempty"`
	// TopicID (hex) tells a topic from a later one of the same name.
	TopicID        string  `json:"topic_id,omitempty"`
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	PartitionEpoch int32   `json:"partition_epoch"`
	ISR            []int32 `json:"isr,omitempty"`
	// Deleted marks a partition the request deleted (StopReplica with
	// delete, or UpdateMetadata announcing a deleted topic).
	Deleted bool `json:"deleted,omitempty"`

	Accepted bool `json:"accepted"`
	// ErrorCode says why it was refused (STALE_CONTROLLER_EPOCH, …).
	ErrorCode int16 `json:"error_code,omitempty"`
	// Reason is a readable form of the refusal.
	Reason string `json:"reason,omitempty"`
}

func (o Observation) String() string {
	out := "accepted"
	if !o.Accepted {
		out = "refused " + CodeName(o.ErrorCode)
		if o.Reason != "" {
			out += " (" + o.Reason + ")"
		}
	}
	who := fmt.Sprintf("broker %d", o.Broker)
	if o.Incarnation != "" {
		who += "/" + shortID(o.Incarnation)
	}
	if o.Partition < 0 {
		return fmt.Sprintf("%s #%d %s ce=%d be=%d: %s [%s]", who, o.Seq, o.Request, o.ControllerEpoch, o.BrokerEpoch, out, o.Time.Format("15:04:05.000"))
	}
	return fmt.Sprintf("%s #%d %s ce=%d %s-%d leader=%d le=%d pe=%d isr=%v: %s [%s]", who, o.Seq, o.Request, o.ControllerEpoch,
		o.Topic, o.Partition, o.Leader, o.LeaderEpoch, o.PartitionEpoch, o.ISR, out, o.Time.Format("15:04:05.000"))
}

// Phase is a point in a fault's life.
type Phase string

const (
	// Start: the fault was applied.
	Start Phase = "start"
	// Heal: the fault was undone (process restarted or resumed, network
	// rules removed).
	Heal Phase = "heal"
	// Note: something happened during a fault (a heartbeat flap toggled).
	Note Phase = "note"
)

// FaultEvent is one line of the fault timeline.
type FaultEvent struct {
	// Fault numbers the faults of a run from 1.
	Fault int       `json:"fault"`
	Kind  string    `json:"kind"`
	Phase Phase     `json:"phase"`
	Time  time.Time `json:"time"`
	// Nodes are the nodes (voters, or broker ids for broker faults) the
	// fault hit.
	Nodes []int `json:"nodes,omitempty"`
	// Detail is readable: which links were cut, which process stopped.
	Detail string `json:"detail,omitempty"`
	// Error is set when applying or healing the fault failed.
	Error string `json:"error,omitempty"`
}

func (e FaultEvent) String() string {
	s := fmt.Sprintf("%s fault %d %s %s", e.Time.Format("15:04:05.000"), e.Fault, e.Kind, e.Phase)
	if len(e.Nodes) > 0 {
		s += fmt.Sprintf(" nodes=%v", e.Nodes)
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Error != "" {
		s += " ERROR " + e.Error
	}
	return s
}

// PartitionSample is one partition in a ClusterSample.
type PartitionSample struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	ISR       []int32 `json:"isr,omitempty"`
}

// ClusterSample is the cluster's partition leadership as read at one time
// (from the active controller's Metadata, for instance), with the brokers
// that were alive then.
type ClusterSample struct {
	Time       time.Time         `json:"time"`
	Live       []int32           `json:"live"`
	Partitions []PartitionSample `json:"partitions"`
}

// VoterHash is a voter's state hash at a raft index.
type VoterHash struct {
	Index uint64 `json:"index"`
	Hash  string `json:"hash"`
}
