package kafkawire

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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

func FuzzHandleFrame(f *testing.F) {
	s := &Server{apis: map[int16]int16{3: 12, 18: 4}, cfg: Config{Handler: HandlerFunc(func(context.Context, *Conn, kmsg.Request) (kmsg.Response, error) {
		return nil, io.EOF
	})}}
	s.ctx = context.Background()
	f.Add([]byte{0, 18, 0, 3, 0, 0, 0, 1, 0xff, 0xff, 0, 0, 0, 0})
	f.Add([]byte{0, 3, 0, 12, 0, 0, 0, 1, 0, 1, 'x', 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, frame []byte) {
		c1, c2 := net.Pipe()
		defer c1.Close()
		defer c2.Close()
		_, _ = s.handleFrame(c1.RemoteAddr(), nil, &Session{}, frame)
	})
}
