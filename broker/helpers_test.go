package broker_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

var testLogger = testkit.Logger

func startAgent(t testing.TB, cfg broker.Config) *broker.Agent {
	t.Helper()
	if cfg.Listener == "" {
		cfg.Listener = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	a, err := broker.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testkit.WaitFor(t, 15*time.Second, what, cond)
}

// controlClient is a kgo client that speaks to the agent as controller 1
// would, with a metadata offset in its client id.
func controlClient(t testing.TB, addr string, offset uint64) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID(kafkaclient.ControlClientID(1, offset)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// clientMetadata is what a fresh kgo client pointed at addr reads.
func clientMetadata(t testing.TB, addr string, topics ...string) kadm.Metadata {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).Metadata(ctx, topics...)
	if err != nil {
		t.Fatal(err)
	}
	return md
}

// send sends a request to the seed broker (the agent itself).
func send[R kmsg.Response](t testing.TB, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp.(R)
}

var (
	topicA = rl.TopicID{0xa}
	topicB = rl.TopicID{0xb}
)

// part describes a partition state for the request builders.
type part struct {
	topic  string
	id     rl.TopicID
	p      int32
	leader int32
	le     int32
	pe     int32
	isr    []int32
	reps   []int32
}

func lai(ce int32, be int64, parts ...part) *kmsg.LeaderAndISRRequest {
	req := kmsg.NewPtrLeaderAndISRRequest()
	req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = 1, ce, be
	for _, p := range parts {
		var ts *kmsg.LeaderAndISRRequestTopicState
		for i := range req.TopicStates {
			if req.TopicStates[i].Topic == p.topic {
				ts = &req.TopicStates[i]
			}
		}
		if ts == nil {
			req.TopicStates = append(req.TopicStates, kmsg.NewLeaderAndISRRequestTopicState())
			ts = &req.TopicStates[len(req.TopicStates)-1]
			ts.Topic, ts.TopicID = p.topic, p.id
		}
		ps := kmsg.NewLeaderAndISRRequestTopicPartition()
		ps.Partition, ps.ControllerEpoch, ps.Leader, ps.LeaderEpoch, ps.ZKVersion = p.p, ce, p.leader, p.le, p.pe
		ps.ISR, ps.Replicas = p.isr, p.reps
		ts.PartitionStates = append(ts.PartitionStates, ps)
	}
	return req
}

type liveBroker struct {
	id   int32
	addr string
}

func um(ce int32, be int64, brokers []liveBroker, parts ...part) *kmsg.UpdateMetadataRequest {
	req := kmsg.NewPtrUpdateMetadataRequest()
	req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = 1, ce, be
	for _, b := range brokers {
		host, port, _ := net.SplitHostPort(b.addr)
		pn, _ := strconv.Atoi(port)
		lb := kmsg.NewUpdateMetadataRequestLiveBroker()
		lb.ID, lb.Host, lb.Port = b.id, host, int32(pn)
		ep := kmsg.NewUpdateMetadataRequestLiveBrokerEndpoint()
		ep.Host, ep.Port, ep.ListenerName = host, int32(pn), "PLAINTEXT"
		lb.Endpoints = append(lb.Endpoints, ep)
		req.LiveBrokers = append(req.LiveBrokers, lb)
	}
	for _, p := range parts {
		var ts *kmsg.UpdateMetadataRequestTopicState
		for i := range req.TopicStates {
			if req.TopicStates[i].Topic == p.topic {
				ts = &req.TopicStates[i]
			}
		}
		if ts == nil {
			req.TopicStates = append(req.TopicStates, kmsg.NewUpdateMetadataRequestTopicState())
			ts = &req.TopicStates[len(req.TopicStates)-1]
			ts.Topic, ts.TopicID = p.topic, p.id
		}
		ps := kmsg.NewUpdateMetadataRequestTopicPartition()
		ps.Partition, ps.ControllerEpoch, ps.Leader, ps.LeaderEpoch, ps.ZKVersion = p.p, ce, p.leader, p.le, p.pe
		ps.ISR, ps.Replicas = p.isr, p.reps
		ts.PartitionStates = append(ts.PartitionStates, ps)
	}
	return req
}

func stopReq(ce int32, be int64, topic string, partition, le int32, del bool) *kmsg.StopReplicaRequest {
	req := kmsg.NewPtrStopReplicaRequest()
	req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = 1, ce, be
	t := kmsg.NewStopReplicaRequestTopic()
	t.Topic = topic
	ps := kmsg.NewStopReplicaRequestTopicPartitionState()
	ps.Partition, ps.LeaderEpoch, ps.Delete = partition, le, del
	t.PartitionStates = append(t.PartitionStates, ps)
	req.Topics = append(req.Topics, t)
	return req
}

// laiCodes flattens a LeaderAndIsr response to topic id/partition → code.
func laiCodes(resp *kmsg.LeaderAndISRResponse) map[string]int16 {
	out := map[string]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[fmt.Sprintf("%x-%d", t.TopicID[:1], p.Partition)] = p.ErrorCode
		}
	}
	return out
}

// fakeQuorum is a set of fake controller listeners: each answers Metadata
// naming the active one, and only the active one serves brokers.
type fakeQuorum struct {
	t     testing.TB
	nodes []*fakeNode

	mu            sync.Mutex
	active        int
	nextEpoch     int64
	epochs        map[int32]int64
	registrations []kmsg.BrokerRegistrationRequest
	heartbeats    []kmsg.BrokerHeartbeatRequest
	hbBy          map[int32]int // heartbeats per controller node
	// staleNext makes the next heartbeat fail with this error code.
	staleNext int16
	// shutdownAfter grants a shutdown request after this many asks.
	shutdownAfter int
	shutdownAsks  int
	alters        []kmsg.AlterPartitionRequest
	alter         func(*kmsg.AlterPartitionRequest) *kmsg.AlterPartitionResponse
}

type fakeNode struct {
	id  int32
	srv *kafkawire.Server
}

func newFakeQuorum(t testing.TB, n int) *fakeQuorum {
	q := &fakeQuorum{t: t, nextEpoch: 100, epochs: map[int32]int64{}, hbBy: map[int32]int{}}
	for i := 0; i < n; i++ {
		node := &fakeNode{id: int32(1001 + i)}
		srv, err := kafkawire.Listen("127.0.0.1:0", kafkawire.Config{
			APIs: map[int16]int16{3: 12, 56: 3, 62: 4, 63: 1},
			Handler: kafkawire.HandlerFunc(func(_ context.Context, _ *kafkawire.Conn, req kmsg.Request) (kmsg.Response, error) {
				return q.handle(node, req)
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		node.srv = srv
		t.Cleanup(func() { srv.Close() })
		q.nodes = append(q.nodes, node)
	}
	return q
}

func (q *fakeQuorum) addrs() []string {
	var out []string
	for _, n := range q.nodes {
		out = append(out, n.srv.Addr().String())
	}
	return out
}

func (q *fakeQuorum) setActive(i int) {
	q.mu.Lock()
	q.active = i
	q.mu.Unlock()
}

func (q *fakeQuorum) handle(node *fakeNode, req kmsg.Request) (kmsg.Response, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	isActive := q.nodes[q.active] == node
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		resp := r.ResponseKind().(*kmsg.MetadataResponse)
		resp.ControllerID = q.nodes[q.active].id
		for _, n := range q.nodes {
			host, port, _ := net.SplitHostPort(n.srv.Addr().String())
			p, _ := strconv.Atoi(port)
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = n.id, host, int32(p)
			resp.Brokers = append(resp.Brokers, b)
		}
		return resp, nil
	case *kmsg.BrokerRegistrationRequest:
		resp := r.ResponseKind().(*kmsg.BrokerRegistrationResponse)
		if !isActive {
			resp.ErrorCode = kerr.NotController.Code
			return resp, nil
		}
		q.registrations = append(q.registrations, *r)
		q.nextEpoch++
		q.epochs[r.BrokerID] = q.nextEpoch
		resp.BrokerEpoch = q.nextEpoch
		return resp, nil
	case *kmsg.BrokerHeartbeatRequest:
		resp := r.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
		if !isActive {
			resp.ErrorCode = kerr.NotController.Code
			return resp, nil
		}
		q.heartbeats = append(q.heartbeats, *r)
		q.hbBy[node.id]++
		if q.staleNext != 0 {
			resp.ErrorCode, q.staleNext = q.staleNext, 0
			return resp, nil
		}
		if q.epochs[r.BrokerID] != r.BrokerEpoch {
			resp.ErrorCode = kerr.StaleBrokerEpoch.Code
			return resp, nil
		}
		resp.IsCaughtUp = r.CurrentMetadataOffset >= r.BrokerEpoch
		resp.IsFenced = !resp.IsCaughtUp
		if r.WantShutdown {
			q.shutdownAsks++
			resp.ShouldShutdown = q.shutdownAsks > q.shutdownAfter
		}
		return resp, nil
	case *kmsg.AlterPartitionRequest:
		resp := r.ResponseKind().(*kmsg.AlterPartitionResponse)
		if !isActive {
			resp.ErrorCode = kerr.NotController.Code
			return resp, nil
		}
		q.alters = append(q.alters, *r)
		if q.alter != nil {
			return q.alter(r), nil
		}
		return resp, nil
	}
	return nil, fmt.Errorf("unexpected %T", req)
}

func (q *fakeQuorum) heartbeatsTo(id int32) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.hbBy[id]
}

func (q *fakeQuorum) snapshot() (regs []kmsg.BrokerRegistrationRequest, hbs []kmsg.BrokerHeartbeatRequest) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append(regs, q.registrations...), append(hbs, q.heartbeats...)
}
