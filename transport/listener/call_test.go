package listener

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
)

// call sends one request, at the version it carries, to a listener on a
// connection of its own, as one voter calls another (callPeer).
func call(ctx context.Context, addr, clientID string, req kmsg.Request) (kmsg.Response, error) {
	return callAuth(ctx, nil, nil, addr, clientID, req)
}

// callWith is call over a connection from dial (plain TCP when nil).
func callWith(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr, clientID string, req kmsg.Request) (kmsg.Response, error) {
	return callAuth(ctx, dial, nil, addr, clientID, req)
}

// callAuth is callWith that first logs in with mech when it is not nil.
func callAuth(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), mech kgosasl.Mechanism, addr, clientID string, req kmsg.Request) (kmsg.Response, error) {
	return callPeer(ctx, kafkaclient.Options{ClientID: clientID, Dial: dial, SASL: mech}, addr, req)
}
