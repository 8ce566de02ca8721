package kafkaclient

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// fakeQuorum is three Kafka-protocol listeners, nodes 1001 to 1003. Each
// answers Metadata naming the controller in its view, and a
// BrokerHeartbeat with NOT_CONTROLLER unless it is the active one.
type fakeQuorum struct {
	srvs []*kafkawire.Server

	mu       sync.Mutex
	active   int   // index of the node that takes heartbeats, -1: none
	views    []int // index of the controller each node names, -1: none
	answered []int // heartbeats taken per node
}

func newFakeQuorum(t *testing.T) *fakeQuorum {
	q := &fakeQuorum{views: []int{0, 0, 0}, answered: make([]int, 3)}
	for i := range 3 {
		srv, err := kafkawire.Listen("127.0.0.1:0", kafkawire.Config{
			APIs: map[int16]int16{3: 12, 63: 1},
			Handler: kafkawire.HandlerFunc(func(_ context.Context, _ *kafkawire.Conn, req kmsg.Request) (kmsg.Response, error) {
				return q.handle(i, req), nil
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		q.srvs = append(q.srvs, srv)
	}
	return q
}

// elect makes node i the active controller, named by every node.
func (q *fakeQuorum) elect(i int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.active = i
	for n := range q.views {
		q.views[n] = i
	}
}

func (q *fakeQuorum) addr(i int) string { return q.srvs[i].Addr().String() }

func (q *fakeQuorum) taken() []int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]int(nil), q.answered...)
}

func (q *fakeQuorum) handle(i int, req kmsg.Request) kmsg.Response {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		resp := r.ResponseKind().(*kmsg.MetadataResponse)
		resp.ControllerID = -1
		if v := q.views[i]; v >= 0 {
			resp.ControllerID = int32(1001 + v)
		}
		for n, srv := range q.srvs {
			host, port, _ := net.SplitHostPort(srv.Addr().String())
			p, _ := strconv.Atoi(port)
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = int32(1001+n), host, int32(p)
			resp.Brokers = append(resp.Brokers, b)
		}
		return resp
	case *kmsg.BrokerHeartbeatRequest:
		resp := r.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
		if i != q.active {
			resp.ErrorCode = kerr.NotController.Code
			return resp
		}
		q.answered[i]++
		return resp
	}
	return req.ResponseKind()
}

func heartbeat() kmsg.Request { return kmsg.NewPtrBrokerHeartbeatRequest() }

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestControllerFollowsNotController: the controller is found through a
// standby; a NOT_CONTROLLER answer is returned as it came and forgets the
// connection, so the next request finds the new controller; Do does both
// in one call.
func TestControllerFollowsNotController(t *testing.T) {
	q := newFakeQuorum(t)
	q.elect(1)
	var found []int32
	c := NewController(ControllerConfig{Bootstrap: []string{q.addr(0)}, Found: func(n Node) { found = append(found, n.ID) }})
	defer c.Close()
	ctx := ctxT(t, 10*time.Second)

	resp, err := c.Request(ctx, heartbeat())
	if err != nil || resp.(*kmsg.BrokerHeartbeatResponse).ErrorCode != 0 {
		t.Fatalf("first request: %v %+v", err, resp)
	}
	q.elect(2)
	resp, err = c.Request(ctx, heartbeat())
	if err != nil || resp.(*kmsg.BrokerHeartbeatResponse).ErrorCode != kerr.NotController.Code {
		t.Fatalf("request to the old controller: %v %+v", err, resp)
	}
	if resp, err = c.Request(ctx, heartbeat()); err != nil || resp.(*kmsg.BrokerHeartbeatResponse).ErrorCode != 0 {
		t.Fatalf("request after NOT_CONTROLLER: %v %+v", err, resp)
	}
	q.elect(0)
	if resp, err = c.Do(ctx, heartbeat(), nil); err != nil || resp.(*kmsg.BrokerHeartbeatResponse).ErrorCode != 0 {
		t.Fatalf("Do across a change of controller: %v %+v", err, resp)
	}
	if got := q.taken(); got[0] != 1 || got[1] != 1 || got[2] != 1 {
		t.Fatalf("heartbeats taken per node %v, want one each", got)
	}
	if len(found) != 3 || found[0] != 1002 || found[1] != 1003 || found[2] != 1001 {
		t.Fatalf("controllers found %v", found)
	}
}

// TestControllerStaleView: a standby that names a node no longer active
// sends the search on to the next bootstrap address, because the node
// named must name itself.
func TestControllerStaleView(t *testing.T) {
	q := newFakeQuorum(t)
	q.elect(2)
	q.mu.Lock()
	q.views[0], q.views[1] = 1, 2 // node 0 is behind: it names node 1
	q.mu.Unlock()
	c := NewController(ControllerConfig{Bootstrap: []string{q.addr(0), q.addr(2)}})
	defer c.Close()
	if _, err := c.Request(ctxT(t, 10*time.Second), heartbeat()); err != nil {
		t.Fatal(err)
	}
	if got := q.taken(); got[2] != 1 {
		t.Fatalf("heartbeats taken per node %v, want node 1003's", got)
	}
	// With the stale standby alone, nothing is found.
	c2 := NewController(ControllerConfig{Bootstrap: []string{q.addr(0)}})
	defer c2.Close()
	_, err := c2.Request(ctxT(t, 10*time.Second), heartbeat())
	if !errors.Is(err, ErrNotController) || !strings.Contains(err.Error(), "node 1002 names 1003") {
		t.Fatalf("through a stale standby: %v", err)
	}
}

// TestControllerDoWaits: Do keeps searching while no controller is known
// until one is, or its context ends; Permanent ends it at once; a check
// that says NOT_CONTROLLER sends the request again.
func TestControllerDoWaits(t *testing.T) {
	q := newFakeQuorum(t)
	q.elect(-1)
	c := NewController(ControllerConfig{Bootstrap: []string{q.addr(0), q.addr(1)}})
	defer c.Close()

	_, err := c.Do(ctxT(t, 500*time.Millisecond), heartbeat(), nil)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "knows no active controller") {
		t.Fatalf("with no controller: %v", err)
	}

	go func() {
		time.Sleep(300 * time.Millisecond)
		q.elect(1)
	}()
	if _, err := c.Do(ctxT(t, 10*time.Second), heartbeat(), nil); err != nil {
		t.Fatalf("through an election: %v", err)
	}

	checks := 0
	resp, err := c.Do(ctxT(t, 10*time.Second), heartbeat(), func(kmsg.Response) error {
		if checks++; checks == 1 {
			return NotController(kerr.NotController.Code)
		}
		return nil
	})
	if err != nil || resp == nil || checks != 2 {
		t.Fatalf("after a check saying NOT_CONTROLLER: %v, %d checks", err, checks)
	}
	if err := NotController(0); err != nil {
		t.Fatalf("NotController(0) = %v", err)
	}
	refused := errors.New("refused")
	resp, err = c.Do(ctxT(t, 10*time.Second), heartbeat(), func(kmsg.Response) error { return refused })
	if !errors.Is(err, refused) || resp != nil {
		t.Fatalf("a check's own error: %v", err)
	}

	q.elect(-1)
	c.Invalidate()
	stop := errors.New("stop")
	p := NewController(ControllerConfig{Bootstrap: []string{q.addr(0)}, Permanent: func(err error) error {
		if strings.Contains(err.Error(), "knows no active controller") {
			return stop
		}
		return nil
	}})
	defer p.Close()
	start := time.Now()
	if _, err := p.Do(ctxT(t, 10*time.Second), heartbeat(), nil); !errors.Is(err, stop) || time.Since(start) > 5*time.Second {
		t.Fatalf("a permanent failure: %v after %v", err, time.Since(start))
	}
}

// TestNotControllerAnswer: where each kind of answer says
// NOT_CONTROLLER.
func TestNotControllerAnswer(t *testing.T) {
	nc := kerr.NotController.Code
	for _, tc := range []struct {
		name string
		resp kmsg.Response
		want bool
	}{
		{"Metadata naming another", &kmsg.MetadataResponse{ControllerID: 1002}, true},
		{"Metadata naming itself", &kmsg.MetadataResponse{ControllerID: 1001}, false},
		{"DescribeCluster of the controllers naming another", &kmsg.DescribeClusterResponse{Version: 1, EndpointType: 2, ControllerID: 1002}, true},
		{"DescribeCluster of the controllers naming itself", &kmsg.DescribeClusterResponse{Version: 1, EndpointType: 2, ControllerID: 1001}, false},
		{"DescribeCluster of the brokers naming a broker", &kmsg.DescribeClusterResponse{Version: 1, EndpointType: 1, ControllerID: 1}, false},
		{"DescribeCluster refused", &kmsg.DescribeClusterResponse{ErrorCode: kerr.UnsupportedEndpointType.Code}, false},
		{"CreateTopics, first topic", &kmsg.CreateTopicsResponse{Topics: []kmsg.CreateTopicsResponseTopic{{ErrorCode: nc}, {}}}, true},
		{"CreateTopics, a later topic", &kmsg.CreateTopicsResponse{Topics: []kmsg.CreateTopicsResponseTopic{{}, {ErrorCode: nc}}}, false},
		{"ElectLeaders, first partition", &kmsg.ElectLeadersResponse{Topics: []kmsg.ElectLeadersResponseTopic{{Partitions: []kmsg.ElectLeadersResponseTopicPartition{{ErrorCode: nc}}}}}, true},
		{"ElectLeaders, top level", &kmsg.ElectLeadersResponse{ErrorCode: nc}, true},
		{"BrokerHeartbeat", &kmsg.BrokerHeartbeatResponse{ErrorCode: nc}, true},
		{"DescribeACLs", &kmsg.DescribeACLsResponse{ErrorCode: nc}, true},
		{"BrokerHeartbeat, no error", &kmsg.BrokerHeartbeatResponse{}, false},
		{"Produce (no top-level code)", &kmsg.ProduceResponse{}, false},
	} {
		if got := notControllerAnswer(tc.resp, 1001, nil); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// Found among the voters: a voter's Metadata names a live broker
	// while there is one, another voter or none when it is not active.
	voters := map[int32]bool{1001: true, 1002: true, 1003: true}
	for _, tc := range []struct {
		name       string
		controller int32
		want       bool
	}{
		{"naming a broker", 1, false},
		{"naming itself", 1001, false},
		{"naming another voter", 1002, true},
		{"naming none", -1, true},
	} {
		if got := notControllerAnswer(&kmsg.MetadataResponse{ControllerID: tc.controller}, 1001, voters); got != tc.want {
			t.Errorf("a voter's Metadata %s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestControllerFoundByEndpointKind: at a voter, the controller is the
// voter DescribeCluster names when asked for the controllers (KIP-919),
// whatever its Metadata says (a voter's Metadata names a broker); at a
// broker, which answers that question MISMATCHED_ENDPOINT_TYPE, it is the
// broker its Metadata names.
func TestControllerFoundByEndpointKind(t *testing.T) {
	type node struct {
		id     int32
		srv    *kafkawire.Server
		broker bool
	}
	var nodes []*node
	entry := func(n *node) (string, int32) {
		host, port, _ := net.SplitHostPort(n.srv.Addr().String())
		p, _ := strconv.Atoi(port)
		return host, int32(p)
	}
	for _, n := range []*node{{id: 1001}, {id: 1, broker: true}} {
		srv, err := kafkawire.Listen("127.0.0.1:0", kafkawire.Config{
			APIs: map[int16]int16{3: 12, 60: 1},
			Handler: kafkawire.HandlerFunc(func(_ context.Context, _ *kafkawire.Conn, req kmsg.Request) (kmsg.Response, error) {
				broker := nodes[1]
				switch r := req.(type) {
				case *kmsg.DescribeClusterRequest:
					resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
					if n.broker {
						resp.ErrorCode = kerr.MismatchedEndpointType.Code
						return resp, nil
					}
					b := kmsg.NewDescribeClusterResponseBroker()
					b.NodeID = n.id
					b.Host, b.Port = entry(n)
					resp.Brokers, resp.ControllerID = append(resp.Brokers, b), n.id
					return resp, nil
				case *kmsg.MetadataRequest:
					resp := r.ResponseKind().(*kmsg.MetadataResponse)
					b := kmsg.NewMetadataResponseBroker()
					b.NodeID = broker.id
					b.Host, b.Port = entry(broker)
					resp.Brokers, resp.ControllerID = append(resp.Brokers, b), broker.id
					return resp, nil
				}
				return nil, errors.New("not served")
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		n.srv = srv
		nodes = append(nodes, n)
	}
	for _, boot := range nodes {
		var found []int32
		c := NewController(ControllerConfig{Bootstrap: []string{boot.srv.Addr().String()}, Found: func(n Node) { found = append(found, n.ID) }})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.Request(ctx, kmsg.NewPtrMetadataRequest())
		cancel()
		c.Close()
		if err != nil {
			t.Fatalf("bootstrapped at node %d: %v", boot.id, err)
		}
		if len(found) != 1 || found[0] != boot.id {
			t.Fatalf("bootstrapped at node %d, found %v", boot.id, found)
		}
	}
}

// TestControllerDoReportsTheAttemptBeforeTheDeadline: a node that closes
// the connection on the first request (as a listener requiring SASL does
// with a client that did not log in), and on the next attempt accepts but
// never answers, so that the deadline falls in that attempt: Do's error
// still names the closed connection, not only the deadline.
func TestControllerDoReportsTheAttemptBeforeTheDeadline(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var held []net.Conn
	var mu sync.Mutex
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	}()
	go func() {
		for n := 0; ; n++ {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			if n == 0 {
				// The whole request read, so that the close is an EOF
				// (unread data would make it a reset).
				var size [4]byte
				if _, err := io.ReadFull(conn, size[:]); err == nil {
					_, _ = io.ReadFull(conn, make([]byte, binary.BigEndian.Uint32(size[:])))
				}
				_ = conn.Close()
				continue
			}
			mu.Lock()
			held = append(held, conn)
			mu.Unlock()
		}
	}()
	c := NewController(ControllerConfig{Bootstrap: []string{l.Addr().String()}})
	defer c.Close()
	_, err = c.Do(ctxT(t, 2*time.Second), heartbeat(), nil)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "EOF") {
		t.Fatalf("want the deadline and the closed connection of the attempt before it: %v", err)
	}
}
