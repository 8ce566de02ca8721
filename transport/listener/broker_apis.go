package listener

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// brokerRegistration maps BrokerRegistration onto Controller.RegisterBroker.
// A broker id that is a voter's is refused: the two share the id space
// clients route by (see the package comment).
func (l *Listener) brokerRegistration(ctx context.Context, req *kmsg.BrokerRegistrationRequest) *kmsg.BrokerRegistrationResponse {
	resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
	epoch, err := l.registerBroker(ctx, req)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp
	}
	resp.BrokerEpoch = epoch
	return resp
}

func (l *Listener) registerBroker(ctx context.Context, req *kmsg.BrokerRegistrationRequest) (int64, error) {
	if l.standby() {
		return 0, l.notController()
	}
	// An empty id is a broker of a release that sent none unless told one:
	// accepted, so that a rolling upgrade keeps its brokers registered.
	if cluster := l.clusterID(); cluster != "" && req.ClusterID != "" && req.ClusterID != cluster {
		return 0, kafkaErr(kerr.InconsistentClusterID, "broker %d belongs to cluster %q, this is %q", req.BrokerID, req.ClusterID, cluster)
	}
	if _, ok := l.peer(req.BrokerID); ok {
		l.log.Warn("refused a broker registration under a controller voter's id", "broker", req.BrokerID)
		return 0, kafkaErr(kerr.InvalidRequest, "broker id %d is a controller voter's node id: broker and voter ids must be disjoint", req.BrokerID)
	}
	reg := controller.BrokerRegistration{BrokerID: req.BrokerID, IncarnationID: rl.IncarnationID(req.IncarnationID)}
	if req.Rack != nil {
		reg.Rack = *req.Rack
	}
	for _, ln := range req.Listeners {
		reg.Endpoints = append(reg.Endpoints, rl.Endpoint{Name: ln.Name, Host: ln.Host, Port: ln.Port, SecurityProtocol: ln.SecurityProtocol})
	}
	for _, f := range req.Features {
		if f.MinSupportedVersion < 0 || f.MaxSupportedVersion < f.MinSupportedVersion {
			return 0, kafkaErr(kerr.InvalidRequest, "feature %s: supported versions %d to %d", f.Name, f.MinSupportedVersion, f.MaxSupportedVersion)
		}
		reg.Features = append(reg.Features, rl.FeatureRange{Name: f.Name, Min: rl.Level(f.MinSupportedVersion), Max: rl.Level(f.MaxSupportedVersion)})
	}
	cctx, cancel := l.requestContext(ctx, 0)
	defer cancel()
	return l.node.Controller.RegisterBroker(cctx, reg)
}

// brokerHeartbeat maps BrokerHeartbeat onto Controller.Heartbeat. A failed
// heartbeat reports the broker fenced (the response's default): a broker
// must not act as unfenced on an answer that says nothing.
func (l *Listener) brokerHeartbeat(ctx context.Context, req *kmsg.BrokerHeartbeatRequest) *kmsg.BrokerHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	if l.standby() {
		resp.ErrorCode = errorCode(l.notController())
		return resp
	}
	offset := req.CurrentMetadataOffset
	if offset < 0 {
		offset = 0
	}
	cctx, cancel := l.requestContext(ctx, 0)
	defer cancel()
	hb, err := l.node.Controller.Heartbeat(cctx, controller.Heartbeat{BrokerID: req.BrokerID, BrokerEpoch: req.BrokerEpoch,
		MetadataOffset: uint64(offset), WantFence: req.WantFence, WantShutDown: req.WantShutdown})
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp
	}
	resp.IsCaughtUp, resp.IsFenced, resp.ShouldShutdown = hb.IsCaughtUp, hb.IsFenced, hb.ShouldShutDown
	return resp
}

// alterPartition maps AlterPartition onto Controller.AlterPartition.
// Versions 0–1 name topics, 2+ carry topic ids; 3+ give each ISR member's
// broker epoch (KIP-903), and a member whose epoch is not its current one
// makes that partition INELIGIBLE_REPLICA, checked against this voter's
// image (the active controller's) before the request goes in.
func (l *Listener) alterPartition(ctx context.Context, req *kmsg.AlterPartitionRequest) *kmsg.AlterPartitionResponse {
	resp := req.ResponseKind().(*kmsg.AlterPartitionResponse)
	if l.standby() {
		resp.ErrorCode = errorCode(l.notController())
		return resp
	}
	byID := req.Version >= 2
	type slot struct{ t, p int }
	var items []controller.AlterPartitionItem
	var at []slot
	resp.Topics = make([]kmsg.AlterPartitionResponseTopic, len(req.Topics))
	pre := make([][]error, len(req.Topics))
	l.node.FSM.View(func(im *fsm.Image) {
		for ti, t := range req.Topics {
			rt := &resp.Topics[ti]
			*rt = kmsg.NewAlterPartitionResponseTopic()
			rt.Topic, rt.TopidID = t.Topic, t.TopicID
			pre[ti] = make([]error, len(t.Partitions))
			for pi, p := range t.Partitions {
				item := controller.AlterPartitionItem{Partition: p.Partition, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch}
				if byID {
					item.TopicID = rl.TopicID(t.TopicID)
					if item.TopicID.IsZero() {
						pre[ti][pi] = kafkaErr(kerr.UnknownTopicID, "topic id is zero")
						continue
					}
				} else {
					item.Topic = t.Topic
				}
				if req.Version >= 3 {
					for _, m := range p.NewEpochISR {
						item.NewISR = append(item.NewISR, m.BrokerID)
						if b := im.Broker(m.BrokerID); b != nil && m.BrokerEpoch >= 0 && b.Epoch != m.BrokerEpoch {
							pre[ti][pi] = kafkaErr(kerr.IneligibleReplica, "broker %d is in the new ISR with epoch %d, its epoch is %d", m.BrokerID, m.BrokerEpoch, b.Epoch)
						}
					}
				} else {
					item.NewISR = append([]int32(nil), p.NewISR...)
				}
				if pre[ti][pi] != nil {
					continue
				}
				items = append(items, item)
				at = append(at, slot{ti, pi})
			}
		}
	})
	// The controller is asked even when every partition failed the checks
	// above: a stale broker epoch fails the whole request, and says so.
	results := map[slot]controller.AlterPartitionResult{}
	{
		cctx, cancel := l.requestContext(ctx, 0)
		res, err := l.node.Controller.AlterPartition(cctx, controller.AlterPartitionRequest{BrokerID: req.BrokerID, BrokerEpoch: req.BrokerEpoch, Partitions: items})
		cancel()
		if err != nil {
			resp.ErrorCode = errorCode(err)
			resp.Topics = nil
			return resp
		}
		for i, r := range res {
			results[at[i]] = r
		}
	}
	for ti, t := range req.Topics {
		for pi, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionResponseTopicPartition()
			rp.Partition = p.Partition
			err := pre[ti][pi]
			if err == nil {
				r := results[slot{ti, pi}]
				err = r.Err
				if err == nil {
					rp.LeaderID, rp.LeaderEpoch, rp.PartitionEpoch = r.Leader, r.LeaderEpoch, r.PartitionEpoch
					rp.ISR = append([]int32{}, r.ISR...)
				}
			}
			rp.ErrorCode = errorCode(err)
			resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, rp)
		}
	}
	return resp
}

// unregisterBroker maps UnregisterBroker onto Controller.UnregisterBroker.
func (l *Listener) unregisterBroker(ctx context.Context, req *kmsg.UnregisterBrokerRequest) *kmsg.UnregisterBrokerResponse {
	resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	var err error
	if l.standby() {
		err = l.notController()
	} else {
		cctx, cancel := l.requestContext(ctx, 0)
		err = l.node.Controller.UnregisterBroker(cctx, req.BrokerID)
		cancel()
	}
	resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
	return resp
}
