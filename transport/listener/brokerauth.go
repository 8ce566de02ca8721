package listener

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

// Broker identity. On a TLS connection, the requests only a broker sends
// about itself — BrokerRegistration, BrokerHeartbeat, AlterPartition and
// UnregisterBroker — are served only for the broker id the client's
// verified certificate names (tlsconfig: a ctrlquorum://broker/<id> URI
// SAN). Any other broker id, a certificate that names no broker, or a TLS
// connection without a client certificate gets CLUSTER_AUTHORIZATION_FAILED
// and a log line, before the request reaches the controller. On a plain
// connection nothing is checked: a listener without TLS behaves as it
// always did.

// brokerRequestID returns the broker id a broker-to-controller request
// acts as, and false for every other request.
func brokerRequestID(req kmsg.Request) (int32, bool) {
	switch r := req.(type) {
	case *kmsg.BrokerRegistrationRequest:
		return r.BrokerID, true
	case *kmsg.BrokerHeartbeatRequest:
		return r.BrokerID, true
	case *kmsg.AlterPartitionRequest:
		return r.BrokerID, true
	case *kmsg.UnregisterBrokerRequest:
		return r.BrokerID, true
	}
	return 0, false
}

// authorizeBroker returns the refusal to send for a broker request the
// connection may not make, or nil to serve it.
func (l *Listener) authorizeBroker(c *kafkawire.Conn, req kmsg.Request) kmsg.Response {
	claimed, ok := brokerRequestID(req)
	if !ok || c == nil || c.TLS == nil {
		return nil
	}
	id, err := tlsconfig.PeerIdentity(c.TLS)
	var why string
	switch {
	case err != nil:
		why = err.Error()
	case !id.IsBroker():
		why = "the client certificate names no broker"
	case id.Broker != claimed:
		why = "the client certificate names another broker"
	default:
		return nil
	}
	remote := ""
	if c.Remote != nil {
		remote = c.Remote.String()
	}
	l.log.Warn("refused a broker request: "+why, "api", kmsg.NameForKey(req.Key()), "broker", claimed,
		"certificate", id.String(), "principal", id.Principal(), "remote", remote)
	return clusterDenied(req, "the client certificate does not name this broker id")
}
