// Package configmodel is Kafka's config model as this cluster serves it:
// the definitions of every topic config and of the broker configs the
// cluster knows (name, type, default, documentation, the check of a
// value, whether and at which level it can be changed while the cluster
// runs), how a config's value is resolved across the levels that may set
// it, and the entries DescribeConfigs answers with.
//
// A config's value comes from the first level that sets it, in Kafka's
// order of precedence:
//
//	DYNAMIC_TOPIC_CONFIG           the topic's own config (topic configs only)
//	DYNAMIC_BROKER_CONFIG          the broker's dynamic config (resource: the broker id)
//	DYNAMIC_DEFAULT_BROKER_CONFIG  the cluster-wide default (resource: the empty name)
//	STATIC_BROKER_CONFIG           the node's settings file, environment or flags
//	DEFAULT_CONFIG                 Kafka's default
//
// A topic config falls back to its broker synonym (retention.ms to
// log.retention.ms, max.message.bytes to message.max.bytes) at the broker
// levels. The dynamic levels live in the replicated log (topic configs on
// the topic, broker configs as fsm.BrokerConfigs), so every node resolves
// the same value from the same image; static settings are each node's
// own, as in Kafka.
//
// The package holds no state and decides nothing: the controller's config
// manager validates changes with it and reads the configs it obeys through
// it, the listener and the broker agent describe configs with it.
package configmodel
