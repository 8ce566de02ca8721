package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctrlquorum/ctrlquorum/voter"
)

// QuorumCollector reports the raft configuration and the membership
// changes a voter led, under the names of KIP-853's raft metrics:
//
//	kafka_raft_number_of_voters            voters of the latest configuration (number-of-voters)
//	kafka_raft_number_of_observers         non-voters: voters being added, catching up (number-of-observers)
//	kafka_raft_uncommitted_voter_change    1 while a voter change runs on this node (uncommitted-voter-change)
//	kafka_raft_voter_changes_total{outcome="added|removed|failed"}  changes this node led, by outcome
type QuorumCollector struct {
	v *voter.Voter
}

// NewQuorumCollector returns a collector for v; register it with a
// prometheus.Registry.
func NewQuorumCollector(v *voter.Voter) *QuorumCollector { return &QuorumCollector{v: v} }

var (
	descVoters    = desc("raft", "number_of_voters", "Voters of the latest raft configuration.")
	descObservers = desc("raft", "number_of_observers", "Non-voters of the latest raft configuration: voters being added, still catching up.")
	descChanging  = desc("raft", "uncommitted_voter_change", "1 while a voter change (add or remove) runs on this node, else 0.")
	descChanges   = prometheus.NewDesc("kafka_raft_voter_changes_total", "Voter changes this node led, by outcome: added, removed, failed (refused, timed out, leadership lost).", []string{"outcome"}, nil)
)

// Describe implements prometheus.Collector.
func (c *QuorumCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descVoters, descObservers, descChanging, descChanges} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *QuorumCollector) Collect(ch chan<- prometheus.Metric) {
	voters, observers := 0, 0
	if ms, _, err := c.v.Members(); err == nil {
		for _, m := range ms {
			if m.Voter {
				voters++
			} else {
				observers++
			}
		}
	}
	st := c.v.MembershipStats()
	ch <- prometheus.MustNewConstMetric(descVoters, prometheus.GaugeValue, float64(voters))
	ch <- prometheus.MustNewConstMetric(descObservers, prometheus.GaugeValue, float64(observers))
	ch <- prometheus.MustNewConstMetric(descChanging, prometheus.GaugeValue, float64(st.InProgress))
	for outcome, n := range map[string]uint64{"added": st.Added, "removed": st.Removed, "failed": st.Failed} {
		ch <- prometheus.MustNewConstMetric(descChanges, prometheus.CounterValue, float64(n), outcome)
	}
}
