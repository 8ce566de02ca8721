package raftnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

const (
	// raftMaxPool is how many idle connections the raft transport keeps per
	// peer. Three covers the heartbeat, the replication stream and an
	// occasional vote or snapshot without re-dialing.
	raftMaxPool = 3

	// raftIOTimeout bounds every raft RPC write/read. It must exceed the
	// time to ship a snapshot chunk over a slow link, not just a heartbeat.
	raftIOTimeout = 10 * time.Second

	// raftMaxRPCsInFlight = 1 turns off pipelined replication. In
	// hashicorp/raft v1.8.0 the pipeline can wedge: when a follower answers
	// Success=false or a higher term, the response decoder exits while the
	// send loop may still issue one more request, which then waits forever
	// on an unbuffered channel nobody reads. Replication to that follower
	// stops for good (heartbeats continue, so no election heals it) and
	// raft.Shutdown never returns because it waits for that goroutine.
	// Synchronous AppendEntries with large batches (MaxAppendEntries) costs
	// little on a LAN; raft's own documentation says pipelining gains little
	// in combination with batching.
	raftMaxRPCsInFlight = 1
)

// Dialer opens an outgoing connection to a raft peer. The context carries
// the deadline raft asked for. A plain TCP dialer comes from TCPDialer; a TLS
// one can wrap the same net.Dialer in a tls.Dialer and keep this signature.
type Dialer func(ctx context.Context, address string) (net.Conn, error)

// StreamLayer is a raft.StreamLayer built from any listener and any dialer,
// so the transport above it does not care whether the bytes are plain TCP or
// TLS. It advertises a fixed, routable address to peers and, when closed,
// drops every connection it accepted or dialed: a stopped voter then looks
// to its peers like a crashed one (connection reset) instead of leaving half
// open sockets that only fail at the next write.
type StreamLayer struct {
	ln        net.Listener
	dial      Dialer
	advertise net.Addr

	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
	// nodeID, dirID and log are this node's identity (SetIdentity).
	nodeID, dirID string
	log           hclog.Logger
	warned        map[string]time.Time // refusals logged at WARN, by kind and directory
}

var _ raft.StreamLayer = (*StreamLayer)(nil)

// NewStreamLayer wraps ln and dial. advertise is the address peers use to
// reach this node and that raft stores in its configuration; it must be a
// concrete TCP address (no unspecified IP, no port 0), because a peer that
// dials 0.0.0.0 reaches itself. An empty advertise means the listener's own
// address, which is only valid when ln is bound to a specific IP.
func NewStreamLayer(ln net.Listener, advertise string, dial Dialer) (*StreamLayer, error) {
	if ln == nil || dial == nil {
		return nil, errors.New("transport: stream layer needs a listener and a dialer")
	}
	if advertise == "" {
		advertise = ln.Addr().String()
	}
	addr, err := net.ResolveTCPAddr("tcp", advertise)
	if err != nil {
		return nil, fmt.Errorf("transport: advertise address %q: %w", advertise, err)
	}
	if addr.IP == nil || addr.IP.IsUnspecified() {
		return nil, fmt.Errorf("transport: advertise address %q is not routable; set an explicit advertise address", advertise)
	}
	if addr.Port == 0 {
		return nil, fmt.Errorf("transport: advertise address %q has no port", advertise)
	}
	return &StreamLayer{
		ln:        ln,
		dial:      dial,
		advertise: addr,
		conns:     make(map[*trackedConn]struct{}),
	}, nil
}

// NewTCPStreamLayer listens on bindAddr and dials peers from the same IP.
// Binding the outgoing side matters when several nodes share a host on
// different loopback addresses (127.0.0.1, .2, .3): each node's traffic then
// carries its own source IP, so a firewall rule or a partition injected for
// one IP affects that node in both directions. A bindAddr with port 0 gets a
// free port, and with an empty advertise the actual port is advertised.
func NewTCPStreamLayer(bindAddr, advertise string) (*StreamLayer, error) {
	bind, err := net.ResolveTCPAddr("tcp", bindAddr)
	if err != nil {
		return nil, fmt.Errorf("transport: bind address %q: %w", bindAddr, err)
	}
	ln, err := net.ListenTCP("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("transport: listen on %s: %w", bindAddr, err)
	}
	s, err := NewStreamLayer(ln, advertise, TCPDialer(bind.IP))
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	return s, nil
}

// TCPDialer dials plain TCP with the local address set to bindIP, so the
// connection leaves from the node's own address. A nil or unspecified bindIP
// lets the kernel choose the source address.
func TCPDialer(bindIP net.IP) Dialer {
	d := &net.Dialer{}
	if bindIP != nil && !bindIP.IsUnspecified() {
		d.LocalAddr = &net.TCPAddr{IP: bindIP}
	}
	return func(ctx context.Context, address string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", address)
	}
}

// Accept waits for the next inbound raft connection.
func (s *StreamLayer) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	return s.track(c, true)
}

// Dial connects to a peer's address (a PeerAddress) within timeout (no
// limit when timeout is not positive). When the address names a
// directory, the peer must confirm it is that directory before the
// connection is returned (ErrDirectoryMismatch otherwise).
func (s *StreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	addr, err := ParsePeerAddress(string(address))
	if err != nil {
		return nil, err
	}
	c, err := s.dial(ctx, addr.HostPort)
	if err != nil {
		return nil, err
	}
	if !addr.Legacy() {
		deadline, _ := ctx.Deadline()
		if err := s.confirmDirectory(c, addr, deadline); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return s.track(c, false)
}

// Addr is the advertised address, not the bind address: raft puts it in the
// cluster configuration where peers will dial it.
func (s *StreamLayer) Addr() net.Addr { return s.advertise }

// Close stops listening and closes every connection still open. It is safe
// to call more than once.
func (s *StreamLayer) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()

	err := s.ln.Close()
	for c := range conns {
		_ = c.Conn.Close()
	}
	return err
}

func (s *StreamLayer) track(c net.Conn, inbound bool) (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	tc := &trackedConn{Conn: c, owner: s, inbound: inbound}
	s.conns[tc] = struct{}{}
	return tc, nil
}

func (s *StreamLayer) forget(c *trackedConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// trackedConn removes itself from its stream layer when closed, so the set
// of open connections does not grow with every reconnect. An inbound one
// answers a directory handshake on its first read (see Read).
type trackedConn struct {
	net.Conn
	owner   *StreamLayer
	once    sync.Once
	inbound bool

	checkOnce sync.Once
	checkErr  error
	pending   []byte
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.owner.forget(c) })
	return err
}

// NewRaftTransport builds raft's network transport over stream, with
// pipelined replication disabled (see raftMaxRPCsInFlight). Closing the
// transport closes the stream layer.
func NewRaftTransport(stream *StreamLayer, logger hclog.Logger) *raft.NetworkTransport {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:          stream,
		MaxPool:         raftMaxPool,
		MaxRPCsInFlight: raftMaxRPCsInFlight,
		Timeout:         raftIOTimeout,
		Logger:          logger,
	})
}
