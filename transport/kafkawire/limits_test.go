package kafkawire

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig/tlstest"
)

func logged(cfg *Config) *testkit.Log {
	sink := &testkit.Log{}
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: sink, Level: hclog.Info})
	return sink
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// apiVersionsFrame is a complete ApiVersions v0 request.
func apiVersionsFrame(corr int32) []byte {
	msg := make([]byte, 14)
	binary.BigEndian.PutUint32(msg[0:], 10)
	binary.BigEndian.PutUint16(msg[4:], 18)
	binary.BigEndian.PutUint16(msg[6:], 0)
	binary.BigEndian.PutUint32(msg[8:], uint32(corr))
	binary.BigEndian.PutUint16(msg[12:], 0xffff)
	return msg
}

// roundTrip sends an ApiVersions request on c and reads its answer.
func roundTrip(c net.Conn, corr int32) error {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(apiVersionsFrame(corr)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return err
	}
	resp := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, resp); err != nil {
		return err
	}
	if got := int32(binary.BigEndian.Uint32(resp)); got != corr {
		return errors.New("correlation id mismatch")
	}
	return nil
}

func dial(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByPeer reads from c until the server closes it, and fails if it
// does not within 10 s (or sends data instead).
func closedByPeer(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 1))
	if err == nil {
		t.Fatalf("%s: got %d bytes instead of a closed connection", what, n)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("%s: the server did not close the connection", what)
	}
}

// TestSlowLorisIsClosedOthersServed: connections that send half a frame
// (within the size prefix, and within the body) and stall are closed
// after the read timeout, each with a log line naming the limit; a client
// that behaves is served meanwhile.
func TestSlowLorisIsClosedOthersServed(t *testing.T) {
	cfg := Config{ReadTimeout: 500 * time.Millisecond}
	logs := logged(&cfg)
	s := metadataServer(t, cfg)

	halfSize := dial(t, s)
	if _, err := halfSize.Write([]byte{0, 0}); err != nil {
		t.Fatal(err)
	}
	halfBody := dial(t, s)
	if _, err := halfBody.Write(apiVersionsFrame(1)[:9]); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	good := dial(t, s)
	for i := range int32(20) {
		if err := roundTrip(good, i); err != nil {
			t.Fatalf("a well-behaved client failed while others stalled: %v", err)
		}
	}
	closedByPeer(t, halfSize, "half a size prefix")
	closedByPeer(t, halfBody, "half a frame")
	if waited := time.Since(start); waited < 400*time.Millisecond {
		t.Fatalf("stalled connections closed after %v, before the 500ms read timeout", waited)
	}
	poll(t, "the read-timeout log lines", func() bool {
		return strings.Count(logs.String(), "closing connection: frame not complete within the read timeout") == 2
	})
	if !logs.Has("frame not complete within the read timeout", "read_timeout=500ms") {
		t.Fatalf("log line does not name the limit:\n%s", logs)
	}
	if got := s.Limits().ReadTimeouts; got != 2 {
		t.Fatalf("ReadTimeouts = %d, want 2", got)
	}
	// The good client is still served.
	if err := roundTrip(good, 99); err != nil {
		t.Fatal(err)
	}
}

func TestIdleConnectionIsClosed(t *testing.T) {
	cfg := Config{IdleTimeout: 300 * time.Millisecond}
	logs := logged(&cfg)
	s := metadataServer(t, cfg)
	c := dial(t, s)
	if err := roundTrip(c, 1); err != nil {
		t.Fatal(err)
	}
	closedByPeer(t, c, "idle connection")
	poll(t, "the idle log line", func() bool { return logs.Has("closing connection: idle timeout", "idle_timeout=300ms") })
	if got := s.Limits().IdleTimeouts; got != 1 {
		t.Fatalf("IdleTimeouts = %d", got)
	}
}

// TestOversizedFrameIsNeverAllocated: a frame announcing 1 GiB (and one
// with a negative size) against a 1 MiB limit closes the connection at
// once, without the server allocating anything near the announced size.
func TestOversizedFrameIsNeverAllocated(t *testing.T) {
	cfg := Config{MaxFrameBytes: 1 << 20}
	logs := logged(&cfg)
	s := metadataServer(t, cfg)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, size := range []uint32{1 << 30, 0x80000010} {
		c := dial(t, s)
		msg := binary.BigEndian.AppendUint32(nil, size)
		msg = append(msg, apiVersionsFrame(1)[4:]...)
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		closedByPeer(t, c, "oversized frame")
	}
	poll(t, "both oversized frames counted", func() bool { return s.Limits().FramesTooLarge == 2 })
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Fatalf("the server allocated %d MiB for frames it refused", grew>>20)
	}
	if !logs.Has("closing connection: frame exceeds the maximum frame size", "frame_bytes=1073741824", "max_frame_bytes=1048576") {
		t.Fatalf("no log line naming the limit:\n%s", logs)
	}
	if err := roundTrip(dial(t, s), 5); err != nil {
		t.Fatalf("server stopped serving: %v", err)
	}
}

// TestStalledLargeFramesHoldWhatTheySent: connections that each announce
// a frame of nearly MaxFrameBytes (the default 100 MiB) and send a few
// bytes of it make the server hold about what they sent, not what they
// announced; a client that behaves is answered meanwhile, and the stalled
// connections are closed at the read timeout.
func TestStalledLargeFramesHoldWhatTheySent(t *testing.T) {
	const stalled = 8
	const announced = 100<<20 - 16
	cfg := Config{ReadTimeout: 3 * time.Second}
	logs := logged(&cfg)
	ln := &countingListener{Listener: mustListen(t)}
	s := metadataServerOn(t, ln, cfg)

	good := dial(t, s)
	if err := roundTrip(good, 0); err != nil {
		t.Fatal(err)
	}
	// Each connection is served once first, so that what the server
	// keeps for any connection (its goroutines, its read and write
	// buffers) is in the baseline.
	conns := make([]net.Conn, stalled)
	for i := range conns {
		conns[i] = dial(t, s)
		if err := roundTrip(conns[i], int32(i)); err != nil {
			t.Fatal(err)
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := ln.read.Load()
	for _, c := range conns {
		msg := binary.BigEndian.AppendUint32(nil, announced)
		msg = append(msg, apiVersionsFrame(1)[4:10]...)
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, "the server to read what the stalled clients sent", func() bool {
		return ln.read.Load() >= start+stalled*10
	})
	// A frame's bytes are taken from the queue just before its buffer is
	// allocated.
	poll(t, "a first buffer for each stalled frame", func() bool {
		reading, _, _ := queueState(s)
		return reading == stalled*firstChunk
	})
	for i := range int32(10) {
		if err := roundTrip(good, 100+i); err != nil {
			t.Fatalf("a well-behaved client failed while others stalled: %v", err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n := s.Limits().ReadTimeouts; n != 0 {
		t.Fatalf("%d stalled connections were closed before the heap was measured", n)
	}
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap grew by %d KiB for %d stalled frames announcing %d MiB each", grew>>10, stalled, announced>>20)
	if limit := int64(stalled*64<<10 + 4<<20); grew > limit {
		t.Fatalf("heap grew by %d KiB with %d frames stalled, more than %d KiB", grew>>10, stalled, limit>>10)
	}

	for _, c := range conns {
		closedByPeer(t, c, "stalled large frame")
	}
	poll(t, "the read timeouts counted", func() bool { return s.Limits().ReadTimeouts == stalled })
	if !logs.Has("closing connection: frame not complete within the read timeout", "read_timeout=3s") {
		t.Fatalf("no log line naming the limit:\n%s", logs)
	}
	if err := roundTrip(good, 200); err != nil {
		t.Fatal(err)
	}
}

// TestConnectionCap: with MaxConns 2, a third connection is closed at
// accept and logged; once one of the two goes, a new one is served.
func TestConnectionCap(t *testing.T) {
	cfg := Config{MaxConns: 2}
	logs := logged(&cfg)
	s := metadataServer(t, cfg)
	a, b := dial(t, s), dial(t, s)
	for i, c := range []net.Conn{a, b} {
		if err := roundTrip(c, int32(i)); err != nil {
			t.Fatal(err)
		}
	}
	third := dial(t, s)
	closedByPeer(t, third, "connection over the cap")
	if got := s.Limits().ConnsRefused; got != 1 {
		t.Fatalf("ConnsRefused = %d", got)
	}
	if !logs.Has("connection limit reached: closing new connection", "max_conns=2") {
		t.Fatalf("no log line naming the limit:\n%s", logs)
	}
	// The two admitted connections are unaffected.
	if err := roundTrip(a, 10); err != nil {
		t.Fatal(err)
	}
	a.Close()
	poll(t, "a free connection slot", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns) < 2
	})
	if err := roundTrip(dial(t, s), 11); err != nil {
		t.Fatalf("a connection after one closed: %v", err)
	}
	if err := roundTrip(b, 12); err != nil {
		t.Fatal(err)
	}
}

// countingListener counts the bytes the server reads from each
// connection it accepted.
type countingListener struct {
	net.Listener
	read atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, n: &l.read}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// metadataFrame is a Metadata v1 request of about size bytes.
func metadataFrame(corr int32, size int) []byte {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(1)
	name := strings.Repeat("t", 240)
	for n := 0; n < size; n += len(name) + 2 {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	msg := make([]byte, 4, size+64)
	msg = binary.BigEndian.AppendUint16(msg, 3)
	msg = binary.BigEndian.AppendUint16(msg, 1)
	msg = binary.BigEndian.AppendUint32(msg, uint32(corr))
	msg = binary.BigEndian.AppendUint16(msg, 0xffff)
	msg = req.AppendTo(msg)
	binary.BigEndian.PutUint32(msg, uint32(len(msg)-4))
	return msg
}

// TestInFlightCap: while the handler is stuck on a connection's first
// request, the server reads no more than MaxInFlight frames from it (plus
// what its 64 KiB read buffer holds), logs the pause once, and answers
// everything in order once the handler resumes.
func TestInFlightCap(t *testing.T) {
	const frameSize = 256 << 10
	const sent = 12
	for _, maxInFlight := range []int{1, 3} {
		release := make(chan struct{})
		var handled atomic.Int32
		cfg := Config{MaxInFlight: maxInFlight, APIs: map[int16]int16{3: 12}}
		logs := logged(&cfg)
		cfg.Logger.SetLevel(hclog.Debug) // the pause is per-connection chatter
		cfg.Handler = HandlerFunc(func(_ context.Context, _ *Conn, req kmsg.Request) (kmsg.Response, error) {
			if handled.Add(1) == 1 {
				<-release
			}
			return req.(*kmsg.MetadataRequest).ResponseKind(), nil
		})
		tcp, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln := &countingListener{Listener: tcp}
		s := Serve(ln, cfg)

		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		frames := make([][]byte, sent)
		for i := range frames {
			frames[i] = metadataFrame(int32(i), frameSize)
		}
		writeErr := make(chan error, 1)
		go func() {
			for _, f := range frames {
				if _, err := c.Write(f); err != nil {
					writeErr <- err
					return
				}
			}
			writeErr <- nil
		}()
		want := int64(maxInFlight * len(frames[0]))
		poll(t, "the handler to hold the first request and the reader to fill its slots", func() bool {
			return handled.Load() == 1 && ln.read.Load() >= want
		})
		poll(t, "the pause to be logged", func() bool {
			return logs.Has("in-flight request limit reached", "max_in_flight="+strconv.Itoa(maxInFlight))
		})
		// The reader logs the pause just before it blocks for a slot:
		// from here on it reads nothing until the handler answers.
		if got, limit := ln.read.Load(), want+64<<10; got > limit {
			t.Fatalf("max in flight %d: the server read %d bytes with the handler stuck, more than %d frames of %d bytes plus its buffer",
				maxInFlight, got, maxInFlight, len(frames[0]))
		}
		if got := s.Limits().InFlightPauses; got != 1 {
			t.Fatalf("InFlightPauses = %d", got)
		}
		close(release)
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		for i := range int32(sent) {
			var size [4]byte
			if _, err := io.ReadFull(c, size[:]); err != nil {
				t.Fatalf("response %d: %v", i, err)
			}
			resp := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(c, resp); err != nil {
				t.Fatal(err)
			}
			if got := int32(binary.BigEndian.Uint32(resp)); got != i {
				t.Fatalf("response %d carries correlation id %d", i, got)
			}
		}
		if err := <-writeErr; err != nil {
			t.Fatal(err)
		}
		c.Close()
		s.Close()
	}
}

// queueState reads what the server's queue holds, and how many frames
// wait for it.
func queueState(s *Server) (reading, queued int64, waiting int) {
	q := s.queue
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.reading, q.queued, len(q.waiters)
}

// readAnswer reads one response from c and returns its correlation id.
func readAnswer(c net.Conn) (int32, error) {
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return 0, err
	}
	resp := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, resp); err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(resp)), nil
}

// blockingMetadataServer answers Metadata once release closes, counting
// the requests that reached the handler.
func blockingMetadataServer(t *testing.T, ln net.Listener, cfg Config, release <-chan struct{}, handled *atomic.Int32) *Server {
	cfg.APIs = map[int16]int16{3: 12}
	cfg.Handler = HandlerFunc(func(_ context.Context, _ *Conn, req kmsg.Request) (kmsg.Response, error) {
		handled.Add(1)
		<-release
		return req.(*kmsg.MetadataRequest).ResponseKind(), nil
	})
	s := Serve(ln, cfg)
	t.Cleanup(func() { s.Close() })
	return s
}

// TestByteQueueOrderAndOverdraft walks the queue's rules: bytes that fit
// are taken at once; with nothing read waiting to be handled, the first
// frame that does not fit goes past the bound, alone, until complete;
// waiters are served in order as bytes come back, and one that gives up
// lets those behind it on.
func TestByteQueueOrderAndOverdraft(t *testing.T) {
	q := newByteQueue(100)
	f1, f2, f3, f4, f5, f6 := &frameBytes{}, &frameBytes{}, &frameBytes{}, &frameBytes{}, &frameBytes{}, &frameBytes{}
	granted := func(w *queueWaiter) bool {
		if w == nil {
			return true
		}
		select {
		case <-w.ready:
			return true
		default:
			return false
		}
	}
	if !granted(q.take(f1, 60)) || !granted(q.take(f2, 30)) {
		t.Fatal("bytes that fit were not taken")
	}
	if !granted(q.take(f3, 20)) || q.over != f3 {
		t.Fatal("with nothing to be handled, the first frame past the bound was held back")
	}
	w4 := q.take(f4, 5)
	w5 := q.take(f5, 1)
	if granted(w4) || granted(w5) {
		t.Fatal("a second frame went past the bound")
	}
	if !granted(q.take(f3, 10)) {
		t.Fatal("the frame past the bound was held back")
	}
	q.complete(f3)
	if q.over != nil || granted(w4) {
		t.Fatal("a frame went past the bound while another waited to be handled")
	}
	q.abandon(f2)
	if !granted(w4) || !granted(w5) || q.reading != 66 || q.queued != 30 {
		t.Fatalf("waiters not served as bytes came back: reading %d, queued %d", q.reading, q.queued)
	}
	w6 := q.take(f6, 40)
	w1 := q.take(f1, 1)
	if granted(w6) || granted(w1) {
		t.Fatal("bytes past the bound were taken while a frame waited to be handled")
	}
	q.cancel(w6)
	if !granted(w1) {
		t.Fatal("a waiter behind one that gave up was not served")
	}
	q.release(30)
	q.abandon(f1)
	q.abandon(f4)
	q.abandon(f5)
	q.abandon(f6)
	if q.reading != 0 || q.queued != 0 || len(q.waiters) != 0 || q.over != nil {
		t.Fatalf("queue not empty: %+v", q)
	}
}

// TestQueuedBytesCap: with the handler stuck, frames of several
// connections that together exceed MaxQueuedBytes are not all read: the
// server holds back the later ones (logged once per connection, counted)
// and reads at most the bound plus one frame, plus each connection's read
// buffer. Once the handler answers, every request is answered.
func TestQueuedBytesCap(t *testing.T) {
	const (
		conns     = 8
		frameSize = 400 << 10
		maxQueued = 1 << 20
		maxFrame  = 512 << 10
	)
	release := make(chan struct{})
	var handled atomic.Int32
	cfg := Config{MaxQueuedBytes: maxQueued, MaxFrameBytes: maxFrame}
	logs := logged(&cfg)
	ln := &countingListener{Listener: mustListen(t)}
	s := blockingMetadataServer(t, ln, cfg, release, &handled)

	clients := make([]net.Conn, conns)
	writeErr := make(chan error, conns)
	sent := 0
	for i := range clients {
		clients[i] = dial(t, s)
		frame := metadataFrame(int32(i), frameSize)
		sent += len(frame)
		go func(c net.Conn) {
			_, err := c.Write(frame)
			writeErr <- err
		}(clients[i])
	}
	poll(t, "frames held back by the queued bytes limit", func() bool {
		_, _, waiting := queueState(s)
		return handled.Load() >= 1 && waiting > 0
	})
	poll(t, "the pause to be logged", func() bool {
		return logs.Has("queued request bytes limit reached", "max_queued_bytes=1048576")
	})
	if got := s.Limits().QueuedBytesPauses; got == 0 {
		t.Fatal("QueuedBytesPauses = 0")
	}
	reading, queued, _ := queueState(s)
	if held := reading + queued; held > maxQueued+maxFrame {
		t.Fatalf("the queue holds %d bytes, more than the bound plus a frame", held)
	}
	if read, limit := ln.read.Load(), int64(maxQueued+maxFrame+conns*64<<10); read > limit || read >= int64(sent) {
		t.Fatalf("the server read %d of %d bytes sent with the handler stuck, want at most %d", read, sent, limit)
	}

	close(release)
	for i, c := range clients {
		corr, err := readAnswer(c)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		if corr != int32(i) {
			t.Fatalf("connection %d: answer carries correlation id %d", i, corr)
		}
	}
	for range clients {
		if err := <-writeErr; err != nil {
			t.Fatal(err)
		}
	}
	poll(t, "the queue to be empty", func() bool {
		reading, queued, waiting := queueState(s)
		return reading == 0 && queued == 0 && waiting == 0
	})
}

// TestQueuedBytesPartialFramesDoNotDeadlock: frames partly sent that
// between them want more than MaxQueuedBytes, with nothing read and
// waiting to be handled, would each wait for bytes only the others could
// give back. One of them goes past the bound at a time, and all are
// answered once their clients send the rest (well within the read
// timeout, whose expiry would fail the test).
func TestQueuedBytesPartialFramesDoNotDeadlock(t *testing.T) {
	const (
		conns     = 4
		frameSize = 600 << 10
		maxQueued = 1 << 20
	)
	release := make(chan struct{})
	close(release)
	var handled atomic.Int32
	cfg := Config{MaxQueuedBytes: maxQueued, MaxFrameBytes: maxQueued}
	logged(&cfg)
	s := blockingMetadataServer(t, mustListen(t), cfg, release, &handled)

	clients := make([]net.Conn, conns)
	frames := make([][]byte, conns)
	for i := range clients {
		clients[i] = dial(t, s)
		frames[i] = metadataFrame(int32(i), frameSize)
		if _, err := clients[i].Write(frames[i][:frameSize/2]); err != nil {
			t.Fatal(err)
		}
	}
	// Every frame needs a buffer of 512 KiB for the half sent, 2 MiB in
	// all: some wait, and nothing read is waiting to be handled.
	poll(t, "frames waiting with nothing to be handled", func() bool {
		_, queued, waiting := queueState(s)
		return waiting > 0 && queued == 0
	})
	if reading, queued, _ := queueState(s); reading+queued > maxQueued+frameSize {
		t.Fatalf("the queue holds %d bytes, more than the bound plus a frame", reading+queued)
	}
	for i, c := range clients {
		if _, err := c.Write(frames[i][frameSize/2:]); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range clients {
		corr, err := readAnswer(c)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		if corr != int32(i) {
			t.Fatalf("connection %d: answer carries correlation id %d", i, corr)
		}
	}
	if got := s.Limits().ReadTimeouts; got != 0 {
		t.Fatalf("ReadTimeouts = %d", got)
	}
	poll(t, "the queue to be empty", func() bool {
		reading, queued, waiting := queueState(s)
		return reading == 0 && queued == 0 && waiting == 0
	})
}

// secondFrameBehindAHeldOne starts a server whose handler holds each
// request until release, sends a 200 KiB request on connection a and waits
// for it to reach the handler, then sends another of 200 KiB on connection
// b, for a queue bound below both to hold back.
func secondFrameBehindAHeldOne(t *testing.T, cfg Config, release <-chan struct{}) (s *Server, a, b net.Conn) {
	t.Helper()
	var handled atomic.Int32
	s = blockingMetadataServer(t, mustListen(t), cfg, release, &handled)
	a, b = dial(t, s), dial(t, s)
	if _, err := a.Write(metadataFrame(1, 200<<10)); err != nil {
		t.Fatal(err)
	}
	poll(t, "the first request to reach the handler", func() bool { return handled.Load() == 1 })
	if _, err := b.Write(metadataFrame(2, 200<<10)); err != nil {
		t.Fatal(err)
	}
	return s, a, b
}

// TestQueuedBytesWaitEndsWithTheServer: a connection held back by
// MaxQueuedBytes does not keep Close waiting, and the bytes of frames
// never handled are given back.
func TestQueuedBytesWaitEndsWithTheServer(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	cfg := Config{MaxQueuedBytes: 256 << 10, MaxFrameBytes: 256 << 10}
	logged(&cfg)
	s, _, _ := secondFrameBehindAHeldOne(t, cfg, release)
	poll(t, "the second frame to wait", func() bool {
		_, _, waiting := queueState(s)
		return waiting == 1
	})
	// The stuck handler would keep Close waiting: answer it once the
	// server is closing.
	go func() {
		<-s.ctx.Done()
		release <- struct{}{}
	}()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if reading, queued, waiting := queueState(s); reading != 0 || queued != 0 || waiting != 0 {
		t.Fatalf("after Close the queue holds %d bytes being read, %d queued, %d waiting", reading, queued, waiting)
	}
}

// TestQueuedBytesWaitIsBoundedByIdleTimeout: a connection held back by
// MaxQueuedBytes for IdleTimeout is closed, with a log line naming both
// limits; the connection holding the bytes is served once its handler
// answers.
func TestQueuedBytesWaitIsBoundedByIdleTimeout(t *testing.T) {
	release := make(chan struct{})
	cfg := Config{MaxQueuedBytes: 256 << 10, MaxFrameBytes: 256 << 10, IdleTimeout: 300 * time.Millisecond}
	logs := logged(&cfg)
	s, a, b := secondFrameBehindAHeldOne(t, cfg, release)
	closedByPeer(t, b, "held back past the idle timeout")
	poll(t, "the log line", func() bool {
		return logs.Has("closing connection: idle timeout while held back by the queued request bytes limit",
			"idle_timeout=300ms", "max_queued_bytes=262144")
	})
	if got := s.Limits().IdleTimeouts; got != 1 {
		t.Fatalf("IdleTimeouts = %d", got)
	}
	close(release)
	if corr, err := readAnswer(a); err != nil || corr != 1 {
		t.Fatalf("the connection holding the bytes: %d %v", corr, err)
	}
}

// TestQueuedBytesNeverBelowMaxFrame: a bound below MaxFrameBytes is
// raised to it, with a log line, so that every frame can be read.
func TestQueuedBytesNeverBelowMaxFrame(t *testing.T) {
	cfg := Config{MaxQueuedBytes: 1 << 10, MaxFrameBytes: 64 << 10}
	logs := logged(&cfg)
	s := metadataServer(t, cfg)
	if s.cfg.MaxQueuedBytes != 64<<10 || s.queue.max != 64<<10 {
		t.Fatalf("MaxQueuedBytes = %d", s.cfg.MaxQueuedBytes)
	}
	if !logs.Has("max queued bytes raised to the max frame size", "max_queued_bytes=1024", "max_frame_bytes=65536") {
		t.Fatalf("no log line:\n%s", logs)
	}
	if err := roundTrip(dial(t, s), 1); err != nil {
		t.Fatal(err)
	}
	if d := metadataServer(t, Config{}); d.cfg.MaxQueuedBytes != 256<<20 {
		t.Fatalf("default MaxQueuedBytes = %d", d.cfg.MaxQueuedBytes)
	}
}

// requestFrame is req, at the version it carries, in a frame with a
// request header of correlation id corr.
func requestFrame(corr int32, req kmsg.Request) []byte {
	msg := make([]byte, 4, 64)
	msg = binary.BigEndian.AppendUint16(msg, uint16(req.Key()))
	msg = binary.BigEndian.AppendUint16(msg, uint16(req.GetVersion()))
	msg = binary.BigEndian.AppendUint32(msg, uint32(corr))
	msg = binary.BigEndian.AppendUint16(msg, 0xffff)
	if req.IsFlexible() {
		msg = append(msg, 0)
	}
	msg = req.AppendTo(msg)
	binary.BigEndian.PutUint32(msg, uint32(len(msg)-4))
	return msg
}

// call sends frame on c and checks that the answer carries corr.
func call(t *testing.T, c net.Conn, corr int32, frame []byte) {
	t.Helper()
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	got, err := readAnswer(c)
	if err != nil || got != corr {
		t.Fatalf("request %d: answer %d, %v", corr, got, err)
	}
}

// TestUnauthenticatedFrameCap: on a server whose connections must
// authenticate, a frame above MaxUnauthenticatedFrameBytes before the
// handler says the connection authenticated closes it, with a log line
// and a count; smaller frames are served, and once authenticated the
// connection may send frames up to MaxFrameBytes. Where no
// authentication is needed the cap does not apply.
func TestUnauthenticatedFrameCap(t *testing.T) {
	var states atomic.Int32
	cfg := Config{
		MaxUnauthenticatedFrameBytes: 4 << 10,
		APIs:                         map[int16]int16{3: 12, 36: 1},
		NeedsAuthentication: func(state *tls.ConnectionState) bool {
			if state == nil {
				states.Add(1)
			}
			return true
		},
		Handler: HandlerFunc(func(_ context.Context, c *Conn, req kmsg.Request) (kmsg.Response, error) {
			if _, ok := req.(*kmsg.SASLAuthenticateRequest); ok {
				c.Session.SetAuthenticated()
			}
			return req.ResponseKind(), nil
		}),
	}
	logs := logged(&cfg)
	s := Serve(mustListen(t), cfg)
	defer s.Close()
	big := metadataFrame(1, 8<<10)

	early := dialAddr(t, s.Addr().String())
	if _, err := early.Write(big); err != nil {
		t.Fatal(err)
	}
	closedByPeer(t, early, "a large frame before authentication")
	poll(t, "the frame counted", func() bool { return s.Limits().UnauthenticatedFramesTooLarge == 1 })
	if !logs.Has("closing connection: frame exceeds the maximum frame size before authentication",
		"frame_bytes="+strconv.Itoa(len(big)-4), "max_unauthenticated_frame_bytes=4096") {
		t.Fatalf("no log line naming the limit:\n%s", logs)
	}

	c := dialAddr(t, s.Addr().String())
	call(t, c, 2, metadataFrame(2, 1<<10))
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SetVersion(1)
	call(t, c, 3, requestFrame(3, auth))
	call(t, c, 4, metadataFrame(4, 8<<10))
	call(t, c, 5, metadataFrame(5, 64<<10))
	if got := s.Limits(); got.UnauthenticatedFramesTooLarge != 1 || got.FramesTooLarge != 0 {
		t.Fatalf("limits after authenticating: %+v", got)
	}
	if got := states.Load(); got != 2 {
		t.Fatalf("NeedsAuthentication saw a nil TLS state %d times for 2 plain connections", got)
	}

	cfg.NeedsAuthentication = nil
	open := Serve(mustListen(t), cfg)
	defer open.Close()
	call(t, dialAddr(t, open.Addr().String()), 6, metadataFrame(6, 64<<10))
	if open.cfg.MaxUnauthenticatedFrameBytes != 4<<10 {
		t.Fatal("configured cap not kept")
	}
	if d := metadataServer(t, Config{}); d.cfg.MaxUnauthenticatedFrameBytes != 512<<10 {
		t.Fatalf("default MaxUnauthenticatedFrameBytes = %d", d.cfg.MaxUnauthenticatedFrameBytes)
	}
	if d := metadataServer(t, Config{MaxFrameBytes: 100 << 10}); d.cfg.MaxUnauthenticatedFrameBytes != 100<<10 {
		t.Fatalf("MaxUnauthenticatedFrameBytes = %d above MaxFrameBytes", d.cfg.MaxUnauthenticatedFrameBytes)
	}
}

// TestTLSConnExposesPeerCertificate: on a TLS listener the handler sees
// the client's verified certificate; a plain listener gives nil.
func TestTLSConnExposesPeerCertificate(t *testing.T) {
	pki := tlstest.NewPKI(t, "test CA")
	server := pki.Reloader(pki.Voter(1001))
	client := pki.Reloader(pki.Broker(2))
	var seen atomic.Pointer[Conn]
	handler := HandlerFunc(func(_ context.Context, c *Conn, req kmsg.Request) (kmsg.Response, error) {
		seen.Store(c)
		return req.(*kmsg.MetadataRequest).ResponseKind(), nil
	})
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Handler: handler, APIs: map[int16]int16{3: 12}, ReadTimeout: 400 * time.Millisecond}
	logs := logged(&cfg)
	s := Serve(tls.NewListener(tcp, server.ServerConfig(nil)), cfg)
	defer s.Close()

	c, err := tls.Dial("tcp", s.Addr().String(), client.ClientConfig("127.0.0.1", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(metadataFrame(7, 100)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	got := seen.Load()
	if got == nil || got.TLS == nil || len(got.TLS.PeerCertificates) == 0 || got.TLS.PeerCertificates[0].Subject.CommonName != "broker-2" {
		t.Fatalf("handler saw %+v", got)
	}

	// A client that opens TCP and never starts the handshake is closed
	// after the read timeout, with a log line; others are served.
	stall, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stall.Close()
	closedByPeer(t, stall, "stalled TLS handshake")
	poll(t, "the handshake timeout log line", func() bool {
		return logs.Has("closing connection: TLS handshake not complete within the read timeout", "read_timeout=400ms")
	})
	// A client without a certificate is refused and logged.
	bare, err := tls.Dial("tcp", s.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err == nil {
		_, _ = bare.Write(metadataFrame(8, 100))
		_ = bare.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = bare.Read(make([]byte, 1))
		bare.Close()
	}
	if err == nil {
		t.Fatal("a client without a certificate was served")
	}
	poll(t, "the refused handshake log line", func() bool { return logs.Has("closing connection: TLS handshake failed") })
	if got := s.Limits().HandshakeFailures; got != 2 {
		t.Fatalf("HandshakeFailures = %d", got)
	}

	// Plain listener: no TLS state.
	p := Serve(mustListen(t), Config{Handler: handler, APIs: map[int16]int16{3: 12}})
	defer p.Close()
	pc := dialAddr(t, p.Addr().String())
	if _, err := pc.Write(metadataFrame(9, 100)); err != nil {
		t.Fatal(err)
	}
	_ = pc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(pc, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	if got := seen.Load(); got.TLS != nil {
		t.Fatal("a plain connection reported TLS state")
	}
}

func mustListen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func dialAddr(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestClientThatStopsReadingIsClosed: a client that sends requests and
// never reads the (large) answers is closed after the write timeout.
func TestClientThatStopsReadingIsClosed(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	cfg := Config{WriteTimeout: 300 * time.Millisecond, APIs: map[int16]int16{3: 12}}
	logs := logged(&cfg)
	cfg.Handler = HandlerFunc(func(_ context.Context, _ *Conn, req kmsg.Request) (kmsg.Response, error) {
		resp := req.(*kmsg.MetadataRequest).ResponseKind().(*kmsg.MetadataResponse)
		for range 4 {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic = kmsg.StringPtr(big)
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	})
	s := Serve(mustListen(t), cfg)
	defer s.Close()
	c := dialAddr(t, s.Addr().String())
	// Keep sending small requests; never read.
	go func() {
		for i := int32(0); ; i++ {
			if _, err := c.Write(metadataFrame(i, 100)); err != nil {
				return
			}
		}
	}()
	poll(t, "the write timeout", func() bool { return s.Limits().WriteTimeouts == 1 })
	if !logs.Has("closing connection: response not written within the write timeout", "write_timeout=300ms") {
		t.Fatalf("no log line naming the limit:\n%s", logs)
	}
	if err := roundTrip(dialAddr(t, s.Addr().String()), 1); err != nil {
		t.Fatalf("others not served: %v", err)
	}
}
