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
//   - only from a connection allowed CLUSTER_ACTION on the cluster: a
//     broker's or a voter's certificate, a super user, a principal an ACL
//     allows it, or anyone while authorization is not enforced. Anyone
//     else gets CLUSTER_AUTHORIZATION_FAILED on the envelope, and a log
//     line: a client cannot claim another principal by wrapping its
//     request;
//   - only on the active controller (a standby answers NOT_CONTROLLER on
//     the envelope, and the sender finds the controller again);
//   - only for the requests of kafkaclient.Forwardable, which are then authenticated
//     and authorized as the principal the envelope names, at the client's
//     address, exactly as if that client had sent them here. A request
//     that came in an envelope is never forwarded again.

// forwardableVersion says which requests an envelope may carry: those
// of kafkaclient.Forwardable, at a version the listener serves.
func forwardableVersion(key, version int16) bool {
	if _, ok := kafkaclient.Forwardable()[key]; !ok {
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
	if a := l.access(c); !a.cluster(rl.OpClusterAction) {
		l.log.Warn("refused an envelope: the sender may not forward requests", "principal", a.id.principal, "remote", remoteOf(c))
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
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
