package broker_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// TestForwardAfterAnUnansweredAttempt: a forwarded change whose first
// attempt reached the controller and got no answer (the controller's
// connection broke, as in a failover) is sent again; when the second
// attempt is refused (the topic is gone: the first deleted it), the
// client gets REQUEST_TIMED_OUT, an outcome it cannot read as "nothing
// happened", and not the refusal. A refusal with no unanswered attempt
// before it is passed on as it is.
func TestForwardAfterAnUnansweredAttempt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	pn, _ := strconv.Atoi(port)
	var drop atomic.Bool // the next envelope gets no answer
	var envelopes atomic.Int32
	ctrl := kafkawire.Serve(ln, kafkawire.Config{
		APIs: map[int16]int16{3: 12, 58: 0},
		Handler: kafkawire.HandlerFunc(func(_ context.Context, _ *kafkawire.Conn, req kmsg.Request) (kmsg.Response, error) {
			switch r := req.(type) {
			case *kmsg.MetadataRequest:
				resp := r.ResponseKind().(*kmsg.MetadataResponse)
				b := kmsg.NewMetadataResponseBroker()
				b.NodeID, b.Host, b.Port = 1001, host, int32(pn)
				resp.Brokers, resp.ControllerID = append(resp.Brokers, b), 1001
				return resp, nil
			case *kmsg.EnvelopeRequest:
				envelopes.Add(1)
				if drop.CompareAndSwap(true, false) {
					return nil, errors.New("the controller goes away before answering")
				}
				env, err := kafkaclient.OpenRequest(r, func(int16, int16) bool { return true })
				if err != nil {
					return nil, err
				}
				dt := env.Request.(*kmsg.DeleteTopicsRequest)
				inner := dt.ResponseKind().(*kmsg.DeleteTopicsResponse)
				names := dt.TopicNames
				for _, tp := range dt.Topics {
					names = append(names, *tp.Topic)
				}
				for _, name := range names {
					rt := kmsg.NewDeleteTopicsResponseTopic()
					rt.Topic, rt.ErrorCode = kmsg.StringPtr(name), kerr.UnknownTopicOrPartition.Code
					inner.Topics = append(inner.Topics, rt)
				}
				resp := r.ResponseKind().(*kmsg.EnvelopeResponse)
				resp.ResponseData = kafkaclient.SealResponse(env.CorrelationID, env.Request, inner)
				return resp, nil
			}
			return nil, nil
		}),
	})
	t.Cleanup(func() { ctrl.Close() })

	a := startAgent(t, broker.Config{BrokerID: 1, Voters: []int32{1001}, Controllers: []string{ln.Addr().String()}, HeartbeatInterval: time.Hour})
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.Addr()), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deleteTopic := func() int16 {
		t.Helper()
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TopicNames, req.TimeoutMillis = []string{"t"}, 10000
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr("t")
		req.Topics = append(req.Topics, rt)
		resp, err := cl.SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		dr := resp.(*kmsg.DeleteTopicsResponse)
		if len(dr.Topics) != 1 {
			t.Fatalf("answer for %d topics", len(dr.Topics))
		}
		return dr.Topics[0].ErrorCode
	}

	if code := deleteTopic(); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("a refusal with nothing before it: %v, want it passed on", kerr.ErrorForCode(code))
	}
	drop.Store(true)
	before := envelopes.Load()
	if code := deleteTopic(); code != kerr.RequestTimedOut.Code {
		t.Fatalf("a refusal after an unanswered attempt: %v, want %v", kerr.ErrorForCode(code), kerr.RequestTimedOut)
	}
	if n := envelopes.Load() - before; n != 2 {
		t.Fatalf("%d attempts reached the controller, want the unanswered one and its retry", n)
	}
}
