package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// clusterManager owns the brokers (Kafka's ClusterControlManager): their
// registration, heartbeats and sessions, fencing and unfencing,
// controlled shutdown and unregistration. It decides about a broker and
// hands the broker's partitions to the replication manager. Its own state
// is the brokers' sessions, which are not in the image (see sessions);
// its handlers read them and return the changes as effects.
type clusterManager struct {
	replication    *replicationManager
	sessionTimeout time.Duration
	sessions       *sessions
	// catchUpBelow is the index of the activation entry: a broker whose
	// first heartbeat reports less is sent what changed since.
	catchUpBelow uint64
}

// activated records the index the activation entry committed at.
func (m *clusterManager) activated(index uint64) { m.catchUpBelow = index }

// BrokerRegistration is a broker asking to join.
type BrokerRegistration struct {
	BrokerID      int32
	IncarnationID rl.IncarnationID
	Endpoints     []rl.Endpoint
	Rack          string
	// Features is the feature levels the broker supports. None: not
	// reported (a build from before feature levels), see registration.
	Features []rl.FeatureRange
}

// RegisterBroker registers a broker and returns its broker epoch. The same
// incarnation registering again gets its epoch back. A new incarnation
// replaces the old one (whose epoch every later request then fails with)
// unless the old one still has a live session: then the id is in use
// (DUPLICATE_BROKER_REGISTRATION) until that session ends.
func (c *Controller) RegisterBroker(ctx context.Context, req BrokerRegistration) (int64, error) {
	if req.BrokerID < 0 {
		return 0, kafkaErr(kerr.InvalidRequest, "broker id %d is negative", req.BrokerID)
	}
	v, _, err := c.submit(ctx, "register-broker", func(m *managers, w *work) (eventOutcome, error) {
		return respond(m.cluster.register(w, req))
	}, func(v any, index uint64) any {
		if e := v.(int64); e >= 0 {
			return e
		}
		return int64(index)
	})
	if err != nil {
		return 0, err
	}
	return v.(int64), nil
}

// register answers with the broker's epoch, or -1 for a new registration,
// whose epoch is the index of the entry that commits it.
func (m *clusterManager) register(w *work, req BrokerRegistration) (result[int64], error) {
	var res result[int64]
	deadline := w.now.Add(m.sessionTimeout)
	old := w.img().Broker(req.BrokerID)
	if old != nil && old.Incarnation == req.IncarnationID {
		res.response = old.Epoch
		res.sessions = []sessionChange{renewal(req.BrokerID, deadline, renew)}
		return res, nil
	}
	if old != nil && !old.Fenced && m.sessions.alive(req.BrokerID, w.now) {
		return res, kafkaErr(kerr.DuplicateBrokerRegistration, "broker %d is registered with incarnation %s and its session is live", req.BrokerID, old.Incarnation)
	}
	rec, err := m.registration(w, req)
	if err != nil {
		return res, err
	}
	if err := w.stageEach(rec); err != nil {
		return res, err
	}
	if old != nil {
		w.log.Info("broker registered a new incarnation: fencing the old one", "broker", req.BrokerID, "old_epoch", old.Epoch)
		if err := m.replication.offlineBrokerReplicas(w, req.BrokerID); err != nil {
			return res, err
		}
	} else {
		w.log.Info("broker registered", "broker", req.BrokerID, "rack", req.Rack)
	}
	res.sessions = []sessionChange{renewal(req.BrokerID, deadline, renewCaughtUp)}
	if old != nil && !old.Fenced {
		w.plan.updateMetadataToAll = true // a live broker left the list
	}
	res.endRound = true
	res.response = -1
	return res, nil
}

// Heartbeat is a broker's periodic report.
type Heartbeat struct {
	BrokerID    int32
	BrokerEpoch int64
	// MetadataOffset is the highest control-request offset the broker applied.
	MetadataOffset uint64
	WantFence      bool
	WantShutDown   bool
}

// HeartbeatResponse tells a broker where it stands.
type HeartbeatResponse struct {
	IsCaughtUp     bool
	IsFenced       bool
	ShouldShutDown bool
}

// Heartbeat renews a broker's session. A fenced broker that has caught up
// (applied at least up to its own registration) is unfenced and its
// replicas come back online; one that asks to shut down is moved out of
// every leadership first and told it may stop once it leads nothing.
func (c *Controller) Heartbeat(ctx context.Context, hb Heartbeat) (HeartbeatResponse, error) {
	v, _, err := c.submit(ctx, "heartbeat", func(m *managers, w *work) (eventOutcome, error) {
		return respond(m.cluster.heartbeat(w, hb))
	}, nil)
	if err != nil {
		return HeartbeatResponse{}, err
	}
	return v.(HeartbeatResponse), nil
}

func checkBrokerEpoch(r fsm.Reader, id int32, epoch int64) (*fsm.Broker, error) {
	b := r.Broker(id)
	if b == nil {
		return nil, kafkaErr(kerr.BrokerIDNotRegistered, "broker %d", id)
	}
	if b.Epoch != epoch {
		return nil, kafkaErr(kerr.StaleBrokerEpoch, "broker %d has epoch %d, request carries %d", id, b.Epoch, epoch)
	}
	return b, nil
}

// heartbeat renews the session and acts on what the broker reports. A
// broker's first heartbeat since activation plans its catch-up; the mark
// goes once the round that sends it has committed (effects.committed), so
// a heartbeat computed again (its round's base was not what the log
// holds) plans it again.
func (m *clusterManager) heartbeat(w *work, hb Heartbeat) (result[HeartbeatResponse], error) {
	var res result[HeartbeatResponse]
	b, err := checkBrokerEpoch(w.img(), hb.BrokerID, hb.BrokerEpoch)
	if err != nil {
		return res, err
	}
	res.sessions = []sessionChange{renewal(b.ID, w.now.Add(m.sessionTimeout), renew)}
	if m.sessions.needCatchUp[b.ID] {
		res.committed = []sessionChange{{broker: b.ID, op: caughtUp}}
		if hb.MetadataOffset < m.catchUpBelow {
			w.plan.catchUpFrom(b.ID, catchUpStart(b, hb.MetadataOffset), false)
		}
	}
	isCaughtUp := hb.MetadataOffset >= uint64(b.Epoch)
	stillLeads := false
	switch {
	case hb.WantFence && !b.Fenced:
		w.log.Info("broker asked to be fenced", "broker", b.ID)
		if err := m.fence(w, b); err != nil {
			return res, err
		}
	case hb.WantShutDown:
		leads, err := m.controlledShutdown(w, b)
		if err != nil {
			return res, err
		}
		stillLeads = leads
	case b.Fenced && isCaughtUp && !hb.WantFence:
		if err := m.unfence(w, b, hb.MetadataOffset); err != nil {
			return res, err
		}
	}
	now := w.img().Broker(b.ID)
	res.response = HeartbeatResponse{IsCaughtUp: isCaughtUp, IsFenced: now.Fenced}
	if hb.WantShutDown {
		res.response.ShouldShutDown = !stillLeads
	}
	return res, nil
}

// CheckSessions runs a session check now (the loop also runs one on a
// timer). It returns once the resulting fences committed.
func (c *Controller) CheckSessions(ctx context.Context) error {
	_, _, err := c.submit(ctx, "session-check", computeCheckSessions, nil)
	return err
}

// computeCheckSessions is the compute of a session check, the API's and
// the loop's ticks'.
func computeCheckSessions(m *managers, w *work) (eventOutcome, error) {
	return respond(m.cluster.checkSessions(w))
}

// checkSessions fences every broker whose session expired.
func (m *clusterManager) checkSessions(w *work) (result[any], error) {
	var res result[any]
	for _, id := range m.sessions.expired(w.now) {
		b := w.img().Broker(id)
		if b == nil {
			res.sessions = append(res.sessions, sessionChange{broker: id, op: forget})
			continue
		}
		if b.Fenced {
			continue
		}
		w.log.Warn("broker session expired: fencing", "broker", id, "epoch", b.Epoch)
		w.because(fmt.Sprintf("broker %d fenced: session expired", id))
		if err := m.fence(w, b); err != nil {
			return res, err
		}
	}
	return res, nil
}

// fence stages the fence and its effects: partitions the broker led go
// offline and are re-elected, then its replicas go OfflineReplica.
func (m *clusterManager) fence(w *work, b *fsm.Broker) error {
	if err := w.stageEach(&rl.FenceBroker{BrokerID: b.ID, BrokerEpoch: b.Epoch}); err != nil {
		return err
	}
	w.plan.updateMetadataToAll = true
	return m.replication.offlineBrokerReplicas(w, b.ID)
}

// unfence brings a caught-up broker back: its replicas come online, and
// partitions without a leader that it can lead are elected.
func (m *clusterManager) unfence(w *work, b *fsm.Broker, offset uint64) error {
	if err := w.stageEach(&rl.UnfenceBroker{BrokerID: b.ID, BrokerEpoch: b.Epoch}); err != nil {
		return err
	}
	w.because(fmt.Sprintf("broker %d caught up: unfenced", b.ID))
	w.log.Info("broker caught up: unfenced", "broker", b.ID, "epoch", b.Epoch)
	w.plan.updateMetadataToAll = true
	w.plan.catchUpFrom(b.ID, catchUpStart(b, offset), false)
	return m.replication.onlineBrokerReplicas(w, b.ID)
}

// catchUpStart is where the catch-up of a broker that reports offset
// starts. A broker that has applied nothing past its own registration (it
// reports its epoch until it applies a request) is a new incarnation with
// an empty cache: it gets the whole image, as Kafka sends a starting
// broker a full UpdateMetadata, whether this is its unfence or the first
// heartbeat a new controller hears from it (the controller that unfenced
// it may have gone before its catch-up was delivered). One that comes
// back with a cache gets what changed since.
func catchUpStart(b *fsm.Broker, offset uint64) uint64 {
	if offset <= uint64(b.Epoch) {
		return 0
	}
	return offset
}

// controlledShutdown marks a broker that asked to stop as shutting down
// and has the replication manager move leadership off it. It reports
// whether the broker still leads a partition.
func (m *clusterManager) controlledShutdown(w *work, b *fsm.Broker) (stillLeads bool, err error) {
	w.because(fmt.Sprintf("controlled shutdown of broker %d", b.ID))
	if !b.ShuttingDown {
		if err := w.stageEach(&rl.BrokerShutdown{BrokerID: b.ID, BrokerEpoch: b.Epoch}); err != nil {
			return false, err
		}
		w.log.Info("controlled shutdown requested", "broker", b.ID)
		w.plan.updateMetadataToAll = true
	}
	return m.replication.controlledShutdownReplicas(w, b.ID)
}

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
	_, _, err := c.submit(ctx, "unregister-broker", func(m *managers, w *work) (eventOutcome, error) {
		return respond(m.cluster.unregister(w, id))
	}, nil)
	return err
}

func (m *clusterManager) unregister(w *work, id int32) (result[any], error) {
	var res result[any]
	b := w.img().Broker(id)
	if b == nil {
		return res, kafkaErr(kerr.BrokerIDNotRegistered, "broker %d", id)
	}
	w.because(fmt.Sprintf("unregistration of broker %d", id))
	if !b.Fenced {
		w.log.Info("unregistering a broker that is still unfenced: fencing it first", "broker", id,
			"session_live", m.sessions.alive(id, w.now))
		if err := m.fence(w, b); err != nil {
			return res, err
		}
	} else if err := m.replication.offlineBrokerReplicas(w, id); err != nil {
		return res, err
	}
	if err := w.stageEach(&rl.UnregisterBroker{BrokerID: id, BrokerEpoch: b.Epoch}); err != nil {
		return res, err
	}
	res.sessions = []sessionChange{{broker: id, op: forget}}
	w.plan.updateMetadataToAll = true
	w.log.Info("broker unregistered", "broker", id, "epoch", b.Epoch)
	return res, nil
}

// activate starts a session for every unfenced broker, each awaiting its
// first heartbeat (its catch-up), and plans a full UpdateMetadata to every
// live broker: it names every topic, so a broker that missed a deletion
// under the previous controller forgets the topic even if its own
// catch-up never comes. Like every request to a broker this controller
// has not caught up yet, it carries metadata offset 0 (plan.materialize's
// awaitingCatchUp): the broker's first heartbeat then still reports the
// offset it reached before, and its catch-up starts there. The response
// is the number of sessions.
func (m *clusterManager) activate(w *work) result[int] {
	var res result[int]
	deadline := w.now.Add(m.sessionTimeout)
	for _, b := range w.img().Brokers() {
		if !b.Fenced {
			res.sessions = append(res.sessions, renewal(b.ID, deadline, renewAwaitingCatchUp))
			res.response++
		}
	}
	w.plan.updateMetadataToAll, w.plan.fullUpdateMetadata = true, true
	return res
}

// importBrokers registers the imported brokers the view does not know,
// and returns those it registered.
func (m *clusterManager) importBrokers(w *work, brokers []*rl.RegisterBroker) (result[[]*rl.RegisterBroker], error) {
	var res result[[]*rl.RegisterBroker]
	for _, rb := range brokers {
		if w.img().Broker(rb.BrokerID) != nil {
			continue
		}
		if err := w.stageEach(rb); err != nil {
			return res, err
		}
		res.response = append(res.response, rb)
	}
	res.endRound = len(res.response) > 0
	return res, nil
}

// importUnfence unfences the brokers an import registered, each with a
// fresh session, as if it had just heartbeated.
func (m *clusterManager) importUnfence(w *work, registered []*rl.RegisterBroker) (result[any], error) {
	var res result[any]
	for _, rb := range registered {
		b := w.img().Broker(rb.BrokerID)
		if b == nil || !b.Fenced || b.Incarnation != rb.IncarnationID {
			continue
		}
		if err := w.stageEach(&rl.UnfenceBroker{BrokerID: b.ID, BrokerEpoch: b.Epoch}); err != nil {
			return res, err
		}
		res.sessions = append(res.sessions, renewal(b.ID, w.now.Add(m.sessionTimeout), renewAwaitingCatchUp))
	}
	w.plan.updateMetadataToAll = true
	return res, nil
}

// registration is the record that registers req, or UNSUPPORTED_VERSION
// for a broker that reports a range of metadata.version without the
// finalized level, as Kafka refuses it. A broker that reports no features
// is registered at any level: brokers read control requests, whose
// versions they negotiate, not records, and an upgrade asks such a broker
// for its levels (ApiVersions) before it raises the level. The broker's
// features go in the record from level 2, whose RegisterBroker version
// carries them.
func (m *clusterManager) registration(w *work, req BrokerRegistration) (*rl.RegisterBroker, error) {
	level := w.img().Features().MetadataLevel()
	r := SupportedRange(req.Features, rl.FeatureMetadataVersion)
	if len(req.Features) > 0 && (level < r.Min || level > r.Max) {
		return nil, kafkaErr(kerr.UnsupportedVersion, "unable to register because broker %d does not support finalized version %d of %s: it supports %d to %d",
			req.BrokerID, level, rl.FeatureMetadataVersion, r.Min, r.Max)
	}
	rec := &rl.RegisterBroker{BrokerID: req.BrokerID, IncarnationID: req.IncarnationID, Endpoints: req.Endpoints, Rack: req.Rack}
	if level >= rl.Level2 {
		rec.Features = req.Features
	}
	return rec, nil
}
