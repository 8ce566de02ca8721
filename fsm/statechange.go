package fsm

import (
	"slices"
	"strconv"
	"time"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Kinds of StateChange.
const (
	// ChangePartition is a partition's state, leader, leader epoch or ISR
	// changing (partition state machine transitions and leader/ISR
	// changes alike).
	ChangePartition = "partition"
	// ChangeReplica is one replica's state changing.
	ChangeReplica = "replica"
	// ChangeTopic is a topic created, queued for deletion or removed.
	ChangeTopic = "topic"
	// ChangeBroker is a broker registered, fenced, unfenced, shutting down
	// or unregistered: the events transitions follow from.
	ChangeBroker = "broker"
)

// StateChange is one committed transition, as the state-change history
// shows it: what changed from what to what. Fields that do not apply to
// its kind are zero (Partition and Broker -1).
type StateChange struct {
	Kind string `json:"kind"`
	// Cause is what the controller was handling when it wrote the change
	// (a StateChangeCause record earlier in the entry), empty when the
	// entry names none (written before level 2, or by the loop's own
	// bookkeeping).
	Cause     string     `json:"cause,omitempty"`
	Topic     string     `json:"topic,omitempty"`
	TopicID   rl.TopicID `json:"-"`
	Partition int32      `json:"partition"`
	Broker    int32      `json:"broker"`
	From      string     `json:"from,omitempty"`
	To        string     `json:"to,omitempty"`
	// Leader, leader epoch and ISR of a partition change, before and
	// after.
	FromLeader      int32   `json:"from_leader,omitempty"`
	Leader          int32   `json:"leader,omitempty"`
	FromLeaderEpoch int32   `json:"from_leader_epoch,omitempty"`
	LeaderEpoch     int32   `json:"leader_epoch,omitempty"`
	FromISR         []int32 `json:"from_isr,omitempty"`
	ISR             []int32 `json:"isr,omitempty"`
}

// EntryChanges are the transitions one committed entry made, with where
// and by whom it was decided: the raft index and term, raft's append time
// on the leader, and the controller epoch and node that wrote it (the
// image's, as of the entry's first record).
type EntryChanges struct {
	Index           uint64
	Term            uint64
	AppendedAt      time.Time
	ControllerEpoch int32
	ControllerNode  int32
	Changes         []StateChange
}

// StateChangeListener is told, in log order and under no lock, the
// transitions of every applied entry that made any. Like CommitListener
// it runs on raft's apply path and must not block for long.
type StateChangeListener func(EntryChanges)

// changeRecorder collects an entry's transitions while the FSM applies it:
// before each record it notes what the record touches and its state, and
// once the record has applied it reads the new state. A rejected record
// leaves nothing. Only the FSM of a node that keeps a history runs it.
type changeRecorder struct {
	im      *Image
	out     []StateChange
	pending []StateChange
	// cause is the entry's current cause; next is a cause record's text
	// until it has applied.
	cause, next string
	nextSet     bool
}

func (c *changeRecorder) before(r rl.Record) {
	c.pending = c.pending[:0]
	c.nextSet = false
	im := c.im
	switch r := r.(type) {
	case *rl.StateChangeCause:
		c.next, c.nextSet = r.Text, true
	case *rl.Topic:
		c.pending = append(c.pending, StateChange{Kind: ChangeTopic, Topic: r.Name, TopicID: r.TopicID, Partition: -1, Broker: -1, To: "created"})
	case *rl.BeginDeleteTopic:
		c.pending = append(c.pending, c.topicChange(r.TopicID, "deleting"))
	case *rl.RemoveTopic:
		c.pending = append(c.pending, c.topicChange(r.TopicID, "removed"))
	case *rl.Partition:
		// Its replicas start NonExistentReplica: the ReplicaStateChange
		// that follows moves them.
		c.partitionBefore(r.TopicID, r.Partition)
	case *rl.PartitionChange:
		c.partitionBefore(r.TopicID, r.Partition)
	case *rl.PartitionChanges:
		for i := range r.Changes {
			c.partitionBefore(r.TopicID, r.Changes[i].Partition)
		}
	case *rl.PartitionStateChange:
		for _, p := range r.Partitions {
			c.partitionBefore(r.TopicID, p)
		}
	case *rl.ReplicaStateChange:
		name := c.topicName(r.TopicID)
		for _, ref := range r.Replicas {
			from := rl.NonExistentReplica
			if p := im.partition(r.TopicID, ref.Partition); p != nil {
				from = p.ReplicaState(ref.Broker)
			}
			c.pending = append(c.pending, StateChange{Kind: ChangeReplica, Topic: name, TopicID: r.TopicID, Partition: ref.Partition, Broker: ref.Broker,
				From: from.String(), To: r.State.String()})
		}
	case *rl.RegisterBroker:
		c.pending = append(c.pending, c.brokerChange(r.BrokerID, "registered"))
	case *rl.FenceBroker:
		c.pending = append(c.pending, c.brokerChange(r.BrokerID, "fenced"))
	case *rl.UnfenceBroker:
		c.pending = append(c.pending, c.brokerChange(r.BrokerID, "unfenced"))
	case *rl.BrokerShutdown:
		c.pending = append(c.pending, c.brokerChange(r.BrokerID, "shutting-down"))
	case *rl.UnregisterBroker:
		c.pending = append(c.pending, c.brokerChange(r.BrokerID, "unregistered"))
	}
}

// after completes the pending changes with the state the record left, or
// drops them if it was rejected.
func (c *changeRecorder) after(applied bool) {
	if !applied {
		return
	}
	if c.nextSet {
		c.cause = c.next
	}
	for i := range c.pending {
		ch := &c.pending[i]
		ch.Cause = c.cause
		if ch.Kind != ChangePartition {
			c.out = append(c.out, *ch)
			continue
		}
		if p := c.im.partition(ch.TopicID, ch.Partition); p != nil {
			ch.To, ch.Leader, ch.LeaderEpoch, ch.ISR = p.State.String(), p.Leader, p.LeaderEpoch, p.ISR
		} else {
			// Gone from the image: NonExistentPartition, as it was.
			ch.To, ch.Leader, ch.LeaderEpoch, ch.ISR = rl.NonExistentPartition.String(), ch.FromLeader, ch.FromLeaderEpoch, ch.FromISR
		}
		c.out = append(c.out, *ch)
	}
}

func (c *changeRecorder) partitionBefore(id rl.TopicID, part int32) {
	ch := StateChange{Kind: ChangePartition, Topic: c.topicName(id), TopicID: id, Partition: part, Broker: -1,
		From: rl.NonExistentPartition.String(), FromLeader: rl.NoLeader}
	if p := c.im.partition(id, part); p != nil {
		ch.From, ch.FromLeader, ch.FromLeaderEpoch, ch.FromISR = p.State.String(), p.Leader, p.LeaderEpoch, p.ISR
	}
	c.pending = append(c.pending, ch)
}

func (c *changeRecorder) topicChange(id rl.TopicID, to string) StateChange {
	return StateChange{Kind: ChangeTopic, Topic: c.topicName(id), TopicID: id, Partition: -1, Broker: -1, To: to}
}

func (c *changeRecorder) brokerChange(id int32, to string) StateChange {
	return StateChange{Kind: ChangeBroker, Partition: -1, Broker: id, To: to}
}

func (c *changeRecorder) topicName(id rl.TopicID) string {
	if t := c.im.topic(id); t != nil {
		return t.Name
	}
	return id.String()
}

// take returns the entry's changes and starts the next entry.
func (c *changeRecorder) take() []StateChange {
	out := c.out
	c.out, c.cause = nil, ""
	return out
}

// Describe returns a change as one line of text, without the entry's
// header: what the state-change history prints.
func (ch StateChange) Describe() string {
	switch ch.Kind {
	case ChangeTopic:
		return "topic " + ch.Topic + " " + ch.To
	case ChangeBroker:
		return "broker " + strconv.Itoa(int(ch.Broker)) + " " + ch.To
	case ChangeReplica:
		return "replica " + ch.Topic + "-" + strconv.Itoa(int(ch.Partition)) + " on broker " + strconv.Itoa(int(ch.Broker)) + ": " + ch.From + " -> " + ch.To
	}
	s := "partition " + ch.Topic + "-" + strconv.Itoa(int(ch.Partition)) + ": " + ch.From + " -> " + ch.To
	s += " leader " + strconv.Itoa(int(ch.FromLeader)) + " -> " + strconv.Itoa(int(ch.Leader))
	s += " leader_epoch " + strconv.Itoa(int(ch.FromLeaderEpoch)) + " -> " + strconv.Itoa(int(ch.LeaderEpoch))
	if !slices.Equal(ch.FromISR, ch.ISR) {
		s += " isr " + ids(ch.FromISR) + " -> " + ids(ch.ISR)
	} else {
		s += " isr " + ids(ch.ISR)
	}
	return s
}

func ids(s []int32) string {
	b := []byte{'['}
	for i, x := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(x), 10)
	}
	return string(append(b, ']'))
}
