package server

import (
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// wireLimit is one limit of a Kafka listener's wire server. Each listener
// of wireListeners has it under its own prefix: listener.max.frame.bytes
// for the voter's Kafka listener, broker.listener.max.frame.bytes for the
// broker agent's. A limit added to WireLimits is one line here.
type wireLimit struct {
	name string
	// def is kafkawire's default, so that an unset limit is what a
	// listener had before it could be set.
	def string
	// usage names the listener with %[1]s.
	usage string
	// field is the WireLimits field.
	field string
}

var wireLimits = []wireLimit{
	{"max.frame.bytes", "104857600", "largest request frame %[1]s takes, in bytes; a connection announcing a larger one is closed (1024 to 2147483647; Kafka: socket.request.max.bytes)", "MaxFrameBytes"},
	{"idle.timeout", "10m", "%[1]s closes a connection that sent no request for this long (Kafka: connections.max.idle.ms)", "IdleTimeout"},
	{"read.timeout", "30s", "time %[1]s gives a client to send the rest of a frame it started, and to complete its TLS handshake", "ReadTimeout"},
	{"write.timeout", "30s", "time %[1]s gives one response to be written before it closes the connection (a client that stopped reading)", "WriteTimeout"},
	{"max.connections", "10000", "open connections %[1]s takes; more are closed at accept (Kafka: max.connections)", "MaxConns"},
	{"max.in.flight", "1", "requests %[1]s reads from one connection ahead of their answers (1 to 1024); 1 reads the next one only once the previous one is answered, as a Kafka broker does", "MaxInFlight"},
	{"max.queued.bytes", "268435456", "bytes of request frames %[1]s holds at once over all its connections; a connection whose next frame does not fit waits (not below max.frame.bytes; Kafka: queued.max.request.bytes)", "MaxQueuedBytes"},
	{"max.unauthenticated.frame.bytes", "524288", "largest request frame %[1]s takes from a connection that has not yet logged in with SASL (Kafka: sasl.server.max.receive.size)", "MaxUnauthenticatedFrameBytes"},
}

// wireListener is a Kafka listener a node may run.
type wireListener struct {
	prefix string
	what   string
	// field is the Config field of its limits.
	field string
	// voter tells whether the voter role runs the listener; else the
	// broker role does.
	voter bool
}

var wireListeners = []wireListener{
	{"listener.", "the voter's Kafka listener", "ListenerLimits", true},
	{"broker.listener.", "the broker agent's listener", "BrokerListenerLimits", false},
}

func (l wireListener) runs(c *Config) bool {
	if l.voter {
		return c.Voter
	}
	return c.Broker
}

// LimitSettings are the settings of the Kafka listeners' wire limits
// (listener.*, broker.listener.*) and of the raft TLS handshake bounds.
func LimitSettings() []Setting {
	var out []Setting
	for _, l := range wireListeners {
		for _, w := range wireLimits {
			out = append(out, Setting{l.prefix + w.name, w.def, fmt.Sprintf(w.usage, l.what), l.field + "." + w.field, stageLimits, nil})
		}
	}
	return append(out,
		Setting{"raft.tls.handshake.timeout", "10s", "time an inbound raft connection has to complete its TLS handshake (with TLS)", "RaftHandshakeTimeout", stageLimits, nil},
		Setting{"raft.tls.max.handshakes", "64", "inbound raft TLS handshakes in progress at once; a connection beyond them is closed at accept (with TLS)", "RaftMaxHandshakes", stageLimits, nil},
	)
}

// LogLimits logs the limits in force on each listener the node runs, by
// setting name.
func (nc *NodeConfig) LogLimits(logger hclog.Logger) {
	c := &nc.Config
	for _, l := range wireListeners {
		if !l.runs(c) {
			continue
		}
		kv := []any{strings.TrimSuffix(l.prefix, "."), nc.vals.Get(strings.TrimSuffix(l.prefix, "."))}
		for _, w := range wireLimits {
			kv = append(kv, l.prefix+w.name, nc.field(l.field+"."+w.field).Interface())
		}
		logger.Info("limits of "+l.what, kv...)
	}
	if c.Voter && (c.RaftTLS != nil || c.TLS != nil) {
		logger.Info("limits of raft's TLS handshakes", "raft.tls.handshake.timeout", c.RaftHandshakeTimeout, "raft.tls.max.handshakes", c.RaftMaxHandshakes)
	}
}
