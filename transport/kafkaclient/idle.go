package kafkaclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// ErrUnsolicited is the error of WaitIdle when the peer sent bytes that
// no request asked for.
var ErrUnsolicited = errors.New("peer sent data no request asked for")

// WaitIdle watches a connection between requests: it blocks until the
// peer closes or resets the connection, or sends something unasked, and
// returns the error that says so (the connection is then broken), or
// until ctx ends, when it returns ctx's error and the connection stays
// usable. A request waits for it to return: cancel ctx first.
//
// It is how a client that keeps a connection to a server it seldom
// talks to learns at once that the server's process is gone: the
// kernel of a host whose process died closes its sockets, which reaches
// an idle reader as EOF or a reset (see PeerGone).
func (c *Conn) WaitIdle(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return fmt.Errorf("%w: %w", ErrBroken, c.broken)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	_ = c.nc.SetReadDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetReadDeadline(time.Unix(1, 0)) })
	_, err := c.r.Peek(1)
	stop()
	var ne net.Error
	if ctx.Err() != nil && errors.As(err, &ne) && ne.Timeout() {
		// Interrupted by ctx, not by the peer: the connection is as it
		// was. The next request sets its own deadline.
		_ = c.nc.SetReadDeadline(time.Time{})
		return ctx.Err()
	}
	if err == nil {
		err = ErrUnsolicited
	}
	c.broken = err
	_ = c.nc.Close()
	return err
}

// PeerGone reports whether err says the peer closed or reset the
// connection (EOF, ECONNRESET, EPIPE) rather than that it timed out, was
// refused, or failed otherwise.
func PeerGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Refused reports whether err is a connection refused by the peer's host
// (ECONNREFUSED: nothing listens on the port), and nothing else: not a
// timeout, a DNS error or a failed TLS handshake.
func Refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
