package raftnet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

// TLSStreamConfig configures a mutually authenticated raft stream layer.
type TLSStreamConfig struct {
	// BindAddr and Advertise are as for NewTCPStreamLayer: outgoing
	// connections leave from BindAddr's IP.
	BindAddr, Advertise string
	// Certs is this voter's TLS material; reloading it changes what new
	// connections use.
	Certs *tlsconfig.Reloader
	// Peers decides which certificates may take part in raft, on accept
	// and on dial alike; normally tlsconfig.Voters(the configured voter
	// ids). Required.
	Peers tlsconfig.PeerCheck
	// HandshakeTimeout bounds an inbound handshake. Default 10 s.
	HandshakeTimeout time.Duration
	// MaxHandshakes bounds inbound handshakes in progress; a connection
	// beyond it is closed at once, with a log line. Default 64.
	MaxHandshakes int
	Logger        hclog.Logger
}

// NewTLSStreamLayer listens on cfg.BindAddr and dials peers over TLS. Both
// sides present their certificate and verify the other's against the CA
// bundle, and a peer is accepted or dialled only if its certificate names
// an identity cfg.Peers accepts (a configured voter): a process with a
// certificate of another CA, or one naming another node, fails the
// handshake and never reaches raft. Inbound handshakes complete before
// Accept returns, in their own goroutines and under HandshakeTimeout, so
// a peer that connects and stalls holds neither the accept loop nor a
// raft goroutine.
func NewTLSStreamLayer(cfg TLSStreamConfig) (*StreamLayer, error) {
	if cfg.Certs == nil {
		return nil, errors.New("transport: a TLS stream layer needs certificates")
	}
	if cfg.Peers == nil {
		return nil, errors.New("transport: a TLS stream layer needs a peer check (the configured voters)")
	}
	bind, err := net.ResolveTCPAddr("tcp", cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("transport: bind address %q: %w", cfg.BindAddr, err)
	}
	tcp, err := net.ListenTCP("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("transport: listen on %s: %w", cfg.BindAddr, err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	ln := NewHandshakeListener(tcp, cfg.Certs.ServerConfig(cfg.Peers), HandshakeOptions{
		Timeout: cfg.HandshakeTimeout, MaxPending: cfg.MaxHandshakes, Logger: logger.Named("raft-tls"), What: "raft",
	})
	s, err := NewStreamLayer(ln, cfg.Advertise, TLSDialer(bind.IP, cfg.Certs.ClientConfig("", cfg.Peers)))
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	return s, nil
}

// TLSDialer dials TCP from bindIP (see TCPDialer) and completes a TLS
// handshake with cfg before returning, within the context's deadline.
func TLSDialer(bindIP net.IP, cfg *tls.Config) Dialer {
	nd := &net.Dialer{}
	if bindIP != nil && !bindIP.IsUnspecified() {
		nd.LocalAddr = &net.TCPAddr{IP: bindIP}
	}
	d := &tls.Dialer{NetDialer: nd, Config: cfg}
	return func(ctx context.Context, address string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", address)
	}
}

// HandshakeOptions configures NewHandshakeListener.
type HandshakeOptions struct {
	// Timeout bounds one handshake. Default 10 s.
	Timeout time.Duration
	// MaxPending bounds handshakes in progress. Default 64.
	MaxPending int
	Logger     hclog.Logger
	// What names the listener in log lines ("raft").
	What string
}

// NewHandshakeListener wraps ln so that Accept returns only *tls.Conn
// whose server-side handshake with cfg has completed. Each handshake runs
// in its own goroutine under Timeout; at most MaxPending run at once and
// a connection beyond that is closed. A failed handshake (wrong CA, a
// peer check that refuses, a stall) is logged with the remote address and
// the reason, and the connection closed.
func NewHandshakeListener(ln net.Listener, cfg *tls.Config, opts HandshakeOptions) net.Listener {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = 64
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.What == "" {
		opts.What = "tls"
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &handshakeListener{inner: ln, cfg: cfg, opts: opts, ctx: ctx, cancel: cancel,
		sem: make(chan struct{}, opts.MaxPending), ready: make(chan net.Conn)}
	l.wg.Add(1)
	go l.loop()
	return l
}

type handshakeListener struct {
	inner  net.Listener
	cfg    *tls.Config
	opts   HandshakeOptions
	ctx    context.Context
	cancel context.CancelFunc
	sem    chan struct{}
	ready  chan net.Conn
	wg     sync.WaitGroup

	mu        sync.Mutex
	err       error // why the accept loop ended
	closeOnce sync.Once
}

func (l *handshakeListener) loop() {
	defer l.wg.Done()
	for {
		c, err := l.inner.Accept()
		if err != nil {
			if l.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if !errors.Is(err, net.ErrClosed) {
				// EMFILE and the like: back off, do not spin.
				l.opts.Logger.Warn("accept failed", "listener", l.opts.What, "error", err)
				select {
				case <-time.After(10 * time.Millisecond):
					continue
				case <-l.ctx.Done():
					return
				}
			}
			l.mu.Lock()
			l.err = err
			l.mu.Unlock()
			l.cancel()
			return
		}
		select {
		case l.sem <- struct{}{}:
		default:
			l.opts.Logger.Warn("TLS handshake limit reached: closing new connection", "listener", l.opts.What,
				"remote", c.RemoteAddr().String(), "max_handshakes", l.opts.MaxPending)
			_ = c.Close()
			continue
		}
		l.wg.Add(1)
		go l.handshake(c)
	}
}

func (l *handshakeListener) handshake(c net.Conn) {
	defer l.wg.Done()
	defer func() { <-l.sem }()
	tc := tls.Server(c, l.cfg)
	ctx, cancel := context.WithTimeout(l.ctx, l.opts.Timeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		if l.ctx.Err() == nil {
			reason := err.Error()
			if errors.Is(err, context.DeadlineExceeded) {
				reason = fmt.Sprintf("handshake not complete within the %v handshake timeout", l.opts.Timeout)
			}
			l.opts.Logger.Warn("refused connection: TLS handshake failed", append([]any{"listener", l.opts.What,
				"remote", c.RemoteAddr().String(), "reason", reason}, tlsconfig.UnverifiedPeer(err)...)...)
		}
		_ = tc.Close()
		return
	}
	select {
	case l.ready <- tc:
	case <-l.ctx.Done():
		_ = tc.Close()
	}
}

// Accept returns the next connection whose handshake completed.
func (l *handshakeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.ctx.Done():
		l.mu.Lock()
		err := l.err
		l.mu.Unlock()
		if err == nil {
			err = net.ErrClosed
		}
		return nil, err
	}
}

// Close stops accepting, abandons handshakes in progress and waits for
// their goroutines.
func (l *handshakeListener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		l.cancel()
		err = l.inner.Close()
		l.wg.Wait()
	})
	return err
}

func (l *handshakeListener) Addr() net.Addr { return l.inner.Addr() }
