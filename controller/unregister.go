package controller

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// UnregisterBroker removes a broker from the cluster, for a broker that is
// decommissioned and will not come back under this id soon. An unknown id
// gets BROKER_ID_NOT_REGISTERED.
//
// A broker that is still unfenced is fenced first, in the same event: the
// partitions it leads are re-elected and its replicas go offline before it
// disappears, so no partition is left led by a broker that no longer
// exists. For a broker fenced already the same transitions are rerun
// (they are idempotent), in case a failover cut the fence's effects short.
// Its replicas stay in their assignments: moving them elsewhere is a
// reassignment, an operator's decision.
func (c *Controller) UnregisterBroker(ctx context.Context, id int32) error {
	_, _, err := c.submit(ctx, "unregister-broker", func(ec *eventCtx) (any, error) {
		b := ec.img().Broker(id)
		if b == nil {
			return nil, kafkaErr(kerr.BrokerIDNotRegistered, "broker %d", id)
		}
		if !b.Fenced {
			ec.log.Info("unregistering a broker that is still unfenced: fencing it first", "broker", id,
				"session_live", ec.act.sessions.alive(id, ec.now))
			if err := ec.fenceBroker(b); err != nil {
				return nil, err
			}
		} else if err := ec.offlineBrokerReplicas(id); err != nil {
			return nil, err
		}
		if err := ec.stageEach(&rl.UnregisterBroker{BrokerID: id, BrokerEpoch: b.Epoch}); err != nil {
			return nil, err
		}
		ec.act.sessions.forget(id)
		ec.plan.updateMetadataToAll = true
		ec.log.Info("broker unregistered", "broker", id, "epoch", b.Epoch)
		return nil, nil
	}, nil)
	return err
}
