// Package sender delivers the controller's control requests (LeaderAndIsr,
// UpdateMetadata, StopReplica) to brokers over the Kafka wire protocol. It
// implements controller.Sender.
//
// Each broker has its own queue, goroutine and connection, so a slow or
// dead broker never stalls the controller's event loop (Send only queues)
// nor the other brokers. A broker's request sets are delivered in the
// order they were sent, each as LeaderAndIsr, then UpdateMetadata, then
// StopReplica. A request that fails in transit (connection refused or
// lost, a timeout) is retried after an exponential backoff, on a new
// connection to the address the broker resolves to at that moment. While
// a broker is slow or down its queued sets are coalesced (see merge):
// the newest state of each partition wins, so the queue never holds more
// than Config.QueueLimit sets and, once merged, at most one request of
// each kind per broker.
//
// A set carrying an older controller epoch than one already queued or
// delivered to the same broker is dropped, and so is one for an older
// incarnation of the broker (an older broker epoch): the broker would
// refuse them.
//
// Versions are negotiated with ApiVersions on every connection; the
// highest both sides know is used (LeaderAndIsr v7, StopReplica v4 and
// UpdateMetadata v8 against our broker agent, all with topic ids where
// the request has them, leader epochs, broker epoch, controller epoch
// and controller id).
//
// The metadata offset (the raft index a request reflects) is carried in
// the client id of the request header (see kafkaclient.ControlClientID).
// Only the last request of a set carries the set's offset; the ones
// before it carry the offset of the last set fully delivered, so a broker
// that reports the highest offset it saw has applied everything up to it.
package sender

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
)

// StopReplicaResult is the outcome of deleting one replica on a broker.
type StopReplicaResult = controller.StopReplicaResult

// ResponseHandler receives what brokers answered that the controller acts
// on. It is called from one goroutine of the Pool, in the order the
// outcomes were known per broker; it should not block for long, as it
// holds up the outcomes of every broker.
type ResponseHandler interface {
	// HandleStopReplicaResponse reports the outcome of the replicas a
	// StopReplica asked the broker to delete: the broker's per-partition
	// error, or the request's own error for each of them when the broker
	// refused it as a whole or it could not be delivered (ErrDropped).
	// Stops without delete are not reported.
	HandleStopReplicaResponse(broker int32, results []StopReplicaResult)
}

// The controller takes the outcomes itself.
var _ ResponseHandler = (*controller.Controller)(nil)

// ErrDropped is the error reported for a replica deletion whose request
// was dropped without reaching the broker: the broker is no longer
// registered, or a newer controller epoch took over.
var ErrDropped = fmt.Errorf("stop replica request dropped before delivery")

// Config configures a Pool. Zero values take the defaults.
type Config struct {
	Logger hclog.Logger
	// Resolve returns a broker's address (host:port), normally its first
	// PLAINTEXT endpoint in the committed image (see ImageResolver). It
	// is called before every attempt, so a broker that registers again
	// elsewhere is found there; a broker it does not know has its queued
	// requests dropped.
	Resolve func(broker int32) (addr string, ok bool)
	// Responses receives StopReplica outcomes; nil discards them.
	Responses ResponseHandler
	// MinBackoff and MaxBackoff bound the exponential backoff between
	// attempts at a broker. Defaults 50 ms and 5 s.
	MinBackoff, MaxBackoff time.Duration
	// QueueLimit is how many request sets may wait for one broker before
	// they are coalesced into one. Default 32.
	QueueLimit int
	// DialTimeout bounds connecting and negotiating versions. Default 5 s.
	DialTimeout time.Duration
	// RequestTimeout bounds one request and its response. Default 30 s.
	RequestTimeout time.Duration
	// MaxPartitionsPerRequest splits an UpdateMetadata with more
	// partitions into several requests (see EncodeUpdateMetadataChunks).
	// Default DefaultMaxPartitionsPerRequest.
	MaxPartitionsPerRequest int
	// Dial, if set, returns how to open a connection to a broker: a TLS
	// dialler that presents this controller's certificate and expects the
	// broker's. Nil, or a nil DialFunc, is plain TCP.
	Dial func(broker int32) kafkaclient.DialFunc
	// SASL, if set, logs this controller in on its connections to brokers
	// whose listeners require SASL (those that offer SaslHandshake), as a
	// super user: the control requests come from the cluster. Nil: none.
	SASL kgosasl.Mechanism
	// Refusals is told of a broker whose listener refused a connection
	// after a connection to it reset (see liveness.go); nil: nobody.
	Refusals RefusalHandler
	// ProbeDial opens the plain TCP connection that probes a broker's
	// listener after a reset (bound to the node's address, as Dial's);
	// nil: net.Dialer.
	ProbeDial kafkaclient.DialFunc
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 50 * time.Millisecond
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(5*time.Second, c.MinBackoff)
	}
	if c.QueueLimit <= 0 {
		c.QueueLimit = 32
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 5 * time.Second
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.MaxPartitionsPerRequest <= 0 {
		c.MaxPartitionsPerRequest = DefaultMaxPartitionsPerRequest
	}
	if c.Resolve == nil {
		c.Resolve = func(int32) (string, bool) { return "", false }
	}
}

// ImageResolver resolves a broker id to its first PLAINTEXT endpoint in
// the FSM's committed image.
func ImageResolver(f *fsm.FSM) func(int32) (string, bool) {
	return func(id int32) (addr string, ok bool) {
		f.View(func(im *fsm.Image) {
			b := im.Broker(id)
			if b == nil {
				return
			}
			if e, found := PlaintextEndpoint(b.Endpoints); found {
				addr, ok = net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))), true
			}
		})
		return addr, ok
	}
}

// Pool is the set of per-broker senders. It implements controller.Sender.
type Pool struct {
	cfg    Config
	log    hclog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	brokers map[int32]*brokerSender
	closed  bool

	// reports wait for the reporter goroutine, the only caller of the
	// response handler: neither Send nor a broker stuck on a hung
	// connection delays them.
	reportMu   sync.Mutex
	reports    []report
	reportWake chan struct{}

	// progress is closed when a broker reaches a new mark (see Marks);
	// progressEnded once the pool closed.
	progressMu    sync.Mutex
	progress      chan struct{}
	progressEnded bool
}

type report struct {
	broker  int32
	results []StopReplicaResult
}

// reporter hands outcomes to the response handler until Close.
func (p *Pool) reporter() {
	defer p.wg.Done()
	for {
		select {
		case <-p.reportWake:
		case <-p.ctx.Done():
			return
		}
		p.reportMu.Lock()
		batch := p.reports
		p.reports = nil
		p.reportMu.Unlock()
		for _, r := range batch {
			if p.ctx.Err() != nil {
				return
			}
			p.cfg.Responses.HandleStopReplicaResponse(r.broker, r.results)
		}
	}
}

var _ controller.Sender = (*Pool)(nil)

// New returns a Pool. Per-broker goroutines start with the first request
// for each broker.
func New(cfg Config) *Pool {
	cfg.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{cfg: cfg, log: cfg.Logger.Named("sender"), ctx: ctx, cancel: cancel, brokers: map[int32]*brokerSender{},
		reportWake: make(chan struct{}, 1)}
	if cfg.Responses != nil {
		p.wg.Add(1)
		go p.reporter()
	}
	return p
}

// Send queues a broker's requests and returns at once.
func (p *Pool) Send(r controller.Requests) {
	n := numRequests(&r)
	if n == 0 {
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	b := p.brokers[r.Broker]
	if b == nil {
		b = &brokerSender{p: p, id: r.Broker, log: p.log.With("broker", r.Broker), wake: make(chan struct{}, 1), epoch: -1, brokerEpoch: -1,
			connEpoch: -1, resetEpoch: -1, reportedEpoch: -1}
		p.brokers[r.Broker] = b
		p.wg.Add(1)
		go b.run()
	}
	p.mu.Unlock()
	b.enqueue(r, n)
}

// Close stops every sender: requests in flight are abandoned and queued
// ones dropped. It waits for the goroutines to end.
func (p *Pool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.progressed() // wake the waiters: nothing will be delivered any more
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range p.brokers {
		b.mu.Lock()
		for i := range b.pending {
			b.stats.Dropped += uint64(numRequests(&b.pending[i]))
		}
		b.pending = nil
		b.stats.Dropped += uint64(b.stats.InFlight)
		b.stats.InFlight = 0
		b.mu.Unlock()
	}
}

// BrokerStats are one broker's counters. Every request (a LeaderAndIsr, an
// UpdateMetadata or a StopReplica) queued is, at any moment, exactly one
// of: pending, in flight, sent, dropped or coalesced into another:
// Queued = Pending + InFlight + Sent + Dropped + Coalesced.
type BrokerStats struct {
	// Queued counts requests handed to Send.
	Queued uint64
	// Sent counts requests the broker answered, including those it refused.
	Sent uint64
	// Refused counts the answered requests refused as a whole (stale
	// controller or broker epoch, or another top-level error).
	Refused uint64
	// Retries counts failed attempts that were retried.
	Retries uint64
	// Dropped counts requests discarded unanswered: an older controller
	// epoch or broker incarnation than one already queued or delivered, a
	// broker that is no longer known, an API the broker does not serve,
	// or Close.
	Dropped uint64
	// Coalesced counts requests merged into a newer one.
	Coalesced uint64
	// Pending and InFlight are the requests waiting and being delivered.
	Pending  int
	InFlight int
	// Resets counts connections the broker closed or reset, and Refusals
	// the dials of its listener refused after one (each reported once per
	// broker epoch, see liveness.go).
	Resets, Refusals uint64
	// Connected reports an open connection; Addr is its address.
	Connected bool
	Addr      string
}

// Stats is a snapshot of every broker's counters and their totals.
type Stats struct {
	Total   BrokerStats
	Brokers map[int32]BrokerStats
}

// Stats returns a snapshot of the counters.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	bs := make([]*brokerSender, 0, len(p.brokers))
	for _, b := range p.brokers {
		bs = append(bs, b)
	}
	p.mu.Unlock()
	out := Stats{Brokers: make(map[int32]BrokerStats, len(bs))}
	for _, b := range bs {
		s := b.snapshot()
		out.Brokers[b.id] = s
		t := &out.Total
		t.Queued += s.Queued
		t.Sent += s.Sent
		t.Refused += s.Refused
		t.Retries += s.Retries
		t.Dropped += s.Dropped
		t.Coalesced += s.Coalesced
		t.Resets += s.Resets
		t.Refusals += s.Refusals
		t.Pending += s.Pending
		t.InFlight += s.InFlight
	}
	return out
}

// brokerSender is the queue, goroutine and connection of one broker.
type brokerSender struct {
	p    *Pool
	id   int32
	log  hclog.Logger
	wake chan struct{}

	mu      sync.Mutex
	pending []controller.Requests
	// epoch is the highest controller epoch queued or delivered, and
	// brokerEpoch the highest broker epoch (the newest incarnation).
	epoch       int32
	brokerEpoch int64
	stats       BrokerStats
	// handed counts the sets queued (and not dropped on arrival); done is
	// the count of them the broker has finished with: every set taken up
	// to it was answered, refused or dropped (see Marks).
	handed, done uint64

	// Owned by the goroutine.
	conn      *kafkaclient.Conn
	delivered uint64 // metadata offset of the last set fully delivered
	backoff   time.Duration
	failures  int
	// connEpoch is the broker epoch of the last request answered on conn
	// (-1: none yet); resetEpoch and resetAddr the broker epoch and
	// address of a connection the broker reset, until a connection is
	// established again (-1: none); reportedEpoch the last epoch whose
	// refusal was reported. See liveness.go.
	connEpoch, resetEpoch, reportedEpoch int64
	resetAddr                            string
}

func (b *brokerSender) snapshot() BrokerStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.stats
	s.Pending = 0
	for i := range b.pending {
		s.Pending += numRequests(&b.pending[i])
	}
	return s
}

// obsoleteLocked reports whether a set is for an older controller epoch
// or an older incarnation of the broker (an older broker epoch) than one
// already queued or delivered: the broker would refuse it.
func (b *brokerSender) obsoleteLocked(h controller.Header) bool {
	return h.ControllerEpoch < b.epoch || (h.BrokerEpoch >= 0 && h.BrokerEpoch < b.brokerEpoch)
}

func (b *brokerSender) enqueue(r controller.Requests, n int) {
	h := setHeader(&r)
	b.mu.Lock()
	b.stats.Queued += uint64(n)
	if b.obsoleteLocked(h) {
		b.stats.Dropped += uint64(n)
		b.report(appendDropped(nil, &r))
		epoch, brokerEpoch := b.epoch, b.brokerEpoch
		b.mu.Unlock()
		b.log.Warn("dropping requests of an older controller epoch or broker incarnation", "controller_epoch", h.ControllerEpoch,
			"newest_controller_epoch", epoch, "broker_epoch", h.BrokerEpoch, "newest_broker_epoch", brokerEpoch)
		b.signal()
		return
	}
	if h.ControllerEpoch > b.epoch || h.BrokerEpoch > b.brokerEpoch {
		b.epoch, b.brokerEpoch = h.ControllerEpoch, max(h.BrokerEpoch, b.brokerEpoch)
		// Queued sets that are now obsolete would be refused.
		kept := b.pending[:0]
		for i := range b.pending {
			if b.obsoleteLocked(setHeader(&b.pending[i])) {
				b.stats.Dropped += uint64(numRequests(&b.pending[i]))
				b.report(appendDropped(nil, &b.pending[i]))
				continue
			}
			kept = append(kept, b.pending[i])
		}
		clear(b.pending[len(kept):])
		b.pending = kept
	}
	b.pending = append(b.pending, r)
	b.handed++
	if len(b.pending) > b.p.cfg.QueueLimit {
		b.coalesceLocked()
	}
	b.mu.Unlock()
	b.signal()
}

func (b *brokerSender) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// coalesceLocked merges the queue into one set.
func (b *brokerSender) coalesceLocked() {
	before := 0
	for i := range b.pending {
		before += numRequests(&b.pending[i])
	}
	m := merge(b.pending)
	b.stats.Coalesced += uint64(before - numRequests(&m))
	clear(b.pending)
	b.pending = append(b.pending[:0], m)
}

// take waits for queued sets and returns them merged into one, with the
// mark the broker reaches once the set is finished with.
func (b *brokerSender) take() (controller.Requests, uint64, bool) {
	for {
		b.mu.Lock()
		if b.p.ctx.Err() != nil {
			b.mu.Unlock()
			return controller.Requests{}, 0, false
		}
		if len(b.pending) > 0 {
			sets := b.pending
			b.pending = nil
			mark := b.handed
			before := 0
			for i := range sets {
				before += numRequests(&sets[i])
			}
			// Counted in flight while merging, so the counters add up
			// at every moment.
			b.stats.InFlight = before
			b.mu.Unlock()
			set := merge(sets)
			n := numRequests(&set)
			b.mu.Lock()
			b.stats.Coalesced += uint64(before - n)
			b.stats.InFlight = n
			b.mu.Unlock()
			return set, mark, true
		}
		b.mu.Unlock()
		if !b.idleWait() {
			return controller.Requests{}, 0, false
		}
	}
}

// requeue puts the undelivered rest of a set back at the head of the
// queue, where the next take merges it with anything newer. A set whose
// controller epoch was overtaken meanwhile is dropped instead.
func (b *brokerSender) requeue(set controller.Requests) {
	n := numRequests(&set)
	b.mu.Lock()
	b.stats.InFlight = 0
	if b.obsoleteLocked(setHeader(&set)) {
		b.stats.Dropped += uint64(n)
		b.mu.Unlock()
		b.reportDropped(&set)
		return
	}
	b.pending = append([]controller.Requests{set}, b.pending...)
	b.mu.Unlock()
}

func (b *brokerSender) run() {
	defer b.p.wg.Done()
	defer func() {
		if b.conn != nil {
			_ = b.conn.Close()
		}
	}()
	for {
		set, mark, ok := b.take()
		if !ok {
			return
		}
		if b.deliver(set) {
			b.finished(mark)
		} else {
			// Retry: wait, then take again (merging what came meanwhile).
			if !b.sleep() {
				return
			}
		}
	}
}

// sleep waits out the backoff; false when the pool closed.
func (b *brokerSender) sleep() bool {
	cfg := &b.p.cfg
	if b.backoff == 0 {
		b.backoff = cfg.MinBackoff
	} else {
		b.backoff = min(2*b.backoff, cfg.MaxBackoff)
	}
	d := b.backoff/2 + rand.N(b.backoff/2+1) // jitter in [backoff/2, backoff]
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-b.p.ctx.Done():
		return false
	}
}

type kind int

const (
	kindLAI kind = iota
	kindUM
	kindSR
)

func (k kind) String() string {
	return [...]string{"LeaderAndIsr", "UpdateMetadata", "StopReplica"}[k]
}

func present(set *controller.Requests, k kind) bool {
	switch k {
	case kindLAI:
		return set.LeaderAndIsr != nil
	case kindUM:
		return set.UpdateMetadata != nil
	default:
		return set.StopReplica != nil
	}
}

func clearKind(set *controller.Requests, k kind) {
	switch k {
	case kindLAI:
		set.LeaderAndIsr = nil
	case kindUM:
		set.UpdateMetadata = nil
	default:
		set.StopReplica = nil
	}
}

type outcome int

const (
	outDelivered outcome = iota
	outRefused
	outRetry
	outDropSet  // the broker is unknown: drop what is left of the set
	outDropKind // the broker does not serve this API
	outClosed
)

// deliver sends a set's requests in order. It returns false when an
// attempt failed and the rest was requeued for a retry.
func (b *brokerSender) deliver(set controller.Requests) bool {
	offset := setHeader(&set).MetadataOffset
	for _, k := range []kind{kindLAI, kindUM, kindSR} {
		if !present(&set, k) {
			continue
		}
		last := true
		for _, later := range []kind{kindLAI, kindUM, kindSR}[k+1:] {
			last = last && !present(&set, later)
		}
		reqOffset := b.delivered
		if last {
			reqOffset = max(offset, b.delivered)
		}
		switch b.attempt(&set, k, reqOffset) {
		case outDelivered, outRefused:
			clearKind(&set, k)
			b.mu.Lock()
			b.stats.Sent++
			b.stats.InFlight--
			b.mu.Unlock()
			b.backoff, b.failures = 0, 0
		case outDropKind:
			clearKind(&set, k)
			b.mu.Lock()
			b.stats.Dropped++
			b.stats.InFlight--
			b.mu.Unlock()
		case outDropSet:
			b.mu.Lock()
			b.stats.Dropped += uint64(numRequests(&set))
			b.stats.InFlight = 0
			b.mu.Unlock()
			b.reportDropped(&set)
			return true
		case outRetry:
			b.mu.Lock()
			b.stats.Retries++
			b.mu.Unlock()
			b.requeue(set)
			return false
		case outClosed:
			return true
		}
	}
	b.delivered = max(b.delivered, offset)
	return true
}

// connect returns a connection to the broker's current address.
func (b *brokerSender) connect(epoch int64) (*kafkaclient.Conn, outcome) {
	addr, ok := b.p.cfg.Resolve(b.id)
	if !ok {
		b.closeConn()
		return nil, outDropSet
	}
	if b.conn != nil && b.conn.Addr() != addr {
		b.log.Info("broker address changed: reconnecting", "old", b.conn.Addr(), "new", addr)
		b.closeConn()
	}
	if b.conn != nil {
		return b.conn, outDelivered
	}
	opts := kafkaclient.Options{DialTimeout: b.p.cfg.DialTimeout, SASL: b.p.cfg.SASL, SASLIfOffered: true}
	if b.p.cfg.Dial != nil {
		opts.Dial = b.p.cfg.Dial(b.id)
	}
	conn, err := kafkaclient.Dial(b.p.ctx, addr, opts)
	if err != nil {
		if b.p.ctx.Err() != nil {
			return nil, outClosed
		}
		if kafkaclient.PeerGone(err) {
			b.connLost(err, addr, epoch)
		} else {
			b.dialFailed(err, addr)
		}
		b.failed("connect failed", err, addr)
		return nil, outRetry
	}
	b.conn, b.connEpoch = conn, -1
	b.connected()
	b.mu.Lock()
	b.stats.Connected, b.stats.Addr = true, addr
	b.mu.Unlock()
	if b.failures > 0 {
		b.log.Info("connected again", "addr", addr, "after_failures", b.failures)
	}
	return conn, outDelivered
}

func (b *brokerSender) closeConn() {
	if b.conn == nil {
		return
	}
	_ = b.conn.Close()
	b.conn = nil
	b.mu.Lock()
	b.stats.Connected = false
	b.mu.Unlock()
}

// failed logs a failed attempt: the first of a run loudly, the rest quietly.
func (b *brokerSender) failed(msg string, err error, addr string) {
	b.failures++
	if b.failures == 1 {
		b.log.Warn(msg+"; retrying with backoff", "addr", addr, "error", err)
	} else {
		b.log.Debug(msg+"; retrying with backoff", "addr", addr, "error", err, "failures", b.failures)
	}
}

// attempt sends one request of the set.
func (b *brokerSender) attempt(set *controller.Requests, k kind, offset uint64) outcome {
	conn, out := b.connect(setHeader(set).BrokerEpoch)
	if conn == nil {
		return out
	}
	var reqs []kmsg.Request
	var hdr controller.Header
	key := map[kind]int16{kindLAI: 4, kindUM: 6, kindSR: 5}[k]
	v, ok := conn.Version(key)
	if !ok {
		b.log.Error("broker does not serve the request: dropping it", "request", k.String(), "addr", conn.Addr())
		return outDropKind
	}
	switch k {
	case kindLAI:
		hdr = set.LeaderAndIsr.Header
		reqs = []kmsg.Request{EncodeLeaderAndIsr(set.LeaderAndIsr, v)}
	case kindUM:
		hdr = set.UpdateMetadata.Header
		for _, r := range EncodeUpdateMetadataChunks(set.UpdateMetadata, v, b.p.cfg.MaxPartitionsPerRequest) {
			reqs = append(reqs, r)
		}
	case kindSR:
		hdr = set.StopReplica.Header
		for _, r := range EncodeStopReplica(set.StopReplica, v) {
			reqs = append(reqs, r)
		}
	}
	var resps []kmsg.Response
	for i, req := range reqs {
		// Only the final wire request of the set carries its offset.
		off := offset
		if i < len(reqs)-1 {
			off = b.delivered
		}
		ctx, cancel := context.WithTimeout(b.p.ctx, b.p.cfg.RequestTimeout)
		resp, err := conn.RequestAs(ctx, kafkaclient.ControlClientID(hdr.ControllerID, off), req)
		cancel()
		if err != nil {
			if b.p.ctx.Err() != nil {
				b.closeConn()
				return outClosed
			}
			epoch := b.connEpoch
			if epoch < 0 {
				epoch = hdr.BrokerEpoch
			}
			b.connLost(err, conn.Addr(), epoch)
			b.failed(k.String()+" failed", err, conn.Addr())
			return outRetry
		}
		b.connEpoch = hdr.BrokerEpoch
		resps = append(resps, resp)
	}
	switch k {
	case kindLAI:
		return b.handleLAI(set.LeaderAndIsr, resps[0].(*kmsg.LeaderAndISRResponse))
	case kindUM:
		for _, r := range resps {
			if code := r.(*kmsg.UpdateMetadataResponse).ErrorCode; code != 0 {
				return b.topLevel(k, hdr, code)
			}
		}
		return outDelivered
	default:
		return b.handleSR(set.StopReplica, resps)
	}
}

// topLevel classifies a request-level error code.
func (b *brokerSender) topLevel(k kind, hdr controller.Header, code int16) outcome {
	if code == 0 {
		return outDelivered
	}
	err := kerr.ErrorForCode(code)
	b.mu.Lock()
	b.stats.Refused++
	b.mu.Unlock()
	switch code {
	case kerr.StaleControllerEpoch.Code:
		b.log.Warn("broker refused a request: it has seen a newer controller epoch", "request", k.String(), "controller_epoch", hdr.ControllerEpoch)
	case kerr.StaleBrokerEpoch.Code:
		// Maybe a stale process still answers at an old address: look
		// the broker up again before the next request.
		b.closeConn()
		b.log.Warn("broker refused a request for another incarnation", "request", k.String(), "broker_epoch", hdr.BrokerEpoch)
	default:
		b.log.Warn("broker refused a request", "request", k.String(), "error", err)
	}
	return outRefused
}

const maxLoggedPartitionErrors = 10

func (b *brokerSender) handleLAI(r *controller.LeaderAndIsr, resp *kmsg.LeaderAndISRResponse) outcome {
	if resp.ErrorCode != 0 {
		return b.topLevel(kindLAI, r.Header, resp.ErrorCode)
	}
	names := map[rl.TopicID]string{}
	for _, ps := range r.Partitions {
		names[ps.TopicID] = ps.Topic
	}
	n := 0
	logErr := func(topic string, p int32, code int16) {
		if code == 0 {
			return
		}
		n++
		if n <= maxLoggedPartitionErrors {
			b.log.Warn("broker refused a partition of LeaderAndIsr", "topic", topic, "partition", p, "error", kerr.ErrorForCode(code))
		}
	}
	for _, p := range resp.Partitions {
		logErr(p.Topic, p.Partition, p.ErrorCode)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			logErr(names[rl.TopicID(t.TopicID)], p.Partition, p.ErrorCode)
		}
	}
	if n > maxLoggedPartitionErrors {
		b.log.Warn("broker refused more partitions of LeaderAndIsr", "total_refused", n)
	}
	return outDelivered
}

func (b *brokerSender) handleSR(r *controller.StopReplica, resps []kmsg.Response) outcome {
	type key struct {
		topic string
		part  int32
	}
	codes := map[key]int16{}
	var top int16
	for _, x := range resps {
		resp := x.(*kmsg.StopReplicaResponse)
		if resp.ErrorCode != 0 && top == 0 {
			top = resp.ErrorCode
		}
		for _, p := range resp.Partitions {
			codes[key{p.Topic, p.Partition}] = p.ErrorCode
		}
	}
	out := outDelivered
	if top != 0 {
		out = b.topLevel(kindSR, r.Header, top)
	}
	h := b.p.cfg.Responses
	if h == nil {
		return out
	}
	var results []StopReplicaResult
	for _, sp := range r.Partitions {
		if !sp.Delete {
			continue
		}
		res := StopReplicaResult{TopicID: sp.TopicID, Topic: sp.Topic, Partition: sp.Partition, BrokerEpoch: r.BrokerEpoch}
		if top != 0 {
			res.Err = kerr.ErrorForCode(top)
		} else if code, ok := codes[key{sp.Topic, sp.Partition}]; !ok {
			res.Err = fmt.Errorf("broker %d did not answer for %s-%d", b.id, sp.Topic, sp.Partition)
		} else {
			res.Err = kerr.ErrorForCode(code)
		}
		results = append(results, res)
	}
	b.report(results)
	return out
}

// appendDropped adds the deletions of a dropped set, which will not
// happen, to results.
func appendDropped(results []StopReplicaResult, set *controller.Requests) []StopReplicaResult {
	if set.StopReplica == nil {
		return results
	}
	for _, sp := range set.StopReplica.Partitions {
		if sp.Delete {
			results = append(results, StopReplicaResult{TopicID: sp.TopicID, Topic: sp.Topic, Partition: sp.Partition, Err: ErrDropped,
				BrokerEpoch: set.StopReplica.BrokerEpoch})
		}
	}
	return results
}

// reportDropped tells the response handler that the deletions of a set
// will not happen.
func (b *brokerSender) reportDropped(set *controller.Requests) {
	b.report(appendDropped(nil, set))
}

func (b *brokerSender) report(results []StopReplicaResult) {
	if b.p.cfg.Responses == nil || len(results) == 0 {
		return
	}
	b.p.reportMu.Lock()
	b.p.reports = append(b.p.reports, report{broker: b.id, results: results})
	b.p.reportMu.Unlock()
	select {
	case b.p.reportWake <- struct{}{}:
	default:
	}
}
