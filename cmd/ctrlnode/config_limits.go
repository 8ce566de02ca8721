package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/server"
)

// wireLimit is one limit of a Kafka listener's wire server. Each listener
// of wireListeners has it under its own prefix: listener.max.frame.bytes
// for the voter's Kafka listener, broker.listener.max.frame.bytes for the
// broker agent's. A limit added to server.WireLimits is one line here.
type wireLimit struct {
	name string
	// def is kafkawire's default, so that an unset limit is what a
	// listener had before it could be set.
	def string
	// usage names the listener with %[1]s.
	usage string
	// field is the server.WireLimits field, ptr the way to it.
	field string
	ptr   func(*server.WireLimits) any
}

var wireLimits = []wireLimit{
	{"max.frame.bytes", "104857600", "largest request frame %[1]s takes, in bytes; a connection announcing a larger one is closed (1024 to 2147483647; Kafka: socket.request.max.bytes)",
		"MaxFrameBytes", func(l *server.WireLimits) any { return &l.MaxFrameBytes }},
	{"idle.timeout", "10m", "%[1]s closes a connection that sent no request for this long (Kafka: connections.max.idle.ms)",
		"IdleTimeout", func(l *server.WireLimits) any { return &l.IdleTimeout }},
	{"read.timeout", "30s", "time %[1]s gives a client to send the rest of a frame it started, and to complete its TLS handshake",
		"ReadTimeout", func(l *server.WireLimits) any { return &l.ReadTimeout }},
	{"write.timeout", "30s", "time %[1]s gives one response to be written before it closes the connection (a client that stopped reading)",
		"WriteTimeout", func(l *server.WireLimits) any { return &l.WriteTimeout }},
	{"max.connections", "10000", "open connections %[1]s takes; more are closed at accept (Kafka: max.connections)",
		"MaxConns", func(l *server.WireLimits) any { return &l.MaxConns }},
	{"max.in.flight", "1", "requests %[1]s reads from one connection ahead of their answers (1 to 1024); 1 reads the next one only once the previous one is answered, as a Kafka broker does",
		"MaxInFlight", func(l *server.WireLimits) any { return &l.MaxInFlight }},
	{"max.queued.bytes", "268435456", "bytes of request frames %[1]s holds at once over all its connections; a connection whose next frame does not fit waits (not below max.frame.bytes; Kafka: queued.max.request.bytes)",
		"MaxQueuedBytes", func(l *server.WireLimits) any { return &l.MaxQueuedBytes }},
	{"max.unauthenticated.frame.bytes", "524288", "largest request frame %[1]s takes from a connection that has not yet logged in with SASL (Kafka: sasl.server.max.receive.size)",
		"MaxUnauthenticatedFrameBytes", func(l *server.WireLimits) any { return &l.MaxUnauthenticatedFrameBytes }},
}

// wireListener is a Kafka listener a node may run.
type wireListener struct {
	prefix string
	what   string
	// field is the server.Config field of its limits.
	field  string
	limits func(*server.Config) *server.WireLimits
	// runs tells whether the node runs the listener.
	runs func(*server.Config) bool
}

var wireListeners = []wireListener{
	{"listener.", "the voter's Kafka listener", "ListenerLimits",
		func(c *server.Config) *server.WireLimits { return &c.ListenerLimits }, func(c *server.Config) bool { return c.Voter }},
	{"broker.listener.", "the broker agent's listener", "BrokerListenerLimits",
		func(c *server.Config) *server.WireLimits { return &c.BrokerListenerLimits }, func(c *server.Config) bool { return c.Broker }},
}

// limitSettings are the settings of the listeners' wire limits and of
// the raft TLS handshake bounds.
func limitSettings() []setting {
	var out []setting
	for _, l := range wireListeners {
		for _, w := range wireLimits {
			out = append(out, setting{l.prefix + w.name, w.def, fmt.Sprintf(w.usage, l.what), l.field + "." + w.field})
		}
	}
	return append(out,
		setting{"raft.tls.handshake.timeout", "10s", "time an inbound raft connection has to complete its TLS handshake (with TLS)", "RaftHandshakeTimeout"},
		setting{"raft.tls.max.handshakes", "64", "inbound raft TLS handshakes in progress at once; a connection beyond them is closed at accept (with TLS)", "RaftMaxHandshakes"},
	)
}

// limitsSettings fills every listener's wire limits and the raft TLS
// handshake bounds. Each must be positive: zero would mean "the default"
// to the server, which the setting's default already says.
func limitsSettings(ns nodeSettings, c *server.Config) error {
	for _, l := range wireListeners {
		lim := l.limits(c)
		for _, w := range wireLimits {
			if err := parseLimit(ns, l.prefix+w.name, w.ptr(lim)); err != nil {
				return err
			}
		}
	}
	if err := parseLimit(ns, "raft.tls.handshake.timeout", &c.RaftHandshakeTimeout); err != nil {
		return err
	}
	return parseLimit(ns, "raft.tls.max.handshakes", &c.RaftMaxHandshakes)
}

// parseLimit reads a positive limit into p: a duration, or a whole number
// that p's type holds. Ranges narrower than the type's are the server's
// to check (Config.Validate), so that they hold for every caller.
func parseLimit(ns nodeSettings, key string, p any) error {
	if d, ok := p.(*time.Duration); ok {
		v, err := ns.duration(key)
		*d = v
		return err
	}
	s := ns.get(key)
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return cfgErr("%s: %q is not a whole number", ns.describe(key), s)
	case n <= 0:
		return cfgErr("%s: %q is not positive", ns.describe(key), s)
	}
	over := func(limit int64) error {
		if err != nil || n > limit {
			return cfgErr("%s: %s is above the hard limit %d", ns.describe(key), s, limit)
		}
		return nil
	}
	switch p := p.(type) {
	case *int32:
		if err := over(math.MaxInt32); err != nil {
			return err
		}
		*p = int32(n)
	case *int:
		if err := over(math.MaxInt); err != nil {
			return err
		}
		*p = int(n)
	case *int64:
		if err := over(math.MaxInt64); err != nil {
			return err
		}
		*p = n
	case *uint64:
		if err := over(math.MaxInt64); err != nil {
			return err
		}
		*p = uint64(n)
	default:
		panic(fmt.Sprintf("setting %s: limit of unsupported type %T", key, p))
	}
	return nil
}

// logLimits logs the limits in force on each listener the node runs, by
// setting name.
func logLimits(logger hclog.Logger, ns nodeSettings, c *server.Config) {
	for _, l := range wireListeners {
		if !l.runs(c) {
			continue
		}
		kv := []any{strings.TrimSuffix(l.prefix, "."), ns.get(strings.TrimSuffix(l.prefix, "."))}
		lim := l.limits(c)
		for _, w := range wireLimits {
			kv = append(kv, l.prefix+w.name, limitValue(w.ptr(lim)))
		}
		logger.Info("limits of "+l.what, kv...)
	}
	if c.Voter && (c.RaftTLS != nil || c.TLS != nil) {
		logger.Info("limits of raft's TLS handshakes", "raft.tls.handshake.timeout", c.RaftHandshakeTimeout, "raft.tls.max.handshakes", c.RaftMaxHandshakes)
	}
}

func limitValue(p any) any {
	switch p := p.(type) {
	case *time.Duration:
		return *p
	case *int32:
		return *p
	case *int:
		return *p
	case *int64:
		return *p
	}
	return p
}
