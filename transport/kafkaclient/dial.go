package kafkaclient

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	kgosasl "github.com/twmb/franz-go/pkg/sasl"
)

// DialFunc opens the connection a Conn runs on: a TLS dialler, a dialler
// bound to a source address. It must return once the connection is ready
// for requests (a TLS dialler completes its handshake first).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Options configures Dial. Zero values take the defaults.
type Options struct {
	// ClientID goes in the header of every request that does not name its
	// own (see RequestAs).
	ClientID string
	// Dial opens the connection: plain TCP when nil; a tlsconfig.Reloader's
	// Dialer or TLSDialer for TLS.
	Dial DialFunc
	// DialTimeout bounds the connect, the TLS handshake, the ApiVersions
	// exchange and the SASL login when the context has no earlier
	// deadline. Default 5 s.
	DialTimeout time.Duration
	// MaxResponseBytes bounds a response frame. Default 256 MiB.
	MaxResponseBytes int32
	// SoftwareName and SoftwareVersion are sent in ApiVersions v3+.
	// Defaults "ctrlquorum" and "1".
	SoftwareName, SoftwareVersion string
	// SASL, if set, authenticates the connection after the ApiVersions
	// exchange (franz-go's scram and plain packages provide mechanisms).
	SASL kgosasl.Mechanism
	// SASLIfOffered logs in with SASL only when the peer's ApiVersions
	// offers SaslHandshake: for a client of listeners some of which
	// require a login and some not (a controller's connections to
	// brokers).
	SASLIfOffered bool
	// NoApiVersions skips the ApiVersions exchange: every request goes at
	// the version it carries, Version and Pick find nothing, and a SASL
	// login uses SaslHandshake v1 and SaslAuthenticate v1. For a peer
	// known to run the same listener (one voter forwarding to another).
	NoApiVersions bool
}

func (o *Options) defaults() {
	if o.Dial == nil {
		var d net.Dialer
		o.Dial = d.DialContext
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = 256 << 20
	}
	if o.SoftwareName == "" {
		o.SoftwareName = "ctrlquorum"
	}
	if o.SoftwareVersion == "" {
		o.SoftwareVersion = "1"
	}
}

// Dial connects to addr with opts.Dial, negotiates API versions and logs
// in with opts.SASL. DialTimeout bounds all of it.
func Dial(ctx context.Context, addr string, opts Options) (*Conn, error) {
	opts.defaults()
	ctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	nc, err := opts.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := &Conn{opts: opts, addr: addr, nc: nc, r: bufio.NewReaderSize(nc, 64<<10), w: bufio.NewWriterSize(nc, 64<<10)}
	if !opts.NoApiVersions {
		if err := c.negotiate(ctx); err != nil {
			_ = nc.Close()
			return nil, fmt.Errorf("api versions with %s: %w", addr, err)
		}
	}
	if err := c.authenticate(ctx); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	return c, nil
}

// TLSDialer dials TLS with cfg over nd (a plain net.Dialer when nil). A
// cfg without ServerName verifies the host of the address dialled. With
// a tlsconfig.Reloader, use its Dialer instead: its configs check the
// name they were made for.
func TLSDialer(nd *net.Dialer, cfg *tls.Config) DialFunc {
	if nd == nil {
		nd = &net.Dialer{}
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c := cfg
		if cfg != nil && cfg.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				c = cfg.Clone()
				c.ServerName = host
			}
		}
		d := &tls.Dialer{NetDialer: nd, Config: c}
		return d.DialContext(ctx, network, addr)
	}
}
