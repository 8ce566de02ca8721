package controller

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Config configures a Controller.
type Config struct {
	// NodeID is this voter's id, recorded in ControllerEpoch records.
	NodeID int32
	FSM    *fsm.FSM
	Log    Log
	Sender Sender
	Logger hclog.Logger
	Clock  Clock
	// SessionTimeout is how long a broker may go without a heartbeat
	// before it is fenced. Default 9 s.
	SessionTimeout time.Duration
	// MaxEventsPerRound bounds how many queued events one round takes.
	MaxEventsPerRound int
	// MaxRecordsPerEntry splits a round's records into log entries of at
	// most this many records.
	MaxRecordsPerEntry int
	// ApplyTimeout bounds how long a proposal may wait to be enqueued.
	ApplyTimeout time.Duration
	// QueueSize is the capacity of the event queue.
	QueueSize int
	// Observer, if set, is told about every committed round (metrics).
	Observer Observer
	// BootstrapLevel is the metadata.version a new cluster starts at
	// (Kafka's format --release-version). Zero: the latest this build
	// knows.
	BootstrapLevel rl.Level
	// StaticConfigs are this node's static broker configs by Kafka's
	// names (auto.leader.rebalance.enable, min.insync.replicas, …): the
	// STATIC_BROKER_CONFIG level below the dynamic configs in the log.
	// Only settings given explicitly belong here. Check the values
	// (configmodel.Def.Check) before: one that does not parse counts as
	// Kafka's default.
	StaticConfigs map[string]string
	// ClusterID is this node's cluster id (its data directory's, from
	// ctrlnode format). The active controller records it in a log that
	// has none, once the level allows the record. Empty: none is written.
	ClusterID string
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 9 * time.Second
	}
	if c.MaxEventsPerRound <= 0 {
		c.MaxEventsPerRound = 8192
	}
	if c.MaxRecordsPerEntry <= 0 {
		c.MaxRecordsPerEntry = 50_000
	}
	if c.ApplyTimeout <= 0 {
		c.ApplyTimeout = 10 * time.Second
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 65536
	}
	if c.Sender == nil {
		c.Sender = discardSender{}
	}
}

type discardSender struct{}

func (discardSender) Send(Requests) {}

// Controller is the active-controller logic of one voter. It is idle until
// Activate is called (the node does so when raft makes this voter leader)
// and returns to idle on Deactivate or when a proposal fails because
// leadership was lost. While active it runs a single event loop: every
// decision is computed there, against the committed image plus the
// not-yet-committed changes of the same round, and proposed to the log.
type Controller struct {
	cfg Config
	log hclog.Logger

	mu        sync.Mutex
	active    *activation // nil while idle
	lastStats ActivationStats
	// balanceOverride is SetBalance's override of the configs' automatic
	// rebalance (nil: none); balanceSets counts SetBalance's calls, and
	// balanceChanged tells the active loop of one. balanceChecks counts
	// the balance ticks (BalanceChecks).
	balanceOverride *BalanceConfig
	balanceSets     uint64
	balanceChanged  chan struct{}
	balanceChecks   atomic.Uint64

	// invalidStateChanges counts the transitions refused while active
	// (stateChangeLog).
	invalidStateChanges atomic.Int64
	// refusalFences counts the fences for a refused listener
	// (ListenerRefused).
	refusalFences atomic.Int64

	// computed, if set (tests only), is told which events the loop
	// computed at a time, and whether over a round still committing.
	computed func(events []*event, overInFlight bool)
}

// activation is one term as active controller.
type activation struct {
	epoch   int32
	started time.Time
	// events is this activation's queue: an event queued during one term
	// is never picked up by the next.
	events chan *event
	stop   chan struct{}
	done   chan struct{}
	ready  chan struct{}
	failed error
	// managers are the term's handlers and the state they own.
	managers *managers
}

// New returns an idle controller.
func New(cfg Config) *Controller {
	cfg.setDefaults()
	return &Controller{
		cfg:            cfg,
		log:            cfg.Logger.Named("controller"),
		balanceChanged: make(chan struct{}, 1),
	}
}

// Active reports whether this node is the active controller, and its epoch.
func (c *Controller) Active() (bool, int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.active == nil {
		return false, 0
	}
	select {
	case <-c.active.ready:
		return c.active.failed == nil, c.active.epoch
	default:
		return false, 0
	}
}

// FSM returns the image the controller decides against.
func (c *Controller) FSM() *fsm.FSM { return c.cfg.FSM }

// eventResult is what a caller of submit gets back.
type eventResult struct {
	value any
	index uint64
	err   error
}

// computeFunc is an event's compute: it calls handlers of the managers
// with the event's work, and hands the loop their outcome.
type computeFunc func(m *managers, w *work) (eventOutcome, error)

// event is one unit of controller work: compute runs its handlers, which
// stage records in the event's own work and plan its requests; after the
// round commits, the caller gets the value, with the index of the entry
// that carries it.
type event struct {
	name     string
	enqueued time.Time
	compute  computeFunc
	// finish, if set, runs after commit to turn the value into the final
	// result (for example to put the committed index in a response).
	finish func(value any, index uint64) any
	// then, if set, is run by the loop once the event is answered, with
	// its result, and returns the event to run next (nil for none): the
	// loop's own multi-event work (a rebalance's runs) goes on this way.
	then func(eventResult) *event
	done chan eventResult
	// fromCaller: a caller queued the event through enqueue and waits for
	// it; the loop's own events (activation, resumption, ticks, broker
	// responses) leave it false.
	fromCaller bool
}

// newEvent makes an event stamped with the time it is queued.
func (c *Controller) newEvent(name string, compute computeFunc) *event {
	return &event{name: name, enqueued: c.cfg.Clock.Now(), compute: compute, done: make(chan eventResult, 1)}
}

// call is a queued event whose result can be waited for.
type call struct {
	ev  *event
	act *activation
	err error
}

// enqueue queues an event without waiting for it.
func (c *Controller) enqueue(ctx context.Context, name string, compute computeFunc, finish func(any, uint64) any) call {
	c.mu.Lock()
	a := c.active
	c.mu.Unlock()
	if a == nil {
		return call{err: ErrNotController}
	}
	ev := c.newEvent(name, compute)
	ev.finish, ev.fromCaller = finish, true
	select {
	case a.events <- ev:
		return call{ev: ev, act: a}
	case <-a.stop:
		return call{err: ErrNotController}
	case <-ctx.Done():
		return call{err: ctx.Err()}
	}
}

// wait waits for the event's result. A context that ends first leaves the
// outcome unknown: the event may still commit.
func (cl call) wait(ctx context.Context) (any, uint64, error) {
	if cl.err != nil {
		return nil, 0, cl.err
	}
	select {
	case r := <-cl.ev.done:
		return r.value, r.index, r.err
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	case <-cl.act.done:
		// The activation ended. Its loop answered every event it took;
		// one that slipped into the queue after the last drain was never
		// looked at.
		select {
		case r := <-cl.ev.done:
			return r.value, r.index, r.err
		default:
			return nil, 0, ErrNotController
		}
	}
}

// submit queues an event and waits for its result. It fails with
// ErrNotController when the node is not active or stops being active
// before the event commits.
func (c *Controller) submit(ctx context.Context, name string, compute computeFunc, finish func(any, uint64) any) (any, uint64, error) {
	return c.enqueue(ctx, name, compute, finish).wait(ctx)
}

// submitEach queues one event per item and then waits for each, so that
// one bad item fails alone while the items still share the loop's group
// commit. An item refused returns its error and queues nothing. The
// values and errors come back in the items' order.
func (c *Controller) submitEach(ctx context.Context, n int, name string, refused func(i int) error, compute func(i int) computeFunc) ([]any, []error) {
	values, errs := make([]any, n), make([]error, n)
	calls := make([]call, n)
	for i := range n {
		if errs[i] = refused(i); errs[i] == nil {
			calls[i] = c.enqueue(ctx, name, compute(i), nil)
		}
	}
	for i := range n {
		if errs[i] == nil {
			values[i], _, errs[i] = calls[i].wait(ctx)
		}
	}
	return values, errs
}

// errLeadershipLost marks a proposal that failed because this node is no
// longer the raft leader.
var errLeadershipLost = errors.New("leadership lost")
