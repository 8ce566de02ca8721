// Package listener is a controller voter's Kafka-protocol listener: the
// endpoint admin clients (kgo, kadm, Kafka's own tools) and the brokers'
// agents talk to. It decodes nothing itself — transport/kafkawire does the
// framing and version negotiation — and decides nothing itself: every
// request maps onto a method of the node's controller, or, for reads, onto
// the voter's committed image.
//
// Brokers serve clients; voters serve brokers. A voter's Metadata answer
// is a broker's: the live, unfenced data brokers, with a live broker (the
// lowest id) as ControllerId, so that a client bootstrapped at a voter
// sends its broker requests (FindCoordinator, InitProducerId, broker
// configs) and its admin requests to brokers, which forward what only the
// controller answers. Only while no live broker exists (a new, empty
// cluster, or every broker fenced) does Metadata list the voters instead,
// with the active one as controller, so that admin tools can still
// bootstrap an empty cluster; Kafka's controllers serve no Metadata to
// clients at all. Operators reach the voters themselves through
// DescribeCluster with endpoint type 2 (KIP-919's --bootstrap-controller),
// which names the voters with the active one as controller;
// transport/kafkaclient finds the active controller that way. Endpoint
// type 1 lists the data brokers with a live broker as controller.
//
// Node ids. The listener reports each voter under its voter (raft) id, and
// a deployment picks voter ids disjoint from broker ids (1001–1003 in dev,
// brokers from 1), so that the two kinds of answer never name one id for
// two nodes. A broker registering with a voter's id is refused; if one is
// found in the image anyway, it is left out of the broker list and a
// warning is logged. Partition leaders and replicas are always data broker
// ids.
//
// Standby voters. Only the active controller changes anything. Every other
// voter answers each mutation with NOT_CONTROLLER (retriable) and names the
// active one as ControllerID in DescribeCluster of the controllers (and
// in Metadata while no live broker exists), listing it with its address
// from Config.Peers, so a client that follows ControllerID reroutes by
// itself. The config mutations (IncrementalAlterConfigs, AlterConfigs) are
// the exception: clients send them to any broker and do not retry them on
// NOT_CONTROLLER, so a standby forwards them to the active controller in
// an Envelope and relays its answer (Config.NoForward turns that off).
//
// Brokers forward the admin requests only the controller answers in an
// Envelope with the client's principal (KIP-590, see envelope.go).
package listener

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
	"github.com/ctrlquorum/ctrlquorum/transport/sasl"
)

// PeerListener is where clients reach one voter's listener.
type PeerListener struct {
	NodeID int32
	Host   string
	Port   int32
}

func (p PeerListener) addr() string {
	return net.JoinHostPort(p.Host, strconv.Itoa(int(p.Port)))
}

// Config configures a Listener.
type Config struct {
	// Addr is the host:port to listen on. Ignored when Listener is set.
	Addr string
	// Listener, if set, is served instead of listening on Addr: a TLS
	// listener, or one opened early so that its port is known before the
	// peers' configs are written.
	Listener net.Listener
	// Advertise is the host:port clients are told to use for this voter
	// when Peers does not list it. Empty means the bound address.
	Advertise string
	// Node is the controller voter this listener serves.
	Node *controller.Node
	// Peers lists every voter's client listener, this one's included.
	// Metadata and DescribeCluster list them as brokers so that clients
	// can reach whichever is active.
	Peers  []PeerListener
	Logger hclog.Logger
	// ClusterID is reported in Metadata and DescribeCluster, and a broker
	// registering with another one is refused (INCONSISTENT_CLUSTER_ID).
	// Empty accepts any.
	ClusterID string
	// BrokerListener names the data brokers' endpoint that clients are
	// given. Default "PLAINTEXT".
	BrokerListener string
	// ControllerListener is the listener name DescribeQuorum reports for
	// the voters. Default "CONTROLLER".
	ControllerListener string
	// RequestTimeout bounds a request that carries no timeout of its own
	// (or a non-positive one). Default 30 s.
	RequestTimeout time.Duration
	// PeerTimeout bounds the probe DescribeQuorum sends each follower to
	// learn its log end. Default 2 s.
	PeerTimeout time.Duration
	// NoForward makes a standby answer config mutations with
	// NOT_CONTROLLER instead of forwarding them to the active voter.
	NoForward bool
	// ForwardTimeout bounds how long a config mutation waits for an active
	// controller to take it (an election in progress) and for its answer.
	// It stays below kgo's default 10 s request overhead, so the client
	// hears NOT_CONTROLLER rather than timing out. Default 8 s.
	ForwardTimeout time.Duration
	// Wire adjusts the wire server's configuration (limits, timeouts).
	Wire func(*kafkawire.Config)
	// Dial opens connections to the other voters' listeners (forwarded
	// config changes, DescribeQuorum probes). Default plain TCP; with TLS
	// listeners, a TLS dialler such as tlsconfig.Reloader.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Security configures client authentication (SASL) and authorization
	// (see security.go). The zero value is dev mode: no SASL, and no
	// authorization until a rule is added to the log.
	Security SecurityConfig
}

// Listener serves one controller voter over the Kafka protocol.
type Listener struct {
	cfg   Config
	log   hclog.Logger
	node  *controller.Node
	self  int32
	peers map[int32]PeerListener
	// peerIDs are the voter ids in ascending order.
	peerIDs []int32
	srv     *kafkawire.Server

	warnMu sync.Mutex
	warned map[string]bool

	// kept are the connections of the read-index round trips.
	kept keptConns

	superUsers map[string]bool
	secStats   securityCounters
	// stop is cancelled by Close; bootstrapDone closes when
	// bootstrapUsers has returned.
	stop          context.Context
	cancelStop    context.CancelFunc
	bootstrapDone chan struct{}
}

// served lists the API keys the listener answers. ApiVersions (18) is
// answered by kafkawire itself.
var served = []int16{
	3,  // Metadata
	17, // SaslHandshake
	19, // CreateTopics
	20, // DeleteTopics
	29, // DescribeAcls
	30, // CreateAcls
	31, // DeleteAcls
	32, // DescribeConfigs
	33, // AlterConfigs
	37, // CreatePartitions
	43, // ElectLeaders
	44, // IncrementalAlterConfigs
	45, // AlterPartitionReassignments
	36, // SaslAuthenticate
	46, // ListPartitionReassignments
	50, // DescribeUserScramCredentials
	51, // AlterUserScramCredentials
	55, // DescribeQuorum
	56, // AlterPartition
	57, // UpdateFeatures
	58, // Envelope
	60, // DescribeCluster
	62, // BrokerRegistration
	63, // BrokerHeartbeat
	64, // UnregisterBroker
	80, // AddRaftVoter
	81, // RemoveRaftVoter
}

// APIs returns every API key the listener serves with the highest version,
// which is always the highest kmsg knows; the lowest is 0 except for the
// keys MinVersions names.
func APIs() map[int16]int16 {
	out := make(map[int16]int16, len(served)+1)
	for _, k := range append([]int16{18}, served...) {
		out[k] = kmsg.RequestForKey(k).MaxVersion()
	}
	return out
}

// MinVersions returns the keys served from a version above 0: none. (Kafka
// serves SaslHandshake 0–1, and librdkafka logs in only where v0 is in the
// range; v0's raw SASL tokens are served too.)
func MinVersions() map[int16]int16 { return map[int16]int16{} }

// New starts serving. The node must be started; the listener does not stop
// it on Close. A Config.Listener passed in belongs to the Listener from
// then on, and is closed if New fails.
func New(cfg Config) (*Listener, error) {
	l, err := newListener(cfg)
	if err != nil && cfg.Listener != nil {
		_ = cfg.Listener.Close()
	}
	return l, err
}

func newListener(cfg Config) (*Listener, error) {
	if cfg.Node == nil {
		return nil, errors.New("listener: Node is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.BrokerListener == "" {
		cfg.BrokerListener = "PLAINTEXT"
	}
	if cfg.ControllerListener == "" {
		cfg.ControllerListener = "CONTROLLER"
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.ForwardTimeout <= 0 {
		cfg.ForwardTimeout = 8 * time.Second
	}
	if cfg.PeerTimeout <= 0 {
		cfg.PeerTimeout = 2 * time.Second
	}
	self, err := strconv.ParseInt(cfg.Node.Voter.ID(), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("listener: voter id %q is not a node id: %w", cfg.Node.Voter.ID(), err)
	}
	l := &Listener{cfg: cfg, log: cfg.Logger.Named("listener"), node: cfg.Node, self: int32(self),
		peers: map[int32]PeerListener{}, warned: map[string]bool{}, superUsers: map[string]bool{},
		bootstrapDone: make(chan struct{})}
	l.stop, l.cancelStop = context.WithCancel(context.Background())
	for _, m := range cfg.Security.SASLMechanisms {
		if !sasl.IsScram(m) && m != sasl.Plain {
			return nil, fmt.Errorf("listener: SASL mechanism %q is not one of %v", m, sasl.Mechanisms())
		}
	}
	for _, u := range cfg.Security.BootstrapUsers {
		if u.Name == "" || u.Password == "" || !sasl.IsScram(u.Mechanism) {
			return nil, fmt.Errorf("listener: bootstrap user %q: want a name, a password and a SCRAM mechanism (not %q)", u.Name, u.Mechanism)
		}
	}
	for _, u := range cfg.Security.SuperUsers {
		if typ, name, ok := strings.Cut(u, ":"); !ok || typ == "" || name == "" {
			return nil, fmt.Errorf("listener: super user %q is not of the form User:name", u)
		}
		l.superUsers[u] = true
	}
	for _, p := range cfg.Peers {
		if _, dup := l.peers[p.NodeID]; dup {
			return nil, fmt.Errorf("listener: voter %d is listed twice in Peers", p.NodeID)
		}
		if p.NodeID < 0 || p.Host == "" || p.Port <= 0 || p.Port > 65535 {
			return nil, fmt.Errorf("listener: peer %+v: want a non-negative id, a host and a port", p)
		}
		l.peers[p.NodeID] = p
	}

	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("listener: %w", err)
		}
	}
	if _, ok := l.peers[l.self]; !ok {
		adv := cfg.Advertise
		if adv == "" {
			adv = ln.Addr().String()
		}
		host, port, err := net.SplitHostPort(adv)
		pn, perr := strconv.ParseInt(port, 10, 32)
		if err != nil || perr != nil || host == "" || pn <= 0 || pn > 65535 {
			if cfg.Listener == nil {
				_ = ln.Close()
			}
			return nil, fmt.Errorf("listener: advertised address %q: want host:port with a concrete host", adv)
		}
		l.peers[l.self] = PeerListener{NodeID: l.self, Host: host, Port: int32(pn)}
	}
	for id := range l.peers {
		l.peerIDs = append(l.peerIDs, id)
	}
	sort.Slice(l.peerIDs, func(i, j int) bool { return l.peerIDs[i] < l.peerIDs[j] })

	wc := kafkawire.Config{Handler: l, Logger: l.log.Named("wire"), APIs: APIs()}
	if cfg.Wire != nil {
		cfg.Wire(&wc)
		wc.Handler, wc.APIs = l, APIs()
	}
	wc.MinVersions = MinVersions()
	wc.Features = l.apiVersionsFeatures
	if l.saslEnabled() {
		wc.NeedsAuthentication = needsLogin
	}
	l.srv = kafkawire.Serve(ln, wc)
	l.node.SetReadIndexSource(l.askReadIndex)
	if len(cfg.Security.BootstrapUsers) > 0 {
		go l.bootstrapUsers()
	} else {
		close(l.bootstrapDone)
	}
	l.log.Info("serving the Kafka protocol", "addr", ln.Addr().String(), "node", l.self, "voters", l.peerIDs,
		"sasl", cfg.Security.SASLMechanisms, "super_users", cfg.Security.SuperUsers, "authorize_always", cfg.Security.Authorize)
	return l, nil
}

// Addr is the address the listener is bound to.
func (l *Listener) Addr() net.Addr { return l.srv.Addr() }

// NodeID is the voter id the listener reports itself under.
func (l *Listener) NodeID() int32 { return l.self }

// Close stops accepting, closes every connection and waits for them.
func (l *Listener) Close() error {
	l.cancelStop()
	l.kept.close()
	<-l.bootstrapDone
	return l.srv.Close()
}

// Handle implements kafkawire.Handler. A handler that panics closes the
// connection instead of the process: one malformed corner must not take
// the controller down with it.
func (l *Listener) Handle(ctx context.Context, c *kafkawire.Conn, req kmsg.Request) (resp kmsg.Response, err error) {
	defer func() {
		if r := recover(); r != nil {
			l.log.Error("request handler panicked: closing the connection", "api", kmsg.NameForKey(req.Key()),
				"version", req.GetVersion(), "panic", r, "stack", string(debug.Stack()))
			resp, err = nil, fmt.Errorf("internal error handling %s", kmsg.NameForKey(req.Key()))
		}
	}()
	return l.handle(ctx, c, req)
}

func (l *Listener) handle(ctx context.Context, c *kafkawire.Conn, req kmsg.Request) (kmsg.Response, error) {
	a := l.access(c)
	if l.saslEnabled() && !preAuthAPI(req.Key()) && !a.id.authenticated {
		l.secStats.unauthenticated.Add(1)
		return nil, fmt.Errorf("%s before SASL authentication", kmsg.NameForKey(req.Key()))
	}
	if denied := l.authorizeBroker(c, req); denied != nil {
		denied.SetVersion(req.GetVersion())
		return denied, nil
	}
	refused, serve, post := l.authorize(a, req)
	if refused != nil {
		refused.SetVersion(req.GetVersion())
		return refused, nil
	}
	var resp kmsg.Response
	if isRead(req.Key()) && !forwarded(c) {
		resp = l.freshRead(ctx, c, serve)
	}
	if resp == nil {
		var err error
		if resp, err = l.dispatch(ctx, c, serve); err != nil {
			return nil, err
		}
	}
	if millis, ok := writeTimeout(serve); ok {
		l.awaitBrokers(ctx, serve, millis)
	}
	if post != nil {
		post(resp)
	}
	resp.SetVersion(req.GetVersion())
	return resp, nil
}

func (l *Listener) dispatch(ctx context.Context, c *kafkawire.Conn, req kmsg.Request) (kmsg.Response, error) {
	var resp kmsg.Response
	switch r := req.(type) {
	case *kmsg.EnvelopeRequest:
		resp = l.envelope(ctx, c, r)
	case *kmsg.SASLHandshakeRequest:
		resp = l.saslHandshake(c, r)
	case *kmsg.SASLAuthenticateRequest:
		resp = l.saslAuthenticate(c, r)
	case *kmsg.CreateACLsRequest:
		resp = l.createAcls(ctx, c, r)
	case *kmsg.DescribeACLsRequest:
		resp = l.describeAcls(r)
	case *kmsg.DeleteACLsRequest:
		resp = l.deleteAcls(ctx, c, r)
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		resp = l.describeScram(r)
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		resp = l.alterScram(ctx, c, r)
	case *kmsg.MetadataRequest:
		resp = l.metadata(c, r)
	case *kmsg.CreateTopicsRequest:
		resp = l.createTopics(ctx, r)
	case *kmsg.DeleteTopicsRequest:
		resp = l.deleteTopics(ctx, r)
	case *kmsg.CreatePartitionsRequest:
		resp = l.createPartitions(ctx, r)
	case *kmsg.ElectLeadersRequest:
		resp = l.electLeaders(ctx, r)
	case *kmsg.AlterPartitionAssignmentsRequest:
		resp = l.alterReassignments(ctx, r)
	case *kmsg.ListPartitionReassignmentsRequest:
		resp = l.listReassignments(r)
	case *kmsg.DescribeClusterRequest:
		resp = l.describeCluster(r)
	case *kmsg.DescribeQuorumRequest:
		resp = l.describeQuorum(ctx, c, r)
	case *kmsg.AddRaftVoterRequest:
		resp = l.addRaftVoter(ctx, c, r)
	case *kmsg.RemoveRaftVoterRequest:
		resp = l.removeRaftVoter(ctx, c, r)
	case *kmsg.DescribeConfigsRequest:
		resp = l.describeConfigs(r)
	case *kmsg.IncrementalAlterConfigsRequest:
		resp = l.incrementalAlterConfigs(ctx, c, r)
	case *kmsg.AlterConfigsRequest:
		resp = l.alterConfigs(ctx, c, r)
	case *kmsg.BrokerRegistrationRequest:
		resp = l.brokerRegistration(ctx, r)
	case *kmsg.BrokerHeartbeatRequest:
		resp = l.brokerHeartbeat(ctx, r)
	case *kmsg.AlterPartitionRequest:
		resp = l.alterPartition(ctx, r)
	case *kmsg.UnregisterBrokerRequest:
		resp = l.unregisterBroker(ctx, r)
	case *kmsg.UpdateFeaturesRequest:
		resp = l.updateFeatures(ctx, r)
	default:
		return nil, fmt.Errorf("%s is not served", kmsg.NameForKey(req.Key()))
	}
	return resp, nil
}

// requestContext bounds a request by the timeout it carries, or by
// RequestTimeout when it carries none.
func (l *Listener) requestContext(ctx context.Context, timeoutMillis int32) (context.Context, context.CancelFunc) {
	d := l.cfg.RequestTimeout
	if timeoutMillis > 0 {
		d = time.Duration(timeoutMillis) * time.Millisecond
	}
	return context.WithTimeout(ctx, d)
}

// warnCollision logs, once per id, a data broker whose id is a voter's.
func (l *Listener) warnCollision(id int32) {
	if l.firstWarning("collision", id) {
		l.log.Warn("a registered broker has a controller voter's node id: clients will only see the voter under it; give brokers ids disjoint from the voters'", "id", id)
	}
}

// firstWarning reports whether this is the first warning of its kind
// about id: conditions seen on every request are logged once.
func (l *Listener) firstWarning(kind string, id int32) bool {
	key := kind + "/" + strconv.Itoa(int(id))
	l.warnMu.Lock()
	defer l.warnMu.Unlock()
	if l.warned[key] {
		return false
	}
	l.warned[key] = true
	return true
}
