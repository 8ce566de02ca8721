package kafkawire

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Conn describes the connection a request came on.
type Conn struct {
	Remote   net.Addr
	ClientID string
	// Version of the request being handled.
	Version int16
}

// Handler serves decoded requests. It returns the response to send, or an
// error to close the connection (for a request that cannot be answered).
type Handler interface {
	Handle(ctx context.Context, c *Conn, req kmsg.Request) (kmsg.Response, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, c *Conn, req kmsg.Request) (kmsg.Response, error)

// Handle implements Handler.
func (f HandlerFunc) Handle(ctx context.Context, c *Conn, req kmsg.Request) (kmsg.Response, error) {
	return f(ctx, c, req)
}

// Config configures a Server. Zero values take the defaults.
type Config struct {
	Handler Handler
	Logger  hclog.Logger
	// APIs maps each served API key to the highest version served; the
	// lowest is always 0 and the highest never above what kmsg knows.
	// ApiVersions (key 18) is always served.
	APIs map[int16]int16
	// MaxFrameBytes bounds a request frame. Default 100 MiB, Kafka's
	// socket.request.max.bytes.
	MaxFrameBytes int32
	// IdleTimeout closes a connection with no request for this long.
	// Default 10 minutes, Kafka's connections.max.idle.ms.
	IdleTimeout time.Duration
	// ReadTimeout bounds reading the rest of a frame once it started, so
	// a client that sends half a frame and stalls is dropped. Default 30 s.
	ReadTimeout time.Duration
	// MaxConns bounds open connections; more are closed at accept.
	// Default 10000.
	MaxConns int
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
	s := &Server{cfg: cfg, log: cfg.Logger, ln: ln, conns: map[net.Conn]struct{}{}, apis: map[int16]int16{}}
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
			s.log.Warn("connection limit reached: closing new connection", "remote", c.RemoteAddr().String(), "max_conns", s.cfg.MaxConns)
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
	r := bufio.NewReaderSize(c, 64<<10)
	w := bufio.NewWriterSize(c, 64<<10)
	log := s.log.With("remote", c.RemoteAddr().String())
	for {
		frame, err := s.readFrame(c, r)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				log.Info("closing connection", "reason", err)
			}
			return
		}
		resp, err := s.handleFrame(c, frame)
		if err != nil {
			log.Warn("closing connection after a bad request", "reason", err)
			return
		}
		if _, err := w.Write(resp); err != nil {
			return
		}
		if err := w.Flush(); err != nil {
			return
		}
	}
}

func (s *Server) readFrame(c net.Conn, r *bufio.Reader) ([]byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
	var size [4]byte
	if _, err := io.ReadFull(r, size[:1]); err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return nil, fmt.Errorf("idle for %v", s.cfg.IdleTimeout)
		}
		return nil, err
	}
	_ = c.SetReadDeadline(time.Now().Add(s.cfg.ReadTimeout))
	if _, err := io.ReadFull(r, size[1:]); err != nil {
		return nil, stalled(err, s.cfg.ReadTimeout)
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 8 || n > s.cfg.MaxFrameBytes {
		return nil, fmt.Errorf("frame of %d bytes is outside 8..%d (max frame bytes)", n, s.cfg.MaxFrameBytes)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(r, frame); err != nil {
		return nil, stalled(err, s.cfg.ReadTimeout)
	}
	return frame, nil
}

func stalled(err error, d time.Duration) error {
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return fmt.Errorf("frame not complete within the %v read timeout", d)
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

// skipTags skips a tagged-field section (header v2).
func skipTags(b []byte) ([]byte, error) {
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

func (s *Server) handleFrame(c net.Conn, frame []byte) ([]byte, error) {
	h, body, err := parseHeader(frame)
	if err != nil {
		return nil, err
	}
	maxV, served := s.apis[h.key]
	if !served {
		return nil, fmt.Errorf("API key %d is not served here", h.key)
	}
	if h.version < 0 || h.version > maxV {
		if h.key == apiVersionsKey {
			return s.unsupportedAPIVersions(h), nil
		}
		return nil, fmt.Errorf("API key %d version %d is not served (0..%d)", h.key, h.version, maxV)
	}
	req := kmsg.RequestForKey(h.key)
	req.SetVersion(h.version)
	if req.IsFlexible() {
		if body, err = skipTags(body); err != nil {
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
		resp, err = s.cfg.Handler.Handle(s.ctx, &Conn{Remote: c.RemoteAddr(), ClientID: h.clientID, Version: h.version}, req)
		if err != nil {
			return nil, fmt.Errorf("%s v%d: %w", kmsg.NameForKey(h.key), h.version, err)
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
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: 0, MaxVersion: s.apis[k]})
	}
	return out
}

func (s *Server) apiVersions(*kmsg.ApiVersionsRequest) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ApiKeys = s.versionList()
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
