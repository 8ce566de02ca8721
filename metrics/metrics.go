// Package metrics exports a controller node's state and the work of its
// event loop as Prometheus metrics, named after Kafka's controller
// metrics so that dashboards and alerts written for a KRaft or
// ZooKeeper-era controller read them with little change:
//
//	kafka_controller_active_controller_count       1 on the active controller, 0 elsewhere (ActiveControllerCount)
//	kafka_controller_controller_epoch              the committed controller epoch
//	kafka_controller_offline_partitions_count      partitions without a leader (OfflinePartitionsCount)
//	kafka_controller_preferred_replica_imbalance_count  partitions not led by their preferred replica
//	kafka_controller_active_broker_count           registered, unfenced brokers (ActiveBrokerCount)
//	kafka_controller_fenced_broker_count           registered, fenced brokers (FencedBrokerCount)
//	kafka_controller_shutting_down_broker_count    brokers in controlled shutdown
//	kafka_controller_refused_listener_fences_total brokers this node fenced, while active, because their listener refused a connection after a reset
//	kafka_controller_global_topic_count            topics (GlobalTopicCount)
//	kafka_controller_global_partition_count        partitions (GlobalPartitionCount)
//	kafka_controller_event_queue_time_seconds      time an event waits in the queue (EventQueueTimeMs)
//	kafka_controller_event_queue_processing_time_seconds  time to compute a round of events (EventQueueProcessingTimeMs)
//	kafka_controller_last_applied_record_offset    raft index of the last entry applied to the image
//	kafka_controller_last_committed_record_offset  raft commit index as this node knows it
//	kafka_controller_last_applied_record_lag       committed minus applied, in log entries (the apply lag)
//	kafka_raft_commit_latency_seconds              time from proposing a round's entries to their commit
//	kafka_raft_current_epoch                       the raft term
//	kafka_raft_current_leader                      the raft leader's node id, -1 for none
//	kafka_server_metadata_loader_current_metadata_version  the finalized metadata.version of this node's image (CurrentMetadataVersion)
//
// A voter's connections to brokers (its sender pool) have counters of
// their own, per broker: ctrlquorum_sender_requests_sent_total,
// _request_retries_total, _connection_resets_total and
// _listener_refusals_total (see sender.go).
//
// As in Kafka, the cluster-wide gauges (offline partitions, imbalance,
// broker and topic counts) are reported by the active controller only;
// the other voters report 0, so a sum over all voters is the cluster's
// figure. Offsets are raft log indexes.
package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctrlquorum/ctrlquorum/controller"
)

// Buckets for the latency histograms, in seconds: 50 µs to about 13 s.
var latencyBuckets = prometheus.ExponentialBuckets(50e-6, 2, 19)

// LoopObserver records the event loop's rounds. It implements
// controller.Observer; pass it as controller.Config.Observer.
type LoopObserver struct {
	queueTime     prometheus.Histogram
	processing    prometheus.Histogram
	commitLatency prometheus.Histogram
	rounds        prometheus.Counter
	events        prometheus.Counter
	records       prometheus.Counter
	entries       prometheus.Counter
}

var _ controller.Observer = (*LoopObserver)(nil)

// NewLoopObserver creates the loop's metrics and registers them with reg.
func NewLoopObserver(reg prometheus.Registerer) *LoopObserver {
	o := &LoopObserver{
		queueTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "kafka", Subsystem: "controller", Name: "event_queue_time_seconds",
			Help:    "Time an event waited in the active controller's queue before its round started.",
			Buckets: latencyBuckets,
		}),
		processing: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "kafka", Subsystem: "controller", Name: "event_queue_processing_time_seconds",
			Help:    "Time the active controller spent computing one round of events (commit not included).",
			Buckets: latencyBuckets,
		}),
		commitLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "kafka", Subsystem: "raft", Name: "commit_latency_seconds",
			Help:    "Time from proposing a round's log entries to their being committed and applied on the active controller.",
			Buckets: latencyBuckets,
		}),
		rounds: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "kafka", Subsystem: "controller", Name: "rounds_total",
			Help: "Rounds of the event loop that committed.",
		}),
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "kafka", Subsystem: "controller", Name: "events_total",
			Help: "Events computed by the active controller.",
		}),
		records: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "kafka", Subsystem: "controller", Name: "records_total",
			Help: "Metadata records the active controller committed.",
		}),
		entries: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "kafka", Subsystem: "controller", Name: "log_entries_total",
			Help: "Raft log entries the active controller committed.",
		}),
	}
	reg.MustRegister(o.queueTime, o.processing, o.commitLatency, o.rounds, o.events, o.records, o.entries)
	return o
}

// RoundCommitted implements controller.Observer.
func (o *LoopObserver) RoundCommitted(st controller.RoundStats) {
	for _, d := range st.QueueTimes {
		o.queueTime.Observe(d.Seconds())
	}
	o.processing.Observe(st.Compute.Seconds())
	if st.Records > 0 {
		o.commitLatency.Observe(st.Commit.Seconds())
	}
	o.rounds.Inc()
	o.events.Add(float64(st.Events))
	o.records.Add(float64(st.Records))
	o.entries.Add(float64(st.Entries))
}

// NodeCollector reports a controller node's gauges, read at scrape time
// from the node's image and raft state.
type NodeCollector struct {
	node *controller.Node
	// MinRescan is the least time between two scans of the partitions;
	// a scrape sooner than that reuses the previous figures if the image
	// has not changed. Default 1 s.
	MinRescan time.Duration

	mu       sync.Mutex
	cached   ImageStats
	cachedAt time.Time
}

// NewNodeCollector returns a collector for node; register it with a
// prometheus.Registry.
func NewNodeCollector(node *controller.Node) *NodeCollector {
	return &NodeCollector{node: node, MinRescan: time.Second}
}

func desc(subsystem, name, help string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName("kafka", subsystem, name), help, nil, nil)
}

var (
	descActive       = desc("controller", "active_controller_count", "1 if this node is the active controller, else 0.")
	descEpoch        = desc("controller", "controller_epoch", "The controller epoch committed in the log.")
	descOffline      = desc("controller", "offline_partitions_count", "Partitions without a leader (reported by the active controller).")
	descImbalance    = desc("controller", "preferred_replica_imbalance_count", "Partitions not led by their preferred replica (reported by the active controller).")
	descActiveBr     = desc("controller", "active_broker_count", "Registered, unfenced brokers (reported by the active controller).")
	descFencedBr     = desc("controller", "fenced_broker_count", "Registered, fenced brokers (reported by the active controller).")
	descShutdownBr   = desc("controller", "shutting_down_broker_count", "Brokers in controlled shutdown (reported by the active controller).")
	descTopics       = desc("controller", "global_topic_count", "Topics (reported by the active controller).")
	descPartitions   = desc("controller", "global_partition_count", "Partitions (reported by the active controller).")
	descReassigning  = desc("controller", "reassigning_partitions_count", "Partitions with a reassignment in progress (reported by the active controller).")
	descDeleting     = desc("controller", "topics_to_delete_count", "Topics queued for deletion (reported by the active controller).")
	descApplied      = desc("controller", "last_applied_record_offset", "Raft index of the last log entry applied to this node's image.")
	descCommitted    = desc("controller", "last_committed_record_offset", "Raft commit index as this node knows it.")
	descApplyLag     = desc("controller", "last_applied_record_lag", "Committed minus applied log entries on this node (the apply lag).")
	descHalted       = desc("controller", "metadata_error_count", "1 if this node's state machine halted on an entry it could not apply, else 0.")
	descRefusalFence = desc("controller", "refused_listener_fences_total", "Brokers this node fenced, while active controller, because their registered listener refused a connection after a connection to them reset (a crashed process), without waiting for the session timeout.")
	descInvalidSC    = desc("controller", "invalid_state_transitions_total", "Replica and partition state transitions this node refused to stage while active controller (each logged by the state.change logger).")
	descMV           = desc("server", "metadata_loader_current_metadata_version", "The finalized metadata.version of this node's image.")
	descRaftTerm     = desc("raft", "current_epoch", "The raft term this node is in.")
	descRaftLeader   = desc("raft", "current_leader", "Node id of the raft leader as this node knows it, -1 for none.")
	descRaftLastLog  = desc("raft", "log_end_offset", "Index of the last entry in this node's raft log.")
	descRaftState    = prometheus.NewDesc("kafka_raft_current_state", "1 for the raft state this node is in, 0 for the others.", []string{"state"}, nil)
	nodeDescriptions = []*prometheus.Desc{descActive, descEpoch, descOffline, descImbalance, descActiveBr, descFencedBr,
		descShutdownBr, descTopics, descPartitions, descReassigning, descDeleting, descApplied, descCommitted,
		descApplyLag, descHalted, descInvalidSC, descRefusalFence, descMV, descRaftTerm, descRaftLeader, descRaftLastLog, descRaftState}
)

// Describe implements prometheus.Collector.
func (c *NodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range nodeDescriptions {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *NodeCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	n := c.node
	active, _ := n.Controller.Active()
	st := c.imageStats()
	gauge(descActive, b2f(active))
	gauge(descEpoch, float64(st.ControllerEpoch))
	gauge(descMV, float64(st.MetadataVersion))
	var cluster ImageStats
	if active {
		cluster = st
	}
	gauge(descOffline, float64(cluster.OfflinePartitions))
	gauge(descImbalance, float64(cluster.PreferredImbalance))
	gauge(descActiveBr, float64(cluster.ActiveBrokers))
	gauge(descFencedBr, float64(cluster.FencedBrokers))
	gauge(descShutdownBr, float64(cluster.ShuttingDownBrokers))
	gauge(descTopics, float64(cluster.Topics))
	gauge(descPartitions, float64(cluster.Partitions))
	gauge(descReassigning, float64(cluster.ReassigningPartitions))
	gauge(descDeleting, float64(cluster.DeletingTopics))
	ch <- prometheus.MustNewConstMetric(descInvalidSC, prometheus.CounterValue, float64(n.Controller.InvalidStateChanges()))
	ch <- prometheus.MustNewConstMetric(descRefusalFence, prometheus.CounterValue, float64(n.Controller.RefusalFences()))

	r := n.Voter.Raft()
	applied := n.FSM.AppliedIndex()
	commit := r.CommitIndex()
	gauge(descApplied, float64(applied))
	gauge(descCommitted, float64(commit))
	lag := 0.0
	if commit > applied {
		lag = float64(commit - applied)
	}
	gauge(descApplyLag, lag)
	gauge(descHalted, b2f(n.FSM.Halted() != nil))
	gauge(descRaftTerm, float64(r.CurrentTerm()))
	leader := -1.0
	if _, id := r.LeaderWithID(); id != "" {
		if v, err := strconv.ParseInt(string(id), 10, 32); err == nil {
			leader = float64(v)
		}
	}
	gauge(descRaftLeader, leader)
	gauge(descRaftLastLog, float64(r.LastIndex()))
	state := r.State().String()
	for _, s := range []string{"Follower", "Candidate", "Leader", "Shutdown"} {
		ch <- prometheus.MustNewConstMetric(descRaftState, prometheus.GaugeValue, b2f(s == state), s)
	}
}

func (c *NodeCollector) imageStats() ImageStats {
	applied := c.node.FSM.AppliedIndex()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.cachedAt.IsZero() && (c.cached.AppliedIndex == applied || time.Since(c.cachedAt) < c.MinRescan) {
		return c.cached
	}
	c.cached = ReadImageStats(c.node.FSM)
	c.cachedAt = time.Now()
	return c.cached
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
