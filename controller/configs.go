package controller

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller/configmodel"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// configManager owns the topics' configurations (Kafka's
// ConfigurationControlManager): incremental changes, the legacy
// AlterConfigs' replacement of a whole set, and the checks of keys and
// values (configs_keys.go) that topic creation uses too. Everything it
// decides from is in the image. Turning unclean leader election on has the
// replication manager elect the leaderless partitions in the same work.
type configManager struct {
	replication *replicationManager
}

// ConfigOp is an IncrementalAlterConfigs operation, with Kafka's wire
// values.
type ConfigOp int8

const (
	// ConfigSet sets the key to the value.
	ConfigSet ConfigOp = 0
	// ConfigDelete removes the key, so the broker default applies again.
	ConfigDelete ConfigOp = 1
	// ConfigAppend adds the comma-separated values to a list-valued key.
	ConfigAppend ConfigOp = 2
	// ConfigSubtract removes the comma-separated values from a list-valued
	// key.
	ConfigSubtract ConfigOp = 3
)

func (op ConfigOp) String() string {
	switch op {
	case ConfigSet:
		return "SET"
	case ConfigDelete:
		return "DELETE"
	case ConfigAppend:
		return "APPEND"
	case ConfigSubtract:
		return "SUBTRACT"
	}
	return "ConfigOp(" + strconv.Itoa(int(op)) + ")"
}

// AlterConfig is one operation on one key.
type AlterConfig struct {
	Key   string
	Value string
	Op    ConfigOp
}

// AlterConfigsResult is the outcome for one topic of a request that alters
// the configs of several.
type AlterConfigsResult struct {
	Topic string
	Err   error
}

// IncrementalAlterTopicConfigs changes a topic's configs, all operations
// or none: every key is checked (unknown key or bad value: INVALID_CONFIG
// naming the key) before anything is staged. With validateOnly the checks
// run and nothing is committed.
//
// Turning unclean.leader.election.enable on also runs an unclean election
// for the topic's leaderless partitions in the same event, as Kafka's
// KRaft controller does: an operator who enables it wants the offline
// partitions back now, not at the next broker change.
func (c *Controller) IncrementalAlterTopicConfigs(ctx context.Context, topic string, ops []AlterConfig, validateOnly bool) error {
	_, _, err := c.submit(ctx, "alter-topic-configs", func(m *managers, w *work) (eventOutcome, error) {
		return answer(nil, m.configs.alterTopicConfigs(w, topic, ops, validateOnly))
	}, nil)
	return err
}

// ReplaceTopicConfigs makes configs a topic's complete config set, as the
// legacy AlterConfigs request does: every key given is SET and every key
// the topic sets that configs leaves out is DELETEd, in one event. The
// keys to delete are worked out inside the event, against the image as the
// round sees it, so a key set by a change that commits before this one is
// deleted too: whatever order the two take, the topic ends with exactly
// configs. The checks and their errors are IncrementalAlterTopicConfigs'
// (a key given twice is INVALID_REQUEST).
func (c *Controller) ReplaceTopicConfigs(ctx context.Context, topic string, configs []rl.ConfigEntry, validateOnly bool) error {
	_, _, err := c.submit(ctx, "alter-topic-configs", func(m *managers, w *work) (eventOutcome, error) {
		return answer(nil, m.configs.replaceTopicConfigs(w, topic, configs, validateOnly))
	}, nil)
	return err
}

// replaceTopicConfigs sets configs as the topic's complete set: the keys
// to delete are those the topic sets in the view and configs leaves out.
func (m *configManager) replaceTopicConfigs(w *work, topic string, configs []rl.ConfigEntry, validateOnly bool) error {
	return m.alterTopicConfigs(w, topic, replaceOps(w.img(), topic, configs), validateOnly)
}

// replaceOps turns a complete config set into SETs of its keys, in the
// order given, and DELETEs of the keys the topic sets in r and the set
// leaves out, in key order.
func replaceOps(r fsm.Reader, topic string, configs []rl.ConfigEntry) []AlterConfig {
	var current []rl.ConfigEntry
	if t := r.TopicByName(topic); t != nil {
		current = t.Configs
	}
	return replacing(current, configs)
}

// replacing is the legacy AlterConfigs as operations: every key of
// configs SET, every key of current that configs leaves out DELETEd.
func replacing(current, configs []rl.ConfigEntry) []AlterConfig {
	ops := make([]AlterConfig, 0, len(configs))
	given := make(map[string]bool, len(configs))
	for _, e := range configs {
		ops = append(ops, AlterConfig{Key: e.Key, Value: e.Value, Op: ConfigSet})
		given[e.Key] = true
	}
	for _, e := range current {
		if !given[e.Key] {
			ops = append(ops, AlterConfig{Key: e.Key, Op: ConfigDelete})
		}
	}
	return ops
}

// DescribeTopicConfigs returns the configs a topic sets itself, sorted
// by key (DescribeTopic describes every config with its effective
// value). It reads r as given (hold the FSM's view when r is the
// committed image) and sends nothing through the event loop, so it also
// works on a node that is not active.
func DescribeTopicConfigs(r fsm.Reader, topic string) ([]rl.ConfigEntry, error) {
	t := r.TopicByName(topic)
	if t == nil || t.Deleting {
		return nil, kafkaErr(kerr.UnknownTopicOrPartition, "topic %q", topic)
	}
	out := make([]rl.ConfigEntry, len(t.Configs))
	copy(out, t.Configs)
	return out, nil
}

// DescribeTopic describes every topic config of a topic (or those opts
// asks for) with its effective value and source, as the node node
// resolves it: the topic's own configs, node's dynamic broker configs,
// the cluster-wide default, static (the node's settings), Kafka's
// default. It reads r as given, like DescribeTopicConfigs.
func DescribeTopic(r fsm.Reader, topic string, node int32, static map[string]string, opts configmodel.DescribeOptions) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	t := r.TopicByName(topic)
	if t == nil || t.Deleting {
		return nil, kafkaErr(kerr.UnknownTopicOrPartition, "topic %q", topic)
	}
	lv := configmodel.Levels{Topic: t.Configs, Broker: strconv.Itoa(int(node)), Dynamic: r.BrokerConfigs(), Static: static}
	return configmodel.DescribeTopic(lv, opts), nil
}

func (m *configManager) alterTopicConfigs(w *work, topic string, ops []AlterConfig, validateOnly bool) error {
	t := w.img().TopicByName(topic)
	if t == nil || t.Deleting {
		return kafkaErr(kerr.UnknownTopicOrPartition, "topic %q", topic)
	}
	type change struct {
		key, value string
		del        bool
	}
	var changes []change
	seen := map[string]bool{}
	enableUnclean := false
	for _, op := range ops {
		if seen[op.Key] {
			return kafkaErr(kerr.InvalidRequest, "topic config %q appears more than once in the request", op.Key)
		}
		seen[op.Key] = true
		def, ok := configmodel.TopicDef(op.Key)
		if !ok {
			return kafkaErr(kerr.InvalidConfig, "Unknown topic config name: %s", op.Key)
		}
		cur, set := t.Config(op.Key)
		var next string
		var err error
		switch op.Op {
		case ConfigSet:
			next = op.Value
		case ConfigDelete:
			if set {
				changes = append(changes, change{key: op.Key, del: true})
			}
			continue
		case ConfigAppend, ConfigSubtract:
			if next, err = listOp(def, op, cur, set); err != nil {
				return err
			}
		default:
			return kafkaErr(kerr.InvalidRequest, "Unknown operations type %d for config %s", op.Op, op.Key)
		}
		if err := checkTopicConfig(op.Key, next); err != nil {
			return err
		}
		if on, _ := configmodel.ParseBool(next); op.Key == configmodel.KeyUncleanLeaderElection && on {
			enableUnclean = true
		}
		if !set || cur != next {
			changes = append(changes, change{key: op.Key, value: next})
		}
	}
	if validateOnly {
		return nil
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].key < changes[j].key })
	for _, ch := range changes {
		if err := w.stageEach(&rl.TopicConfig{TopicID: t.ID, Key: ch.key, Value: ch.value, Delete: ch.del}); err != nil {
			return err
		}
	}
	if len(changes) > 0 {
		w.log.Info("topic configs changed", "topic", t.Name, "keys", len(changes))
		// Brokers with data read the configs they obey (min.insync.replicas,
		// retention) from the controller when told something changed.
		w.plan.updateMetadataToAll = true
	}
	if enableUnclean {
		var leaderless []partRef
		for _, ref := range w.topicPartitionRefs(t) {
			if w.img().Partition(ref.id, ref.part).Leader == rl.NoLeader {
				leaderless = append(leaderless, ref)
			}
		}
		if len(leaderless) > 0 {
			failed, err := m.replication.electUnclean(w, leaderless)
			if err != nil {
				return err
			}
			for _, ref := range sortedRefs(failed) {
				w.log.Warn("unclean election after enabling it: partition stays leaderless", "topic", ref.name, "partition", ref.part, "error", failed[ref])
			}
		}
	}
	return nil
}

// listOp is the value an APPEND or SUBTRACT leaves: only list configs
// take them (INVALID_CONFIG otherwise, as in Kafka), starting from the
// default when the resource does not set the key.
func listOp(def configmodel.Def, op AlterConfig, cur string, set bool) (string, error) {
	if def.Type != kmsg.ConfigTypeList {
		verb := "append"
		if op.Op == ConfigSubtract {
			verb = "subtract"
		}
		return "", kafkaErr(kerr.InvalidConfig, "Config value %s is not allowed for config key: %s", verb, op.Key)
	}
	if !set {
		cur = def.Default
	}
	return alterList(cur, op.Value, op.Op == ConfigAppend), nil
}

// alterList appends the comma-separated values to (or removes them from)
// a comma-separated list, keeping its order and never listing a value
// twice.
func alterList(cur, values string, add bool) string {
	list := splitList(cur)
	for _, v := range splitList(values) {
		i := slices.Index(list, v)
		switch {
		case add && i < 0:
			list = append(list, v)
		case !add && i >= 0:
			list = slices.Delete(list, i, i+1)
		}
	}
	return strings.Join(list, ",")
}

func splitList(s string) []string {
	var out []string
	for _, v := range configmodel.SplitList(s) {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
