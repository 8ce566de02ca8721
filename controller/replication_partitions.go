package controller

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// CreatePartitions is one topic of a CreatePartitions request.
type CreatePartitions struct {
	Topic string
	// Count is the new total number of partitions.
	Count int32
	// Assignment, if not empty, lists the replicas of the new partitions
	// only, in partition order. Empty lets the controller place them.
	Assignment [][]int32
}

// CreatePartitionsResult is the outcome for one topic.
type CreatePartitionsResult struct {
	Topic string
	Err   error
}

// CreatePartitions adds partitions to existing topics, each topic as its
// own event so that one bad topic fails alone. With validateOnly every
// check runs and nothing is committed. A topic named twice in one request
// is refused both times (INVALID_REQUEST), as Kafka does: which of the two
// was meant cannot be told.
func (c *Controller) CreatePartitions(ctx context.Context, reqs []CreatePartitions, validateOnly bool) []CreatePartitionsResult {
	seen := map[string]int{}
	for _, r := range reqs {
		seen[r.Topic]++
	}
	_, errs := c.submitEach(ctx, len(reqs), "create-partitions", func(i int) error {
		if seen[reqs[i].Topic] > 1 {
			return kafkaErr(kerr.InvalidRequest, "topic %q appears more than once in the request", reqs[i].Topic)
		}
		return nil
	}, func(i int) computeFunc {
		r := reqs[i]
		return func(m *managers, w *work) (eventOutcome, error) {
			return answer(nil, m.replication.createPartitions(w, r, validateOnly))
		}
	})
	out := make([]CreatePartitionsResult, len(reqs))
	for i, r := range reqs {
		out[i] = CreatePartitionsResult{Topic: r.Topic, Err: errs[i]}
	}
	return out
}

// maxNewPartitionsPerRequest bounds how many partitions one request may
// add. Their placement and records are built in memory within one event: a
// count near 2^31 would exhaust the active node's memory, and the next
// node's when the client retries.
const maxNewPartitionsPerRequest = 1_000_000

func (m *replicationManager) createPartitions(w *work, r CreatePartitions, validateOnly bool) error {
	t := w.img().TopicByName(r.Topic)
	if t == nil || t.Deleting {
		return kafkaErr(kerr.UnknownTopicOrPartition, "topic %q", r.Topic)
	}
	current := w.img().PartitionCount(t.ID)
	if r.Count <= current {
		return kafkaErr(kerr.InvalidPartitions, "topic %q has %d partitions and %d were requested: the count can only grow", r.Topic, current, r.Count)
	}
	if n := int64(r.Count) - int64(current); n > maxNewPartitionsPerRequest {
		return kafkaErr(kerr.InvalidPartitions, "topic %q: adding %d partitions at once, the limit is %d", r.Topic, n, maxNewPartitionsPerRequest)
	}
	p0 := w.img().Partition(t.ID, 0)
	if p0 == nil || len(p0.Replicas) == 0 {
		return kafkaErr(unknownServerError, "topic %q has no partition 0 to take the replication factor from", r.Topic)
	}
	// During a reassignment partition 0 lists old and new replicas: the
	// replication factor is the one the reassignment ends with.
	replicas := p0.Replicas
	if ra, ok := t.Reassignments[0]; ok {
		replicas = targetReplicas(p0.Replicas, ra)
	}
	rf := int16(len(replicas))
	n := r.Count - current // > 0, and small enough to place

	var assignment [][]int32
	if len(r.Assignment) > 0 {
		if int32(len(r.Assignment)) != n {
			return kafkaErr(kerr.InvalidReplicaAssignment, "topic %q: adding %d partitions (from %d to %d) but %d replica lists were given",
				r.Topic, n, current, r.Count, len(r.Assignment))
		}
		a, err := m.newAssignment(w, r.Topic, n, rf, r.Assignment, current, rf)
		if err != nil {
			return err
		}
		assignment = a
	} else {
		brokers := w.brokerInfos(true)
		if int(rf) > len(brokers) {
			return kafkaErr(kerr.InvalidReplicationFactor, "topic %q has replication factor %d, larger than the %d available brokers", r.Topic, rf, len(brokers))
		}
		a, err := AssignReplicas(brokers, n, rf, ContinuationStartIndex(brokers, replicas[0]), current)
		switch {
		case errors.Is(err, ErrInvalidPartitions):
			return kafkaErr(kerr.InvalidPartitions, "topic %q: %v", r.Topic, err)
		case errors.Is(err, ErrInvalidReplicationFactor):
			return kafkaErr(kerr.InvalidReplicationFactor, "topic %q: %v", r.Topic, err)
		case err != nil:
			return kafkaErr(unknownServerError, "topic %q: %v", r.Topic, err)
		}
		assignment = a
	}
	if validateOnly {
		return nil
	}
	if err := m.addPartitions(w, t.ID, t.Name, current, assignment); err != nil {
		return err
	}
	w.log.Info("partitions added", "topic", t.Name, "from", current, "to", r.Count)
	return nil
}
