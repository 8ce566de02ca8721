// Package server assembles one ctrlquorum node from the library's parts:
// a controller voter (raft voter, FSM, controller) with its Kafka-protocol
// listener and the sender pool that delivers its control requests to
// brokers; a broker agent; the operations HTTP endpoint (metrics, health,
// readiness, state hash). A node has either role or both. It is what
// `ctrlnode run` starts, three times over for `ctrlnode dev`, and what a
// broker process that embeds a controller would start.
package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/broker/replica"
	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	"github.com/ctrlquorum/ctrlquorum/fsm/statelog"
	"github.com/ctrlquorum/ctrlquorum/metrics"
	"github.com/ctrlquorum/ctrlquorum/ops"
	"github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/listener"
	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
	"github.com/ctrlquorum/ctrlquorum/transport/sender"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
	"github.com/ctrlquorum/ctrlquorum/transport/zookeeper"
	"github.com/ctrlquorum/ctrlquorum/voter"
)

// VoterPeer is one controller voter of the quorum: its raft address and
// the address of its Kafka-protocol listener, both as the other nodes
// reach them.
type VoterPeer struct {
	ID       int32
	Raft     string // host:port
	Listener string // host:port
}

// Config describes one node. Validate reports what is wrong with it.
type Config struct {
	// NodeID is the voter's id (the raft server id, and the id the
	// listener reports for this voter). Voter ids and broker ids must not
	// collide: voters 1001–1003 and brokers from 1 is the convention.
	NodeID int32
	Voter  bool
	Broker bool

	// Voter role.
	RaftAddr          string // host:port raft binds
	RaftAdvertise     string // host:port peers dial; empty: RaftAddr
	Listener          string // host:port of the Kafka-protocol listener
	ListenerAdvertise string // host:port clients are told; empty: Listener
	// Voters lists every voter, this one included; a fresh data directory
	// bootstraps the quorum from it.
	Voters  []VoterPeer
	DataDir string
	// SessionTimeout is the broker session timeout; zero means 9 s.
	SessionTimeout time.Duration
	ClusterID      string
	// StaticConfigs are the node's static broker configs by Kafka's
	// names (auto.leader.rebalance.enable, min.insync.replicas, …), the
	// STATIC_BROKER_CONFIG level under the dynamic configs in the log;
	// only those set explicitly (see controller.Config.StaticConfigs). A
	// broker agent reports them for its own broker resource.
	StaticConfigs map[string]string

	// Broker role.
	BrokerID          int32
	BrokerListener    string // host:port the agent binds
	BrokerAdvertise   string // host:port registered; empty: bound address
	BrokerRack        string
	Controllers       []string // bootstrap listeners; empty: the Voters' listeners
	HeartbeatInterval time.Duration
	BrokerHost        broker.Host // nil: a broker.MemoryHost
	// BrokerData, with a Dir, gives the broker a real data path in place
	// of BrokerHost (see BrokerData).
	BrokerData BrokerData

	// ZooKeeperMirror, with the voter role, mirrors the committed image to
	// Kafka's znodes in this ZooKeeper ("host:port[,…][/chroot]") while
	// this voter is the active controller; empty: no mirror.
	ZooKeeperMirror string

	// ListenerLimits are the wire limits of the voter's Kafka-protocol
	// listener, BrokerListenerLimits those of the broker agent's
	// listener (frame size, timeouts, connections, requests in flight).
	ListenerLimits       WireLimits
	BrokerListenerLimits WireLimits
	// RaftHandshakeTimeout bounds an inbound raft connection's TLS
	// handshake and RaftMaxHandshakes the handshakes in progress at once
	// (see raftnet.TLSStreamConfig); zero keeps the defaults, 10 s and
	// 64. Without TLS they do nothing.
	RaftHandshakeTimeout time.Duration
	RaftMaxHandshakes    int
	// RaftSnapshotThreshold, RaftSnapshotInterval and RaftTrailingLogs
	// are raft's snapshot settings (raft.Config's SnapshotThreshold,
	// SnapshotInterval and TrailingLogs): every interval, with jitter,
	// raft takes a snapshot if the threshold of entries accumulated since
	// the last one, and keeps the trailing entries behind it; a voter
	// lagging further is sent the snapshot. Zero keeps hashicorp/raft's
	// defaults, 8192, 120 s and 10240.
	RaftSnapshotThreshold uint64
	RaftSnapshotInterval  time.Duration
	RaftTrailingLogs      uint64
	// RaftLogStore is the store the voter keeps its raft log in; a data
	// directory holding its log in another one has it moved on start
	// (raftlog.OpenStores). Zero: raftlog.DefaultLogStore.
	RaftLogStore raftlog.LogStore

	// StateChangeLog makes a voter keep its state-change log (every
	// transition it applies, one JSON line each) in
	// <DataDir>/state-change-log, rotated at StateChangeLogMaxBytes and
	// keeping StateChangeLogFiles files (zero: statelog's defaults).
	StateChangeLog         bool
	StateChangeLogMaxBytes int64
	StateChangeLogFiles    int

	// HTTPAddr is where the operations endpoint listens; empty: none.
	HTTPAddr string
	Pprof    bool

	Logger hclog.Logger
	// TLS, if set, is this node's certificate, and everything the node
	// serves and dials runs over mutual TLS with it: raft between voters
	// (a peer must name a configured voter), the Kafka-protocol listener
	// (any client certificate of the CA; broker requests only as the
	// broker the certificate names) and forwarding between voters, the
	// sender's connections to brokers (the broker must present the
	// certificate of the broker id dialled), and the broker agent (see
	// broker.Config.TLS). With the voter role the certificate must name
	// NodeID as its voter id, with the broker role BrokerID as its broker
	// id. Nil: plain TCP throughout.
	TLS *tlsconfig.Reloader
	// RaftTLS, ListenerTLS and BrokerListenerTLS, each if set, replace
	// TLS for one listener and the connections that go with it, so that
	// each can have its own certificate and CA bundle: RaftTLS for raft
	// between voters, accepted and dialled; ListenerTLS for the
	// Kafka-protocol listener and what the voter dials over the Kafka
	// protocol (forwarding to the other voters, the sender's connections
	// to brokers); BrokerListenerTLS for the broker agent's listener and
	// its connections to the controllers. The certificates of the first
	// two must name NodeID as voter id, the third's BrokerID as broker
	// id; TLS then needs to name only what the listeners left to it do.
	// A CA bundle must hold the CAs of the peers its listener meets. A
	// node's listeners are all TLS or all plain TCP: Validate refuses one
	// that would leave some on plain TCP.
	RaftTLS           *tlsconfig.Reloader
	ListenerTLS       *tlsconfig.Reloader
	BrokerListenerTLS *tlsconfig.Reloader
	// VoterOptions adjusts the raft voter's configuration (timeouts, a TLS
	// stream layer).
	VoterOptions func(*voter.Config)

	// Security is the Kafka listener's client authentication (SASL) and
	// authorization (see listener.SecurityConfig); the zero value is dev
	// mode: no SASL, no authorization until a rule is added. With SASL and
	// TLS, clients may connect without a certificate and log in with SASL.
	Security listener.SecurityConfig
	// SASL is this node's own login where the voters' listeners require
	// SASL: the broker agent's connections to the controllers and, unless
	// Security.PeerSASL is set, the voters' calls to each other. Its
	// principal must be a super user. Nil: none (with TLS the node's
	// certificate identifies it instead).
	SASL kgosasl.Mechanism
}

// Server is a running node.
type Server struct {
	cfg      Config
	log      hclog.Logger
	Node     *controller.Node     // nil without the voter role
	Listener *listener.Listener   // nil without the voter role
	Sender   *sender.Pool         // nil without the voter role
	Agent    *broker.Agent        // nil without the broker role
	Replicas *replica.Manager     // nil without BrokerData.Dir
	HTTP     *ops.Server          // nil without HTTPAddr
	Mirror   *zookeeper.Mirror    // nil without ZooKeeperMirror
	StateLog *statelog.Log        // nil without the voter role or StateChangeLog
	Registry *prometheus.Registry // this node's metrics

	// quorum is the voter once started, for voterCheck.
	quorum atomic.Pointer[voter.Voter]

	stopOnce sync.Once
	stopErr  error
	mu       sync.Mutex
	handedTo string
}

// Start starts the node's parts: voter, listener, broker agent, HTTP
// endpoint, in that order. On error it stops what it started.
func Start(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	s := &Server{cfg: cfg, log: cfg.Logger, Registry: prometheus.NewRegistry()}
	s.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	fail := func(err error) (*Server, error) {
		s.abort()
		return nil, err
	}
	if cfg.Voter {
		if err := s.startVoter(); err != nil {
			return fail(err)
		}
	}
	if cfg.Broker {
		if err := s.startBroker(); err != nil {
			return fail(err)
		}
	}
	if cfg.ZooKeeperMirror != "" && s.Node != nil {
		if err := s.startMirror(); err != nil {
			return fail(err)
		}
	}
	if cfg.HTTPAddr != "" {
		ocfg := ops.Config{NodeID: cfg.NodeID, Node: s.Node, Gatherer: s.Registry, Pprof: cfg.Pprof, StateLog: s.StateLog}
		if s.Agent != nil {
			a := s.Agent
			ocfg.Checks = append(ocfg.Checks, func() error {
				st := a.Status()
				if !st.Registered {
					return fmt.Errorf("broker %d not registered with the controller", a.BrokerID())
				}
				return nil
			})
		}
		h, err := ops.Serve(cfg.HTTPAddr, s.withMigrate(s.withControlLog(ops.Handler(ocfg))))
		if err != nil {
			return fail(fmt.Errorf("http: %w", err))
		}
		s.HTTP = h
	}
	return s, nil
}

// voterOptions sets the voter's raft snapshot settings and log store,
// then applies VoterOptions, which may change them again.
func (c *Config) voterOptions(vc *voter.Config) {
	vc.SnapshotThreshold, vc.SnapshotInterval, vc.TrailingLogs = c.RaftSnapshotThreshold, c.RaftSnapshotInterval, c.RaftTrailingLogs
	vc.Store.LogStore = cmp.Or(c.RaftLogStore, raftlog.DefaultLogStore)
	if c.VoterOptions != nil {
		c.VoterOptions(vc)
	}
}

// stopReplicaForwarder passes the sender's StopReplica outcomes to the
// controller, which exists only once the node has started.
type stopReplicaForwarder struct {
	c atomic.Pointer[controller.Controller]
}

func (f *stopReplicaForwarder) HandleStopReplicaResponse(brokerID int32, results []sender.StopReplicaResult) {
	c := f.c.Load()
	if c == nil {
		return
	}
	c.HandleStopReplicaResponse(brokerID, results)
}

// HandleListenerRefused passes the sender's refused listeners on, as
// HandleStopReplicaResponse its StopReplica outcomes.
func (f *stopReplicaForwarder) HandleListenerRefused(r controller.ListenerRefusal) {
	if c := f.c.Load(); c != nil {
		c.HandleListenerRefused(r)
	}
}

func (s *Server) startVoter() error {
	if _, err := s.checkIdentity(); err != nil {
		return err
	}
	cfg := s.cfg // with the directory's cluster id
	var image atomic.Pointer[fsm.FSM]
	fwd := &stopReplicaForwarder{}
	nd := s.localDialer()
	kafkaTLS := cfg.tlsOr(cfg.ListenerTLS)
	brokerDial := func(int32) kafkaclient.DialFunc { return nd.DialContext }
	if certs := kafkaTLS; certs != nil {
		brokerDial = func(id int32) kafkaclient.DialFunc {
			return certs.Dialer(nd, tlsconfig.Broker(id))
		}
	}
	// The controller logs in to brokers that require SASL as it logs in
	// to the other voters.
	peerLogin := cfg.Security.PeerSASL
	if peerLogin == nil {
		peerLogin = cfg.SASL
	}
	s.Sender = sender.New(sender.Config{
		Dial:   brokerDial,
		Logger: s.log,
		Resolve: func(id int32) (string, bool) {
			f := image.Load()
			if f == nil {
				return "", false
			}
			return sender.ImageResolver(f)(id)
		},
		Responses: fwd,
		Refusals:  fwd,
		ProbeDial: nd.DialContext,
		SASL:      peerLogin,
	})
	s.Registry.MustRegister(metrics.NewSenderCollector(s.Sender))
	var lpeers []listener.PeerListener
	for _, v := range cfg.Voters {
		host, port, _ := splitHostPort(v.Listener)
		lpeers = append(lpeers, listener.PeerListener{NodeID: v.ID, Host: host, Port: int32(port)})
	}
	observer := metrics.NewLoopObserver(s.Registry)
	voterOpts := cfg.voterOptions
	if raftTLS := cfg.tlsOr(cfg.RaftTLS); raftTLS != nil {
		stream, err := raftnet.NewTLSStreamLayer(raftnet.TLSStreamConfig{
			BindAddr: cfg.RaftAddr, Advertise: cfg.RaftAdvertise, Certs: raftTLS,
			Peers: s.voterCheck(), Logger: s.log,
			HandshakeTimeout: cfg.RaftHandshakeTimeout, MaxHandshakes: cfg.RaftMaxHandshakes,
		})
		if err != nil {
			return fmt.Errorf("raft: %w", err)
		}
		voterOpts = func(vc *voter.Config) {
			cfg.voterOptions(vc)
			if vc.Stream != nil {
				// The caller brought its own stream layer.
				_ = stream.Close()
				return
			}
			vc.Stream = stream
		}
	}
	fsmOpts, err := s.openStateLog()
	if err != nil {
		return err
	}
	n, err := controller.StartNode(controller.NodeConfig{
		NodeID: cfg.NodeID, RaftAddr: cfg.RaftAddr, RaftAdvertise: cfg.RaftAdvertise, DataDir: cfg.DataDir,
		Sender: s.Sender, Logger: s.log, SessionTimeout: cfg.SessionTimeout,
		Voter: voterOpts,
		Controller: func(c *controller.Config) {
			c.Observer, c.StaticConfigs, c.ClusterID = observer, cfg.StaticConfigs, cfg.ClusterID
		},
		FSM: fsmOpts,
	})
	if err != nil {
		return err
	}
	s.Node = n
	s.quorum.Store(n.Voter)
	image.Store(n.FSM)
	fwd.c.Store(n.Controller)
	s.Registry.MustRegister(metrics.NewNodeCollector(n), metrics.NewQuorumCollector(n.Voter))
	lcfg := listener.Config{
		Addr: cfg.Listener, Advertise: cfg.ListenerAdvertise, Node: n, Peers: lpeers,
		Logger: s.log, ClusterID: cfg.ClusterID, Security: cfg.Security, Wire: cfg.ListenerLimits.apply,
	}
	if lcfg.Security.PeerSASL == nil {
		lcfg.Security.PeerSASL = cfg.SASL
	}
	lcfg.Dial = s.localDialer().DialContext
	if kafkaTLS != nil {
		ln, err := net.Listen("tcp", cfg.Listener)
		if err != nil {
			return fmt.Errorf("listener: %w", err)
		}
		tc := kafkaTLS.ServerConfig(nil)
		if len(cfg.Security.SASLMechanisms) > 0 {
			tc = kafkaTLS.ClientListenerConfig()
		}
		lcfg.Listener = tls.NewListener(ln, tc)
		lcfg.Dial = kafkaTLS.Dialer(s.localDialer(), s.voterCheck())
	}
	l, err := listener.New(lcfg)
	if err != nil {
		if lcfg.Listener != nil {
			_ = lcfg.Listener.Close()
		}
		return err
	}
	s.Listener = l
	s.Registry.MustRegister(metrics.NewListenerCollector(l))
	return nil
}

func (s *Server) startBroker() error {
	cfg := s.cfg
	ctrls := cfg.Controllers
	if len(ctrls) == 0 {
		for _, v := range cfg.Voters {
			ctrls = append(ctrls, v.Listener)
		}
	}
	host := cfg.BrokerHost
	var service broker.Service
	if cfg.BrokerData.Dir != "" {
		rm, err := s.startReplicas()
		if err != nil {
			return err
		}
		s.Replicas, host, service = rm, rm, rm
	}
	a, err := broker.Start(broker.Config{
		BrokerID: cfg.BrokerID, Rack: cfg.BrokerRack, Listener: cfg.BrokerListener, Advertise: cfg.BrokerAdvertise,
		Controllers: ctrls, ClusterID: cfg.ClusterID, HeartbeatInterval: cfg.HeartbeatInterval,
		Host: host, Service: service, Logger: s.log, TLS: cfg.tlsOr(cfg.BrokerListenerTLS), Voters: s.voterIDs(), SASL: cfg.SASL, Dialer: s.localDialer(),
		SASLMechanisms: cfg.Security.SASLMechanisms, SuperUsers: cfg.Security.SuperUsers,
		Wire: cfg.BrokerListenerLimits.apply, StaticConfigs: cfg.StaticConfigs,
		WatchClusterState: service != nil, Authorize: cfg.Security.Authorize,
	})
	if err != nil {
		return fmt.Errorf("broker %d: %w", cfg.BrokerID, err)
	}
	s.Agent = a
	if s.Replicas != nil {
		s.Replicas.Attach(a)
	}
	return nil
}

// localDialer dials from the node's own address: the IP raft binds (a
// voter) or the broker listener's (a broker), when it names one. On a host
// with several loopback or interface addresses, a peer then sees each
// node's connections come from that node's address, and so do firewall
// rules that cut one node off (the partition tests). A wildcard or host
// name binding leaves the choice to the kernel.
func (s *Server) localDialer() *net.Dialer {
	addr := s.cfg.BrokerListener
	if s.cfg.Voter {
		addr = s.cfg.RaftAddr
	}
	d := &net.Dialer{}
	if host, _, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
			d.LocalAddr = &net.TCPAddr{IP: ip}
		}
	}
	return d
}

// voterCheck accepts, over TLS, the certificate of a configured voter or
// of any server of the voter's raft configuration: a voter added while
// this node runs, whose id the voters setting does not list.
func (s *Server) voterCheck() tlsconfig.PeerCheck {
	static := map[int32]bool{}
	for _, id := range s.voterIDs() {
		static[id] = true
	}
	return tlsconfig.VoterFunc(func(id int32) bool {
		if static[id] {
			return true
		}
		v := s.quorum.Load()
		if v == nil {
			return false
		}
		ms, _, err := v.Members()
		if err != nil {
			return false
		}
		for _, m := range ms {
			if m.NodeID() == id {
				return true
			}
		}
		return false
	})
}

// voterIDs are the ids of the configured voters.
func (s *Server) voterIDs() []int32 {
	ids := make([]int32, 0, len(s.cfg.Voters))
	for _, v := range s.cfg.Voters {
		ids = append(ids, v.ID)
	}
	return ids
}

// ReloadTLS re-reads the node's certificate, key and CA bundle, and
// those of each listener that has its own: new connections (raft,
// listener, sender, broker agent) use them at once, established ones keep
// theirs. A set that fails to load keeps the material loaded before, and
// the others are reloaded all the same; the error names each set that
// failed. Without TLS it is an error.
func (s *Server) ReloadTLS() error {
	seen := map[*tlsconfig.Reloader]bool{}
	var errs []error
	for _, set := range []struct {
		name  string
		certs *tlsconfig.Reloader
	}{{"", s.cfg.TLS}, {"raft", s.cfg.RaftTLS}, {"listener", s.cfg.ListenerTLS}, {"broker listener", s.cfg.BrokerListenerTLS}} {
		if set.certs == nil || seen[set.certs] {
			continue
		}
		seen[set.certs] = true
		if err := set.certs.Reload(); err != nil {
			if set.name != "" {
				err = fmt.Errorf("%s: %w", set.name, err)
			}
			errs = append(errs, err)
		}
	}
	if len(seen) == 0 {
		return errors.New("TLS is not configured")
	}
	return errors.Join(errs...)
}

// tlsOr is a listener's own TLS material if it has some, else the
// node's.
func (c *Config) tlsOr(own *tlsconfig.Reloader) *tlsconfig.Reloader {
	if own != nil {
		return own
	}
	return c.TLS
}

// tlsUse is a listener the node runs and the TLS material it runs with.
type tlsUse struct {
	// field is the Config field the material comes from.
	field string
	what  string
	certs *tlsconfig.Reloader
	// voter tells whether its certificate must name the voter id (else
	// the broker id).
	voter bool
}

// tlsUses lists the listeners the node runs with their TLS material.
func (c *Config) tlsUses() []tlsUse {
	var out []tlsUse
	add := func(field, what string, own *tlsconfig.Reloader, voter bool) {
		if own == nil {
			field = "TLS"
		}
		out = append(out, tlsUse{field: field, what: what, certs: c.tlsOr(own), voter: voter})
	}
	if c.Voter {
		add("RaftTLS", "raft", c.RaftTLS, true)
		add("ListenerTLS", "the Kafka listener", c.ListenerTLS, true)
	}
	if c.Broker {
		add("BrokerListenerTLS", "the broker agent's listener", c.BrokerListenerTLS, false)
	}
	return out
}

// openStateLog opens the voter's state-change log, if it keeps one, and
// returns the FSM options that feed it.
func (s *Server) openStateLog() (func(*fsm.Options), error) {
	if !s.cfg.StateChangeLog {
		return nil, nil
	}
	l, err := statelog.Open(filepath.Join(s.cfg.DataDir, "state-change-log"),
		statelog.Options{MaxFileBytes: s.cfg.StateChangeLogMaxBytes, Files: s.cfg.StateChangeLogFiles})
	if err != nil {
		return nil, err
	}
	s.StateLog = l
	log := s.log.Named("state.change")
	return func(o *fsm.Options) {
		o.OnStateChanges = func(e fsm.EntryChanges) {
			if err := l.Append(e); err != nil {
				log.Error("cannot write the state-change log", "index", e.Index, "error", err)
			}
		}
		o.OnRestore = func(index uint64) {
			if err := l.Restored(index); err != nil {
				log.Error("cannot write the state-change log", "index", index, "error", err)
			}
		}
	}, nil
}

// abort stops whatever started, without the graceful steps.
func (s *Server) abort() {
	if s.HTTP != nil {
		_ = s.HTTP.Close()
	}
	if s.Mirror != nil {
		s.Mirror.Stop()
	}
	if s.Agent != nil {
		_ = s.Agent.Close()
	}
	if s.Replicas != nil {
		_ = s.Replicas.Close()
	}
	if s.Listener != nil {
		_ = s.Listener.Close()
	}
	if s.Node != nil {
		_ = s.Node.Shutdown()
	}
	if s.Sender != nil {
		s.Sender.Close()
	}
	if s.StateLog != nil {
		_ = s.StateLog.Close()
	}
}

// Stop stops the node gracefully: the broker agent goes through a
// controlled shutdown (the controller moves leadership off it first), a
// voter that leads hands raft leadership to another voter, then the
// listener, the sender and the HTTP endpoint close. If ctx ends first the
// remaining steps are done without waiting.
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		var errs []error
		if s.Agent != nil {
			if err := s.Agent.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("broker controlled shutdown: %w", err))
			}
		}
		if s.Replicas != nil {
			if err := s.Replicas.Close(); err != nil {
				errs = append(errs, fmt.Errorf("broker data: %w", err))
			}
		}
		if s.Mirror != nil {
			s.Mirror.Stop()
		}
		if s.Node != nil {
			s.handOver(ctx)
			if err := s.Node.Shutdown(); err != nil {
				errs = append(errs, fmt.Errorf("voter: %w", err))
			}
		}
		if s.Listener != nil {
			if err := s.Listener.Close(); err != nil {
				errs = append(errs, fmt.Errorf("listener: %w", err))
			}
		}
		if s.Sender != nil {
			s.Sender.Close()
		}
		if s.HTTP != nil {
			_ = s.HTTP.Close()
		}
		if s.StateLog != nil {
			if err := s.StateLog.Close(); err != nil {
				errs = append(errs, fmt.Errorf("state-change log: %w", err))
			}
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// handOver moves raft leadership to another voter if this one leads, and
// waits until this voter hears from the new leader (or ctx ends), so the
// quorum has a leader again before this one stops.
func (s *Server) handOver(ctx context.Context) {
	v := s.Node.Voter
	if !v.IsLeader() {
		return
	}
	s.Node.Controller.Deactivate()
	if err := v.TransferLeadership(); err != nil {
		s.log.Warn("leadership transfer failed; stopping anyway", "error", err)
		return
	}
	for {
		if _, id := v.LeaderID(); id != "" && id != v.ID() {
			s.mu.Lock()
			s.handedTo = id
			s.mu.Unlock()
			s.log.Info("leadership handed over", "to", id)
			return
		}
		select {
		case <-ctx.Done():
			s.log.Warn("no new leader seen before the stop deadline")
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// HandedOverTo returns the voter id leadership was handed to by Stop, or
// "" if this node did not lead (or no successor was seen).
func (s *Server) HandedOverTo() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handedTo
}

// Close stops the node at once, with no controlled shutdown and no
// leadership handover: what a crash looks like to the other nodes, less
// the lost writes.
func (s *Server) Close() error {
	s.stopOnce.Do(func() { s.abort() })
	return s.stopErr
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q is not a number from 0 to 65535", p)
	}
	return host, port, nil
}

// Cfg returns the configuration the node runs with.
func (s *Server) Cfg() Config { return s.cfg }
