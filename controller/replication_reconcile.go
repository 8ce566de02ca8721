package controller

import (
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// resume picks up, after a failover (or an import), what the log shows in
// progress: it finishes the transitions a previous controller committed in
// part (reconcile), then carries on topic deletions, then reassignments.
// Each step reads only the view and is idempotent.
func (m *replicationManager) resume(w *work) error {
	if err := m.reconcile(w); err != nil {
		return err
	}
	if err := m.resumeTopicDeletions(w); err != nil {
		return err
	}
	return m.resumeReassignments(w)
}

// reconcile finishes decisions that a previous controller committed only
// in part. A large event is split over several log entries, and a failover
// can commit a prefix of them: a broker fenced whose replicas are not all
// offline yet, a partition elected whose OnlinePartition record did not
// make it, or one left leaderless but still marked online. Each is visible
// in the image, and each fix is an ordinary, idempotent transition, so
// the new controller needs nothing but its own log to finish the work.
//
// It scans every partition once, so it runs as the first event after the
// controller is ready rather than as part of activation.
func (m *replicationManager) reconcile(w *work) error {
	for _, b := range w.img().Brokers() {
		if b.Fenced {
			if err := m.offlineBrokerReplicas(w, b.ID); err != nil {
				return err
			}
		}
	}
	live, _ := w.liveSet()
	var toOnline, toOffline []partRef
	im := w.img()
	for _, t := range sortedTopics(im) {
		im.EachPartition(t.ID, func(i int32, p *fsm.Partition) bool {
			ref := partRef{id: t.ID, name: t.Name, part: i}
			switch {
			case p.State == rl.OfflinePartition && p.Leader != rl.NoLeader && live.Has(p.Leader):
				toOnline = append(toOnline, ref)
			case p.State == rl.OnlinePartition && p.Leader == rl.NoLeader:
				toOffline = append(toOffline, ref)
			}
			return true
		})
	}
	if len(toOnline)+len(toOffline) > 0 {
		w.log.Info("finishing partition transitions left by the previous controller", "to_online", len(toOnline), "to_offline", len(toOffline))
	}
	if len(toOnline) > 0 {
		if _, err := m.handlePartitionStateChanges(w, toOnline, rl.OnlinePartition, NoOpElection, nil); err != nil {
			return err
		}
	}
	if len(toOffline) > 0 {
		if _, err := m.handlePartitionStateChanges(w, toOffline, rl.OfflinePartition, 0, nil); err != nil {
			return err
		}
	}
	return nil
}
