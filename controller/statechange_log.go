package controller

import (
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// stateChangeLog is where the replication manager records a transition it
// refused to stage, as Kafka's controller does in its state-change log
// (logInvalidTransition, logFailedStateChange): one ERROR line per replica
// or partition on the active controller's "state.change" logger, with the
// states from and to and the reason, and a count for the metric. Valid
// transitions need no such line: every one is a committed record, and
// each voter's state-change log and `ctrlnode state-changes` show them.
type stateChangeLog struct {
	log     hclog.Logger
	invalid *atomic.Int64
}

func (s *stateChangeLog) invalidReplica(reason, topic string, partition, broker int32, from, to string) {
	s.count()
	if s.log != nil {
		s.log.Error("invalid replica state transition", "reason", reason, "topic", topic, "partition", partition, "broker", broker, "from", from, "to", to)
	}
}

func (s *stateChangeLog) invalidPartition(reason, topic string, partition int32, from, to string) {
	s.count()
	if s.log != nil {
		s.log.Error("invalid partition state transition", "reason", reason, "topic", topic, "partition", partition, "from", from, "to", to)
	}
}

func (s *stateChangeLog) count() {
	if s.invalid != nil {
		s.invalid.Add(1)
	}
}

// InvalidStateChanges counts the replica and partition transitions this
// node refused to stage while active (the state.change log's lines).
func (c *Controller) InvalidStateChanges() int64 { return c.invalidStateChanges.Load() }
