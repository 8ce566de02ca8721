package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

// Controller identity. On a TLS connection, the control requests —
// LeaderAndIsr, UpdateMetadata, StopReplica — are served only when the
// client's verified certificate names a configured voter (a
// ctrlquorum://voter/<id> URI SAN; Config.Voters, or any voter when it is
// empty). Otherwise the request is refused as a whole with
// CLUSTER_AUTHORIZATION_FAILED and a log line, before fencing or the Host
// see it, and nothing is recorded in the control log. A plain connection
// is not checked, unless the listener requires SASL: then a connection
// that logged in must be a super user's (Config.SuperUsers; the voters
// log in as one), and one that did not never gets this far (saslGate).

// authorizeControl returns the refusal to send for a control request the
// connection may not make, or nil to serve it.
func (a *Agent) authorizeControl(c *kafkawire.Conn, req kmsg.Request) kmsg.Response {
	switch req.(type) {
	case *kmsg.LeaderAndISRRequest, *kmsg.UpdateMetadataRequest, *kmsg.StopReplicaRequest:
	default:
		return nil
	}
	var id tlsconfig.Identity
	var err error
	if c != nil && c.TLS != nil {
		if id, err = tlsconfig.PeerIdentity(c.TLS); err == nil {
			if err = a.voterCheck()(id); err == nil {
				return nil
			}
		}
	}
	if user := clientAuthOf(c).user; user != "" {
		if slices.Contains(a.cfg.SuperUsers, "User:"+user) {
			return nil
		}
		a.log.Warn("refused a control request: the SASL user is not a super user",
			"api", kmsg.NameForKey(req.Key()), "principal", "User:"+user, "remote", remoteOf(c))
		return controlRefusal(req)
	}
	if c == nil || c.TLS == nil {
		return nil
	}
	remote := ""
	if c.Remote != nil {
		remote = c.Remote.String()
	}
	a.log.Warn("refused a control request: the client certificate names no configured voter",
		"api", kmsg.NameForKey(req.Key()), "certificate", id.String(), "reason", err, "remote", remote)
	return controlRefusal(req)
}

// controlRefusal is CLUSTER_AUTHORIZATION_FAILED for a control request.
func controlRefusal(req kmsg.Request) kmsg.Response {
	code := kerr.ClusterAuthorizationFailed.Code
	switch r := req.ResponseKind().(type) {
	case *kmsg.LeaderAndISRResponse:
		r.ErrorCode = code
		return r
	case *kmsg.UpdateMetadataResponse:
		r.ErrorCode = code
		return r
	case *kmsg.StopReplicaResponse:
		r.ErrorCode = code
		return r
	}
	return nil
}
