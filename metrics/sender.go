package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctrlquorum/ctrlquorum/transport/sender"
)

// SenderCollector exports the counters of a voter's sender pool (its
// connections to brokers), per broker.
type SenderCollector struct {
	p *sender.Pool
}

// NewSenderCollector returns a collector for p.
func NewSenderCollector(p *sender.Pool) *SenderCollector { return &SenderCollector{p: p} }

func senderDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName("ctrlquorum", "sender", name), help, []string{"broker"}, nil)
}

var (
	descSenderSent     = senderDesc("requests_sent_total", "Control requests a broker answered (including those it refused).")
	descSenderRetries  = senderDesc("request_retries_total", "Attempts at a broker that failed in transit (refused, reset or timed out connections) and were retried.")
	descSenderResets   = senderDesc("connection_resets_total", "Connections to a broker that the broker's side closed or reset.")
	descSenderRefusals = senderDesc("listener_refusals_total", "Connections to a broker's listener refused after a connection to it reset, reported to the controller (once per broker epoch).")
	senderDescs        = []*prometheus.Desc{descSenderSent, descSenderRetries, descSenderResets, descSenderRefusals}
)

// Describe implements prometheus.Collector.
func (c *SenderCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range senderDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *SenderCollector) Collect(ch chan<- prometheus.Metric) {
	for id, s := range c.p.Stats().Brokers {
		b := strconv.Itoa(int(id))
		for _, x := range []struct {
			d *prometheus.Desc
			v uint64
		}{{descSenderSent, s.Sent}, {descSenderRetries, s.Retries}, {descSenderResets, s.Resets}, {descSenderRefusals, s.Refusals}} {
			ch <- prometheus.MustNewConstMetric(x.d, prometheus.CounterValue, float64(x.v), b)
		}
	}
}
