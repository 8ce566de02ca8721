package kafkawire

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// readSized reads one size-prefixed frame.
func readSized(t *testing.T, r *bufio.Reader) []byte {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		t.Fatalf("reading a frame's size: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r, b); err != nil {
		t.Fatalf("reading a frame of %d bytes: %v", len(b), err)
	}
	return b
}

// TestSASLTokensAfterHandshakeV0: once the handler switches a connection
// to raw SASL tokens during a SaslHandshake v0, the following frames reach
// its step function as bare tokens (even ones shorter than a request
// header, and empty ones) and its answers come back size-prefixed, an
// empty answer as an empty frame; the frames are bounded by the
// unauthenticated limit until the exchange is done, after which the
// connection serves Kafka requests again, with the full frame size; a
// failed step closes the connection without an answer.
func TestSASLTokensAfterHandshakeV0(t *testing.T) {
	var mu sync.Mutex
	var steps []string
	cfg := Config{
		APIs:                         map[int16]int16{3: 12, 17: 1},
		NeedsAuthentication:          func(*tls.ConnectionState) bool { return true },
		MaxUnauthenticatedFrameBytes: 1024,
	}
	cfg.Handler = HandlerFunc(func(_ context.Context, c *Conn, req kmsg.Request) (kmsg.Response, error) {
		switch r := req.(type) {
		case *kmsg.SASLHandshakeRequest:
			resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
			resp.SupportedMechanisms = []string{"TEST"}
			if c.Version == 0 {
				c.Session.ReadSASLTokens(func(tok []byte) ([]byte, bool, error) {
					mu.Lock()
					steps = append(steps, string(tok))
					mu.Unlock()
					switch string(tok) {
					case "bad":
						return nil, false, errors.New("wrong password")
					case "fin":
						return nil, true, nil
					}
					return append([]byte("re:"), tok...), false, nil
				})
			}
			return resp, nil
		case *kmsg.MetadataRequest:
			return r.ResponseKind(), nil
		}
		return nil, io.EOF
	})
	s := Serve(mustListen(t), cfg)
	t.Cleanup(func() { s.Close() })

	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(c)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = "TEST"
		hs.SetVersion(0)
		if _, err := c.Write(requestFrame(1, hs)); err != nil {
			t.Fatal(err)
		}
		if got := readSized(t, r); binary.BigEndian.Uint32(got) != 1 {
			t.Fatalf("handshake answer has correlation id %d", binary.BigEndian.Uint32(got))
		}
		return c, r
	}

	c, r := dial()
	for _, tc := range []struct{ token, want string }{{"ab", "re:ab"}, {"", "re:"}, {"client-first-message", "re:client-first-message"}} {
		if _, err := c.Write(AppendSASLToken(nil, []byte(tc.token))); err != nil {
			t.Fatal(err)
		}
		if got := string(readSized(t, r)); got != tc.want {
			t.Fatalf("token %q answered %q, want %q", tc.token, got, tc.want)
		}
	}
	if _, err := c.Write(AppendSASLToken(nil, []byte("fin"))); err != nil {
		t.Fatal(err)
	}
	if got := readSized(t, r); len(got) != 0 {
		t.Fatalf("the last token was answered %q, want an empty token", got)
	}
	// Logged in: Kafka requests again, larger than the unauthenticated
	// bound.
	if _, err := c.Write(metadataFrame(7, 4096)); err != nil {
		t.Fatal(err)
	}
	if got := readSized(t, r); binary.BigEndian.Uint32(got) != 7 {
		t.Fatalf("Metadata after the login answered with correlation id %d", binary.BigEndian.Uint32(got))
	}
	mu.Lock()
	if want := []string{"ab", "", "client-first-message", "fin"}; !slices.Equal(steps, want) {
		t.Fatalf("step saw %q, want %q", steps, want)
	}
	mu.Unlock()

	c, r = dial()
	if _, err := c.Write(AppendSASLToken(nil, []byte("bad"))); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, r, "a failed step")

	c, r = dial()
	if _, err := c.Write(AppendSASLToken(nil, make([]byte, 2048))); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, r, "a token above the unauthenticated frame bound")
	if got := s.Limits().UnauthenticatedFramesTooLarge; got != 1 {
		t.Fatalf("UnauthenticatedFramesTooLarge = %d, want 1", got)
	}
}
