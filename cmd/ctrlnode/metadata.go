package main

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

type partMeta struct {
	Partition       int32
	Leader          int32
	LeaderEpoch     int32
	Replicas        []int32
	ISR             []int32
	OfflineReplicas []int32
	Err             error
}

type topicMeta struct {
	Name       string
	ID         topicID
	Err        error
	Partitions []partMeta // by partition
}

// topicID is a topic id as the admin commands print it: URL-safe base64
// without padding, as Kafka's tools print a Uuid.
type topicID [16]byte

func (t topicID) String() string { return rl.TopicID(t).String() }

func (t topicMeta) partition(p int32) (partMeta, bool) {
	for _, pm := range t.Partitions {
		if pm.Partition == p {
			return pm, true
		}
	}
	return partMeta{}, false
}

// fetchMetadata reads topic metadata from the active controller, whose
// image holds every acknowledged change. No topics means all.
func (c *cli) fetchMetadata(ctx context.Context, topics []string) (map[string]topicMeta, error) {
	req := kmsg.NewPtrMetadataRequest()
	if len(topics) > 0 {
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			name := t
			rt.Topic = &name
			req.Topics = append(req.Topics, rt)
		}
	} else {
		req.Topics = nil // all topics
	}
	r, err := c.toController(ctx, req, nil)
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.MetadataResponse)
	out := map[string]topicMeta{}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		tm := topicMeta{Name: *t.Topic, ID: topicID(t.TopicID), Err: kerr.ErrorForCode(t.ErrorCode)}
		for _, p := range t.Partitions {
			tm.Partitions = append(tm.Partitions, partMeta{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: p.Replicas, ISR: p.ISR, OfflineReplicas: p.OfflineReplicas, Err: kerr.ErrorForCode(p.ErrorCode)})
		}
		sort.Slice(tm.Partitions, func(i, j int) bool { return tm.Partitions[i].Partition < tm.Partitions[j].Partition })
		out[tm.Name] = tm
	}
	return out, nil
}

func metaNames(m map[string]topicMeta) []string { return sortedKeys(m) }
