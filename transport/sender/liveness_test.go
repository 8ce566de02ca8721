package sender_test

import (
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/transport/listener"
	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
	"github.com/ctrlquorum/ctrlquorum/transport/sender"
	"github.com/ctrlquorum/ctrlquorum/voter"
)

// registeredAgent starts a broker agent registered with a controller of
// one voter (real raft and listener, a session of a minute), so that it
// takes requests for its broker epoch, which it returns. The controller
// sends the agent nothing: the test's pool does.
func registeredAgent(t *testing.T) (*broker.Agent, int64) {
	t.Helper()
	stream, err := raftnet.NewTCPStreamLayer("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := controller.StartNode(controller.NodeConfig{NodeID: 1001, DataDir: t.TempDir(),
		Peers: []controller.Peer{{ID: 1001, Addr: stream.Addr().String()}}, SessionTimeout: time.Minute,
		Logger: testLogger(t).Named("voter"),
		Voter: func(vc *voter.Config) {
			vc.Stream = stream
			voter.FastTimeouts(vc)
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	l, err := listener.New(listener.Config{Listener: ln, Node: n, Logger: testLogger(t).Named("listener"),
		Peers: []listener.PeerListener{{NodeID: 1001, Host: "127.0.0.1", Port: int32(ln.Addr().(*net.TCPAddr).Port)}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	a := startAgent(t, broker.Config{BrokerID: 1, Controllers: []string{ln.Addr().String()}, HeartbeatInterval: 50 * time.Millisecond})
	waitFor(t, "the broker to register", func() bool { return a.Status().Registered })
	return a, a.Status().BrokerEpoch
}

// refusals is a RefusalHandler that keeps what it was told.
type refusals struct {
	mu  sync.Mutex
	got []controller.ListenerRefusal
}

func (r *refusals) HandleListenerRefused(x controller.ListenerRefusal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, x)
}

func (r *refusals) list() []controller.ListenerRefusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func epochSet(b int32, brokerEpoch int64, offset uint64, addr string) controller.Requests {
	h := hdr(1, offset)
	h.BrokerEpoch = brokerEpoch
	live := []controller.LiveBroker{{ID: b, Endpoints: endpoint(addr)}}
	return set(b, h, live, []controller.PartitionState{ps("t", topicID, 0, b, int32(offset), b)})
}

// TestListenerRefusedAfterReset: a broker that stops (its connections
// closed, its listener closed) while the sender is idle is reported at
// once, with the broker epoch of the requests it last answered, and only
// once for that epoch however often the sender's retries are refused
// afterwards.
func TestListenerRefusedAfterReset(t *testing.T) {
	a, epoch := registeredAgent(t)
	addr := a.Addr()
	bk := newBook()
	bk.set(1, addr)
	rec := &refusals{}
	p := newPool(t, bk, sender.Config{Refusals: rec})
	p.Send(epochSet(1, epoch, 1, addr))
	waitFor(t, "the first delivery", func() bool { return p.Stats().Brokers[1].Sent == 2 })

	a.Close()
	waitFor(t, "the refusal to be reported", func() bool { return len(rec.list()) > 0 })
	want := controller.ListenerRefusal{BrokerID: 1, BrokerEpoch: epoch, Addr: addr}
	if got := rec.list(); !slices.Equal(got, []controller.ListenerRefusal{want}) {
		t.Fatalf("reported %+v, want %+v", got, want)
	}

	// The sender goes on trying; each connect is refused, and none is
	// reported again.
	p.Send(epochSet(1, epoch, 2, addr))
	waitFor(t, "retries against the closed port", func() bool { return p.Stats().Brokers[1].Retries >= 3 })
	if got := rec.list(); len(got) != 1 {
		t.Fatalf("reported again: %+v", got)
	}
	if s := p.Stats().Brokers[1]; s.Resets != 1 || s.Refusals != 1 {
		t.Fatalf("counters: %+v", s)
	}
}

// proxy forwards connections to a broker and can close every connection
// it holds while still listening (a broker that closes an idle
// connection), or hold every byte in both directions while accepting new
// connections (a paused process, whose kernel still accepts connections
// into its listener's backlog).
type proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	conns  []net.Conn
	paused chan struct{} // closed while running
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	px := &proxy{ln: ln, target: target, paused: make(chan struct{})}
	close(px.paused)
	go px.accept()
	t.Cleanup(func() {
		ln.Close()
		px.resume()
		px.cut()
	})
	return px
}

func (px *proxy) addr() string { return px.ln.Addr().String() }

func (px *proxy) accept() {
	for {
		c, err := px.ln.Accept()
		if err != nil {
			return
		}
		go px.forward(c)
	}
}

func (px *proxy) forward(c net.Conn) {
	px.gate()
	u, err := net.Dial("tcp", px.target)
	if err != nil {
		c.Close()
		return
	}
	px.mu.Lock()
	px.conns = append(px.conns, c, u)
	px.mu.Unlock()
	go px.copy(u, c)
	px.copy(c, u)
}

// copy moves bytes from src to dst, each read held while paused.
func (px *proxy) copy(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			px.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (px *proxy) gate() {
	px.mu.Lock()
	ch := px.paused
	px.mu.Unlock()
	<-ch
}

func (px *proxy) pause() {
	px.mu.Lock()
	px.paused = make(chan struct{})
	px.mu.Unlock()
}

func (px *proxy) resume() {
	px.mu.Lock()
	defer px.mu.Unlock()
	select {
	case <-px.paused:
	default:
		close(px.paused)
	}
}

func (px *proxy) cut() {
	px.mu.Lock()
	conns := px.conns
	px.conns = nil
	px.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// TestConnectionClosedByLiveBroker: a connection the broker closes while
// its listener still accepts (an idle timeout) is seen, its listener
// probed and not reported, and the next request goes over a new
// connection.
func TestConnectionClosedByLiveBroker(t *testing.T) {
	a, epoch := registeredAgent(t)
	px := newProxy(t, a.Addr())
	bk := newBook()
	bk.set(1, px.addr())
	rec := &refusals{}
	p := newPool(t, bk, sender.Config{Refusals: rec})
	p.Send(epochSet(1, epoch, 1, px.addr()))
	waitFor(t, "the first delivery", func() bool { return p.Stats().Brokers[1].Sent == 2 })

	px.cut()
	waitFor(t, "the reset to be seen", func() bool { return p.Stats().Brokers[1].Resets == 1 })
	p.Send(epochSet(1, epoch, 2, px.addr()))
	waitFor(t, "delivery over a new connection", func() bool { return a.Status().MetadataOffset == 2 })
	if got := rec.list(); len(got) != 0 || p.Stats().Brokers[1].Refusals != 0 {
		t.Fatalf("a live broker was reported: %+v", got)
	}
}

// TestPausedBrokerIsNotReported: a broker that stops answering but keeps
// its connections and accepts new ones (a paused process) times out
// request after request and is never reported; once it answers again
// it gets what was sent.
func TestPausedBrokerIsNotReported(t *testing.T) {
	a, epoch := registeredAgent(t)
	px := newProxy(t, a.Addr())
	bk := newBook()
	bk.set(1, px.addr())
	rec := &refusals{}
	p := newPool(t, bk, sender.Config{Refusals: rec, RequestTimeout: 100 * time.Millisecond, DialTimeout: 100 * time.Millisecond})
	p.Send(epochSet(1, epoch, 1, px.addr()))
	waitFor(t, "the first delivery", func() bool { return p.Stats().Brokers[1].Sent == 2 })

	px.pause()
	p.Send(epochSet(1, epoch, 2, px.addr()))
	waitFor(t, "requests to time out again and again", func() bool { return p.Stats().Brokers[1].Retries >= 5 })
	if s := p.Stats().Brokers[1]; len(rec.list()) != 0 || s.Resets != 0 || s.Refusals != 0 {
		t.Fatalf("a paused broker was reported: %+v, counters %+v", rec.list(), s)
	}
	px.resume()
	waitFor(t, "delivery once the broker answers", func() bool { return a.Status().MetadataOffset == 2 })
	if len(rec.list()) != 0 {
		t.Fatalf("a paused broker was reported: %+v", rec.list())
	}
}
