package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctrlquorum/ctrlquorum/transport/listener"
)

// ListenerCollector exports a voter listener's security and connection
// limit counters.
type ListenerCollector struct {
	l *listener.Listener
}

// NewListenerCollector returns a collector for l.
func NewListenerCollector(l *listener.Listener) *ListenerCollector { return &ListenerCollector{l: l} }

func counterDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName("ctrlquorum", "listener", name), help, labels, nil)
}

var (
	descAuths        = counterDesc("authentications_total", "SASL logins that succeeded.")
	descAuthFailures = counterDesc("authentication_failures_total", "SASL logins refused (wrong password, unknown user, malformed exchange, mechanism not offered).")
	descDenials      = counterDesc("authorization_denials_total", "Operations refused by the authorization rules (one per resource).")
	descUnauth       = counterDesc("unauthenticated_requests_total", "Connections closed for a request sent before logging in.")
	descLimits       = counterDesc("limit_hits_total", "Connections closed or held back by a wire limit.", "limit")
	listenerDescs    = []*prometheus.Desc{descAuths, descAuthFailures, descDenials, descUnauth, descLimits}
)

// Describe implements prometheus.Collector.
func (c *ListenerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range listenerDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *ListenerCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	s := c.l.SecurityCounts()
	counter(descAuths, s.Authentications)
	counter(descAuthFailures, s.AuthenticationFailures)
	counter(descDenials, s.Denials)
	counter(descUnauth, s.Unauthenticated)
	w := c.l.WireLimits()
	for _, x := range []struct {
		name string
		v    uint64
	}{
		{"max_connections", w.ConnsRefused}, {"max_frame_bytes", w.FramesTooLarge}, {"read_timeout", w.ReadTimeouts},
		{"idle_timeout", w.IdleTimeouts}, {"write_timeout", w.WriteTimeouts}, {"tls_handshake", w.HandshakeFailures},
		{"max_in_flight", w.InFlightPauses},
	} {
		counter(descLimits, x.v, x.name)
	}
}
