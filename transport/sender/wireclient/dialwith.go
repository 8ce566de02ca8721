package wireclient

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"
)

// DialFunc opens the connection a Conn runs on: a TLS dialler, a dialler
// bound to a source address.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// DialWith is Dial over a connection opened by dial, which must return
// once the connection is ready for requests (a TLS dialler completes its
// handshake first). DialTimeout bounds dial plus the ApiVersions exchange.
func DialWith(ctx context.Context, addr string, opts Options, dial DialFunc) (*Conn, error) {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 5 * time.Second
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = 256 << 20
	}
	if opts.SoftwareName == "" {
		opts.SoftwareName = "ctrlquorum"
	}
	if opts.SoftwareVersion == "" {
		opts.SoftwareVersion = "1"
	}
	ctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := newConn(addr, opts, nc)
	if err := c.negotiate(ctx); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("api versions with %s: %w", addr, err)
	}
	if err := c.authenticate(ctx); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	return c, nil
}

// DialTLS is Dial over TLS with cfg; the handshake counts towards
// DialTimeout. A cfg without ServerName gets the host of addr. With a
// tlsconfig.Reloader, use DialWith and its Dialer instead: its configs
// check the name they were made for.
func DialTLS(ctx context.Context, addr string, opts Options, cfg *tls.Config) (*Conn, error) {
	d := &tls.Dialer{Config: cfg}
	if cfg != nil && cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			c := cfg.Clone()
			c.ServerName = host
			d.Config = c
		}
	}
	return DialWith(ctx, addr, opts, d.DialContext)
}

func newConn(addr string, opts Options, nc net.Conn) *Conn {
	return &Conn{opts: opts, addr: addr, nc: nc, r: bufio.NewReaderSize(nc, 64<<10), w: bufio.NewWriterSize(nc, 64<<10)}
}
