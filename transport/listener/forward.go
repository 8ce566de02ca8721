package listener

import (
	"context"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// forwardClientID is the client id of the connection a voter forwards
// requests on to another (the requests themselves keep their client's).
const forwardClientID = "ctrlquorum-forward"

func clientID(c *kafkawire.Conn) string {
	if c == nil {
		return ""
	}
	return c.ClientID
}

// forwarded reports whether the request came in an Envelope. A voter
// never forwards such a request again: two voters that each believe the
// other is active must not bounce it between them.
func forwarded(c *kafkawire.Conn) bool {
	if c == nil || c.Session == nil {
		return false
	}
	a, ok := c.Session.Value.(*connAuth)
	return ok && a.envelopePrincipal != ""
}

// maxPeerResponse bounds a response read from another voter.
const maxPeerResponse = 100 << 20

// peerCallTimeout bounds a call to another voter whose context has no
// deadline.
const peerCallTimeout = 30 * time.Second

// callPeer sends one request, at the version it carries, to a
// Kafka-protocol listener on a connection of its own (dialled with
// opts.Dial, logged in with opts.SASL) and returns the decoded response.
// The voters run the same listener, so a request one could decode the
// other can too, at the same version: no ApiVersions round is needed.
// Calls between voters are rare (forwarded config changes, quorum
// probes), which is why each dials afresh rather than keeping a pool.
// The context, or peerCallTimeout, bounds the whole call.
func callPeer(ctx context.Context, opts kafkaclient.Options, addr string, req kmsg.Request) (kmsg.Response, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, peerCallTimeout)
		defer cancel()
		deadline, _ = ctx.Deadline()
	}
	opts.NoApiVersions = true
	opts.MaxResponseBytes = maxPeerResponse
	opts.DialTimeout = max(time.Until(deadline), time.Nanosecond)
	conn, err := kafkaclient.Dial(ctx, addr, opts)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.Request(ctx, req)
}

// callVoter is callPeer to another voter's listener, dialled with Dial
// and logged in with Security.PeerSASL.
func (l *Listener) callVoter(ctx context.Context, p PeerListener, clientID string, req kmsg.Request) (kmsg.Response, error) {
	return callPeer(ctx, kafkaclient.Options{ClientID: clientID, Dial: l.cfg.Dial, SASL: l.cfg.Security.PeerSASL}, p.addr(), req)
}

// forward sends a request to the active controller in an Envelope (see
// envelope.go) and returns its answer, or nil when there is no active
// controller to send it to (unknown, this voter, unreachable, or no
// longer active).
func (l *Listener) forward(ctx context.Context, c *kafkawire.Conn, req kmsg.Request) kmsg.Response {
	id := l.activeID()
	p, ok := l.peer(id)
	if id < 0 || id == l.self || !ok {
		return nil
	}
	var ip net.IP
	if c != nil {
		if a, ok := c.Remote.(*net.TCPAddr); ok {
			ip = a.IP
		}
	}
	env := kafkaclient.Envelope(req, clientID(c), l.identify(c).principal, ip)
	resp, err := l.callVoter(ctx, p, forwardClientID, env)
	if err == nil {
		resp, err = kafkaclient.OpenEnvelope(resp.(*kmsg.EnvelopeResponse), req)
	}
	if err != nil {
		l.log.Debug("forwarding to the active controller failed", "api", kmsg.NameForKey(req.Key()), "active", id, "error", err)
		return nil
	}
	return resp
}
