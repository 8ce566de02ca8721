package controller

import (
	"context"
	"crypto/rand"
	"errors"
	"hash/fnv"

	"github.com/twmb/franz-go/pkg/kerr"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// CreateTopic is one topic of a CreateTopics request. NumPartitions and
// ReplicationFactor of -1 take the defaults; with an explicit Assignment
// both must be -1.
type CreateTopic struct {
	Name              string
	NumPartitions     int32
	ReplicationFactor int16
	// Assignment, if given, lists partition i's replicas at index i.
	Assignment [][]int32
	Configs    []rl.ConfigEntry
}

// CreateTopicResult is the outcome for one topic.
type CreateTopicResult struct {
	Name              string
	TopicID           rl.TopicID
	NumPartitions     int32
	ReplicationFactor int16
	Configs           []rl.ConfigEntry
	Err               error
}

const (
	defaultPartitions        = 1
	defaultReplicationFactor = 1
	maxTopicNameLength       = 249
)

// CreateTopics creates topics, each as its own event: one bad topic fails
// alone. With validateOnly nothing is committed, but every check runs.
func (c *Controller) CreateTopics(ctx context.Context, topics []CreateTopic, validateOnly bool) []CreateTopicResult {
	seen := map[string]int{}
	for _, t := range topics {
		seen[t.Name]++
	}
	values, errs := c.submitEach(ctx, len(topics), "create-topic", func(i int) error {
		if seen[topics[i].Name] > 1 {
			return kafkaErr(kerr.InvalidRequest, "topic %q appears more than once in the request", topics[i].Name)
		}
		return nil
	}, func(i int) computeFunc {
		t := topics[i]
		return func(m *managers, w *work) (eventOutcome, error) {
			return answer(m.replication.createTopic(w, t, validateOnly))
		}
	})
	out := make([]CreateTopicResult, len(topics))
	for i, t := range topics {
		if errs[i] != nil {
			out[i] = CreateTopicResult{Name: t.Name, Err: errs[i]}
			continue
		}
		out[i] = values[i].(CreateTopicResult)
	}
	return out
}

// ValidTopicName returns an INVALID_TOPIC_EXCEPTION error for a name Kafka
// would refuse.
func ValidTopicName(name string) error {
	switch {
	case name == "":
		return kafkaErr(kerr.InvalidTopicException, "topic name is empty")
	case name == "." || name == "..":
		return kafkaErr(kerr.InvalidTopicException, "topic name %q is not allowed", name)
	case len(name) > maxTopicNameLength:
		return kafkaErr(kerr.InvalidTopicException, "topic name is %d characters long, the limit is %d", len(name), maxTopicNameLength)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return kafkaErr(kerr.InvalidTopicException, "topic name %q contains %q: only ASCII letters, digits, '.', '_' and '-' are allowed", name, r)
		}
	}
	return nil
}

func startIndex(name string) int {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32() & 0x7fffffff)
}

func (m *replicationManager) createTopic(w *work, t CreateTopic, validateOnly bool) (CreateTopicResult, error) {
	w.because("creation of topic " + t.Name)
	if err := ValidTopicName(t.Name); err != nil {
		return CreateTopicResult{}, err
	}
	if w.img().TopicByName(t.Name) != nil {
		return CreateTopicResult{}, kafkaErr(kerr.TopicAlreadyExists, "topic %q already exists", t.Name)
	}
	configs, err := validateConfigs(t.Configs)
	if err != nil {
		return CreateTopicResult{}, err
	}
	assignment, err := m.newAssignment(w, t.Name, t.NumPartitions, t.ReplicationFactor, t.Assignment, 0, 0)
	if err != nil {
		return CreateTopicResult{}, err
	}
	res := CreateTopicResult{Name: t.Name, NumPartitions: int32(len(assignment)), ReplicationFactor: int16(len(assignment[0])), Configs: configs}
	if validateOnly {
		return res, nil
	}
	if _, err := rand.Read(res.TopicID[:]); err != nil {
		return CreateTopicResult{}, kafkaErr(kerr.UnknownServerError, "topic id: %v", err)
	}
	// The topic, a Partition and a PartitionChange per partition, and the
	// replica and partition state changes of the whole topic.
	w.txn.Grow(4 + 2*len(assignment))
	if err := w.stageEach(&rl.Topic{TopicID: res.TopicID, Name: t.Name, Configs: configs}); err != nil {
		return CreateTopicResult{}, err
	}
	if err := m.addPartitions(w, res.TopicID, t.Name, 0, assignment); err != nil {
		return CreateTopicResult{}, err
	}
	if w.log.IsInfo() { // its arguments cost more than the create itself when the line is dropped
		w.log.Info("topic created", "topic", t.Name, "id", res.TopicID.String(), "partitions", res.NumPartitions, "replication_factor", res.ReplicationFactor)
	}
	return res, nil
}

// newAssignment validates an explicit assignment or computes one.
func (m *replicationManager) newAssignment(w *work, name string, partitions int32, rf int16, explicit [][]int32, first int32, wantRF int16) ([][]int32, error) {
	if len(explicit) > 0 {
		if first == 0 && (partitions != -1 || rf != -1) {
			return nil, kafkaErr(kerr.InvalidRequest, "with a replica assignment, the number of partitions and the replication factor must be -1")
		}
		pa := make([]PartitionAssignment, len(explicit))
		for i, reps := range explicit {
			pa[i] = PartitionAssignment{Partition: first + int32(i), Replicas: reps}
		}
		var ids []int32
		for _, b := range w.img().Brokers() {
			ids = append(ids, b.ID)
		}
		if err := ValidateAssignment(pa, AssignmentRules{FirstPartitionID: first, ReplicationFactor: wantRF, Brokers: NewBrokerSet(ids...)}); err != nil {
			return nil, kafkaErr(kerr.InvalidReplicaAssignment, "%v", err)
		}
		return explicit, nil
	}
	if partitions == -1 {
		partitions = defaultPartitions
	}
	if rf == -1 {
		rf = defaultReplicationFactor
	}
	if partitions <= 0 {
		return nil, kafkaErr(kerr.InvalidPartitions, "number of partitions must be larger than 0, got %d", partitions)
	}
	if rf <= 0 {
		return nil, kafkaErr(kerr.InvalidReplicationFactor, "replication factor must be larger than 0, got %d", rf)
	}
	brokers := w.brokerInfos(true)
	if int(rf) > len(brokers) {
		return nil, kafkaErr(kerr.InvalidReplicationFactor, "replication factor %d is larger than the %d available brokers", rf, len(brokers))
	}
	a, err := AssignReplicas(brokers, partitions, rf, startIndex(name)+int(first), first)
	switch {
	case errors.Is(err, ErrInvalidPartitions):
		return nil, kafkaErr(kerr.InvalidPartitions, "%v", err)
	case errors.Is(err, ErrInvalidReplicationFactor):
		return nil, kafkaErr(kerr.InvalidReplicationFactor, "%v", err)
	case err != nil:
		return nil, kafkaErr(kerr.UnknownServerError, "%v", err)
	}
	return a, nil
}

// addPartitions stages new partitions numbered from first and brings them
// online: NewPartition with NewReplica replicas, OnlinePartition (first
// live replica leads, live replicas form the ISR), then the live replicas
// OnlineReplica. Only the election sends anything: LeaderAndIsr to the
// replicas and UpdateMetadata to every live broker.
func (m *replicationManager) addPartitions(w *work, id rl.TopicID, name string, first int32, assignment [][]int32) error {
	n := 0
	for _, r := range assignment {
		n += len(r)
	}
	refs := make([]partRef, 0, len(assignment))
	reps := make([]replica, 0, n)
	for i, r := range assignment {
		p := first + int32(i)
		if err := w.stageEach(&rl.Partition{TopicID: id, Partition: p, Replicas: r}); err != nil {
			return err
		}
		ref := partRef{id: id, name: name, part: p}
		refs = append(refs, ref)
		for _, b := range r {
			reps = append(reps, replica{ref: ref, broker: b})
		}
	}
	if _, err := m.handleReplicaStateChanges(w, reps, rl.NewReplica); err != nil {
		return err
	}
	failed, err := m.handlePartitionStateChanges(w, refs, rl.OnlinePartition, OfflineElection, nil)
	if err != nil {
		return err
	}
	for ref, e := range failed {
		w.log.Warn("new partition has no live replica: left offline", "topic", ref.name, "partition", ref.part, "error", e)
	}
	live, _ := w.liveSet()
	online := make([]replica, 0, len(reps))
	for _, r := range reps {
		if live.Has(r.broker) {
			online = append(online, r)
		}
	}
	_, err = m.handleReplicaStateChanges(w, online, rl.OnlineReplica)
	return err
}
