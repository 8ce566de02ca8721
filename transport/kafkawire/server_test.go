package kafkawire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
)

// metadataServer answers Metadata with itself as the only broker and the
// controller, which is all kgo needs to route admin requests.
func metadataServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	return metadataServerOn(t, mustListen(t), cfg)
}

// metadataServerOn is metadataServer on a listener of the caller's.
func metadataServerOn(t *testing.T, ln net.Listener, cfg Config) *Server {
	t.Helper()
	var s *Server
	cfg.APIs = map[int16]int16{3: 12}
	cfg.Handler = HandlerFunc(func(_ context.Context, c *Conn, req kmsg.Request) (kmsg.Response, error) {
		switch r := req.(type) {
		case *kmsg.MetadataRequest:
			host, port, _ := net.SplitHostPort(s.Addr().String())
			p := 0
			for _, ch := range port {
				p = p*10 + int(ch-'0')
			}
			resp := r.ResponseKind().(*kmsg.MetadataResponse)
			resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1, Host: host, Port: int32(p)}}
			resp.ControllerID = 1
			for _, rt := range r.Topics {
				rtopic := kmsg.NewMetadataResponseTopic()
				rtopic.Topic = rt.Topic
				rtopic.ErrorCode = kerr.UnknownTopicOrPartition.Code
				resp.Topics = append(resp.Topics, rtopic)
			}
			return resp, nil
		}
		return nil, io.EOF
	})
	s = Serve(ln, cfg)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestKgoNegotiatesAndReadsMetadata(t *testing.T) {
	s := metadataServer(t, Config{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	vers, err := adm.ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, bv := range vers {
		if bv.Err != nil {
			t.Fatal(bv.Err)
		}
		if max, ok := bv.KeyMaxVersion(3); !ok || max != 12 {
			t.Fatalf("metadata max version = %d %v", max, ok)
		}
	}
	md, err := adm.Metadata(ctx, "missing")
	if err != nil {
		t.Fatal(err)
	}
	if md.Controller != 1 || len(md.Brokers) != 1 {
		t.Fatalf("metadata: %+v", md)
	}
}

// rawCall sends one request with the given header version and returns the
// raw response frame (nil if the server closed the connection).
func rawCall(t *testing.T, addr string, key, version int16, body []byte, flexible bool) []byte {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hdr := make([]byte, 10)
	binary.BigEndian.PutUint16(hdr[0:], uint16(key))
	binary.BigEndian.PutUint16(hdr[2:], uint16(version))
	binary.BigEndian.PutUint32(hdr[4:], 77)
	binary.BigEndian.PutUint16(hdr[8:], 0xffff) // null client id
	if flexible {
		hdr = append(hdr, 0)
	}
	msg := append(hdr, body...)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(msg)))
	if _, err := c.Write(append(frame, msg...)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil
	}
	resp := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestApiVersionsV0AndUnsupportedVersion(t *testing.T) {
	s := metadataServer(t, Config{})
	resp := rawCall(t, s.Addr().String(), 18, 0, nil, false)
	if resp == nil || int32(binary.BigEndian.Uint32(resp)) != 77 {
		t.Fatalf("v0 response %x", resp)
	}
	v0 := kmsg.NewPtrApiVersionsResponse()
	v0.SetVersion(0)
	if err := v0.ReadFrom(resp[4:]); err != nil || v0.ErrorCode != 0 || len(v0.ApiKeys) != 2 {
		t.Fatalf("v0: %+v %v", v0, err)
	}
	// A version newer than any served: UNSUPPORTED_VERSION in a v0 body.
	resp = rawCall(t, s.Addr().String(), 18, 99, nil, false)
	if resp == nil {
		t.Fatal("connection closed instead of UNSUPPORTED_VERSION")
	}
	un := kmsg.NewPtrApiVersionsResponse()
	un.SetVersion(0)
	if err := un.ReadFrom(resp[4:]); err != nil || un.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("unsupported: %+v %v", un, err)
	}
}

func TestBadRequestsCloseTheConnection(t *testing.T) {
	s := metadataServer(t, Config{MaxFrameBytes: 1 << 10})
	cases := map[string]func() []byte{
		"unknown key":         func() []byte { return rawCall(t, s.Addr().String(), 999, 0, nil, false) },
		"unserved key":        func() []byte { return rawCall(t, s.Addr().String(), 19, 0, nil, false) },
		"unsupported version": func() []byte { return rawCall(t, s.Addr().String(), 3, 13, nil, true) },
		"garbage body":        func() []byte { return rawCall(t, s.Addr().String(), 3, 1, []byte{0x7f, 0xff, 0xff, 0xff}, false) },
		"oversized frame":     func() []byte { return rawCall(t, s.Addr().String(), 3, 1, make([]byte, 2048), false) },
	}
	for name, call := range cases {
		if resp := call(); resp != nil {
			t.Errorf("%s: got a response %x, want the connection closed", name, resp)
		}
	}
	// The server still serves others.
	if resp := rawCall(t, s.Addr().String(), 18, 0, nil, false); resp == nil {
		t.Fatal("server stopped answering after bad connections")
	}
}

func TestStalledFrameIsDropped(t *testing.T) {
	s := metadataServer(t, Config{ReadTimeout: 200 * time.Millisecond})
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte{0, 0, 0, 50, 0, 18}); err != nil { // half a frame
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("stalled connection was not closed")
	}
}

// FuzzHandleFrame writes an arbitrary byte stream to a server, as a client
// would: size-prefixed request frames, pipelined (the server reads up to
// three frames ahead of its answers). The handler answers Metadata and
// CreateTopics; a CreateTopics of a topic named "refuse" makes it fail
// and one named "close" makes it ask for the connection to close after
// the answer. For each frame in turn, what handleFrame makes of it alone
// is what the connection must do: send that answer, whose size prefix
// matches, whose correlation id is the request's and whose body decodes
// as the response to the request's key and version; or close (a frame
// handleFrame refuses, or whose size the server refuses before reading
// it) without sending anything more. Answers come in request order.
// When every frame is answered and none asked for a close, the
// connection still answers an ApiVersions afterwards. A stream that ends
// in the middle of a frame is sent up to that frame. The connection is a
// net.Pipe, so an input takes microseconds.
//
//	go test -run '^$' -fuzz '^FuzzHandleFrame$' ./transport/kafkawire
func FuzzHandleFrame(f *testing.F) {
	ln := newPipeListener()
	s := Serve(ln, Config{APIs: map[int16]int16{3: 12, 19: 7}, MaxFrameBytes: fuzzMaxFrame, MaxInFlight: 4,
		Handler: HandlerFunc(answerFuzzFrame)})
	f.Cleanup(func() { s.Close() })

	f.Add(sizePrefixed([]byte{0, 18, 0, 3, 0, 0, 0, 1, 0xff, 0xff, 0, 0, 0, 0}))
	f.Add(sizePrefixed([]byte{0, 3, 0, 12, 0, 0, 0, 1, 0, 1, 'x', 0, 0, 0, 0, 0}))
	for _, seed := range handleFrameSeeds() {
		f.Add(seed.stream)
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		type want struct {
			frame []byte // the request frame, without its size
			resp  []byte // the answer, nil for a close instead
			close bool   // the connection closes after the answer
		}
		var wants []want
		var sent int
		for rest := stream; len(rest) >= 4; {
			n := int32(binary.BigEndian.Uint32(rest))
			if n < 8 || n > fuzzMaxFrame {
				sent += 4
				wants = append(wants, want{})
				break
			}
			if int(n) > len(rest)-4 {
				break
			}
			frame := rest[4 : 4+n]
			rest = rest[4+n:]
			sent += 4 + int(n)
			sess := &Session{}
			resp, err := s.handleFrame(pipeAddr{}, nil, sess, nil, frame)
			if err != nil {
				wants = append(wants, want{frame: frame})
				break
			}
			wants = append(wants, want{frame: frame, resp: resp, close: sess.closeAfter != ""})
			if sess.closeAfter != "" {
				break
			}
		}

		c := ln.dial(t)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			_, _ = c.Write(stream[:sent]) // fails once the server closes
		}()
		r := bufio.NewReader(c)
		closed := false
		for i, w := range wants {
			if w.resp == nil {
				expectClosed(t, r, fmt.Sprintf("frame %d was refused", i))
				closed = true
				break
			}
			checkFuzzAnswer(t, s, r, i, w.frame, w.resp)
			if w.close {
				expectClosed(t, r, fmt.Sprintf("the handler closed the connection after frame %d", i))
				closed = true
				break
			}
		}
		if closed {
			return
		}
		<-wrote
		probe := kmsg.NewPtrApiVersionsRequest()
		probe.SetVersion(0)
		sized := kmsg.NewRequestFormatter().AppendRequest(nil, probe, -7)
		if _, err := c.Write(sized); err != nil {
			t.Fatalf("the connection closed after %d answered frames: %v", len(wants), err)
		}
		resp, err := s.handleFrame(pipeAddr{}, nil, &Session{}, nil, sized[4:])
		if err != nil {
			t.Fatal(err)
		}
		checkFuzzAnswer(t, s, r, len(wants), sized[4:], resp)
	})
}

// fuzzMaxFrame is FuzzHandleFrame's MaxFrameBytes: small, so that the
// fuzzer meets the limit.
const fuzzMaxFrame = 1 << 16

// answerFuzzFrame is FuzzHandleFrame's handler.
func answerFuzzFrame(_ context.Context, c *Conn, req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		resp := r.ResponseKind().(*kmsg.MetadataResponse)
		resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1, Host: "127.0.0.1", Port: 9092}}
		resp.ControllerID = 1
		for _, rt := range r.Topics {
			topic := kmsg.NewMetadataResponseTopic()
			topic.Topic = rt.Topic
			topic.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, topic)
		}
		return resp, nil
	case *kmsg.CreateTopicsRequest:
		resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, rt := range r.Topics {
			switch rt.Topic {
			case "refuse":
				return nil, errors.New("refused")
			case "close":
				c.Session.CloseAfterResponse("asked to")
			}
			topic := kmsg.NewCreateTopicsResponseTopic()
			topic.Topic = rt.Topic
			topic.NumPartitions = rt.NumPartitions
			topic.ReplicationFactor = rt.ReplicationFactor
			resp.Topics = append(resp.Topics, topic)
		}
		return resp, nil
	}
	return nil, fmt.Errorf("no answer for %s", kmsg.NameForKey(req.Key()))
}

// checkFuzzAnswer reads the answer to frame and checks it against want,
// what handleFrame made of the frame alone.
func checkFuzzAnswer(t *testing.T, s *Server, r *bufio.Reader, i int, frame, want []byte) {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		t.Fatalf("frame %d: no answer: %v", i, err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<20 {
		t.Fatalf("frame %d: answer of %d bytes", i, n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatalf("frame %d: the answer is cut short (%d bytes announced): %v", i, n, err)
	}
	if !bytes.Equal(body[:4], frame[4:8]) {
		t.Fatalf("frame %d: answer with correlation id %x, the request's is %x", i, body[:4], frame[4:8])
	}
	if !bytes.Equal(append(size[:], body...), want) {
		t.Fatalf("frame %d: answer\n%x\nhandleFrame answers\n%x", i, append(size[:], body...), want)
	}
	key := int16(binary.BigEndian.Uint16(frame))
	version := int16(binary.BigEndian.Uint16(frame[2:]))
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	body = body[4:]
	if key == apiVersionsKey {
		if version < 0 || version > s.apis[apiVersionsKey] {
			resp.SetVersion(0)
		}
	} else if resp.IsFlexible() {
		if len(body) == 0 || body[0] != 0 {
			t.Fatalf("frame %d: flexible answer without an empty tag section: %x", i, body)
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("frame %d: the answer to %s v%d does not decode: %v", i, kmsg.NameForKey(key), version, err)
	}
	if av, ok := resp.(*kmsg.ApiVersionsResponse); ok && resp.GetVersion() != version && av.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("frame %d: ApiVersions v%d answered in v0 with error %d", i, version, av.ErrorCode)
	}
}

// expectClosed fails unless the server closes the connection with
// nothing more sent.
func expectClosed(t *testing.T, r *bufio.Reader, why string) {
	t.Helper()
	if b, err := r.ReadByte(); err == nil {
		t.Fatalf("%s, yet the server sent more (%#x…)", why, b)
	} else if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("%s, yet the connection stayed open: %v", why, err)
	}
}

func sizePrefixed(frame []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)
}

// pipeListener accepts the server ends of net.Pipe connections.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial returns the client end of a new connection to the listener.
func (l *pipeListener) dial(t testing.TB) net.Conn {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
	case <-l.closed:
		t.Fatal("listener closed")
	}
	return client
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

type frameSeed struct {
	name   string
	stream []byte
}

// handleFrameSeeds are streams of real requests as kgo writes them:
// ApiVersions at its oldest and newest version, Metadata and
// CreateTopics in flexible and older versions, all of them pipelined on
// one connection, and streams that end in a refused frame, in a close
// the handler asks for, and in a frame larger than the limit after an
// ApiVersions of a version not served.
func handleFrameSeeds() []frameSeed {
	rf := kmsg.NewRequestFormatter(kmsg.FormatterClientID("kgo"))
	frame := func(req kmsg.Request, version int16, corr int32) []byte {
		req.SetVersion(version)
		return rf.AppendRequest(nil, req, corr)
	}
	apiVersions := func(v int16, corr int32) []byte {
		req := kmsg.NewPtrApiVersionsRequest()
		if v >= 3 {
			req.ClientSoftwareName, req.ClientSoftwareVersion = "kgo", "1.22.3"
		}
		return frame(req, v, corr)
	}
	metadata := func(v int16, corr int32, topics ...string) []byte {
		req := kmsg.NewPtrMetadataRequest()
		for _, name := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		return frame(req, v, corr)
	}
	createTopics := func(v int16, corr int32, topics ...string) []byte {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 30000
		for _, name := range topics {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 6, 3
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			cfg.Name, cfg.Value = "min.insync.replicas", kmsg.StringPtr("2")
			rt.Configs = append(rt.Configs, cfg)
			req.Topics = append(req.Topics, rt)
		}
		return frame(req, v, corr)
	}
	cat := func(frames ...[]byte) []byte { return bytes.Join(frames, nil) }
	return []frameSeed{
		{"api-versions-v0", apiVersions(0, 1)},
		{"api-versions-v3", apiVersions(3, 1)},
		{"metadata-v12", metadata(12, 2, "orders", "payments")},
		{"create-topics-v7", createTopics(7, 3, "orders", "payments")},
		{"older-versions", cat(metadata(1, 1, "orders"), createTopics(2, 2, "orders"))},
		{"pipelined", cat(apiVersions(3, 1), metadata(12, 2, "orders"), createTopics(7, 3, "orders"), metadata(12, 4, "orders"))},
		{"refused", cat(metadata(12, 1), createTopics(7, 2, "refuse"), metadata(12, 3))},
		{"close-after", cat(createTopics(7, 1, "close"), metadata(12, 2))},
		{"unsupported-then-oversized", cat(apiVersions(99, 1), metadata(12, 2), binary.BigEndian.AppendUint32(nil, fuzzMaxFrame+1), make([]byte, 16))},
	}
}

// TestFuzzHandleFrameCorpus checks that the seeds are answered; with
// -write-fuzz-corpus it writes them to testdata/fuzz/FuzzHandleFrame.
func TestFuzzHandleFrameCorpus(t *testing.T) {
	s := &Server{apis: map[int16]int16{3: 12, 18: 4, 19: 7}, cfg: Config{Handler: HandlerFunc(answerFuzzFrame)}, ctx: context.Background()}
	for _, seed := range handleFrameSeeds() {
		first := seed.stream[4 : 4+binary.BigEndian.Uint32(seed.stream)]
		if _, err := s.handleFrame(pipeAddr{}, nil, &Session{}, nil, first); err != nil {
			t.Fatalf("%s: %v", seed.name, err)
		}
		if *writeFuzzCorpus {
			testkit.WriteFuzzSeed(t, "FuzzHandleFrame", seed.name, seed.stream)
		}
	}
}

var writeFuzzCorpus = flag.Bool("write-fuzz-corpus", false, "write the seed corpus files of the fuzz targets into testdata/fuzz")
