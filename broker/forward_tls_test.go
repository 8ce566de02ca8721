package broker_test

import (
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig/tlstest"
)

// TestForwardCarriesTheClientsCertificate: over TLS, a broker forwards a
// client's request in an Envelope naming the principal of the client's
// certificate, from its own connection (presenting the broker's
// certificate) to a controller that presents a voter's; the controller's
// answer reaches the client unchanged.
func TestForwardCarriesTheClientsCertificate(t *testing.T) {
	pki := tlstest.NewPKI(t, "cluster CA")
	voter := pki.Reloader(pki.Voter(1001))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	pn, _ := strconv.Atoi(port)

	var mu sync.Mutex
	var principals []string
	var senders []tlsconfig.Identity
	ctrl := kafkawire.Serve(tls.NewListener(ln, voter.ServerConfig(nil)), kafkawire.Config{
		APIs: map[int16]int16{3: 12, 58: 0},
		Handler: kafkawire.HandlerFunc(func(_ context.Context, c *kafkawire.Conn, req kmsg.Request) (kmsg.Response, error) {
			switch r := req.(type) {
			case *kmsg.MetadataRequest:
				resp := r.ResponseKind().(*kmsg.MetadataResponse)
				b := kmsg.NewMetadataResponseBroker()
				b.NodeID, b.Host, b.Port = 1001, host, int32(pn)
				resp.Brokers, resp.ControllerID = append(resp.Brokers, b), 1001
				return resp, nil
			case *kmsg.EnvelopeRequest:
				env, err := kafkaclient.OpenRequest(r, func(int16, int16) bool { return true })
				if err != nil {
					return nil, err
				}
				sender, _ := tlsconfig.PeerIdentity(c.TLS)
				mu.Lock()
				principals, senders = append(principals, env.Principal), append(senders, sender)
				mu.Unlock()
				ct := env.Request.(*kmsg.CreateTopicsRequest)
				inner := ct.ResponseKind().(*kmsg.CreateTopicsResponse)
				for _, tp := range ct.Topics {
					rt := kmsg.NewCreateTopicsResponseTopic()
					rt.Topic, rt.NumPartitions = tp.Topic, 7
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

	a := startAgent(t, broker.Config{BrokerID: 1, TLS: pki.Reloader(pki.Broker(1)), Voters: []int32{1001},
		Controllers: []string{ln.Addr().String()}, HeartbeatInterval: time.Hour})
	dave := pki.Reloader(pki.Client("dave"))
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.Addr()), kgo.Dialer(dave.Dialer(&net.Dialer{Timeout: 10 * time.Second}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = "dave-1"
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.(*kmsg.CreateTopicsResponse); len(ct.Topics) != 1 || ct.Topics[0].Topic != "dave-1" || ct.Topics[0].NumPartitions != 7 {
		t.Fatalf("relayed answer: %+v", ct.Topics)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(principals) != 1 || principals[0] != "User:dave" || !senders[0].IsBroker() || senders[0].Broker != 1 {
		t.Fatalf("the controller saw principals %v from %v", principals, senders)
	}
}
