// Package kafkaclient is the Kafka-protocol client of every connection a
// node or the command line opens: the controller's sender to brokers, a
// broker agent's connection to the active controller, one voter
// forwarding to another, and the admin commands.
//
// A Conn is one connection: TLS through its DialFunc, framing, request
// headers v1/v2, ApiVersions negotiation at dial time (each request at
// the highest version both sides know, see Pick), a SASL login (SCRAM or
// PLAIN, through franz-go's sasl mechanisms), and requests and responses
// as github.com/twmb/franz-go/pkg/kmsg types with correlation ids checked.
// A Conn sends one request at a time and waits for its response, which is
// what control traffic needs: the controller's requests to a broker must
// arrive in order, and a broker agent's requests to the controller are
// few. The context bounds each request. Any error — a timeout, a
// cancelled context, a frame that does not parse — breaks the
// connection: the caller closes it and dials again.
//
// A Controller finds a cluster's active controller through bootstrap
// addresses and keeps a connection to it (see Controller).
package kafkaclient

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// VersionRange is the versions a peer serves for one API key.
type VersionRange struct{ Min, Max int16 }

// Conn is a client connection to one Kafka-protocol server.
type Conn struct {
	opts Options
	addr string

	mu       sync.Mutex
	nc       net.Conn
	r        *bufio.Reader
	w        *bufio.Writer
	corr     int32
	broken   error
	versions map[int16]VersionRange
	buf      []byte
}

// maxKeptBuffer bounds the encoding buffer a Conn keeps between requests.
const maxKeptBuffer = 64 << 20

// ErrBroken is wrapped by every error of a request on a connection that an
// earlier error broke.
var ErrBroken = errors.New("connection broken by an earlier error")

// Addr is the address the connection was dialled to.
func (c *Conn) Addr() string { return c.addr }

// Close closes the connection.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken == nil {
		c.broken = net.ErrClosed
	}
	return c.nc.Close()
}

// Versions returns what the peer serves, per API key.
func (c *Conn) Versions() map[int16]VersionRange {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int16]VersionRange, len(c.versions))
	for k, v := range c.versions {
		out[k] = v
	}
	return out
}

// Version returns the highest version of key that both the peer and kmsg
// know, or false when there is none.
func (c *Conn) Version(key int16) (int16, bool) {
	req := kmsg.RequestForKey(key)
	if req == nil {
		return 0, false
	}
	c.mu.Lock()
	vr, ok := c.versions[key]
	c.mu.Unlock()
	if !ok {
		return 0, false
	}
	v := min(vr.Max, req.MaxVersion())
	if v < vr.Min || v < 0 {
		return 0, false
	}
	return v, true
}

// Pick sets req's version to the highest both sides know, and fails when
// that is below minVersion.
func (c *Conn) Pick(req kmsg.Request, minVersion int16) error {
	v, ok := c.Version(req.Key())
	if !ok || v < minVersion {
		return fmt.Errorf("%s: %s serves no version we can use (need at least v%d)", kmsg.NameForKey(req.Key()), c.addr, minVersion)
	}
	req.SetVersion(v)
	return nil
}

// Request sends req at the version it carries and returns the response.
func (c *Conn) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return c.RequestAs(ctx, c.opts.ClientID, req)
}

// RequestAs is Request with a client id for this request only.
func (c *Conn) RequestAs(ctx context.Context, clientID string, req kmsg.Request) (kmsg.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return nil, fmt.Errorf("%w: %w", ErrBroken, c.broken)
	}
	resp, err := c.roundTrip(ctx, clientID, req, req.ResponseKind())
	if err != nil {
		c.broken = err
		_ = abort(c.nc)
		return nil, err
	}
	return resp, nil
}

// abort closes nc discarding whatever it has not delivered. A request
// cut short (its deadline passed, the peer unreachable) may still sit in
// the socket's send queue; closed the usual way, the kernel keeps sending
// it, and a network partition that heals delivers it after its sender
// gave up on it and perhaps retried: a late DeleteTopics then deletes the
// topic created again since. With SO_LINGER 0 the close resets the
// connection and drops the queue.
func abort(nc net.Conn) error {
	raw := nc
	if tc, ok := nc.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	if tcp, ok := raw.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	return nc.Close()
}

// roundTrip writes one request and reads its response into resp. The
// caller holds mu.
func (c *Conn) roundTrip(ctx context.Context, clientID string, req kmsg.Request, resp kmsg.Response) (kmsg.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.nc.SetDeadline(dl)
	} else {
		_ = c.nc.SetDeadline(time.Time{})
	}
	// A context cancelled mid-request interrupts the blocked read/write.
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	c.corr++
	corr := c.corr
	// The encoding buffer is reused: control requests to a broker are
	// large and similar in size, and regrowing it each time costs more
	// than encoding.
	frame := AppendRequest(c.buf[:0], corr, clientID, req)
	if cap(frame) <= maxKeptBuffer {
		c.buf = frame
	} else {
		c.buf = nil
	}
	if _, err := c.w.Write(frame); err != nil {
		return nil, c.ctxErr(ctx, err)
	}
	if err := c.w.Flush(); err != nil {
		return nil, c.ctxErr(ctx, err)
	}
	body, err := c.readFrame()
	if err != nil {
		return nil, c.ctxErr(ctx, err)
	}
	if len(body) < 4 {
		return nil, errors.New("response shorter than its header")
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		return nil, fmt.Errorf("response correlation id %d, want %d", got, corr)
	}
	body = body[4:]
	// ApiVersions answers with header v0 whatever its version, so that a
	// client that asked too high a version can still read the error.
	if req.IsFlexible() && req.Key() != 18 {
		if body, err = kafkawire.SkipTags(body); err != nil {
			return nil, err
		}
	}
	resp.SetVersion(req.GetVersion())
	if err := SafeRead(resp, body); err != nil {
		return nil, fmt.Errorf("decode %s v%d response: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp, nil
}

func (c *Conn) ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return err
}

func (c *Conn) readFrame() ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > c.opts.MaxResponseBytes {
		return nil, fmt.Errorf("response frame of %d bytes is outside 4..%d", n, c.opts.MaxResponseBytes)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c.r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// negotiate asks for ApiVersions v3 and falls back to the version the peer
// names when it answers UNSUPPORTED_VERSION.
func (c *Conn) negotiate(ctx context.Context) error {
	version := int16(3)
	for attempt := 0; attempt < 2; attempt++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(version)
		req.ClientSoftwareName = c.opts.SoftwareName
		req.ClientSoftwareVersion = c.opts.SoftwareVersion
		resp, err := c.apiVersions(ctx, req)
		if err != nil {
			return err
		}
		if resp.ErrorCode == kerr.UnsupportedVersion.Code {
			next := int16(-1)
			for _, k := range resp.ApiKeys {
				if k.ApiKey == 18 {
					next = min(k.MaxVersion, version-1)
				}
			}
			if next < 0 {
				return errors.New("peer serves no ApiVersions version we speak")
			}
			version = next
			continue
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		c.versions = make(map[int16]VersionRange, len(resp.ApiKeys))
		for _, k := range resp.ApiKeys {
			c.versions[k.ApiKey] = VersionRange{Min: k.MinVersion, Max: k.MaxVersion}
		}
		return nil
	}
	return errors.New("ApiVersions negotiation did not converge")
}

// apiVersions sends one ApiVersions request. An UNSUPPORTED_VERSION answer
// comes as a v0 body whatever version was asked, so the error code (the
// first field of every version) is read first.
func (c *Conn) apiVersions(ctx context.Context, req *kmsg.ApiVersionsRequest) (*kmsg.ApiVersionsResponse, error) {
	raw := &rawResponse{}
	if _, err := c.roundTrip(ctx, c.opts.ClientID, req, raw); err != nil {
		return nil, err
	}
	if len(raw.body) < 2 {
		return nil, errors.New("ApiVersions response truncated")
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(req.Version)
	if int16(binary.BigEndian.Uint16(raw.body)) == kerr.UnsupportedVersion.Code {
		resp.SetVersion(0)
	}
	if err := SafeRead(resp, raw.body); err != nil {
		return nil, fmt.Errorf("decode ApiVersions response: %w", err)
	}
	return resp, nil
}

// rawResponse keeps a response body undecoded.
type rawResponse struct {
	kmsg.ApiVersionsResponse
	body []byte
}

func (r *rawResponse) ReadFrom(b []byte) error {
	r.body = append([]byte(nil), b...)
	return nil
}

// AppendRequest appends a whole request frame — size, header (v2 for a
// flexible request, v1 otherwise) and body — to dst.
func AppendRequest(dst []byte, corr int32, clientID string, req kmsg.Request) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.Key()))
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.GetVersion()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(clientID)))
	dst = append(dst, clientID...)
	if req.IsFlexible() {
		dst = append(dst, 0) // no header tags
	}
	dst = req.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// SafeRead decodes a message, turning a decoder panic on hostile input
// into an error.
func SafeRead(m interface{ ReadFrom([]byte) error }, b []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed message: %v", r)
		}
	}()
	return m.ReadFrom(b)
}
