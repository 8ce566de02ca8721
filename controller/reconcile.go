package controller

import (
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

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
func (ec *eventCtx) reconcile() error {
	for _, b := range ec.img().Brokers() {
		if b.Fenced {
			if err := ec.offlineBrokerReplicas(b.ID); err != nil {
				return err
			}
		}
	}
	live, _ := ec.liveSet()
	var toOnline, toOffline []partRef
	im := ec.img()
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
		ec.log.Info("finishing partition transitions left by the previous controller", "to_online", len(toOnline), "to_offline", len(toOffline))
	}
	if len(toOnline) > 0 {
		if _, err := ec.handlePartitionStateChanges(toOnline, rl.OnlinePartition, NoOpElection, nil); err != nil {
			return err
		}
	}
	if len(toOffline) > 0 {
		if _, err := ec.handlePartitionStateChanges(toOffline, rl.OfflinePartition, 0, nil); err != nil {
			return err
		}
	}
	return nil
}
