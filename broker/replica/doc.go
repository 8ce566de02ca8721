// Package replica is a broker's replica manager: the data path of the
// partitions the controller gave the broker, on top of partlog.
//
// A Manager is the broker's Host (broker.Host): LeaderAndIsr makes a
// local replica leader or follower, StopReplica stops it and, with
// delete, removes its directory. It serves the data APIs on the broker's
// listener (broker.Config.Service): Produce, Fetch (consumers and
// follower replicas), ListOffsets and OffsetsForLeaderEpoch. Everything
// else a client sends — Metadata, the admin requests — is the agent's.
//
// Leader epochs are checked on every request that carries one: older
// than the replica's is FENCED_LEADER_EPOCH, newer is
// UNKNOWN_LEADER_EPOCH (the broker has not heard of it yet); a request to
// a replica that does not lead is NOT_LEADER_OR_FOLLOWER.
//
// Produce with acks=all is refused with NOT_ENOUGH_REPLICAS while the ISR
// is smaller than min.insync.replicas, and answered once the high
// watermark passes the records; if the ISR shrank below
// min.insync.replicas by then, with NOT_ENOUGH_REPLICAS_AFTER_APPEND (the
// records are in the log all the same), as Kafka does. min.insync.replicas
// is the topic's effective config, resolved by configmodel from the
// levels the agent keeps (the topic's configs, this broker's dynamic
// config, the cluster default, the static settings; Config's
// MinInsyncReplicas in place of Kafka's default): a change is in force
// once IncrementalAlterConfigs is answered.
//
// Where the cluster enforces ACLs (broker.Agent.Authorize, with the rules
// the agent reads from the controller) Produce needs WRITE on the topic,
// a consumer's Fetch READ and ListOffsets DESCRIBE, else the partitions
// get TOPIC_AUTHORIZATION_FAILED; a follower's Fetch needs CLUSTER_ACTION
// on the cluster, OffsetsForLeaderEpoch CLUSTER_ACTION or DESCRIBE on the
// topic (access.go).
//
// The high watermark is the smallest log end offset among the ISR, as
// the leader learns them from its followers' fetch offsets; consumers
// read up to it. A follower that has not caught up with the leader's log
// end for ReplicaLagTime (Kafka's replica.lag.time.max.ms, measured as
// Kafka measures it: since the last fetch at or past the leader's end
// offset of the fetch before) is taken out of the ISR through the
// agent's AlterPartition; a follower outside the ISR that reaches the
// high watermark is put back the same way.
//
// A follower fetches from its leader over one connection per leader
// broker. Each time it becomes follower in a new leader epoch it first
// asks the leader, with OffsetsForLeaderEpoch, where its own latest epoch
// ends in the leader's log and truncates its log there (KIP-101,
// KIP-279), so that records a former leader wrote but never committed
// do not stay on this replica.
//
// The high watermarks are checkpointed in the data directory (Kafka's
// replication-offset-checkpoint, checkpoint.go): written atomically when
// one moved, every HighWatermarkCheckpointInterval and on Close, and read
// at start, so that a restarted leader serves consumers what was
// committed at once, not only once its followers have fetched again. A
// checkpointed value is never taken past the log's end.
//
// Retention follows each topic's retention.ms and retention.bytes
// (cleanup.policy delete), segment rolls its segment.bytes and
// segment.ms, resolved on every housekeeping tick (retention.go): whole
// closed segments below the high watermark go, and the log start offset
// that ListOffsets' earliest and Fetch's OFFSET_OUT_OF_RANGE go by moves
// with them. A follower whose log ends before its leader's start empties
// it and starts there.
//
// A follower's log start follows its leader's, a whole segment at a
// time.
//
// What it does not do (yet): compaction (cleanup.policy compact keeps
// everything); there are no fetch sessions (every answer
// has session id 0) and no producer ids, so producers run without
// idempotence (franz-go falls back to it by itself when InitProducerID is
// not served); ListOffsets by time answers at batch granularity, and -3
// (the largest timestamp) is refused.
//
// Consumer groups, transactions, compaction and quotas are not served:
// their API keys are not advertised in ApiVersions, and a request for one
// closes the connection, which is what a Kafka broker does with an API
// it does not serve.
package replica
