package broker

import (
	"context"
	"slices"
	"time"
)

// SimulateReplication stands in, until ctx is done, for the replication
// a real broker does, for an agent whose followers are simulated and so
// always caught up: every interval, for every partition the agent leads,
// each replica on a live broker that is missing from the ISR is added to
// it (AlterPartition), as a leader does once a follower has caught up.
// That is what lets reassignments complete and ISRs grow back after a
// broker returns (`ctrlnode dev`'s brokers run it).
func (a *Agent) SimulateReplication(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		live := map[int32]bool{}
		for _, b := range a.Brokers() {
			live[b.ID] = true
		}
		for _, p := range a.Partitions() {
			if p.Leader != a.BrokerID() {
				continue
			}
			isr := append([]int32(nil), p.ISR...)
			for _, r := range p.Replicas {
				if live[r] && !slices.Contains(isr, r) {
					isr = append(isr, r)
				}
			}
			if len(isr) == len(p.ISR) {
				continue
			}
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, _ = a.AlterPartition(actx, p.Topic, p.Partition, isr)
			cancel()
		}
	}
}
