package controller

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// DeleteTopic names one topic of a DeleteTopics request: by name, or (for
// requests that carry topic ids) by id. Exactly one of the two is set.
type DeleteTopic struct {
	Name    string
	TopicID rl.TopicID
}

// DeleteTopicResult is the outcome for one topic. Name and TopicID are
// filled in from the topic when it was found.
type DeleteTopicResult struct {
	Name    string
	TopicID rl.TopicID
	Err     error
}

// DeleteTopics queues topics for deletion, each topic as its own event so
// that one bad topic fails alone. The answer comes once the deletion has
// started (BeginDeleteTopic committed and the replicas told to delete
// their data), not when it has finished: the topic disappears from the
// image when every broker has confirmed (see HandleStopReplicaResponse).
//
// A topic already being deleted is answered without error and nothing
// more is done: a retried request is harmless. Errors per topic:
// UNKNOWN_TOPIC_OR_PARTITION (no topic of that name), UNKNOWN_TOPIC_ID (no
// topic with that id), INVALID_REQUEST (both or neither of name and id
// given, or the same topic named twice in the request).
//
// Deletion follows the replica state machine (docs/statemachines.md,
// replica states and topic deletion): every live broker is sent
// UpdateMetadata with leader LeaderDuringDelete for every partition,
// which drops the topic from its metadata cache (the topic leaves
// client-visible metadata at once); every partition loses its leader and
// goes OfflinePartition; every replica goes OfflineReplica and
// then ReplicaDeletionStarted, with StopReplica (delete=true, leader epoch
// EpochDuringDelete) to its broker. A replica whose broker is fenced goes
// ReplicaDeletionIneligible instead and is retried when the broker is back.
// Each broker's confirmation moves its replica to ReplicaDeletionSuccessful
// (a failure to ReplicaDeletionIneligible); when all replicas of the topic
// are confirmed they become NonExistentReplica, the partitions
// NonExistentPartition, and the topic is removed. Its name is then free: a
// topic created under it gets a new topic id.
func (c *Controller) DeleteTopics(ctx context.Context, topics []DeleteTopic) []DeleteTopicResult {
	names := map[string]int{}
	ids := map[rl.TopicID]int{}
	for _, t := range topics {
		if t.Name != "" {
			names[t.Name]++
		}
		if !t.TopicID.IsZero() {
			ids[t.TopicID]++
		}
	}
	values, errs := c.submitEach(ctx, len(topics), "delete-topic", func(i int) error {
		switch t := topics[i]; {
		case t.Name != "" && !t.TopicID.IsZero():
			return kafkaErr(kerr.InvalidRequest, "topic %q: give either a topic name or a topic id, not both", t.Name)
		case t.Name == "" && t.TopicID.IsZero():
			return kafkaErr(kerr.InvalidRequest, "neither a topic name nor a topic id was given")
		case t.Name != "" && names[t.Name] > 1:
			return kafkaErr(kerr.InvalidRequest, "topic %q appears more than once in the request", t.Name)
		case !t.TopicID.IsZero() && ids[t.TopicID] > 1:
			return kafkaErr(kerr.InvalidRequest, "topic id %s appears more than once in the request", t.TopicID)
		}
		return nil
	}, func(i int) computeFunc {
		t := topics[i]
		return func(m *managers, w *work) (eventOutcome, error) {
			return answer(m.replication.deleteTopic(w, t))
		}
	})
	out := make([]DeleteTopicResult, len(topics))
	for i, t := range topics {
		if errs[i] != nil {
			out[i] = DeleteTopicResult{Name: t.Name, TopicID: t.TopicID, Err: errs[i]}
			continue
		}
		out[i] = values[i].(DeleteTopicResult)
	}
	return out
}

func (m *replicationManager) deleteTopic(w *work, d DeleteTopic) (DeleteTopicResult, error) {
	im := w.img()
	var t *fsm.Topic
	if !d.TopicID.IsZero() {
		if t = im.Topic(d.TopicID); t == nil {
			return DeleteTopicResult{}, kafkaErr(kerr.UnknownTopicID, "topic id %s", d.TopicID)
		}
	} else if t = im.TopicByName(d.Name); t == nil {
		return DeleteTopicResult{}, kafkaErr(kerr.UnknownTopicOrPartition, "topic %q", d.Name)
	}
	res := DeleteTopicResult{Name: t.Name, TopicID: t.ID}
	if t.Deleting {
		return res, nil
	}
	w.because("deletion of topic " + t.Name)
	if err := w.stageEach(&rl.BeginDeleteTopic{TopicID: t.ID}); err != nil {
		return DeleteTopicResult{}, err
	}
	w.log.Info("topic deletion started", "topic", t.Name, "id", t.ID.String(), "partitions", im.PartitionCount(t.ID))
	return res, m.driveTopicDeletion(w, w.img().Topic(t.ID), false)
}

// driveTopicDeletion takes a topic queued for deletion as far as it can
// go from wherever the image shows it: every partition announced to every
// live broker with leader LeaderDuringDelete (UpdateMetadata, so brokers
// drop the topic from their metadata caches at once; see partitionState),
// partitions without a leader and offline, every replica along the
// deletion path (see driveReplicaDeletions), and the topic removed if
// every replica is confirmed deleted. It is idempotent, which is what lets
// a new controller carry on a deletion at any step; with resend, replicas
// already in ReplicaDeletionStarted on live brokers are sent StopReplica
// (delete=true) again, since the request of a previous controller may
// never have gone out.
func (m *replicationManager) driveTopicDeletion(w *work, t *fsm.Topic, resend bool) error {
	im := w.img()
	var led, online []partRef
	var reps []replica
	w.plan.reserve(int(im.PartitionCount(t.ID)))
	im.EachPartition(t.ID, func(i int32, p *fsm.Partition) bool {
		ref := partRef{id: t.ID, name: t.Name, part: i}
		w.plan.updateMetadata(ref)
		if p.Leader != rl.NoLeader {
			led = append(led, ref)
		}
		if p.State != rl.OfflinePartition {
			online = append(online, ref)
		}
		for _, b := range p.Replicas {
			reps = append(reps, replica{ref: ref, broker: b})
		}
		return true
	})
	for _, ref := range led {
		p := im.Partition(ref.id, ref.part)
		if err := w.stageEach(&rl.PartitionChange{TopicID: ref.id, Partition: ref.part, PartitionEpoch: p.PartitionEpoch,
			Set: rl.ChangeLeader, Leader: rl.NoLeader}); err != nil {
			return err
		}
	}
	if len(online) > 0 {
		if _, err := m.handlePartitionStateChanges(w, online, rl.OfflinePartition, 0, nil); err != nil {
			return err
		}
	}
	if err := m.driveReplicaDeletions(w, reps, resend); err != nil {
		return err
	}
	_, err := m.finishTopicDeletion(w, t.ID)
	return err
}

// isDeletionState reports whether a replica in state s is on its way out:
// only a deletion puts a replica in one of these states.
func isDeletionState(s rl.ReplicaState) bool {
	switch s {
	case rl.ReplicaDeletionStarted, rl.ReplicaDeletionSuccessful, rl.ReplicaDeletionIneligible:
		return true
	}
	return false
}

// driveReplicaDeletions moves replicas that are to be deleted along the
// deletion path of the replica state machine, from whatever state each is
// in (docs/statemachines.md, topic deletion):
//
//   - a replica not yet offline goes OfflineReplica (StopReplica without
//     delete, out of the ISR); one that was never created (still
//     NonExistentReplica in the assignment) goes NewReplica first;
//   - an offline replica goes ReplicaDeletionStarted, with StopReplica
//     (delete=true) to its broker, if the broker is live, and
//     ReplicaDeletionIneligible if it is not;
//   - an ineligible replica whose broker is live again is retried:
//     OfflineReplica, then ReplicaDeletionStarted;
//   - a started replica whose broker is not live goes
//     ReplicaDeletionIneligible (its request may be lost; it is retried
//     when the broker returns); on a live broker, with resend, it is sent
//     StopReplica (delete=true) again;
//   - a replica whose deletion is confirmed stays where it is.
//
// The replicas' partitions must have no leader among them.
func (m *replicationManager) driveReplicaDeletions(w *work, reps []replica, resend bool) error {
	if len(reps) == 0 {
		return nil
	}
	live, _ := w.liveSet()
	state := func(r replica) (rl.ReplicaState, bool) {
		p := w.img().Partition(r.ref.id, r.ref.part)
		if p == nil || slices.Index(p.Replicas, r.broker) < 0 {
			return 0, false
		}
		return p.ReplicaState(r.broker), true
	}
	var toNew, toOffline []replica
	for _, r := range reps {
		s, ok := state(r)
		if !ok {
			continue
		}
		switch s {
		case rl.NonExistentReplica:
			toNew = append(toNew, r)
			toOffline = append(toOffline, r)
		case rl.NewReplica, rl.OnlineReplica:
			toOffline = append(toOffline, r)
		case rl.ReplicaDeletionIneligible:
			if live.Has(r.broker) {
				toOffline = append(toOffline, r)
			}
		}
	}
	if len(toNew) > 0 {
		if _, err := m.handleReplicaStateChanges(w, toNew, rl.NewReplica); err != nil {
			return err
		}
	}
	if len(toOffline) > 0 {
		if _, err := m.handleReplicaStateChanges(w, toOffline, rl.OfflineReplica); err != nil {
			return err
		}
	}
	var toStart, toIneligible []replica
	for _, r := range reps {
		s, ok := state(r)
		if !ok {
			continue
		}
		switch {
		case s == rl.OfflineReplica && live.Has(r.broker):
			toStart = append(toStart, r)
		case s == rl.OfflineReplica, s == rl.ReplicaDeletionStarted && !live.Has(r.broker):
			toIneligible = append(toIneligible, r)
		case s == rl.ReplicaDeletionStarted && resend:
			p := w.img().Partition(r.ref.id, r.ref.part)
			w.plan.stopReplica(r.ref, r.broker, true, p.LeaderEpoch)
		}
	}
	if len(toStart) > 0 {
		if _, err := m.handleReplicaStateChanges(w, toStart, rl.ReplicaDeletionStarted); err != nil {
			return err
		}
	}
	if len(toIneligible) > 0 {
		for _, r := range toIneligible {
			w.log.Info("replica deletion deferred: broker not live", "topic", r.ref.name, "partition", r.ref.part, "broker", r.broker)
		}
		if _, err := m.handleReplicaStateChanges(w, toIneligible, rl.ReplicaDeletionIneligible); err != nil {
			return err
		}
	}
	return nil
}

// finishTopicDeletion removes a topic queued for deletion once every
// replica of every partition is ReplicaDeletionSuccessful: the replicas go
// NonExistentReplica (which takes them out of the assignment), the
// partitions NonExistentPartition, and RemoveTopic frees the name. It
// reports whether the topic was removed.
func (m *replicationManager) finishTopicDeletion(w *work, id rl.TopicID) (bool, error) {
	im := w.img()
	t := im.Topic(id)
	if t == nil || !t.Deleting {
		return false, nil
	}
	done := true
	var reps []replica
	var parts, notOffline []partRef
	im.EachPartition(t.ID, func(i int32, p *fsm.Partition) bool {
		ref := partRef{id: t.ID, name: t.Name, part: i}
		for j, b := range p.Replicas {
			if p.ReplicaStates[j] != rl.ReplicaDeletionSuccessful {
				done = false
				return false
			}
			reps = append(reps, replica{ref: ref, broker: b})
		}
		parts = append(parts, ref)
		if p.State != rl.OfflinePartition {
			notOffline = append(notOffline, ref)
		}
		return true
	})
	if !done {
		return false, nil
	}
	if len(reps) > 0 {
		if _, err := m.handleReplicaStateChanges(w, reps, rl.NonExistentReplica); err != nil {
			return false, err
		}
	}
	if len(notOffline) > 0 {
		if _, err := m.handlePartitionStateChanges(w, notOffline, rl.OfflinePartition, 0, nil); err != nil {
			return false, err
		}
	}
	if len(parts) > 0 {
		if _, err := m.handlePartitionStateChanges(w, parts, rl.NonExistentPartition, 0, nil); err != nil {
			return false, err
		}
	}
	if err := w.stageEach(&rl.RemoveTopic{TopicID: t.ID}); err != nil {
		return false, err
	}
	w.log.Info("topic deleted", "topic", t.Name, "id", t.ID.String())
	return true, nil
}

// StopReplicaResult is a broker's answer for one replica that a
// StopReplica with delete=true asked it to delete: Err is nil when the
// replica and its data are gone. TopicID identifies the topic; Topic is
// used when the id is zero.
type StopReplicaResult struct {
	TopicID   rl.TopicID
	Topic     string
	Partition int32
	Err       error
	// BrokerEpoch is the epoch of the broker's registration the request
	// was sent to (its header's). An answer for an earlier registration is
	// stale: a broker that registered again was sent the deletion again,
	// and that request's answer is the one that counts. Zero (or less)
	// stands for the broker's current registration.
	BrokerEpoch int64
}

// HandleStopReplicaResponse reports what a broker answered to a
// StopReplica: pass the results of the partitions that were sent with
// delete=true (stops without delete move no state), with the broker's
// per-partition error, or the request's error for each of them when the
// request failed as a whole or was never delivered.
//
// It does not block: the results are queued as an event of the active
// controller, which moves each replica that is in ReplicaDeletionStarted
// to ReplicaDeletionSuccessful (no error) or ReplicaDeletionIneligible
// (error; retried when its broker returns), and completes the deletions
// this finishes. An answer for a replica in any other state is stale and
// ignored. On a node that is not the active controller it does nothing:
// the next active controller sends again every deletion still pending.
func (c *Controller) HandleStopReplicaResponse(broker int32, results []StopReplicaResult) {
	if len(results) == 0 {
		return
	}
	c.mu.Lock()
	a := c.active
	c.mu.Unlock()
	if a == nil {
		return
	}
	results = slices.Clone(results)
	ev := c.newEvent("stop-replica-response", func(m *managers, w *work) (eventOutcome, error) {
		return answer(nil, m.replication.stopReplicaResponse(w, broker, results))
	})
	select {
	case a.events <- ev:
	default:
		// The queue is full: the caller (a sender goroutine, or the loop
		// itself sending requests) must not wait for it to drain.
		go func() {
			select {
			case a.events <- ev:
			case <-a.stop:
			case <-a.done:
			}
		}()
	}
}

func (m *replicationManager) stopReplicaResponse(w *work, broker int32, results []StopReplicaResult) error {
	im := w.img()
	var epoch int64
	if b := im.Broker(broker); b != nil {
		epoch = b.Epoch
	}
	seen := map[partRef]bool{}
	var ok, failed []replica
	var deleting []rl.TopicID
	isDeleting := map[rl.TopicID]bool{}
	var removals []partRef
	for _, res := range results {
		var t *fsm.Topic
		if !res.TopicID.IsZero() {
			t = im.Topic(res.TopicID)
		} else {
			t = im.TopicByName(res.Topic)
		}
		if t == nil {
			continue
		}
		if res.BrokerEpoch > 0 && res.BrokerEpoch != epoch {
			// Sent to an earlier registration (a request dropped when the
			// broker restarted, say): the deletion went again to the
			// current one, whose answer decides.
			w.log.Debug("stop-replica answer of an earlier broker registration ignored", "broker", broker,
				"answer_epoch", res.BrokerEpoch, "broker_epoch", epoch, "topic", t.Name, "partition", res.Partition)
			continue
		}
		ref := partRef{id: t.ID, name: t.Name, part: res.Partition}
		p := im.Partition(t.ID, res.Partition)
		if p == nil || seen[ref] || p.ReplicaState(broker) != rl.ReplicaDeletionStarted {
			w.log.Debug("stale stop-replica answer ignored", "broker", broker, "topic", t.Name, "partition", res.Partition)
			continue
		}
		seen[ref] = true
		r := replica{ref: ref, broker: broker}
		if res.Err == nil {
			ok = append(ok, r)
		} else {
			w.log.Warn("replica deletion failed: retried when the broker returns", "broker", broker, "topic", t.Name, "partition", res.Partition, "error", res.Err)
			failed = append(failed, r)
		}
		if t.Deleting {
			if !isDeleting[t.ID] {
				isDeleting[t.ID] = true
				deleting = append(deleting, t.ID)
			}
		} else {
			removals = append(removals, ref)
		}
	}
	if len(ok) > 0 {
		if _, err := m.handleReplicaStateChanges(w, ok, rl.ReplicaDeletionSuccessful); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		if _, err := m.handleReplicaStateChanges(w, failed, rl.ReplicaDeletionIneligible); err != nil {
			return err
		}
	}
	slices.SortFunc(deleting, func(a, b rl.TopicID) int { return compareIDs(a, b) })
	for _, id := range deleting {
		if _, err := m.finishTopicDeletion(w, id); err != nil {
			return err
		}
	}
	for _, ref := range sortRefs(removals) {
		if err := m.finishReplicaRemovals(w, ref); err != nil {
			return err
		}
	}
	return nil
}

// resumeTopicDeletions carries on every deletion the log shows in
// progress (part of resume: it runs first thing after activation).
func (m *replicationManager) resumeTopicDeletions(w *work) error {
	var topics []*fsm.Topic
	w.img().ForEachTopic(func(t *fsm.Topic) bool {
		if t.Deleting {
			topics = append(topics, t)
		}
		return true
	})
	slices.SortFunc(topics, func(a, b *fsm.Topic) int { return compareIDs(a.ID, b.ID) })
	if len(topics) > 0 {
		w.log.Info("resuming topic deletions", "topics", len(topics))
	}
	for _, t := range topics {
		if err := m.driveTopicDeletion(w, t, true); err != nil {
			return err
		}
	}
	return nil
}
