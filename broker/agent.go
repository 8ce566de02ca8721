// Package broker is the broker side of the control plane: an Agent that a
// broker process embeds (and that dev mode and the tests run as simulated
// brokers).
//
// The agent registers with the active controller (BrokerRegistration,
// with a fresh incarnation id per Start), heartbeats to it
// (BrokerHeartbeat, with the highest metadata offset it applied), asks
// for controlled shutdown, and reports ISR changes of the partitions it
// leads (AlterPartition). It serves the controller's LeaderAndIsr,
// UpdateMetadata and StopReplica on its own Kafka listener with epoch
// fencing, hands what it accepted to a Host, and keeps a metadata cache
// that it serves to clients as Metadata and DescribeCluster, so a Kafka
// client pointed at an agent sees what the brokers were told: the live
// brokers only, never a controller voter, with a live broker (itself
// when it is live) as controller (cluster.go). Every admin request a
// client may send to any broker is served too: those only the
// controller can answer are forwarded to the active controller in an
// Envelope with the client's principal, and the answer relayed
// (forward.go). ApiVersions advertises exactly what the agent serves.
//
// Fencing, checked in this order:
//   - a request with a controller epoch lower than the highest the agent
//     has accepted is refused as a whole: STALE_CONTROLLER_EPOCH. That is
//     what fences a deposed controller;
//   - a request carrying a broker epoch other than the agent's own is
//     refused as a whole: STALE_BROKER_EPOCH. It was meant for another
//     incarnation of this broker id (or the registration answer has not
//     reached the agent yet). Requests without one (-1, or versions
//     before the field) pass;
//   - per partition, a leader epoch lower than the one cached, or the
//     same leader epoch with a lower partition epoch, is refused:
//     FENCED_LEADER_EPOCH. In LeaderAndIsr the partition's error says so;
//     in UpdateMetadata (which has no per-partition errors) the partition
//     is skipped; in StopReplica the stop is refused (leader epochs -1 and
//     -2, Kafka's "none" and "during delete", always pass, as does an
//     equal epoch). A LeaderAndIsr for a partition the agent is not a
//     replica of is refused with UNKNOWN_TOPIC_OR_PARTITION. A topic id
//     that differs from the cached one for the same name is a re-created
//     topic: the old one is dropped and the new one starts from scratch.
//
// A deleted topic leaves the cache, and so the agent's Metadata answers,
// by whichever of these reaches the agent first: UpdateMetadata with
// leader -2 (Kafka's LeaderDuringDelete) for a partition, which the
// controller sends every live broker when a deletion starts;
// StopReplica deleting a replica with leader epoch -2, which the
// controller sends only for a topic being deleted; or a full
// UpdateMetadata (type 2, the controller's catch-up of a broker that
// registers or of a new controller) that does not name the topic: the
// cache then keeps only the topics it names.
//
// The metadata offset of a control request comes in the client id of its
// header (see kafkaclient.ControlClientID); the agent reports the highest
// one it accepted in its heartbeats, or its own broker epoch if that is
// higher: the controller unfences a broker whose offset has reached its
// registration, and control requests are not sent to a fenced broker, so
// a newly registered broker could not otherwise get there. What changed
// before its registration reaches it when it is unfenced, through the
// controller's catch-up.
//
// Every decision on a control request is recorded (ControlLog).
//
// With WatchClusterState the agent also keeps, for the embedding broker's
// data path, the topic configs, its dynamic broker configs and the ACL
// rules, read from the controller whenever the controller says something
// changed (clusterstate.go): TopicLevels and Authorize.
package broker

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

// Config configures an Agent. Zero values take the defaults.
type Config struct {
	BrokerID int32
	Rack     string
	// Listener is the host:port the agent serves on: its PLAINTEXT
	// endpoint, advertised in its registration. Port 0 picks a free one.
	Listener string
	// Advertise, if set, is the host:port registered instead of the
	// bound address.
	Advertise string
	// Controllers are bootstrap addresses of controller listeners. The
	// agent asks any of them for Metadata and talks to the one named as
	// controller. With none, the agent only serves its listener.
	Controllers []string
	// ClusterID is sent in registration and reported in Metadata.
	ClusterID string
	// HeartbeatInterval is the time between heartbeats. Default 2 s.
	HeartbeatInterval time.Duration
	// RequestTimeout bounds each request to a controller. Default 10 s.
	RequestTimeout time.Duration
	// Host receives the accepted control requests. Default: a MemoryHost.
	Host   Host
	Logger hclog.Logger
	// ControlLogLimit bounds the records kept by ControlLog; the oldest
	// go first. Default 100000.
	ControlLogLimit int
	// MaxFrameBytes bounds a request frame on the listener (kafkawire's
	// default when zero: 100 MiB).
	MaxFrameBytes int32
	// Wire, if set, adjusts the listener's wire server configuration
	// (limits, timeouts) after MaxFrameBytes is applied; the handler and
	// the APIs served stay the agent's.
	Wire func(*kafkawire.Config)
	// TLS, if set, is the broker's certificate (one naming this broker
	// id): the listener then serves mutual TLS and takes control requests
	// only from a certificate that names a controller voter, and the
	// agent reaches the controllers over TLS, accepting only a voter's
	// certificate. Nil: plain TCP throughout.
	TLS *tlsconfig.Reloader
	// Dialer opens the agent's connections to the controllers (binding
	// the node's own address, say). Nil: a zero net.Dialer.
	Dialer *net.Dialer
	// SASL, if set, logs the agent in on its connections to controller
	// listeners that require SASL (a super user's credentials: it acts
	// for the cluster). Nil: none.
	SASL kgosasl.Mechanism
	// SASLMechanisms, if set, makes clients of the listener log in with
	// SASL (SCRAM-SHA-256, SCRAM-SHA-512; PLAIN only over TLS) before
	// anything but ApiVersions, as the voters' listeners require: the
	// mechanisms the voters offer. The agent relays each login to a voter
	// (see sasl.go). Empty: no login, clients are who their certificate
	// says, or anonymous.
	SASLMechanisms []string
	// SuperUsers, with SASLMechanisms, are the principals ("User:admin")
	// whose control requests (LeaderAndIsr, UpdateMetadata, StopReplica)
	// are served on a connection logged in with SASL: the voters' login.
	SuperUsers []string
	// Voters, with TLS, are the voter ids whose certificates may send
	// control requests and serve the controller listeners; empty: any
	// certificate that names a voter.
	Voters []int32
	// ForwardTimeout is the time a forwarded admin request is given, on
	// top of its own timeout, to reach an active controller. Default 8 s,
	// below kgo's default 10 s request overhead, so that the client hears
	// the broker's answer rather than timing out.
	ForwardTimeout time.Duration
	// ForwardConns is the number of connections forwarded admin requests
	// share. Default 4.
	ForwardConns int
	// Service, if set, serves the embedding broker's own APIs (its data
	// path) on the agent's listener beside the agent's: see Service.
	Service Service
	// StaticConfigs are the broker's static broker configs by Kafka's
	// names (those set explicitly), which DescribeConfigs of its own
	// broker resource reports with source STATIC_BROKER_CONFIG where no
	// dynamic config overrides them. Nil: none.
	StaticConfigs map[string]string
	// WatchClusterState keeps a copy of the topic configs, this broker's
	// dynamic configs and the ACL rules, read from the controller, for
	// the embedding broker's data path (TopicLevels, Authorize; see
	// clusterstate.go). Off (simulated brokers): only static configs,
	// and no rules.
	WatchClusterState bool
	// Authorize enforces the ACL rules in Authorize even with no SASL and
	// no rule (the voters' authorizer.enforce).
	Authorize bool
}

// Agent is a running broker agent.
type Agent struct {
	cfg         Config
	log         hclog.Logger
	host        Host
	srv         *kafkawire.Server
	advHost     string
	advPort     uint16
	incarnation rl.IncarnationID
	clog        controlLog

	// applyMu serialises control requests and ISR updates, Host calls
	// included, across connections.
	applyMu sync.Mutex

	mu              sync.RWMutex
	topics          map[string]*cachedTopic
	brokers         []BrokerInfo
	controllerID    int32
	controllerEpoch int32
	applied         uint64
	brokerEpoch     int64
	fenced          bool
	caughtUp        bool
	heartbeats      uint64

	ctrl *kafkaclient.Controller
	fwd  *forwarder

	// The cluster state (clusterstate.go): the last reading, refreshes
	// one at a time, and whether the last one failed.
	state     atomic.Pointer[clusterState]
	stateMu   sync.Mutex
	stateRead retriedRead
	// The finalized feature levels (features.go): the last reading, and
	// whether the last read failed.
	finalized    atomic.Pointer[finalizedFeatures]
	featuresRead retriedRead
	supers       map[string]bool
	// clusterID is Config.ClusterID, or, when that is empty, the one the
	// controller reported before the first registration.
	clusterID    atomic.Pointer[string]
	kick         chan struct{}
	wantShutdown atomic.Bool
	shutdownOK   chan struct{}
	grantOnce    sync.Once
	stop         chan struct{}
	done         chan struct{}
	closeOnce    sync.Once
}

// BrokerInfo is a live broker as UpdateMetadata listed it.
type BrokerInfo struct {
	ID   int32
	Host string
	Port int32
	Rack *string
}

type cachedTopic struct {
	name  string
	id    rl.TopicID
	parts map[int32]*PartitionState
}

// Start starts an agent: its listener at once, and, with controllers
// configured, registration and heartbeats in the background.
func Start(cfg Config) (*Agent, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 2 * time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.ForwardTimeout <= 0 {
		cfg.ForwardTimeout = 8 * time.Second
	}
	if cfg.ForwardConns <= 0 {
		cfg.ForwardConns = 4
	}
	if cfg.ControlLogLimit <= 0 {
		cfg.ControlLogLimit = 100_000
	}
	if cfg.Host == nil {
		cfg.Host = NewMemoryHost()
	}
	if cfg.BrokerID < 0 {
		return nil, fmt.Errorf("broker id %d is negative", cfg.BrokerID)
	}
	a := &Agent{
		cfg:             cfg,
		log:             cfg.Logger.Named("broker").With("broker", cfg.BrokerID),
		host:            cfg.Host,
		topics:          map[string]*cachedTopic{},
		controllerID:    -1,
		controllerEpoch: -1,
		brokerEpoch:     -1,
		fenced:          true,
		kick:            make(chan struct{}, 1),
		shutdownOK:      make(chan struct{}),
		stop:            make(chan struct{}),
		done:            make(chan struct{}),
	}
	a.clog.limit = cfg.ControlLogLimit
	a.stateRead.what = "topic configs and ACLs"
	a.stateRead.read = func(ctx context.Context) error { return a.refreshClusterState(ctx, nil) }
	a.featuresRead.what, a.featuresRead.read = "the finalized feature levels", a.readFinalizedFeatures
	a.supers = map[string]bool{}
	for _, u := range cfg.SuperUsers {
		a.supers[u] = true
	}
	if _, err := rand.Read(a.incarnation[:]); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listener)
	if err != nil {
		return nil, err
	}
	adv := cfg.Advertise
	if adv == "" {
		adv = ln.Addr().String()
	}
	host, portStr, err := net.SplitHostPort(adv)
	if err == nil {
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			host, _ = os.Hostname()
		}
	}
	port, perr := strconv.ParseUint(portStr, 10, 16)
	if err != nil || perr != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("advertised address %q: want host:port", adv)
	}
	a.advHost, a.advPort = host, uint16(port)
	if cfg.TLS != nil {
		// Any client with a certificate of the CA may connect (for
		// Metadata); control requests are checked per request. With
		// SASL, clients without a certificate may connect too, and log
		// in.
		tc := cfg.TLS.ServerConfig(nil)
		if len(cfg.SASLMechanisms) > 0 {
			tc = cfg.TLS.ClientListenerConfig()
		}
		ln = tls.NewListener(ln, tc)
	}
	apis := servedAPIs()
	wc := kafkawire.Config{Handler: a, Logger: a.log.Named("listener"), APIs: apis, MaxFrameBytes: cfg.MaxFrameBytes}
	if cfg.Wire != nil {
		cfg.Wire(&wc)
		wc.Handler, wc.APIs = a, apis
	}
	wc.Features = a.features
	a.withService(&wc)
	a.withSASL(&wc)
	a.srv = kafkawire.Serve(ln, wc)
	if len(cfg.Controllers) > 0 {
		a.ctrl = a.controllerClient(cfg.Controllers)
		a.fwd = newForwarder(cfg.ForwardConns, func() *kafkaclient.Controller {
			return kafkaclient.NewController(kafkaclient.ControllerConfig{Bootstrap: cfg.Controllers, Options: a.controllerOptions()})
		})
		go a.run()
	} else {
		close(a.done)
	}
	a.log.Info("broker agent listening", "addr", a.Addr(), "incarnation", a.incarnation.String())
	return a, nil
}

// servedAPIs are the API keys the agent's listener serves, with the
// highest version of each: Metadata and DescribeCluster from its cache,
// the controller's control requests, and the admin requests it forwards
// to the controller. ApiVersions advertises exactly these.
func servedAPIs() map[int16]int16 {
	apis := kafkaclient.Forwardable()
	apis[kmsg.Metadata.Int16()] = (&kmsg.MetadataRequest{}).MaxVersion()
	apis[kmsg.DescribeCluster.Int16()] = (&kmsg.DescribeClusterRequest{}).MaxVersion()
	apis[KeyLeaderAndIsr], apis[KeyStopReplica], apis[KeyUpdateMetadata] = 7, 4, 8
	return apis
}

// voterCheck accepts a certificate that names a configured voter (any
// voter when none are configured).
func (a *Agent) voterCheck() tlsconfig.PeerCheck {
	if len(a.cfg.Voters) > 0 {
		return tlsconfig.Voters(a.cfg.Voters...)
	}
	return tlsconfig.VoterFunc(func(int32) bool { return true })
}

// Addr is the advertised host:port of the agent's listener.
func (a *Agent) Addr() string {
	return net.JoinHostPort(a.advHost, strconv.Itoa(int(a.advPort)))
}

// WireLimits reports how often the listener's wire limits were hit.
func (a *Agent) WireLimits() kafkawire.LimitCounts { return a.srv.Limits() }

// BrokerID is the agent's broker id.
func (a *Agent) BrokerID() int32 { return a.cfg.BrokerID }

// IncarnationID is this run's incarnation id.
func (a *Agent) IncarnationID() rl.IncarnationID { return a.incarnation }

// Host is the Host the agent calls.
func (a *Agent) Host() Host { return a.host }

// Close stops the agent at once: no controlled shutdown, the listener and
// heartbeats stop. The controller fences the broker when its session
// expires.
func (a *Agent) Close() error {
	var err error
	a.closeOnce.Do(func() {
		close(a.stop)
		<-a.done
		if a.ctrl != nil {
			a.ctrl.Close()
			a.fwd.close()
		}
		err = a.srv.Close()
	})
	return err
}

// Shutdown is a controlled shutdown: the agent asks the controller in its
// heartbeats, waits until the controller says it leads nothing
// (ShouldShutDown), then stops. If ctx ends first it stops anyway and
// returns ctx's error.
func (a *Agent) Shutdown(ctx context.Context) error {
	if a.ctrl == nil {
		return a.Close()
	}
	a.wantShutdown.Store(true)
	a.poke()
	var err error
	select {
	case <-a.shutdownOK:
	case <-ctx.Done():
		err = ctx.Err()
	case <-a.done:
		err = errors.New("agent closed before the controller allowed it to shut down")
	}
	if cerr := a.Close(); err == nil {
		err = cerr
	}
	return err
}

func (a *Agent) poke() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Status is where the agent stands.
type Status struct {
	// BrokerEpoch is -1 until registered.
	BrokerEpoch int64
	Registered  bool
	// Fenced, CaughtUp as the last heartbeat answer said.
	Fenced   bool
	CaughtUp bool
	// Heartbeats counts heartbeats answered without error.
	Heartbeats uint64
	// MetadataOffset is the highest offset of an accepted control request.
	MetadataOffset uint64
	// ControllerEpoch and ControllerID of the newest control request
	// accepted (-1 before any).
	ControllerEpoch   int32
	ControllerID      int32
	ShutdownRequested bool
}

// Status returns a snapshot of the agent's state.
func (a *Agent) Status() Status {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return Status{
		BrokerEpoch: a.brokerEpoch, Registered: a.brokerEpoch >= 0, Fenced: a.fenced, CaughtUp: a.caughtUp,
		Heartbeats: a.heartbeats, MetadataOffset: a.applied, ControllerEpoch: a.controllerEpoch,
		ControllerID: a.controllerID, ShutdownRequested: a.wantShutdown.Load(),
	}
}

// Partition returns the cached state of a partition.
func (a *Agent) Partition(topic string, partition int32) (PartitionState, bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if t := a.topics[topic]; t != nil {
		if p := t.parts[partition]; p != nil {
			return clonePS(p), true
		}
	}
	return PartitionState{}, false
}

// Partitions returns every cached partition, by topic and partition.
func (a *Agent) Partitions() []PartitionState {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var out []PartitionState
	for _, t := range a.topics {
		for _, p := range t.parts {
			out = append(out, clonePS(p))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// NumPartitions is the number of cached partitions.
func (a *Agent) NumPartitions() int {
	a.mu.RLock()
	defer a.mu.RUnlock()
	n := 0
	for _, t := range a.topics {
		n += len(t.parts)
	}
	return n
}

// Brokers returns the live brokers of the last UpdateMetadata, by id.
func (a *Agent) Brokers() []BrokerInfo {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return append([]BrokerInfo(nil), a.brokers...)
}

// ControlLog returns the retained records, oldest first. Seq numbers them
// from 1: a first Seq above 1 means older ones were dropped.
func (a *Agent) ControlLog() []ControlRecord {
	recs, _ := a.clog.snapshot()
	return recs
}

func clonePS(p *PartitionState) PartitionState {
	c := *p
	c.ISR = append([]int32(nil), p.ISR...)
	c.Replicas = append([]int32(nil), p.Replicas...)
	c.Adding = append([]int32(nil), p.Adding...)
	c.Removing = append([]int32(nil), p.Removing...)
	return c
}

// supportedFeatures reports in ApiVersions the feature levels this build
// reads.
func supportedFeatures(resp *kmsg.ApiVersionsResponse) {
	for _, r := range rl.SupportedFeatures() {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = r.Name, int16(r.Min), int16(r.Max)
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
	}
}
