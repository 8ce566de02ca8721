package raftnet

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
)

const ioTimeout = 5 * time.Second

// dialAccept dials to's advertised address from `from` and returns both ends.
func dialAccept(t *testing.T, from, to *StreamLayer) (dialed, accepted net.Conn) {
	t.Helper()
	type result struct {
		c   net.Conn
		err error
	}
	acc := make(chan result, 1)
	go func() {
		c, err := to.Accept()
		acc <- result{c, err}
	}()
	dialed, err := from.Dial(raft.ServerAddress(to.Addr().String()), ioTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", to.Addr(), err)
	}
	t.Cleanup(func() { dialed.Close() })
	select {
	case r := <-acc:
		if r.err != nil {
			t.Fatalf("accept: %v", r.err)
		}
		t.Cleanup(func() { r.c.Close() })
		return dialed, r.c
	case <-time.After(ioTimeout):
		t.Fatal("no connection accepted")
		return nil, nil
	}
}

func newLayer(t *testing.T, bind string) *StreamLayer {
	t.Helper()
	s, err := NewTCPStreamLayer(bind, "")
	if err != nil {
		t.Fatalf("stream layer on %s: %v", bind, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestDialLeavesFromBindIP(t *testing.T) {
	one := newLayer(t, "127.0.0.1:0")
	two, err := NewTCPStreamLayer("127.0.0.2:0", "")
	if err != nil {
		testkit.Need(t, "a second loopback address to bind (127.0.0.2)", err)
	}
	t.Cleanup(func() { two.Close() })

	for _, tc := range []struct {
		from, to *StreamLayer
		wantIP   string
	}{
		{two, one, "127.0.0.2"},
		{one, two, "127.0.0.1"},
	} {
		_, accepted := dialAccept(t, tc.from, tc.to)
		got := accepted.RemoteAddr().(*net.TCPAddr).IP.String()
		if got != tc.wantIP {
			t.Errorf("connection to %s came from %s, want %s", tc.to.Addr(), got, tc.wantIP)
		}
	}
}

func TestAdvertiseMustBeRoutable(t *testing.T) {
	if _, err := NewTCPStreamLayer("0.0.0.0:0", ""); err == nil || !strings.Contains(err.Error(), "not routable") {
		t.Fatalf("wildcard bind without advertise: %v, want not routable", err)
	}
	if _, err := NewTCPStreamLayer("127.0.0.1:0", "0.0.0.0:9000"); err == nil {
		t.Fatal("advertise 0.0.0.0 accepted")
	}
	if _, err := NewTCPStreamLayer("127.0.0.1:0", "127.0.0.1:0"); err == nil {
		t.Fatal("advertise with port 0 accepted")
	}

	s, err := NewTCPStreamLayer("0.0.0.0:0", "10.1.2.3:9093")
	if err != nil {
		t.Fatalf("wildcard bind with explicit advertise: %v", err)
	}
	defer s.Close()
	if got := s.Addr().String(); got != "10.1.2.3:9093" {
		t.Fatalf("Addr() = %s, want the advertised address", got)
	}

	// An empty advertise takes the real port, not the 0 that was asked for.
	l := newLayer(t, "127.0.0.1:0")
	if port := l.Addr().(*net.TCPAddr).Port; port == 0 {
		t.Fatal("advertised port is 0")
	}
}

func TestCloseDropsEveryConnection(t *testing.T) {
	a := newLayer(t, "127.0.0.1:0")
	b := newLayer(t, "127.0.0.1:0")
	_, bAccepted := dialAccept(t, a, b) // a dialed b
	bDialed, _ := dialAccept(t, b, a)   // a accepted from b

	if err := a.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	for name, c := range map[string]net.Conn{"b's accepted conn": bAccepted, "b's dialed conn": bDialed} {
		_ = c.SetReadDeadline(time.Now().Add(ioTimeout))
		_, err := c.Read(make([]byte, 1))
		if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("%s: read after peer closed: %v, want EOF or reset", name, err)
		}
	}
	if _, err := a.Accept(); err == nil {
		t.Error("Accept succeeded after Close")
	}
	if _, err := a.Dial(raft.ServerAddress(b.Addr().String()), ioTimeout); err == nil {
		t.Error("Dial succeeded after Close")
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Pipelined replication can wedge replication and Shutdown in the raft
// version we use; the transport must refuse it so raft falls back to
// synchronous AppendEntries.
func TestRaftTransportRefusesPipelining(t *testing.T) {
	a := newLayer(t, "127.0.0.1:0")
	b := newLayer(t, "127.0.0.1:0")
	trans := NewRaftTransport(a, nil)
	defer trans.Close()
	p, err := trans.AppendEntriesPipeline("b", raft.ServerAddress(b.Addr().String()))
	if !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		if p != nil {
			p.Close()
		}
		t.Fatalf("AppendEntriesPipeline: %v, want ErrPipelineReplicationNotSupported", err)
	}
}
