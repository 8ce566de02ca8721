package controller

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// AlterPartitionItem is one partition of an AlterPartition request: the ISR
// its leader wants, with the epochs the leader computed it from.
type AlterPartitionItem struct {
	TopicID rl.TopicID
	// Topic is used when TopicID is zero (requests older than topic ids).
	Topic          string
	Partition      int32
	LeaderEpoch    int32
	PartitionEpoch int32
	NewISR         []int32
}

// AlterPartitionRequest is a partition leader reporting ISR changes.
type AlterPartitionRequest struct {
	BrokerID    int32
	BrokerEpoch int64
	Partitions  []AlterPartitionItem
}

// AlterPartitionResult is the outcome for one partition. Without Err it
// carries the partition as committed, so the leader can adopt the new
// partition epoch without waiting for a LeaderAndIsr.
type AlterPartitionResult struct {
	TopicID        rl.TopicID
	Topic          string
	Partition      int32
	Err            error
	Leader         int32
	LeaderEpoch    int32
	ISR            []int32
	PartitionEpoch int32
}

// AlterPartition applies ISR changes reported by a partition leader
// (KIP-497, with KIP-841's eligibility rule). The whole request is one
// event: each partition is checked against the image as the event sees it
// and only the valid ones are changed, so one bad partition does not hold
// back the others.
//
// The request fails as a whole with STALE_BROKER_EPOCH when the broker is
// unknown or the epoch is not its current one: a restarted broker must not
// shrink ISRs on behalf of its previous incarnation.
func (c *Controller) AlterPartition(ctx context.Context, req AlterPartitionRequest) ([]AlterPartitionResult, error) {
	v, _, err := c.submit(ctx, "alter-partition", func(m *managers, w *work) (eventOutcome, error) {
		return answer(m.replication.alterPartition(w, req))
	}, nil)
	if err != nil {
		return nil, err
	}
	return v.([]AlterPartitionResult), nil
}

func (m *replicationManager) alterPartition(w *work, req AlterPartitionRequest) ([]AlterPartitionResult, error) {
	b := w.img().Broker(req.BrokerID)
	if b == nil {
		return nil, kafkaErr(kerr.StaleBrokerEpoch, "broker %d is not registered", req.BrokerID)
	}
	if b.Epoch != req.BrokerEpoch {
		return nil, kafkaErr(kerr.StaleBrokerEpoch, "broker %d has epoch %d, request carries %d", req.BrokerID, b.Epoch, req.BrokerEpoch)
	}
	out := make([]AlterPartitionResult, len(req.Partitions))
	for i, item := range req.Partitions {
		res := &out[i]
		res.TopicID, res.Topic, res.Partition = item.TopicID, item.Topic, item.Partition
		ref, p, err := m.checkAlterPartition(w, req.BrokerID, item)
		if err != nil {
			res.Err = err
			continue
		}
		res.TopicID, res.Topic = ref.id, ref.name
		if !slices.Equal(item.NewISR, p.ISR) {
			if err := w.stageEach(&rl.PartitionChange{TopicID: ref.id, Partition: ref.part, PartitionEpoch: p.PartitionEpoch,
				Set: rl.ChangeISR, ISR: slices.Clone(item.NewISR)}); err != nil {
				return nil, err
			}
			live, _ := w.liveSet()
			w.plan.leaderAndIsr(ref, liveOf(p.Replicas, live), false)
			w.log.Debug("ISR changed by the leader", "topic", ref.name, "partition", ref.part, "leader", p.Leader,
				"from", p.ISR, "to", item.NewISR)
			m.reassignmentISRChanged(w, ref)
		}
		// The partition as staged is exactly what commits: the FSM runs
		// the same apply on the same image.
		now := w.img().Partition(ref.id, ref.part)
		res.Leader, res.LeaderEpoch, res.PartitionEpoch = now.Leader, now.LeaderEpoch, now.PartitionEpoch
		res.ISR = slices.Clone(now.ISR)
	}
	return out, nil
}

// checkAlterPartition validates one partition of an AlterPartition
// request. The order of the checks follows Kafka's: an epoch from the
// future first (this controller may be behind), then who is asking, then
// staleness, then the ISR itself.
func (m *replicationManager) checkAlterPartition(w *work, broker int32, item AlterPartitionItem) (partRef, *fsm.Partition, error) {
	im := w.img()
	var t *fsm.Topic
	if !item.TopicID.IsZero() {
		t = im.Topic(item.TopicID)
		if t == nil || t.Deleting {
			return partRef{}, nil, kafkaErr(kerr.UnknownTopicID, "topic id %s", item.TopicID)
		}
	} else {
		t = im.TopicByName(item.Topic)
		if t == nil || t.Deleting {
			return partRef{}, nil, kafkaErr(kerr.UnknownTopicOrPartition, "topic %q", item.Topic)
		}
	}
	ref := partRef{id: t.ID, name: t.Name, part: item.Partition}
	p := im.Partition(t.ID, item.Partition)
	if p == nil {
		return ref, nil, kafkaErr(kerr.UnknownTopicOrPartition, "%s-%d", t.Name, item.Partition)
	}
	switch {
	case item.LeaderEpoch > p.LeaderEpoch:
		return ref, nil, kafkaErr(kerr.UnknownLeaderEpoch, "%s-%d: request carries leader epoch %d, current is %d", t.Name, item.Partition, item.LeaderEpoch, p.LeaderEpoch)
	case p.Leader != broker:
		// Code 6, NOT_LEADER_OR_FOLLOWER in current Kafka.
		return ref, nil, kafkaErr(kerr.NotLeaderForPartition, "%s-%d: broker %d is not the leader (leader is %d)", t.Name, item.Partition, broker, p.Leader)
	case item.LeaderEpoch < p.LeaderEpoch:
		return ref, nil, kafkaErr(kerr.FencedLeaderEpoch, "%s-%d: request carries leader epoch %d, current is %d", t.Name, item.Partition, item.LeaderEpoch, p.LeaderEpoch)
	case item.PartitionEpoch != p.PartitionEpoch:
		return ref, nil, kafkaErr(kerr.InvalidUpdateVersion, "%s-%d: request carries partition epoch %d, current is %d", t.Name, item.Partition, item.PartitionEpoch, p.PartitionEpoch)
	}
	for i, r := range item.NewISR {
		if slices.Index(p.Replicas, r) < 0 {
			return ref, nil, kafkaErr(kerr.InvalidRequest, "%s-%d: new ISR %v lists broker %d, which is not a replica of %v", t.Name, item.Partition, item.NewISR, r, p.Replicas)
		}
		if slices.Index(item.NewISR[:i], r) >= 0 {
			return ref, nil, kafkaErr(kerr.InvalidRequest, "%s-%d: new ISR %v lists broker %d twice", t.Name, item.Partition, item.NewISR, r)
		}
	}
	if slices.Index(item.NewISR, broker) < 0 {
		return ref, nil, kafkaErr(kerr.InvalidRequest, "%s-%d: new ISR %v does not contain the leader %d", t.Name, item.Partition, item.NewISR, broker)
	}
	for _, r := range item.NewISR {
		if p.InISR(r) {
			continue
		}
		if why := m.ineligibleForISR(w, p, r); why != "" {
			return ref, nil, kafkaErr(kerr.IneligibleReplica, "%s-%d: broker %d cannot join the ISR: %s", t.Name, item.Partition, r, why)
		}
	}
	return ref, p, nil
}

// ineligibleForISR says why a replica may not join the ISR, or "" if it
// may (KIP-841): a fenced or stopping broker could otherwise be elected
// leader right after it left. NewReplica is eligible: it is the state of
// a reassignment's new replicas while they catch up, and they must join
// the ISR for the reassignment to complete.
func (m *replicationManager) ineligibleForISR(w *work, p *fsm.Partition, id int32) string {
	b := w.img().Broker(id)
	switch {
	case b == nil:
		return "broker is not registered"
	case b.Fenced:
		return "broker is fenced"
	case b.ShuttingDown:
		return "broker is in controlled shutdown"
	}
	switch s := p.ReplicaState(id); s {
	case rl.OnlineReplica, rl.NewReplica:
		return ""
	default:
		return "replica is " + s.String()
	}
}
