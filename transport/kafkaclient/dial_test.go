package kafkaclient

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig/tlstest"
)

// TestDialTLS: a controller-side client reaches broker 2's TLS
// listener only when the listener's certificate names broker 2, and the
// broker sees the client's certificate.
func TestDialTLS(t *testing.T) {
	pki := tlstest.NewPKI(t, "test CA")
	broker := pki.Reloader(pki.Broker(2))
	controller := pki.Reloader(pki.Voter(1001))
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 1)
	srv := kafkawire.Serve(tls.NewListener(tcp, broker.ServerConfig(tlsconfig.Voters(1001))), kafkawire.Config{
		APIs: map[int16]int16{3: 5},
		Handler: kafkawire.HandlerFunc(func(_ context.Context, c *kafkawire.Conn, req kmsg.Request) (kmsg.Response, error) {
			id, err := tlsconfig.PeerIdentity(c.TLS)
			if err == nil {
				select {
				case seen <- id.String():
				default:
				}
			}
			return req.ResponseKind(), nil
		}),
	})
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	conn, err := Dial(ctx, srv.Addr().String(), Options{Dial: controller.Dialer(nil, tlsconfig.Broker(2))})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := kmsg.NewPtrMetadataRequest()
	if err := conn.Pick(req, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Request(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := <-seen; got != `"voter-1001" voter 1001` {
		t.Fatalf("the broker saw %s", got)
	}
	// Dialling broker 2's address expecting broker 3 fails at the handshake.
	if c, err := Dial(ctx, srv.Addr().String(), Options{Dial: controller.Dialer(nil, tlsconfig.Broker(3))}); err == nil {
		c.Close()
		t.Fatal("connected to broker 2 as broker 3")
	}
	// So does a plain connection to a TLS listener.
	if c, err := Dial(ctx, srv.Addr().String(), Options{DialTimeout: 2 * time.Second}); err == nil {
		c.Close()
		t.Fatal("a plain connection negotiated with a TLS listener")
	}
	// TLSDialer with a standard config verifying the host name.
	cfg := controller.ClientConfig("127.0.0.1", nil)
	c, err := Dial(ctx, srv.Addr().String(), Options{Dial: TLSDialer(nil, cfg)})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
