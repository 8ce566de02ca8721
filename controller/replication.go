package controller

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// replicationManager owns the partitions and their replicas (Kafka's
// ReplicationControlManager): the replica and partition state machines
// (docs/statemachines.md) and the elections they run, topic creation and
// deletion, added partitions, ISR changes from partition leaders
// (AlterPartition), reassignments, elections on demand and the preferred
// leader balance, and the partition side of a broker's fence, return and
// controlled shutdown, which the cluster manager hands it. Everything it
// decides from is in the image: it owns no other state.
type replicationManager struct {
	stateChanges stateChangeLog
}

// replica names one replica: a partition and a broker.
type replica struct {
	ref    partRef
	broker int32
}

// handleReplicaStateChanges moves replicas to target following the
// replica state machine (docs/statemachines.md, replica states):
// replicas are grouped by broker, each transition is checked against the
// table (a replica with no recorded state counts as NonExistentReplica),
// every invalid one is logged once and skipped, the valid ones are staged
// as one record per topic, and their effects are planned. It returns the
// replicas that moved.
func (m *replicationManager) handleReplicaStateChanges(w *work, replicas []replica, target rl.ReplicaState) ([]replica, error) {
	return m.handleReplicaStateChangesIf(w, replicas, target, nil)
}

// handleReplicaStateChangesIf is handleReplicaStateChanges for the
// replicas whose partition, as the event sees it when the replica's turn
// comes, passes keep (nil: all); the others are skipped without a word.
// It spares a caller that selects replicas by their partition's state a
// lookup of its own for each.
func (m *replicationManager) handleReplicaStateChangesIf(w *work, replicas []replica, target rl.ReplicaState, keep func(*fsm.Partition) bool) ([]replica, error) {
	byBroker := func(a, b replica) int {
		if a.broker != b.broker {
			return cmp.Compare(a.broker, b.broker)
		}
		return compareRef(a.ref, b.ref)
	}
	if !slices.IsSortedFunc(replicas, byBroker) {
		slices.SortFunc(replicas, byBroker)
	}
	im := w.img()
	valid := make([]replica, 0, len(replicas))
	if target == rl.OfflineReplica {
		w.plan.reserve(len(replicas))
		w.txn.Grow(len(replicas)) // up to a PartitionChange each
		// Sorted by broker: each run is one broker's StopReplica list.
		for i := 0; i < len(replicas); {
			j := i + 1
			for j < len(replicas) && replicas[j].broker == replicas[i].broker {
				j++
			}
			w.plan.reserveStop(replicas[i].broker, j-i)
			i = j
		}
	}
	for _, r := range replicas {
		p := im.Partition(r.ref.id, r.ref.part)
		if keep != nil && (p == nil || !keep(p)) {
			continue
		}
		from := rl.NonExistentReplica
		if p != nil {
			from = p.ReplicaState(r.broker)
		}
		switch {
		case p == nil:
			m.stateChanges.invalidReplica("no such partition", r.ref.name, r.ref.part, r.broker, from.String(), target.String())
		case !fsm.ValidReplicaTransition(from, target):
			m.stateChanges.invalidReplica("not a transition of the replica state machine", r.ref.name, r.ref.part, r.broker, from.String(), target.String())
		case target == rl.NewReplica && p.Leader == r.broker:
			m.stateChanges.invalidReplica("the replica leads its partition", r.ref.name, r.ref.part, r.broker, from.String(), target.String())
		case slices.Index(p.Replicas, r.broker) < 0:
			m.stateChanges.invalidReplica("broker not in the assignment", r.ref.name, r.ref.part, r.broker, from.String(), target.String())
		default:
			valid = append(valid, r)
			if target == rl.OfflineReplica {
				if err := m.offlineReplicaEffect(w, r, p); err != nil {
					return nil, err
				}
			} else {
				m.replicaEffect(w, r, from, target, p)
			}
		}
	}
	if keep != nil && target == rl.OfflineReplica {
		// A broker none of whose replicas were kept hears nothing.
		for i, r := range replicas {
			if (i == 0 || r.broker != replicas[i-1].broker) && len(w.plan.stop[r.broker]) == 0 {
				delete(w.plan.stop, r.broker)
			}
		}
	}
	if err := m.stageReplicaStates(w, valid, target); err != nil {
		return nil, err
	}
	return valid, nil
}

// stageReplicaStates stages one ReplicaStateChange per topic, topics in
// id order, each with its replicas in the order given.
func (m *replicationManager) stageReplicaStates(w *work, replicas []replica, target rl.ReplicaState) error {
	byTopic := func(a, b replica) int { return compareIDs(a.ref.id, b.ref.id) }
	if !slices.IsSortedFunc(replicas, byTopic) {
		replicas = slices.Clone(replicas)
		slices.SortStableFunc(replicas, byTopic)
	}
	refs := make([]rl.ReplicaRef, len(replicas))
	for i, r := range replicas {
		refs[i] = rl.ReplicaRef{Partition: r.ref.part, Broker: r.broker}
	}
	for i := 0; i < len(replicas); {
		j := i + 1
		for j < len(replicas) && replicas[j].ref.id == replicas[i].ref.id {
			j++
		}
		if err := w.stageEach(&rl.ReplicaStateChange{TopicID: replicas[i].ref.id, State: target, Replicas: refs[i:j:j]}); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// replicaEffect plans what a committed transition sends (the table in
// docs/statemachines.md, replica states).
func (m *replicationManager) replicaEffect(w *work, r replica, from, target rl.ReplicaState, p *fsm.Partition) {
	switch target {
	case rl.NewReplica:
		if p.Leader != rl.NoLeader {
			w.plan.leaderAndIsr(r.ref, []int32{r.broker}, true)
		}
	case rl.OnlineReplica:
		if from != rl.NewReplica {
			w.plan.leaderAndIsr(r.ref, []int32{r.broker}, false)
		}
	case rl.ReplicaDeletionStarted:
		w.plan.stopReplica(r.ref, r.broker, true, p.LeaderEpoch)
	}
}

// offlineReplicaEffect stages and plans the OfflineReplica effect: stop
// the replica, take it out of the ISR (and out of the lead, if it led,
// leaving the partition for an election), tell the remaining replicas.
// The ISR never empties: a last member going offline stays in it with no
// leader, so it can lead again without data loss when it returns.
// p is the partition as the event sees it.
func (m *replicationManager) offlineReplicaEffect(w *work, r replica, p *fsm.Partition) error {
	w.plan.stopReplica(r.ref, r.broker, false, p.LeaderEpoch)
	if p.Leader != r.broker && !p.InISR(r.broker) {
		// Neither leader nor in sync (a fenced broker's partitions once
		// re-elected): nothing the other replicas or brokers need to hear.
		return nil
	}
	isr := w.lists.shrinkISR(p.ISR, oneBroker(r.broker))
	leader := p.Leader
	if leader == r.broker {
		leader = rl.NoLeader
	}
	if leader == p.Leader && slices.Equal(isr, p.ISR) {
		return nil // nothing the other replicas or brokers need to hear
	}
	if err := w.stageChange(rl.PartitionChange{TopicID: r.ref.id, Partition: r.ref.part, PartitionEpoch: p.PartitionEpoch,
		Set: rl.ChangeLeader | rl.ChangeISR, Leader: leader, ISR: isr}); err != nil {
		return err
	}
	if leader != rl.NoLeader {
		live, _ := w.liveSet()
		rest := w.lists.make(len(p.Replicas))
		for _, b := range p.Replicas {
			if b != r.broker && live.Has(b) {
				rest = append(rest, b)
			}
		}
		w.plan.leaderAndIsr(r.ref, rest, false)
	} else {
		w.plan.updateMetadata(r.ref)
	}
	return nil
}

// handlePartitionStateChanges moves partitions to target following the
// partition state machine (docs/statemachines.md, partition states);
// OnlinePartition runs the named election strategy for partitions that
// are not new. It returns per-partition election errors
// (a partition whose election failed stays where it was, except for the
// last-ISR case of the Offline strategy, which commits leader -1).
func (m *replicationManager) handlePartitionStateChanges(w *work, refs []partRef, target rl.PartitionState, strategy Strategy, unclean func(partRef) bool) (map[partRef]error, error) {
	if !slices.IsSortedFunc(refs, compareRef) {
		slices.SortFunc(refs, compareRef)
	}
	failed := map[partRef]error{}
	// refs are sorted: each topic's partitions are one run of parts.
	type topicRun struct {
		id         rl.TopicID
		start, end int
	}
	parts := make([]int32, 0, len(refs))
	var runs []topicRun
	add := func(ref partRef) {
		if n := len(runs); n == 0 || runs[n-1].id != ref.id {
			runs = append(runs, topicRun{id: ref.id, start: len(parts)})
		}
		parts = append(parts, ref.part)
		runs[len(runs)-1].end = len(parts)
	}
	if target == rl.OnlinePartition {
		w.plan.reserve(len(refs))
		w.txn.Grow(len(refs)) // up to a PartitionChange each
	}
	var offline []partRef
	live, shutting := w.liveSet()
	if strategy != ControlledShutdownElection {
		// A broker in controlled shutdown is on its way out: it must not
		// be handed leadership again (Kafka counts it as not live for
		// elections).
		live = live.Without(shutting.IDs()...)
	}
	// Boxed once: each election would box them again.
	liveB, shuttingB := Brokers(live), Brokers(shutting)
	for _, ref := range refs {
		p := w.img().Partition(ref.id, ref.part)
		if p == nil {
			m.stateChanges.invalidPartition("no such partition", ref.name, ref.part, rl.NonExistentPartition.String(), target.String())
			failed[ref] = kafkaErr(kerrUnknownTopicOrPartition, "%s-%d", ref.name, ref.part)
			continue
		}
		if !fsm.ValidPartitionTransition(p.State, target) {
			m.stateChanges.invalidPartition("not a transition of the partition state machine", ref.name, ref.part, p.State.String(), target.String())
			failed[ref] = fmt.Errorf("invalid partition state change %s -> %s", p.State, target)
			continue
		}
		if target != rl.OnlinePartition {
			add(ref)
			continue
		}
		el, err := m.elect(w, ref, p, strategy, liveB, shuttingB, unclean != nil && unclean(ref))
		if err != nil {
			failed[ref] = err
			if el.Leader == rl.NoLeader && p.Leader != rl.NoLeader && strategy != PreferredElection && strategy != ReassignedElection {
				// The leader is gone and nobody clean can take over:
				// commit leader -1, keep the ISR, go offline.
				if err := w.stageChange(rl.PartitionChange{TopicID: ref.id, Partition: ref.part, PartitionEpoch: p.PartitionEpoch,
					Set: rl.ChangeLeader | rl.ChangeISR, Leader: rl.NoLeader, ISR: el.ISR}); err != nil {
					return nil, err
				}
				w.plan.updateMetadata(ref)
			}
			if p.State != rl.OfflinePartition && (w.img().Partition(ref.id, ref.part).Leader == rl.NoLeader) {
				offline = append(offline, ref)
			}
			continue
		}
		if el.Leader != p.Leader || !slices.Equal(el.ISR, p.ISR) {
			if err := w.stageChange(rl.PartitionChange{TopicID: ref.id, Partition: ref.part, PartitionEpoch: p.PartitionEpoch,
				Set: rl.ChangeLeader | rl.ChangeISR, Leader: el.Leader, ISR: el.ISR}); err != nil {
				return nil, err
			}
		}
		if el.Unclean {
			w.log.Warn("unclean leader election", "topic", ref.name, "partition", ref.part, "leader", el.Leader)
		}
		w.plan.leaderAndIsr(ref, el.Receivers, p.State == rl.NewPartition)
		add(ref)
	}
	for _, r := range runs {
		if err := w.stageEach(&rl.PartitionStateChange{TopicID: r.id, State: target, Partitions: parts[r.start:r.end:r.end]}); err != nil {
			return nil, err
		}
	}
	if len(offline) > 0 {
		if _, err := m.handlePartitionStateChanges(w, offline, rl.OfflinePartition, 0, nil); err != nil {
			return nil, err
		}
	}
	return failed, nil
}

// elect picks the leader and ISR of a partition going online: a new
// partition takes its first live replica and all live replicas as ISR;
// any other runs the strategy.
func (m *replicationManager) elect(w *work, ref partRef, p *fsm.Partition, strategy Strategy, live, shutting Brokers, unclean bool) (Election, error) {
	if p.State == rl.NewPartition {
		var isr []int32
		for _, b := range p.Replicas {
			if live.Has(b) {
				isr = append(isr, b)
			}
		}
		if len(isr) == 0 {
			return Election{Leader: rl.NoLeader}, kafkaErr(kerrEligibleLeadersNotAvailable, "no live replica among %v", p.Replicas)
		}
		return Election{Leader: isr[0], ISR: isr, Receivers: isr}, nil
	}
	view := PartitionView{Replicas: p.Replicas, ISR: p.ISR, Leader: p.Leader}
	if t := w.img().Topic(ref.id); t != nil {
		if ra, ok := t.Reassignments[ref.part]; ok {
			view.Target = targetReplicas(p.Replicas, ra)
		}
	}
	return Elect(strategy, ElectionInput{Partition: view, Live: live, ShuttingDown: shutting, Unclean: unclean, lists: &w.lists})
}

// targetReplicas is the assignment a reassignment ends with.
func targetReplicas(replicas []int32, ra fsm.Reassignment) []int32 {
	var out []int32
	for _, b := range replicas {
		if slices.Index(ra.Removing, b) < 0 {
			out = append(out, b)
		}
	}
	return out
}
