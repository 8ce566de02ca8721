package kafkawire

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

// Conn describes the connection a request came on.
type Conn struct {
	Remote   net.Addr
	ClientID string
	// Version of the request being handled.
	Version int16
	// TLS is the state of the connection's completed TLS handshake (the
	// client's verified certificates among it), nil on a plain connection.
	TLS *tls.ConnectionState
	// Session is the connection's own state, the same for every request
	// on it: what the handler learned earlier (who authenticated, say).
	Session *Session
	// Gone closes once the server has stopped reading the connection:
	// the client closed or reset it, or the server is closing it. Nobody
	// will read an answer then, so a handler that waits on others for
	// long (a forwarded request) gives up rather than act for a client
	// that has already given up, and maybe retried elsewhere.
	Gone <-chan struct{}
}

// Session is state a handler keeps for one connection across its
// requests. Requests on a connection are handled one at a time, so the
// handler needs no lock to use it.
type Session struct {
	// Value is the handler's own.
	Value any
	// closeAfter asks the server to close the connection once the
	// current response is written.
	closeAfter string
	// authenticated is set by the handler and read by the connection's
	// reader, which runs beside it.
	authenticated atomic.Bool
	// saslStep, while set, takes the connection's frames as raw SASL
	// tokens (see ReadSASLTokens); rawTokens tells the reader so.
	saslStep  func(token []byte) ([]byte, bool, error)
	rawTokens atomic.Bool
}

// ReadSASLTokens switches the connection, from the next frame on, to the
// framing that follows a SaslHandshake v0: each frame is a size-prefixed
// SASL token with no request header, handed to step, whose answer goes
// back as a size-prefixed token (empty when step returns none, as Kafka
// sends it). When step reports done the connection is authenticated and
// goes back to Kafka requests; when it fails the connection is closed,
// as v0 has no error response. The client sends its first token only
// after reading the handshake's answer, so the switch is in place before
// the reader meets it.
func (s *Session) ReadSASLTokens(step func(token []byte) (out []byte, done bool, err error)) {
	s.saslStep = step
	s.rawTokens.Store(true)
}

// saslToken answers one raw SASL token.
func (s *Session) saslToken(token []byte) ([]byte, error) {
	out, done, err := s.saslStep(token)
	if err != nil {
		return nil, err
	}
	if done {
		s.saslStep = nil
		s.rawTokens.Store(false)
		s.authenticated.Store(true)
	}
	return AppendSASLToken(make([]byte, 0, 4+len(out)), out), nil
}

// AppendSASLToken appends token as the v0 framing sends it: its size as a
// 4-byte big-endian integer, then its bytes.
func AppendSASLToken(dst, token []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(token)))
	return append(dst, token...)
}

// CloseAfterResponse makes the server close the connection after sending
// the response to the current request, logging reason: Kafka's answer to
// a failed authentication is an error response, then a closed connection.
func (s *Session) CloseAfterResponse(reason string) { s.closeAfter = reason }

// SetAuthenticated tells the server that the connection has
// authenticated (a SASL exchange completed): frames read from then on are
// bounded by MaxFrameBytes, no longer by MaxUnauthenticatedFrameBytes.
func (s *Session) SetAuthenticated() { s.authenticated.Store(true) }

// Handler serves decoded requests. It returns the response to send, or an
// error to close the connection (for a request that cannot be answered),
// or neither for a request that gets no response (Produce with acks=0).
type Handler interface {
	Handle(ctx context.Context, c *Conn, req kmsg.Request) (kmsg.Response, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, c *Conn, req kmsg.Request) (kmsg.Response, error)

// Handle implements Handler.
func (f HandlerFunc) Handle(ctx context.Context, c *Conn, req kmsg.Request) (kmsg.Response, error) {
	return f(ctx, c, req)
}

// Config configures a Server. Zero values take the defaults. Every limit
// is logged, naming the limit and its value, when a connection hits it:
// idle timeouts and connections held back (MaxInFlight, MaxQueuedBytes)
// at Info, as the client is not misbehaving, the others at Warn.
type Config struct {
	Handler Handler
	Logger  hclog.Logger
	// APIs maps each served API key to the highest version served; the
	// lowest is always 0 and the highest never above what kmsg knows.
	// ApiVersions (key 18) is always served.
	APIs map[int16]int16
	// MinVersions raises the lowest version served for some keys (0
	// otherwise).
	MinVersions map[int16]int16
	// MaxFrameBytes bounds a request frame. Default 100 MiB, Kafka's
	// socket.request.max.bytes.
	MaxFrameBytes int32
	// MaxQueuedBytes bounds the bytes of request frames held across all
	// connections: frames being read and frames read and not yet handled.
	// Default 256 MiB, Kafka's queued.max.request.bytes; never below
	// MaxFrameBytes (raised to it, so that any frame can be read). A
	// connection whose frame would go past it is not read until requests
	// give their bytes back as they are handled, and TCP pushes back on
	// its client; the wait does not count against its ReadTimeout, and
	// after IdleTimeout of waiting the connection is closed. So that
	// frames partly read cannot wait on each other for ever, one frame
	// at a time may go past the bound while no frame read is waiting to
	// be handled: the bytes held stay within twice the bound. Each
	// connection's 64 KiB read buffer is not counted.
	MaxQueuedBytes int64
	// MaxUnauthenticatedFrameBytes bounds a request frame on a connection
	// that has yet to authenticate (see NeedsAuthentication), so that a
	// client that proved nothing cannot make the server read and hold
	// large frames. Default 512 KiB, Kafka's
	// sasl.server.max.receive.size; never above MaxFrameBytes.
	MaxUnauthenticatedFrameBytes int32
	// NeedsAuthentication tells whether a new connection, once its TLS
	// handshake is done (state is nil on a plain connection), has yet to
	// authenticate; it would say no for a client certificate that
	// already identifies the client, say. Such a connection's frames are
	// bounded by MaxUnauthenticatedFrameBytes until the handler calls
	// Session.SetAuthenticated; with MaxInFlight above 1, so are frames
	// read ahead of the request that authenticates it. Nil: every
	// connection counts as authenticated from the start, as on a
	// listener that requires no login.
	NeedsAuthentication func(state *tls.ConnectionState) bool
	// IdleTimeout closes a connection with no request for this long.
	// Default 10 minutes, Kafka's connections.max.idle.ms.
	IdleTimeout time.Duration
	// ReadTimeout bounds reading the rest of a frame once it started, so
	// a client that sends half a frame and stalls is dropped. On a TLS
	// listener it also bounds the handshake. Default 30 s.
	ReadTimeout time.Duration
	// MaxConns bounds open connections; more are closed at accept.
	// Default 10000.
	MaxConns int
	// MaxInFlight bounds the requests read from one connection and not
	// yet answered. Requests are handled one at a time and answered in
	// order either way; 1 (the default, as a Kafka broker does) reads the
	// next frame only once the previous one is answered, N > 1 reads up to
	// N-1 frames ahead of the one being handled. At the cap the server
	// stops reading from the connection, and TCP pushes back on the
	// client. A connection holds at most MaxInFlight × MaxFrameBytes of
	// request frames.
	MaxInFlight int
	// WriteTimeout bounds writing one response, so a client that stops
	// reading its answers does not hold its connection forever. Default
	// 30 s.
	WriteTimeout time.Duration
	// Features, if set, fills the feature fields of an ApiVersions
	// answer (SupportedFeatures, FinalizedFeatures and their epoch, which
	// versions 3 and later carry): what the node reads and the levels the
	// cluster runs at.
	Features func(resp *kmsg.ApiVersionsResponse)
}

// Server is a Kafka-protocol listener.
type Server struct {
	cfg  Config
	log  hclog.Logger
	ln   net.Listener
	apis map[int16]int16

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc

	stats limitCounters
	queue *byteQueue
}

// Listen starts serving on addr.
func Listen(addr string, cfg Config) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return Serve(ln, cfg), nil
}

// Serve serves on an existing listener (a TLS one, say).
func Serve(ln net.Listener, cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = 100 << 20
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Minute
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 30 * time.Second
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 10000
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 1
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.MaxUnauthenticatedFrameBytes <= 0 {
		cfg.MaxUnauthenticatedFrameBytes = 512 << 10
	}
	cfg.MaxUnauthenticatedFrameBytes = min(cfg.MaxUnauthenticatedFrameBytes, cfg.MaxFrameBytes)
	if cfg.MaxQueuedBytes <= 0 {
		cfg.MaxQueuedBytes = 256 << 20
	}
	if cfg.MaxQueuedBytes < int64(cfg.MaxFrameBytes) {
		cfg.Logger.Warn("max queued bytes raised to the max frame size, so that any frame can be read",
			"max_queued_bytes", cfg.MaxQueuedBytes, "max_frame_bytes", cfg.MaxFrameBytes)
		cfg.MaxQueuedBytes = int64(cfg.MaxFrameBytes)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, ln: ln, conns: map[net.Conn]struct{}{}, apis: map[int16]int16{},
		queue: newByteQueue(cfg.MaxQueuedBytes)}
	for k, v := range cfg.APIs {
		if req := kmsg.RequestForKey(k); req != nil {
			s.apis[k] = min(v, req.MaxVersion())
		}
	}
	s.apis[apiVersionsKey] = (&kmsg.ApiVersionsRequest{}).MaxVersion()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.accept()
	return s
}

const apiVersionsKey = 18

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops accepting, closes every connection and waits for them.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.ln.Close()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return
			}
			s.log.Warn("accept failed", "error", err)
			time.Sleep(10 * time.Millisecond) // a transient accept error (EMFILE) must not spin
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = c.Close()
			return
		}
		if len(s.conns) >= s.cfg.MaxConns {
			s.mu.Unlock()
			// Log before counting: whoever sees the count can read the line.
			s.log.Warn("connection limit reached: closing new connection", "remote", c.RemoteAddr().String(), "max_conns", s.cfg.MaxConns)
			s.stats.connsRefused.Add(1)
			_ = c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

func (s *Server) serveConn(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = c.Close()
	}()
	log := s.log.With("remote", c.RemoteAddr().String())
	var state *tls.ConnectionState
	if tc, ok := c.(*tls.Conn); ok {
		cs, err := s.handshake(tc)
		if err != nil {
			var le *limitError
			if errors.As(err, &le) {
				log.Warn("closing connection: "+le.msg, le.kv...)
			} else if s.ctx.Err() == nil {
				log.Warn("closing connection: TLS handshake failed", append([]any{"reason", err}, tlsconfig.UnverifiedPeer(err)...)...)
			}
			s.stats.handshakeFailures.Add(1)
			return
		}
		state = cs
		if len(cs.PeerCertificates) > 0 {
			log = log.With("tls_subject", cs.PeerCertificates[0].Subject.String())
		}
	}

	session := &Session{}
	session.authenticated.Store(s.cfg.NeedsAuthentication == nil || !s.cfg.NeedsAuthentication(state))

	// One goroutine reads frames, this one answers them in order. slots
	// holds one token per frame read and not yet answered.
	frames := make(chan []byte, s.cfg.MaxInFlight)
	slots := make(chan struct{}, s.cfg.MaxInFlight)
	done := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		s.readLoop(c, session, frames, slots, done, log)
	}()
	defer func() {
		close(done)
		_ = c.Close() // unblocks a read in progress
		<-readerDone
		// Frames read and never to be handled give their bytes back.
		for frame := range frames {
			s.queue.release(int64(len(frame)))
		}
	}()

	w := bufio.NewWriterSize(c, 64<<10)
	for frame := range frames {
		var resp []byte
		var err error
		if session.saslStep != nil {
			resp, err = session.saslToken(frame)
			s.queue.release(int64(len(frame)))
			if err != nil {
				log.Info("closing connection: SASL authentication failed", "reason", err)
				return
			}
		} else {
			resp, err = s.handleFrame(c.RemoteAddr(), state, session, readerDone, frame)
			s.queue.release(int64(len(frame)))
			if err != nil {
				log.Warn("closing connection after a bad request", "reason", err)
				return
			}
		}
		if resp == nil {
			<-slots
			continue
		}
		_ = c.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		_, err = w.Write(resp)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				log.Warn("closing connection: response not written within the write timeout (the client is not reading)",
					"write_timeout", s.cfg.WriteTimeout, "response_bytes", len(resp))
				s.stats.writeTimeouts.Add(1)
			}
			return
		}
		if session.closeAfter != "" {
			log.Info("closing connection", "reason", session.closeAfter)
			return
		}
		<-slots
	}
}

// handshake completes a TLS handshake within the read timeout.
func (s *Server) handshake(tc *tls.Conn) (*tls.ConnectionState, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.ReadTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, &limitError{msg: "TLS handshake not complete within the read timeout", kv: []any{"read_timeout", s.cfg.ReadTimeout}}
		}
		return nil, err
	}
	cs := tc.ConnectionState()
	return &cs, nil
}

// readLoop reads frames into frames, taking a slot for each before it
// starts reading it, until the connection fails, a limit is hit, or done
// closes. It closes frames when it stops, after which the frames already
// read are still answered.
func (s *Server) readLoop(c net.Conn, session *Session, frames chan<- []byte, slots chan struct{}, done <-chan struct{}, log hclog.Logger) {
	defer close(frames)
	r := bufio.NewReaderSize(c, 64<<10)
	rd := &connReader{s: s, c: c, r: r, session: session, log: log, done: done}
	busy := func() bool { return len(slots) > 0 }
	paused := false
	for {
		var err error
		select {
		case slots <- struct{}{}:
		default:
			// Every slot is taken. Wait for the client's next bytes, which
			// only go into the read buffer (or for the client to close the
			// connection, which ends the reader and tells the handlers
			// through Conn.Gone), and say once per connection that it is
			// being held back (at DEBUG: every pipelining client gets here
			// on every connection, which is normal back-pressure;
			// InFlightPauses counts it); then wait for a slot.
			if err = s.awaitData(c, r, busy); err == nil && !paused {
				paused = true
				log.Debug("in-flight request limit reached: not reading more requests from this connection until a response is sent", "max_in_flight", s.cfg.MaxInFlight)
				s.stats.inFlightPauses.Add(1)
			}
			if err == nil {
				select {
				case slots <- struct{}{}:
				case <-done:
					return
				}
			}
		}
		var frame []byte
		if err == nil {
			// The slot just taken is this frame's: others are in flight
			// when more than one is held.
			frame, err = rd.readFrame(func() bool { return len(slots) > 1 })
		}
		if err != nil {
			var le *limitError
			switch {
			case errors.As(err, &le):
				le.count(&s.stats)
				if le.idle {
					log.Info("closing connection: "+le.msg, le.kv...)
				} else {
					log.Warn("closing connection: "+le.msg, le.kv...)
				}
			case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
			default:
				select {
				case <-done:
				default:
					log.Info("closing connection", "reason", err)
				}
			}
			return
		}
		frames <- frame
	}
}

// limitError is a connection closed by one of the Server's limits.
type limitError struct {
	msg  string
	kv   []any
	idle bool
	stat func(*limitCounters)
}

func (e *limitError) Error() string { return e.msg }

func (e *limitError) count(c *limitCounters) {
	if e.stat != nil {
		e.stat(c)
	}
}

// awaitData waits until the client has sent at least one more byte,
// within the idle timeout, which restarts while busy reports requests of
// this connection still being answered.
func (s *Server) awaitData(c net.Conn, r *bufio.Reader, busy func() bool) error {
	for {
		_ = c.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		_, err := r.Peek(1)
		if err == nil {
			return nil
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			if busy() {
				continue
			}
			return &limitError{msg: "idle timeout", kv: []any{"idle_timeout", s.cfg.IdleTimeout}, idle: true,
				stat: func(c *limitCounters) { c.idleTimeouts.Add(1) }}
		}
		return err
	}
}

// connReader is the state of one connection's reader.
type connReader struct {
	s       *Server
	c       net.Conn
	r       *bufio.Reader
	session *Session
	log     hclog.Logger
	done    <-chan struct{}
	// deadline bounds reading the frame in progress.
	deadline time.Time
	// queuePaused tells that MaxQueuedBytes held the connection back
	// before (logged once per connection).
	queuePaused bool
}

// readFrame reads one frame. The wait for its first byte is bounded by
// the idle timeout (see awaitData), the rest of the frame by the read
// timeout. The size is checked before anything is allocated for the
// frame, and the body is read as it arrives (see readBody).
func (rd *connReader) readFrame(busy func() bool) ([]byte, error) {
	s, c, r := rd.s, rd.c, rd.r
	if err := s.awaitData(c, r, busy); err != nil {
		return nil, err
	}
	rd.deadline = time.Now().Add(s.cfg.ReadTimeout)
	_ = c.SetReadDeadline(rd.deadline)
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, s.stalled(err)
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n > s.cfg.MaxFrameBytes || n < 0 {
		return nil, &limitError{msg: "frame exceeds the maximum frame size", kv: []any{"frame_bytes", uint32(n), "max_frame_bytes", s.cfg.MaxFrameBytes},
			stat: func(c *limitCounters) { c.framesTooLarge.Add(1) }}
	}
	if n > s.cfg.MaxUnauthenticatedFrameBytes && !rd.session.authenticated.Load() {
		return nil, &limitError{msg: "frame exceeds the maximum frame size before authentication",
			kv:   []any{"frame_bytes", n, "max_unauthenticated_frame_bytes", s.cfg.MaxUnauthenticatedFrameBytes},
			stat: func(c *limitCounters) { c.unauthenticatedFramesTooLarge.Add(1) }}
	}
	if n < 8 && !rd.session.rawTokens.Load() {
		return nil, fmt.Errorf("frame of %d bytes is too short for a request header", n)
	}
	return rd.readBody(int(n))
}

// firstChunk is the most allocated for a frame's body before any of the
// body has been read: frames up to this size get their buffer at once.
const firstChunk = 32 << 10

// bodyGrowth is how much a frame's buffer grows each time it fills. A
// larger factor copies less of a large frame (each growth copies what was
// read so far: about n/(bodyGrowth-1) in all, where doubling would copy
// about n), a smaller one bounds more tightly what a stalled client makes
// the server hold for what it sent.
const bodyGrowth = 8

// readBody reads a body of n bytes into a buffer that starts at
// firstChunk and grows bodyGrowth times, up to n, only once full. The
// announced size alone costs nothing: a client that announces a large
// frame and stalls holds at most bodyGrowth times what it sent, plus
// firstChunk, not what it announced, until the read timeout closes it.
// Each growth takes its bytes from the server's queue (MaxQueuedBytes)
// before it allocates them, waiting while they do not fit.
func (rd *connReader) readBody(n int) ([]byte, error) {
	q := rd.s.queue
	f := &frameBytes{}
	var buf []byte
	got := 0
	for got < n {
		size := min(n, max(firstChunk, bodyGrowth*len(buf)))
		if err := rd.take(f, int64(size-len(buf))); err != nil {
			q.abandon(f)
			return nil, err
		}
		next := make([]byte, size)
		copy(next, buf[:got])
		buf = next
		k, err := io.ReadFull(rd.r, buf[got:])
		got += k
		if err != nil {
			q.abandon(f)
			return nil, rd.s.stalled(err)
		}
	}
	q.complete(f)
	return buf, nil
}

// take gives f n more bytes of the server's queue, waiting, without
// reading from the connection, while they do not fit. The wait ends
// when the connection or the server closes, or after the idle timeout.
func (rd *connReader) take(f *frameBytes, n int64) error {
	s := rd.s
	w := s.queue.take(f, n)
	if w == nil {
		return nil
	}
	if !rd.queuePaused {
		rd.queuePaused = true
		rd.log.Info("queued request bytes limit reached: not reading from this connection until requests are handled",
			"max_queued_bytes", s.cfg.MaxQueuedBytes)
		s.stats.queuedBytesPauses.Add(1)
	}
	start := time.Now()
	idle := time.NewTimer(s.cfg.IdleTimeout)
	defer idle.Stop()
	select {
	case <-w.ready:
	case <-rd.done:
		s.queue.cancel(w)
		return net.ErrClosed
	case <-s.ctx.Done():
		s.queue.cancel(w)
		return net.ErrClosed
	case <-idle.C:
		s.queue.cancel(w)
		return &limitError{msg: "idle timeout while held back by the queued request bytes limit",
			kv: []any{"idle_timeout", s.cfg.IdleTimeout, "max_queued_bytes", s.cfg.MaxQueuedBytes}, idle: true,
			stat: func(c *limitCounters) { c.idleTimeouts.Add(1) }}
	}
	// The client did not stall while the server held it back: the wait
	// does not count against its read timeout.
	rd.deadline = rd.deadline.Add(time.Since(start))
	_ = rd.c.SetReadDeadline(rd.deadline)
	return nil
}

func (s *Server) stalled(err error) error {
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return &limitError{msg: "frame not complete within the read timeout", kv: []any{"read_timeout", s.cfg.ReadTimeout},
			stat: func(c *limitCounters) { c.readTimeouts.Add(1) }}
	}
	return err
}

// header is a parsed request header.
type header struct {
	key, version  int16
	correlationID int32
	clientID      string
}

func parseHeader(frame []byte) (header, []byte, error) {
	var h header
	if len(frame) < 10 {
		return h, nil, errors.New("request header truncated")
	}
	h.key = int16(binary.BigEndian.Uint16(frame[0:]))
	h.version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.correlationID = int32(binary.BigEndian.Uint32(frame[4:]))
	l := int16(binary.BigEndian.Uint16(frame[8:]))
	rest := frame[10:]
	if l >= 0 {
		if int(l) > len(rest) {
			return h, nil, errors.New("client id truncated")
		}
		h.clientID, rest = string(rest[:l]), rest[l:]
	}
	return h, rest, nil
}

// SkipTags skips a tagged-field section (a v2 request or v1 response
// header's).
func SkipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errors.New("bad tagged field count")
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		if _, k = binary.Uvarint(b); k <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, errors.New("bad tagged field size")
		}
		b = b[k+int(size):]
	}
	return b, nil
}

func (s *Server) handleFrame(remote net.Addr, state *tls.ConnectionState, session *Session, gone <-chan struct{}, frame []byte) ([]byte, error) {
	h, body, err := parseHeader(frame)
	if err != nil {
		return nil, err
	}
	maxV, served := s.apis[h.key]
	if !served {
		return nil, fmt.Errorf("API key %d is not served here", h.key)
	}
	if h.version < s.cfg.MinVersions[h.key] || h.version > maxV {
		if h.key == apiVersionsKey {
			return s.unsupportedAPIVersions(h), nil
		}
		return nil, fmt.Errorf("API key %d version %d is not served (%d..%d)", h.key, h.version, s.cfg.MinVersions[h.key], maxV)
	}
	req := kmsg.RequestForKey(h.key)
	req.SetVersion(h.version)
	if req.IsFlexible() {
		if body, err = SkipTags(body); err != nil {
			return nil, err
		}
	}
	if err := safeRead(req, body); err != nil {
		return nil, fmt.Errorf("decode %s v%d: %w", kmsg.NameForKey(h.key), h.version, err)
	}
	var resp kmsg.Response
	if h.key == apiVersionsKey {
		resp = s.apiVersions(req.(*kmsg.ApiVersionsRequest))
	} else {
		resp, err = s.cfg.Handler.Handle(s.ctx, &Conn{Remote: remote, ClientID: h.clientID, Version: h.version, TLS: state, Session: session, Gone: gone}, req)
		if err != nil {
			return nil, fmt.Errorf("%s v%d: %w", kmsg.NameForKey(h.key), h.version, err)
		}
		if resp == nil {
			return nil, nil // a request answered with nothing (Produce with acks=0)
		}
	}
	resp.SetVersion(h.version)
	return encodeResponse(h, resp, req.IsFlexible() && h.key != apiVersionsKey), nil
}

// safeRead decodes a request body, turning a decoder panic on hostile
// input into an error.
func safeRead(req kmsg.Request, body []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed body: %v", r)
		}
	}()
	return req.ReadFrom(body)
}

func encodeResponse(h header, resp kmsg.Response, flexibleHeader bool) []byte {
	out := make([]byte, 8, 256)
	binary.BigEndian.PutUint32(out[4:], uint32(h.correlationID))
	if flexibleHeader {
		out = append(out, 0) // no tagged fields
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out[0:], uint32(len(out)-4))
	return out
}

func (s *Server) versionList() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]int16, 0, len(s.apis))
	for k := range s.apis {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(keys))
	for _, k := range keys {
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: s.cfg.MinVersions[k], MaxVersion: s.apis[k]})
	}
	return out
}

func (s *Server) apiVersions(*kmsg.ApiVersionsRequest) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ApiKeys = s.versionList()
	if s.cfg.Features != nil {
		s.cfg.Features(resp)
	}
	return resp
}

// unsupportedAPIVersions answers an ApiVersions of a version we do not
// serve as the protocol asks: a v0 response with UNSUPPORTED_VERSION and
// the versions served, so the client retries with one of them.
func (s *Server) unsupportedAPIVersions(h header) []byte {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = s.versionList()
	return encodeResponse(h, resp, false)
}
