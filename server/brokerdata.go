package server

import (
	"fmt"
	"time"

	"github.com/ctrlquorum/ctrlquorum/broker/partlog"
	"github.com/ctrlquorum/ctrlquorum/broker/replica"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

// BrokerData is the broker's data path: with a Dir, the broker keeps
// partition data there and runs a replica manager (broker/replica) as its
// Host, serving Produce, Fetch, ListOffsets and OffsetsForLeaderEpoch on
// its listener beside the agent's APIs. Without one the broker is
// simulated: BrokerHost (a broker.MemoryHost by default) only remembers
// its roles.
type BrokerData struct {
	// Dir holds a folder per partition replica (Kafka's log.dirs).
	Dir string
	// ReplicaLagTime is replica.lag.time.max.ms; zero: 30 s.
	ReplicaLagTime time.Duration
	// MinInsyncReplicas is min.insync.replicas where neither the topic,
	// the dynamic broker configs, the cluster default nor the static
	// min.insync.replicas set it; zero: 1.
	MinInsyncReplicas int
	// SegmentBytes is segment.bytes; zero: 1 GiB.
	SegmentBytes int64
	// FlushMessages and FlushInterval are flush.messages and flush.ms
	// (see package partlog); zero: no sync on the append path, Kafka's
	// default.
	FlushMessages int64
	FlushInterval time.Duration
}

// startReplicas starts the replica manager of the broker's data path.
func (s *Server) startReplicas() (*replica.Manager, error) {
	d := s.cfg.BrokerData
	// Followers fetch from the leader's listener as the broker they are:
	// over TLS with the broker's certificate, accepting a broker's.
	dial := kafkaclient.DialFunc(s.localDialer().DialContext)
	if tc := s.cfg.tlsOr(s.cfg.BrokerListenerTLS); tc != nil {
		dial = tc.Dialer(s.localDialer(), tlsconfig.AnyBroker())
	}
	rm, err := replica.New(replica.Config{
		BrokerID: s.cfg.BrokerID, DataDir: d.Dir, ReplicaLagTime: d.ReplicaLagTime, MinInsyncReplicas: d.MinInsyncReplicas,
		Log:    partlog.Config{SegmentBytes: d.SegmentBytes, FlushMessages: d.FlushMessages, FlushInterval: d.FlushInterval},
		Dial:   dial,
		SASL:   s.cfg.SASL,
		Logger: s.log,
	})
	if err != nil {
		return nil, fmt.Errorf("broker %d data: %w", s.cfg.BrokerID, err)
	}
	return rm, nil
}
