package jepsen

import (
	"strconv"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

// Observation turns a broker agent's record of a control request into the
// checkers' form. incarnation tells the agent's process lifetimes apart
// (its incarnation id, which changes at every start).
func Observation(brokerID int32, incarnation string, r broker.ControlRecord) history.Observation {
	o := history.Observation{
		Broker: brokerID, Incarnation: incarnation, Seq: r.Seq, Time: r.At,
		ControllerID: r.ControllerID, ControllerEpoch: r.ControllerEpoch, BrokerEpoch: r.BrokerEpoch,
		Topic: r.Topic, Partition: r.Partition, Leader: r.Leader, LeaderEpoch: r.LeaderEpoch,
		PartitionEpoch: r.PartitionEpoch, ISR: append([]int32(nil), r.ISR...), Deleted: r.Deleted,
		Accepted: r.Accepted, ErrorCode: r.ErrorCode,
	}
	switch r.Key {
	case broker.KeyLeaderAndIsr:
		o.Request = history.LeaderAndIsr
	case broker.KeyStopReplica:
		o.Request = history.StopReplica
	case broker.KeyUpdateMetadata:
		o.Request = history.UpdateMetadata
	default:
		o.Request = "api-key-" + strconv.Itoa(int(r.Key))
	}
	if !r.TopicID.IsZero() {
		o.TopicID = r.TopicID.String()
	}
	if !r.Accepted && r.ErrorCode != 0 {
		o.Reason = history.CodeName(r.ErrorCode)
	}
	return o
}
