package replica

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// APIs are the data APIs the manager serves and their versions: those
// that carry record batches start at the first version of v2 batches
// (Produce v3, Fetch v4); Fetch stops before topic ids (v13).
func (m *Manager) APIs() map[int16]broker.Versions {
	return map[int16]broker.Versions{
		kmsg.Produce.Int16():              {Min: 3, Max: 9},
		kmsg.Fetch.Int16():                {Min: 4, Max: 12},
		kmsg.ListOffsets.Int16():          {Min: 1, Max: 7},
		kmsg.OffsetForLeaderEpoch.Int16(): {Min: 2, Max: 4},
	}
}

// Handle serves a data request (kafkawire.Handler).
func (m *Manager) Handle(ctx context.Context, c *kafkawire.Conn, req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		return m.produce(ctx, c, r), nil
	case *kmsg.FetchRequest:
		return m.fetch(ctx, c, r), nil
	case *kmsg.ListOffsetsRequest:
		return m.listOffsets(c, r), nil
	case *kmsg.OffsetForLeaderEpochRequest:
		return m.offsetsForLeaderEpoch(c, r), nil
	}
	return nil, fmt.Errorf("%s is not a data request", kmsg.NameForKey(req.Key()))
}

// missingCode is the error for a partition without a local replica:
// NOT_LEADER_OR_FOLLOWER when the cluster has it (this broker is not, or
// not yet, a replica), UNKNOWN_TOPIC_OR_PARTITION when it does not exist.
func (m *Manager) missingCode(tp broker.TopicPartition) int16 {
	if a := m.getAgent(); a != nil {
		if _, ok := a.Partition(tp.Topic, tp.Partition); ok {
			return kerr.NotLeaderForPartition.Code
		}
	}
	return kerr.UnknownTopicOrPartition.Code
}
