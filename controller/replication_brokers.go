package controller

import (
	"slices"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	"github.com/ctrlquorum/ctrlquorum/internal/plantedbug"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// The partition side of a broker's fence, return and controlled shutdown:
// the cluster manager decides about the broker and stages its record, and
// these run the transitions of the broker's partitions in the same work.

// offlineBrokerReplicas runs the broker-failure transitions for a broker
// that is fenced in the work's view (Kafka's onBrokerFailure): partitions
// it leads go OfflinePartition and then OnlinePartition with the Offline
// strategy, and its replicas not yet offline go OfflineReplica. A replica
// already on the deletion path keeps its state: one in
// ReplicaDeletionStarted is sent StopReplica again when its broker
// returns (brokerReturned), and an answer for the fenced registration is
// ignored. It is idempotent, which is what lets a new controller finish a
// fence that an old one did not.
func (m *replicationManager) offlineBrokerReplicas(w *work, id int32) error {
	led, hosted := w.partitionsOf(id)
	w.reserveBrokerWork(len(led), len(hosted))
	if len(hosted) > 0 {
		w.plan.reserveStop(id, len(hosted)) // emptied again if none is stopped
	}
	return eachBrokerSlice(led, hosted, func(led, hosted []partRef) error {
		if len(led) > 0 {
			if _, err := m.handlePartitionStateChanges(w, led, rl.OfflinePartition, 0, nil); err != nil {
				return err
			}
			if _, err := m.handlePartitionStateChanges(w, led, rl.OnlinePartition, OfflineElection, w.uncleanAllowed); err != nil {
				return err
			}
		}
		// The replicas not yet offline, and those offline but still
		// leading or in a shared ISR, are picked as their turn comes,
		// not in a pass of their own: on a large image each lookup is a
		// cache miss.
		toOffline := make([]replica, len(hosted))
		for i, ref := range hosted {
			toOffline[i] = replica{ref: ref, broker: id}
		}
		_, err := m.handleReplicaStateChangesIf(w, toOffline, rl.OfflineReplica, func(p *fsm.Partition) bool {
			switch p.ReplicaState(id) {
			case rl.NewReplica, rl.OnlineReplica:
				return true
			case rl.OfflineReplica:
				// Already offline, but a failover may have cut the ISR
				// shrink short: offline again is valid and idempotent.
				return p.Leader == id || (p.InISR(id) && len(p.ISR) > 1)
			}
			return false
		})
		return err
	})
}

// brokerSlice is how many of a broker's partitions go through all their
// transitions before the next ones start. The records of one partition
// keep their order; those of different partitions are independent. A
// slice's partitions stay in the processor cache from the first
// transition to the last, here and in every voter's FSM, which applies
// the records in the same order: a pass over all of a large broker's
// partitions per transition would miss the cache on each of them.
var brokerSlice = 1024

// eachBrokerSlice calls fn with consecutive slices of hosted (in ref
// order) and the part of led (a subset of hosted, in the same order) that
// falls in each.
func eachBrokerSlice(led, hosted []partRef, fn func(led, hosted []partRef) error) error {
	li := 0
	for lo := 0; lo < len(hosted); lo += brokerSlice {
		hi := min(lo+brokerSlice, len(hosted))
		lj := li
		for lj < len(led) && compareRef(led[lj], hosted[hi-1]) <= 0 {
			lj++
		}
		if err := fn(led[li:lj:lj], hosted[lo:hi:hi]); err != nil {
			return err
		}
		li = lj
	}
	return nil
}

// onlineBrokerReplicas runs the transitions of a broker that was just
// unfenced in the work's view: the work that waited for it carries on
// (see brokerReturned), its replicas come online, and partitions without
// a leader that it can lead are elected.
func (m *replicationManager) onlineBrokerReplicas(w *work, id int32) error {
	m.brokerReturned(w, id)
	_, hosted := w.partitionsOf(id)
	toOnline := make([]replica, 0, len(hosted))
	var leaderless []partRef
	for _, ref := range hosted {
		if t := w.img().Topic(ref.id); t != nil && t.Deleting {
			continue
		}
		p := w.img().Partition(ref.id, ref.part)
		switch p.ReplicaState(id) {
		case rl.NewReplica, rl.OfflineReplica, rl.ReplicaDeletionIneligible:
			toOnline = append(toOnline, replica{ref: ref, broker: id})
		}
		if p.Leader == rl.NoLeader || (plantedbug.On(plantedbug.UncleanElection) && p.State == rl.OnlinePartition && !p.InISR(id)) {
			leaderless = append(leaderless, ref)
		}
	}
	if len(toOnline) > 0 {
		// A replica created while its broker was fenced was never told
		// about: NewReplica -> OnlineReplica sends nothing by itself.
		for _, r := range toOnline {
			if p := w.img().Partition(r.ref.id, r.ref.part); p.ReplicaState(id) == rl.NewReplica && p.Leader != rl.NoLeader {
				w.plan.leaderAndIsr(r.ref, []int32{id}, true)
			}
		}
		if _, err := m.handleReplicaStateChanges(w, toOnline, rl.OnlineReplica); err != nil {
			return err
		}
	}
	if len(leaderless) > 0 {
		if _, err := m.handlePartitionStateChanges(w, leaderless, rl.OnlinePartition, OfflineElection, w.uncleanAllowed); err != nil {
			return err
		}
	}
	return nil
}

// controlledShutdownReplicas moves leadership off a broker in controlled
// shutdown (ControlledShutdown strategy) and takes its follower replicas
// offline. A partition no other ISR member can lead is left with no
// leader and its ISR kept, so the broker leads nothing and may stop. It
// reports whether the broker still leads a partition.
func (m *replicationManager) controlledShutdownReplicas(w *work, id int32) (stillLeads bool, err error) {
	led, hosted := w.partitionsOf(id)
	w.reserveBrokerWork(len(led), len(hosted))
	err = eachBrokerSlice(led, hosted, func(led, hosted []partRef) error {
		if len(led) > 0 {
			failed, err := m.handlePartitionStateChanges(w, led, rl.OnlinePartition, ControlledShutdownElection, nil)
			if err != nil {
				return err
			}
			if len(failed) > 0 {
				stuck := make([]partRef, 0, len(failed))
				for ref := range failed {
					stuck = append(stuck, ref)
				}
				if err := m.dropLeadership(w, stuck); err != nil {
					return err
				}
			}
		}
		var followers []replica
		for _, ref := range hosted {
			p := w.img().Partition(ref.id, ref.part)
			if p.Leader != id && p.InISR(id) && len(p.ISR) > 1 {
				switch p.ReplicaState(id) {
				case rl.NewReplica, rl.OnlineReplica, rl.OfflineReplica, rl.ReplicaDeletionIneligible:
					followers = append(followers, replica{ref: ref, broker: id})
				}
			}
		}
		if len(followers) > 0 {
			if _, err := m.handleReplicaStateChanges(w, followers, rl.OfflineReplica); err != nil {
				return err
			}
		}
		for _, ref := range led {
			if p := w.img().Partition(ref.id, ref.part); p != nil && p.Leader == id {
				stillLeads = true
				break
			}
		}
		return nil
	})
	return stillLeads, err
}

// dropLeadership sets leader -1 (ISR kept) on partitions whose leader must
// step down with nobody to take over, and marks them offline.
func (m *replicationManager) dropLeadership(w *work, refs []partRef) error {
	var off []partRef
	for _, ref := range sortRefs(refs) {
		p := w.img().Partition(ref.id, ref.part)
		if p == nil || p.Leader == rl.NoLeader {
			continue
		}
		if err := w.stageChange(rl.PartitionChange{TopicID: ref.id, Partition: ref.part, PartitionEpoch: p.PartitionEpoch,
			Set: rl.ChangeLeader, Leader: rl.NoLeader}); err != nil {
			return err
		}
		// The old leader must hear that it leads no more.
		live, _ := w.liveSet()
		var to []int32
		for _, r := range p.Replicas {
			if live.Has(r) {
				to = append(to, r)
			}
		}
		w.plan.leaderAndIsr(ref, to, false)
		off = append(off, ref)
	}
	if len(off) > 0 {
		_, err := m.handlePartitionStateChanges(w, off, rl.OfflinePartition, 0, nil)
		return err
	}
	return nil
}

// brokerReturned carries on the work that waited for a broker that was
// just unfenced: its replicas of topics being deleted, and those that
// reassignments dropped, go on down the deletion path (a replica in
// ReplicaDeletionIneligible is retried, one in ReplicaDeletionStarted is
// sent StopReplica delete=true again), and the reassignments it takes part
// in are checked for completion. The broker's unfence calls it before
// bringing the broker's other replicas back online, so that a replica on
// its way out is not brought back.
func (m *replicationManager) brokerReturned(w *work, id int32) {
	im := w.img()
	var deleting, reassigning []*fsm.Topic
	im.ForEachTopic(func(t *fsm.Topic) bool {
		switch {
		case t.Deleting:
			deleting = append(deleting, t)
		case len(t.Reassignments) > 0:
			reassigning = append(reassigning, t)
		}
		return true
	})
	if len(deleting)+len(reassigning) == 0 {
		return
	}
	byID := func(a, b *fsm.Topic) int { return compareIDs(a.ID, b.ID) }
	slices.SortFunc(deleting, byID)
	slices.SortFunc(reassigning, byID)
	w.atomically("work waiting for a returning broker", func(sub *work) error {
		var reps []replica
		for _, t := range deleting {
			sub.img().EachPartition(t.ID, func(i int32, p *fsm.Partition) bool {
				if slices.Index(p.Replicas, id) >= 0 {
					reps = append(reps, replica{ref: partRef{id: t.ID, name: t.Name, part: i}, broker: id})
				}
				return true
			})
		}
		if err := m.driveReplicaDeletions(sub, reps, true); err != nil {
			return err
		}
		for _, t := range reassigning {
			for _, part := range t.ReassigningPartitions() {
				v := newReassignView(sub.img(), sub.img().Topic(t.ID), part)
				if v.p == nil || slices.Index(v.p.Replicas, id) < 0 {
					continue
				}
				if slices.Index(v.doomed, id) >= 0 {
					if err := m.driveReplicaDeletions(sub, []replica{{ref: v.ref, broker: id}}, true); err != nil {
						return err
					}
				}
				v = newReassignView(sub.img(), sub.img().Topic(t.ID), part)
				if _, err := m.maybeCompleteReassignment(sub, &v); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func sortRefs(refs []partRef) []partRef {
	m := make(map[partRef]struct{}, len(refs))
	for _, r := range refs {
		m[r] = struct{}{}
	}
	return sortedRefs(m)
}
