package configmodel

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Scope says at which levels a broker config may be changed while the
// cluster runs.
type Scope int8

const (
	// ReadOnly configs cannot be changed dynamically: their value is the
	// node's own (its id, its listeners) or a static setting.
	ReadOnly Scope = iota
	// PerBroker configs may be set for one broker (resource: its id) and
	// as the cluster-wide default (resource: the empty name).
	PerBroker
	// ClusterWide configs may only be set as the cluster-wide default:
	// they govern the controller, which serves the whole cluster.
	ClusterWide
)

// Def defines one config.
type Def struct {
	Name string
	Type kmsg.ConfigType
	// Default is Kafka's default, as DescribeConfigs prints it; with
	// NullDefault the config has none and is described as null.
	Default     string
	NullDefault bool
	Doc         string
	// BrokerName is a topic config's broker synonym, the broker config
	// whose value the topic takes when it does not set its own; empty
	// for a config of topics only.
	BrokerName string
	// Scope is where a broker config may be changed; topic configs are
	// always dynamic.
	Scope Scope
	// Sensitive values (passwords) are described as null.
	Sensitive bool
	// check refuses a value that does not fit beyond its type (a range,
	// a set of names); nil checks the type alone.
	check func(string) error
}

// Check reports what is wrong with a value for the config, as Kafka's
// ConfigDef would: not of the config's type, or outside its range.
func (d Def) Check(v string) error {
	if err := checkType(d.Type, v); err != nil {
		return err
	}
	if d.check != nil {
		return d.check(v)
	}
	return nil
}

// topicDefs are Kafka's topic configs (its LogConfig), with their types,
// defaults, checks and broker synonyms.
var topicDefs = []Def{
	{Name: "cleanup.policy", Type: kmsg.ConfigTypeList, Default: "delete", BrokerName: "log.cleanup.policy", check: listOf("compact", "delete"),
		Doc: "What happens to old log segments: delete removes them past the retention limits, compact keeps the latest record of each key; both may be given."},
	{Name: "compression.type", Type: kmsg.ConfigTypeString, Default: "producer", BrokerName: "compression.type", check: oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
		Doc: "Codec the broker stores batches with; producer keeps the producer's own codec, uncompressed stores them uncompressed."},
	{Name: "compression.gzip.level", Type: kmsg.ConfigTypeInt, Default: "-1", BrokerName: "compression.gzip.level", check: intIn(-1, -1, 1, 9),
		Doc: "gzip level when compression.type is gzip (1 to 9, or -1 for the codec's default)."},
	{Name: "compression.lz4.level", Type: kmsg.ConfigTypeInt, Default: "9", BrokerName: "compression.lz4.level", check: intIn(1, 17),
		Doc: "lz4 level when compression.type is lz4 (1 to 17)."},
	{Name: "compression.zstd.level", Type: kmsg.ConfigTypeInt, Default: "3", BrokerName: "compression.zstd.level", check: intIn(-131072, 22),
		Doc: "zstd level when compression.type is zstd (-131072 to 22)."},
	{Name: "delete.retention.ms", Type: kmsg.ConfigTypeLong, Default: "86400000", BrokerName: "log.cleaner.delete.retention.ms", check: atLeast(0),
		Doc: "How long a compacted topic keeps the tombstone of a deleted key, so that a consumer reading from the start sees the deletion."},
	{Name: "file.delete.delay.ms", Type: kmsg.ConfigTypeLong, Default: "60000", BrokerName: "log.segment.delete.delay.ms", check: atLeast(0),
		Doc: "Time between a segment leaving the log and its file being removed from disk."},
	{Name: "flush.messages", Type: kmsg.ConfigTypeLong, Default: "9223372036854775807", BrokerName: "log.flush.interval.messages", check: atLeast(1),
		Doc: "Records written between forced fsyncs of the log; the default leaves flushing to the OS and to replication."},
	{Name: "flush.ms", Type: kmsg.ConfigTypeLong, Default: "9223372036854775807", BrokerName: "log.flush.interval.ms", check: atLeast(0),
		Doc: "Longest time a record stays in the log unflushed before a forced fsync; the default leaves flushing to the OS and to replication."},
	{Name: "follower.replication.throttled.replicas", Type: kmsg.ConfigTypeList, Default: "", check: throttledReplicas,
		Doc: "Replicas whose follower fetches are throttled, as partition:broker pairs, or * for every replica of the topic."},
	{Name: "index.interval.bytes", Type: kmsg.ConfigTypeInt, Default: "4096", BrokerName: "log.index.interval.bytes", check: atLeast(0),
		Doc: "Bytes of log between two entries of the offset index."},
	{Name: "leader.replication.throttled.replicas", Type: kmsg.ConfigTypeList, Default: "", check: throttledReplicas,
		Doc: "Replicas whose leader side of replication is throttled, as partition:broker pairs, or * for every replica of the topic."},
	{Name: "local.retention.bytes", Type: kmsg.ConfigTypeLong, Default: "-2", BrokerName: "log.local.retention.bytes", check: atLeast(-2),
		Doc: "With tiered storage, the most bytes a partition keeps on local disk; -2 takes retention.bytes."},
	{Name: "local.retention.ms", Type: kmsg.ConfigTypeLong, Default: "-2", BrokerName: "log.local.retention.ms", check: atLeast(-2),
		Doc: "With tiered storage, how long a segment stays on local disk; -2 takes retention.ms."},
	{Name: "max.compaction.lag.ms", Type: kmsg.ConfigTypeLong, Default: "9223372036854775807", BrokerName: "log.cleaner.max.compaction.lag.ms", check: atLeast(1),
		Doc: "Longest time a record may stay uncompacted in a compacted topic."},
	{Name: "max.message.bytes", Type: kmsg.ConfigTypeInt, Default: "1048588", BrokerName: "message.max.bytes", check: atLeast(0),
		Doc: "Largest record batch the topic accepts, after compression."},
	{Name: "message.downconversion.enable", Type: kmsg.ConfigTypeBoolean, Default: "true", BrokerName: "log.message.downconversion.enable",
		Doc: "Whether the broker converts batches to an older format for consumers that fetch with an old request version."},
	{Name: "message.format.version", Type: kmsg.ConfigTypeString, Default: "3.0-IV1", BrokerName: "log.message.format.version", check: messageFormat,
		Doc: "Deprecated: the record format version of the log; ignored from 3.0 on."},
	{Name: "message.timestamp.after.max.ms", Type: kmsg.ConfigTypeLong, Default: "9223372036854775807", BrokerName: "log.message.timestamp.after.max.ms", check: atLeast(0),
		Doc: "How far in the future of the broker's clock a record's timestamp may be, with CreateTime timestamps."},
	{Name: "message.timestamp.before.max.ms", Type: kmsg.ConfigTypeLong, Default: "9223372036854775807", BrokerName: "log.message.timestamp.before.max.ms", check: atLeast(0),
		Doc: "How far in the past of the broker's clock a record's timestamp may be, with CreateTime timestamps."},
	{Name: "message.timestamp.difference.max.ms", Type: kmsg.ConfigTypeLong, Default: "9223372036854775807", BrokerName: "log.message.timestamp.difference.max.ms", check: atLeast(0),
		Doc: "Deprecated: the largest difference allowed between a record's timestamp and the broker's clock."},
	{Name: "message.timestamp.type", Type: kmsg.ConfigTypeString, Default: "CreateTime", BrokerName: "log.message.timestamp.type", check: oneOf("CreateTime", "LogAppendTime"),
		Doc: "Which time a record carries: the producer's (CreateTime) or the broker's at append (LogAppendTime)."},
	{Name: "min.cleanable.dirty.ratio", Type: kmsg.ConfigTypeDouble, Default: "0.5", BrokerName: "log.cleaner.min.cleanable.ratio", check: doubleIn(0, 1),
		Doc: "Share of a compacted log not yet compacted above which the cleaner compacts it."},
	{Name: "min.compaction.lag.ms", Type: kmsg.ConfigTypeLong, Default: "0", BrokerName: "log.cleaner.min.compaction.lag.ms", check: atLeast(0),
		Doc: "Shortest time a record stays uncompacted in a compacted topic."},
	{Name: "min.insync.replicas", Type: kmsg.ConfigTypeInt, Default: "1", BrokerName: "min.insync.replicas", check: atLeast(1),
		Doc: "Fewest in-sync replicas for which a leader accepts a write acknowledged by all (acks=all); with fewer, producers get NOT_ENOUGH_REPLICAS."},
	{Name: "preallocate", Type: kmsg.ConfigTypeBoolean, Default: "false", BrokerName: "log.preallocate",
		Doc: "Whether a new segment's file is allocated at its full size when it is created."},
	{Name: "remote.log.copy.disable", Type: kmsg.ConfigTypeBoolean, Default: "false",
		Doc: "With tiered storage, stop copying segments to remote storage while keeping what is there readable."},
	{Name: "remote.log.delete.on.disable", Type: kmsg.ConfigTypeBoolean, Default: "false",
		Doc: "With tiered storage, delete the remote segments when remote storage is turned off for the topic."},
	{Name: "remote.storage.enable", Type: kmsg.ConfigTypeBoolean, Default: "false",
		Doc: "Whether the topic's segments are copied to tiered (remote) storage."},
	{Name: "retention.bytes", Type: kmsg.ConfigTypeLong, Default: "-1", BrokerName: "log.retention.bytes",
		Doc: "Most bytes a partition keeps before old segments are deleted, with the delete policy; -1 sets no limit."},
	{Name: "retention.ms", Type: kmsg.ConfigTypeLong, Default: "604800000", BrokerName: "log.retention.ms", check: atLeast(-1),
		Doc: "How long a segment is kept before it is deleted, with the delete policy; -1 keeps it for ever."},
	{Name: "segment.bytes", Type: kmsg.ConfigTypeInt, Default: "1073741824", BrokerName: "log.segment.bytes", check: atLeast(14),
		Doc: "Size at which the log rolls to a new segment file."},
	{Name: "segment.index.bytes", Type: kmsg.ConfigTypeInt, Default: "10485760", BrokerName: "log.index.size.max.bytes", check: atLeast(4),
		Doc: "Size of a segment's offset index file."},
	{Name: "segment.jitter.ms", Type: kmsg.ConfigTypeLong, Default: "0", BrokerName: "log.roll.jitter.ms", check: atLeast(0),
		Doc: "Random time taken off segment.ms per segment, so that partitions do not all roll at once."},
	{Name: "segment.ms", Type: kmsg.ConfigTypeLong, Default: "604800000", BrokerName: "log.roll.ms", check: atLeast(1),
		Doc: "Time after which the log rolls to a new segment even if the current one is not full."},
	{Name: "unclean.leader.election.enable", Type: kmsg.ConfigTypeBoolean, Default: "false", BrokerName: "unclean.leader.election.enable",
		Doc: "Whether a replica outside the ISR may become leader when no in-sync replica is live, at the risk of losing acknowledged records."},
}

// Names of the configs the controller obeys.
const (
	KeyUncleanLeaderElection   = "unclean.leader.election.enable"
	KeyMinInsyncReplicas       = "min.insync.replicas"
	KeyAutoLeaderRebalance     = "auto.leader.rebalance.enable"
	KeyLeaderImbalancePercent  = "leader.imbalance.per.broker.percentage"
	KeyLeaderImbalanceInterval = "leader.imbalance.check.interval.seconds"
)

// brokerOwnDefs are the broker configs that are not a topic config's
// synonym: the controller's own (dynamic here, cluster-wide; Kafka reads
// them from the controller's static config only) and those an admin
// tool shows of every broker, read-only.
var brokerOwnDefs = []Def{
	{Name: KeyAutoLeaderRebalance, Type: kmsg.ConfigTypeBoolean, Default: "true", Scope: ClusterWide,
		Doc: "Whether the controller moves partition leadership back to the preferred replicas by itself, every leader.imbalance.check.interval.seconds."},
	{Name: KeyLeaderImbalancePercent, Type: kmsg.ConfigTypeInt, Default: "10", Scope: ClusterWide, check: intIn(0, 100),
		Doc: "Share, in percent, of a broker's preferred partitions led elsewhere above which the automatic rebalance moves them back."},
	{Name: KeyLeaderImbalanceInterval, Type: kmsg.ConfigTypeLong, Default: "300", Scope: ClusterWide, check: atLeast(1),
		Doc: "Seconds between the controller's checks of the leader balance."},
	{Name: "broker.id", Type: kmsg.ConfigTypeInt, Scope: ReadOnly, Doc: "The broker's id."},
	{Name: "node.id", Type: kmsg.ConfigTypeInt, Scope: ReadOnly, Doc: "The node's id (the broker's id for a broker)."},
	{Name: "process.roles", Type: kmsg.ConfigTypeList, Default: "broker", Scope: ReadOnly, Doc: "The roles of the node."},
	{Name: "broker.rack", Type: kmsg.ConfigTypeString, NullDefault: true, Scope: ReadOnly, Doc: "The broker's rack, used to spread a partition's replicas over racks."},
	{Name: "advertised.listeners", Type: kmsg.ConfigTypeString, NullDefault: true, Scope: ReadOnly, Doc: "The listeners the broker registered, as clients are to reach them."},
	{Name: "num.partitions", Type: kmsg.ConfigTypeInt, Default: "1", Scope: ReadOnly, Doc: "Partitions of a topic created without a number of partitions."},
	{Name: "default.replication.factor", Type: kmsg.ConfigTypeInt, Default: "1", Scope: ReadOnly, Doc: "Replication factor of a topic created without one."},
	{Name: "auto.create.topics.enable", Type: kmsg.ConfigTypeBoolean, Default: "false", Scope: ReadOnly, Doc: "Whether fetching or producing to an unknown topic creates it; this cluster never does."},
	{Name: "delete.topic.enable", Type: kmsg.ConfigTypeBoolean, Default: "true", Scope: ReadOnly, Doc: "Whether topics can be deleted."},
	{Name: "broker.session.timeout.ms", Type: kmsg.ConfigTypeInt, Default: "9000", Scope: ReadOnly, Doc: "How long a broker may go without a heartbeat before the controller fences it."},
	{Name: "broker.heartbeat.interval.ms", Type: kmsg.ConfigTypeInt, Default: "2000", Scope: ReadOnly, Doc: "Time between a broker's heartbeats to the controller."},
	{Name: "replica.lag.time.max.ms", Type: kmsg.ConfigTypeLong, Default: "30000", Scope: ReadOnly, Doc: "A follower that has not caught up with its leader for this long leaves the ISR."},
}

var (
	topicByName  = map[string]*Def{}
	brokerDefs   []Def
	brokerByName = map[string]*Def{}
	// topicByBroker maps a broker synonym to its topic config.
	topicByBroker = map[string]*Def{}
)

func init() {
	sort.Slice(topicDefs, func(i, j int) bool { return topicDefs[i].Name < topicDefs[j].Name })
	for i := range topicDefs {
		d := &topicDefs[i]
		topicByName[d.Name] = d
		if d.BrokerName != "" {
			topicByBroker[d.BrokerName] = d
			b := *d
			b.Name, b.BrokerName, b.Scope = d.BrokerName, "", PerBroker
			b.Doc = "Broker default of the topic config " + d.Name + ": " + d.Doc
			brokerDefs = append(brokerDefs, b)
		}
	}
	brokerDefs = append(brokerDefs, brokerOwnDefs...)
	sort.Slice(brokerDefs, func(i, j int) bool { return brokerDefs[i].Name < brokerDefs[j].Name })
	for i := range brokerDefs {
		brokerByName[brokerDefs[i].Name] = &brokerDefs[i]
	}
}

// TopicDefs returns every topic config, sorted by name.
func TopicDefs() []Def { return append([]Def(nil), topicDefs...) }

// TopicDef returns the topic config named name.
func TopicDef(name string) (Def, bool) {
	if d := topicByName[name]; d != nil {
		return *d, true
	}
	return Def{}, false
}

// BrokerDefs returns every broker config the cluster knows, sorted by
// name.
func BrokerDefs() []Def { return append([]Def(nil), brokerDefs...) }

// BrokerDef returns the broker config named name.
func BrokerDef(name string) (Def, bool) {
	if d := brokerByName[name]; d != nil {
		return *d, true
	}
	return Def{}, false
}

// StaticNames are the broker configs a node's settings may set
// (STATIC_BROKER_CONFIG): every dynamic broker config.
func StaticNames() []string {
	var out []string
	for _, d := range brokerDefs {
		if d.Scope != ReadOnly {
			out = append(out, d.Name)
		}
	}
	return out
}
