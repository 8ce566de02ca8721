package kafkaclient

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// TestWaitIdle: a wait ended by its context leaves the connection usable
// for the next request; a wait ended by the server closing the
// connection says the peer is gone, and the connection is broken; a dial
// of the closed port is refused, which Refused tells from other errors.
func TestWaitIdle(t *testing.T) {
	srv, err := kafkawire.Listen("127.0.0.1:0", kafkawire.Config{
		APIs: map[int16]int16{3: 5},
		Handler: kafkawire.HandlerFunc(func(_ context.Context, _ *kafkawire.Conn, req kmsg.Request) (kmsg.Response, error) {
			return req.ResponseKind(), nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr().String()
	c, err := Dial(context.Background(), addr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.WaitIdle(ctx) }()
		cancel()
		if err := <-done; err != context.Canceled {
			t.Fatalf("wait ended by its context: %v", err)
		}
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(5)
		if _, err := c.Request(context.Background(), req); err != nil {
			t.Fatalf("request after a wait: %v", err)
		}
	}

	done := make(chan error, 1)
	go func() { done <- c.WaitIdle(context.Background()) }()
	srv.Close()
	select {
	case err := <-done:
		if !PeerGone(err) {
			t.Fatalf("the server closed the connection, the wait says %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not see the server close the connection")
	}
	if _, err := c.Request(context.Background(), kmsg.NewPtrMetadataRequest()); err == nil {
		t.Fatal("a request on the connection the server closed succeeded")
	}

	_, err = net.DialTimeout("tcp", addr, 5*time.Second)
	if !Refused(err) || PeerGone(err) {
		t.Fatalf("dial of the closed port: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if Refused(err) {
		t.Fatalf("a cancelled dial counts as refused: %v", err)
	}
}
