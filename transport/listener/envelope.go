package listener

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// Forwarded requests (Kafka's KIP-590). A broker that takes an admin
// request only the controller can answer, and a standby voter that takes
// a config change, send it to the active controller inside an Envelope
// (API 58) with the client's principal and address (see
// kafkaclient.Envelope). The listener serves an Envelope:
//
//   - as the principal it names only from a connection allowed
//     CLUSTER_ACTION on the cluster: a broker's or a voter's certificate,
//     a super user, a principal an ACL allows it, or anyone while
//     authorization is not enforced. From any other connection the
//     request is served as the connection's own principal: a client
//     cannot claim another principal by wrapping its request, and a node
//     that forwards over a connection that proved nothing (a plain
//     listener with rules in the log) gets what its anonymous client
//     would have got;
//   - only on the active controller (a standby answers NOT_CONTROLLER on
//     the envelope, and the sender finds the controller again);
//   - only for the requests of kafkaclient.Forwardable, which are then authenticated
//     and authorized as the principal the envelope names, at the client's
//     address, exactly as if that client had sent them here. A request
//     that came in an envelope is never forwarded again.

// forwardableVersion says which requests an envelope may carry: those
// of kafkaclient.Forwardable, and the reads a standby voter has the
// active controller answer while its image is behind (isRead), at a
// version the listener serves.
func forwardableVersion(key, version int16) bool {
	if _, ok := kafkaclient.Forwardable()[key]; !ok && !isRead(key) {
		return false
	}
	max, ok := APIs()[key]
	return ok && version >= MinVersions()[key] && version <= max
}

// envelope serves the request an Envelope carries, as its client.
func (l *Listener) envelope(ctx context.Context, c *kafkawire.Conn, req *kmsg.EnvelopeRequest) *kmsg.EnvelopeResponse {
	resp := req.ResponseKind().(*kmsg.EnvelopeResponse)
	if forwarded(c) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	env, err := kafkaclient.OpenRequest(req, forwardableVersion)
	if err != nil {
		l.log.Warn("refused an envelope", "error", err, "remote", remoteOf(c))
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	if l.standby() {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	if a := l.access(c); !a.allowed(rl.OpClusterAction, rl.ResourceCluster, rl.ClusterResourceName, true) {
		l.log.Debug("an envelope from a sender that may not forward: served as the sender", "sender", a.id.principal,
			"claimed", env.Principal, "remote", remoteOf(c))
		env.Principal = a.id.principal
	}
	inner := &kafkawire.Conn{ClientID: env.ClientID, Version: env.Request.GetVersion(),
		Session: &kafkawire.Session{Value: &connAuth{certRead: true, envelopePrincipal: env.Principal}}}
	if env.ClientIP != nil {
		inner.Remote = &net.TCPAddr{IP: env.ClientIP}
	}
	l.log.Debug("serving a forwarded request", "api", kmsg.NameForKey(env.Request.Key()), "principal", env.Principal, "from", remoteOf(c))
	out, err := l.handle(ctx, inner, env.Request)
	if err != nil {
		l.log.Warn("a forwarded request could not be served", "api", kmsg.NameForKey(env.Request.Key()), "error", err)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp
	}
	resp.ResponseData = kafkaclient.SealResponse(env.CorrelationID, env.Request, out)
	return resp
}
