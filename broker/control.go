package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
)

// controllerClient is the agent's connection to the active controller
// (see kafkaclient.Controller): found through the bootstrap addresses,
// over TLS, presenting the broker's certificate and accepting only a
// configured voter's, when the agent has certificates (plain TCP
// otherwise), logged in with the agent's SASL mechanism, if any. It is
// forgotten on any transport error or NOT_CONTROLLER, so the next
// request finds the controller again.
func (a *Agent) controllerClient(bootstrap []string) *kafkaclient.Controller {
	return kafkaclient.NewController(kafkaclient.ControllerConfig{Bootstrap: bootstrap, Options: a.controllerOptions(), Found: func(n kafkaclient.Node) {
		a.log.Debug("found the active controller", "controller", n.ID, "addr", n.Addr())
	}})
}

// controllerOptions are the options of the agent's connections to the
// controllers.
func (a *Agent) controllerOptions() kafkaclient.Options {
	nd := a.cfg.Dialer
	if nd == nil {
		nd = &net.Dialer{}
	}
	opts := kafkaclient.Options{
		ClientID:    "ctrlquorum-broker-" + strconv.Itoa(int(a.cfg.BrokerID)),
		Dial:        nd.DialContext,
		DialTimeout: a.cfg.RequestTimeout,
		SASL:        a.cfg.SASL,
	}
	if a.cfg.TLS != nil {
		opts.Dial = a.cfg.TLS.Dialer(nd, a.voterCheck())
	}
	return opts
}

// backoff is an exponential backoff with jitter.
type backoff struct {
	min, max, cur time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	return b.cur/2 + rand.N(b.cur/2+1)
}

func (b *backoff) reset() { b.cur = 0 }

// wait waits d, or until a poke or Close. It reports false on Close.
func (a *Agent) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-a.kick:
	case <-a.stop:
		return false
	}
	return true
}

// run registers and heartbeats until Close.
func (a *Agent) run() {
	defer close(a.done)
	bo := backoff{min: 20 * time.Millisecond, max: max(2*a.cfg.HeartbeatInterval, time.Second)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-a.stop
		cancel()
	}()
	for {
		select {
		case <-a.stop:
			return
		default:
		}
		if a.Status().BrokerEpoch < 0 {
			if err := a.register(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				a.log.Debug("registration failed; retrying", "error", err)
				if !a.wait(bo.next()) {
					return
				}
				continue
			}
			bo.reset()
		}
		if err := a.heartbeat(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log.Debug("heartbeat failed; retrying", "error", err)
			if !a.wait(bo.next()) {
				return
			}
			continue
		}
		bo.reset()
		if a.Status().BrokerEpoch < 0 {
			continue // register again at once
		}
		a.retryClusterState()
		a.featuresRead.retry(a)
		if !a.wait(a.cfg.HeartbeatInterval) {
			return
		}
	}
}

// ClusterID is the cluster id the broker registers with and reports in
// Metadata: Config.ClusterID, or, when that is empty, the one the
// controllers reported when the broker looked for the active one ("" until
// then; a registration without one is accepted).
func (a *Agent) ClusterID() string {
	if a.cfg.ClusterID != "" {
		return a.cfg.ClusterID
	}
	if a.ctrl != nil {
		return a.ctrl.ClusterID()
	}
	return ""
}

func (a *Agent) register(ctx context.Context) error {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID = a.cfg.BrokerID
	req.ClusterID = a.ClusterID()
	req.IncarnationID = a.incarnation
	l := kmsg.NewBrokerRegistrationRequestListener()
	l.Name, l.Host, l.Port, l.SecurityProtocol = "PLAINTEXT", a.advHost, a.advPort, 0
	req.Listeners = []kmsg.BrokerRegistrationRequestListener{l}
	for _, r := range rl.SupportedFeatures() {
		f := kmsg.NewBrokerRegistrationRequestFeature()
		f.Name, f.MinSupportedVersion, f.MaxSupportedVersion = r.Name, int16(r.Min), int16(r.Max)
		req.Features = append(req.Features, f)
	}
	if a.cfg.Rack != "" {
		rack := a.cfg.Rack
		req.Rack = &rack
	}
	rctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	resp, err := a.ctrl.Request(rctx, req)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.BrokerRegistrationResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return fmt.Errorf("registration: %w", err)
	}
	a.mu.Lock()
	a.brokerEpoch, a.fenced, a.caughtUp = r.BrokerEpoch, true, false
	a.mu.Unlock()
	a.log.Info("registered", "broker_epoch", r.BrokerEpoch)
	return nil
}

// reportedOffsetLocked is the metadata offset heartbeats carry: the highest
// applied, or the broker's own registration (its epoch) if higher (see the
// package documentation).
func (a *Agent) reportedOffsetLocked() int64 {
	return max(int64(a.applied), a.brokerEpoch)
}

func (a *Agent) heartbeat(ctx context.Context) error {
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	a.mu.RLock()
	req.BrokerID, req.BrokerEpoch, req.CurrentMetadataOffset = a.cfg.BrokerID, a.brokerEpoch, a.reportedOffsetLocked()
	a.mu.RUnlock()
	want := a.wantShutdown.Load()
	req.WantShutdown = want
	rctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	resp, err := a.ctrl.Request(rctx, req)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.BrokerHeartbeatResponse)
	switch err := kerr.ErrorForCode(r.ErrorCode); {
	case err == nil:
	case errors.Is(err, kerr.NotController):
		return err
	case errors.Is(err, kerr.StaleBrokerEpoch), errors.Is(err, kerr.BrokerIDNotRegistered):
		a.log.Info("controller no longer knows this registration: registering again", "error", err, "broker_epoch", req.BrokerEpoch)
		a.mu.Lock()
		if a.brokerEpoch == req.BrokerEpoch {
			a.brokerEpoch, a.fenced, a.caughtUp = -1, true, false
		}
		a.mu.Unlock()
		return nil
	default:
		return fmt.Errorf("heartbeat: %w", err)
	}
	a.mu.Lock()
	if a.fenced != r.IsFenced {
		if r.IsFenced {
			a.log.Info("fenced by the controller")
		} else {
			a.log.Info("unfenced by the controller")
		}
	}
	a.fenced, a.caughtUp = r.IsFenced, r.IsCaughtUp
	a.heartbeats++
	a.mu.Unlock()
	if want && r.ShouldShutdown {
		a.grantOnce.Do(func() {
			a.log.Info("controller allowed shutdown")
			close(a.shutdownOK)
		})
	}
	return nil
}

// AlterPartition reports, as the partition's leader, a new ISR to the
// controller, with the leader epoch and partition epoch of the cached
// state. It retries on NOT_CONTROLLER and connection errors until ctx
// ends. On success the cache takes the committed state, which is
// returned; a refusal comes back as the Kafka error (for example
// INVALID_UPDATE_VERSION for a stale partition epoch, FENCED_LEADER_EPOCH,
// STALE_BROKER_EPOCH, NOT_LEADER_OR_FOLLOWER when this broker does not
// lead the partition).
func (a *Agent) AlterPartition(ctx context.Context, topic string, partition int32, newISR []int32) (PartitionState, error) {
	if a.ctrl == nil {
		return PartitionState{}, errors.New("no controllers configured")
	}
	bo := backoff{min: 20 * time.Millisecond, max: time.Second}
	for {
		st, ok := a.Partition(topic, partition)
		if !ok {
			return PartitionState{}, fmt.Errorf("%s-%d: %w", topic, partition, kerr.UnknownTopicOrPartition)
		}
		if st.Leader != a.cfg.BrokerID {
			return PartitionState{}, fmt.Errorf("%s-%d is led by %d: %w", topic, partition, st.Leader, kerr.NotLeaderForPartition)
		}
		epoch := a.Status().BrokerEpoch
		if epoch < 0 {
			return PartitionState{}, errors.New("not registered")
		}
		res, err := a.alterPartitionOnce(ctx, st, epoch, newISR)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return PartitionState{}, err
		}
		var ke *kerr.Error
		if errors.As(err, &ke) && !errors.Is(err, kerr.NotController) {
			return PartitionState{}, err
		}
		select {
		case <-time.After(bo.next()):
		case <-ctx.Done():
			return PartitionState{}, fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-a.stop:
			return PartitionState{}, errors.New("agent closed")
		}
	}
}

func (a *Agent) alterPartitionOnce(ctx context.Context, st PartitionState, brokerEpoch int64, newISR []int32) (PartitionState, error) {
	req := kmsg.NewPtrAlterPartitionRequest()
	req.BrokerID, req.BrokerEpoch = a.cfg.BrokerID, brokerEpoch
	t := kmsg.NewAlterPartitionRequestTopic()
	t.Topic, t.TopicID = st.Topic, st.TopicID
	p := kmsg.NewAlterPartitionRequestTopicPartition()
	p.Partition, p.LeaderEpoch, p.PartitionEpoch = st.Partition, st.LeaderEpoch, st.PartitionEpoch
	p.NewISR = slices.Clone(newISR)
	for _, b := range newISR {
		e := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
		e.BrokerID = b // the members' broker epochs are not known here: -1
		p.NewEpochISR = append(p.NewEpochISR, e)
	}
	t.Partitions = []kmsg.AlterPartitionRequestTopicPartition{p}
	req.Topics = []kmsg.AlterPartitionRequestTopic{t}
	rctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	resp, err := a.ctrl.Request(rctx, req)
	if err != nil {
		return PartitionState{}, err
	}
	r := resp.(*kmsg.AlterPartitionResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return PartitionState{}, err
	}
	for _, rt := range r.Topics {
		if r.Version >= 2 && rl.TopicID(rt.TopidID) != st.TopicID {
			continue
		}
		if r.Version < 2 && rt.Topic != st.Topic {
			continue
		}
		for _, rp := range rt.Partitions {
			if rp.Partition != st.Partition {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return PartitionState{}, err
			}
			return a.adoptAlterPartition(st, rp), nil
		}
	}
	return PartitionState{}, fmt.Errorf("the controller's answer has no result for %s-%d", st.Topic, st.Partition)
}

// adoptAlterPartition caches the committed state of an accepted ISR
// change, unless a control request brought something newer meanwhile.
func (a *Agent) adoptAlterPartition(st PartitionState, rp kmsg.AlterPartitionResponseTopicPartition) PartitionState {
	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	next := st
	next.Leader, next.LeaderEpoch, next.PartitionEpoch, next.ISR = rp.LeaderID, rp.LeaderEpoch, rp.PartitionEpoch, slices.Clone(rp.ISR)
	t := a.lookupLocked(st.Topic, st.TopicID)
	if t == nil {
		return next
	}
	if cur := t.parts[st.Partition]; cur != nil && !stale(cur, next.LeaderEpoch, next.PartitionEpoch) {
		c := clonePS(cur)
		c.Leader, c.LeaderEpoch, c.PartitionEpoch, c.ISR = next.Leader, next.LeaderEpoch, next.PartitionEpoch, next.ISR
		t.parts[st.Partition] = &c
	}
	return next
}
