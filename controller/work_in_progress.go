package controller

import (
	"slices"

	"github.com/ctrlquorum/ctrlquorum/fsm"
)

// standardResumers are the resumers (see Controller.resumers) of the
// multi-step work the controller itself starts: topic deletions, then
// reassignments. Each reads only the image and is idempotent.
func standardResumers() []func(*eventCtx) error {
	return []func(*eventCtx) error{
		(*eventCtx).resumeTopicDeletions,
		(*eventCtx).resumeReassignments,
	}
}

// atomically runs fn over a Txn and a plan of its own on top of the
// event's, and keeps what it staged and planned only if it succeeds. A
// failure (the FSM refusing a record fn computed, which is a bug) is
// logged and leaves the event as it was, so work that merely rides along
// with an event (a broker's return, an ISR change) cannot make that event
// fail; the next activation's resumers pick the work up again.
func (ec *eventCtx) atomically(what string, fn func(sub *eventCtx) error) {
	child := ec.txn.Child()
	sub := &eventCtx{c: ec.c, act: ec.act, txn: child, plan: newPlan(), now: ec.now, log: ec.log}
	if err := fn(sub); err != nil {
		ec.log.Error("work left for later: staging failed", "work", what, "error", err)
		return
	}
	ec.txn.Merge(child)
	ec.plan.merge(sub.plan)
	ec.live = nil
	ec.endRound = ec.endRound || sub.endRound
}

// brokerReturned carries on the work that waited for a broker that was
// just unfenced: its replicas of topics being deleted, and those that
// reassignments dropped, go on down the deletion path (a replica in
// ReplicaDeletionIneligible is retried, one in ReplicaDeletionStarted is
// sent StopReplica delete=true again), and the reassignments it takes part
// in are checked for completion. The broker's unfence calls it before
// bringing the broker's other replicas back online, so that a replica on
// its way out is not brought back.
func (ec *eventCtx) brokerReturned(id int32) {
	im := ec.img()
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
	ec.atomically("work waiting for a returning broker", func(sub *eventCtx) error {
		var reps []replica
		for _, t := range deleting {
			sub.img().EachPartition(t.ID, func(i int32, p *fsm.Partition) bool {
				if indexOf(p.Replicas, id) >= 0 {
					reps = append(reps, replica{ref: partRef{id: t.ID, name: t.Name, part: i}, broker: id})
				}
				return true
			})
		}
		if err := sub.driveReplicaDeletions(reps, true); err != nil {
			return err
		}
		for _, t := range reassigning {
			for _, part := range t.ReassigningPartitions() {
				v := newReassignView(sub.img(), sub.img().Topic(t.ID), part)
				if v.p == nil || indexOf(v.p.Replicas, id) < 0 {
					continue
				}
				if indexOf(v.doomed, id) >= 0 {
					if err := sub.driveReplicaDeletions([]replica{{ref: v.ref, broker: id}}, true); err != nil {
						return err
					}
				}
				v = newReassignView(sub.img(), sub.img().Topic(t.ID), part)
				if _, err := sub.maybeCompleteReassignment(&v); err != nil {
					return err
				}
			}
		}
		return nil
	})
}
