package server

// dataSettings are the broker's data path settings (see BrokerData).
func dataSettings() []Setting {
	return []Setting{
		{"broker.data.dir", "", "folder of the broker's partition data (Kafka's log.dirs): the broker then serves Produce, Fetch, ListOffsets and OffsetsForLeaderEpoch and replicates; empty: a simulated broker that only remembers what the controller told it", "BrokerData.Dir", stageValues, nil},
		{"broker.replica.lag.time", "30s", "a follower that has not caught up with the leader for this long leaves the ISR (Kafka's replica.lag.time.max.ms)", "BrokerData.ReplicaLagTime", stageLimits, nil},
		{"broker.min.insync.replicas", "1", "ISR size below which acks=all produces are refused with NOT_ENOUGH_REPLICAS, for topics whose min.insync.replicas no topic, dynamic broker, cluster-default or static config sets", "BrokerData.MinInsyncReplicas", stageValues, nil},
		{"broker.log.segment.bytes", "1073741824", "size at which a partition's log rolls a new segment file (Kafka's log.segment.bytes)", "BrokerData.SegmentBytes", stageValues, nil},
		{"broker.log.flush.messages", "", "fsync a partition's log once this many records were appended since the last (1: before every acknowledgement; Kafka's log.flush.interval.messages); empty: never by count, Kafka's default, so that acknowledged data survives a power loss by replication, not by the disk", "BrokerData.FlushMessages", stageValues, optional("BrokerData.FlushMessages")},
		{"broker.log.flush.interval", "", "fsync a partition's log whose oldest unsynced record is this old (Kafka's log.flush.interval.ms); empty: never by time", "BrokerData.FlushInterval", stageValues, optional("BrokerData.FlushInterval")},
	}
}

// optional reads a setting whose empty value leaves its field zero.
func optional(field string) func(nc *NodeConfig, v string) error {
	return func(nc *NodeConfig, v string) error {
		if v == "" {
			return nil
		}
		return setField(nc.field(field), v)
	}
}
