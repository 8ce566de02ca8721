package controller

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

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

// listConfigDefaults are the list-valued topic configs, the only ones
// APPEND and SUBTRACT apply to, with the default an APPEND or SUBTRACT
// starts from when the topic does not set the key (Kafka's rule).
var listConfigDefaults = map[string]string{
	"cleanup.policy": "delete",
}

const uncleanElectionKey = "unclean.leader.election.enable"

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
	ops := make([]AlterConfig, 0, len(configs))
	given := make(map[string]bool, len(configs))
	for _, e := range configs {
		ops = append(ops, AlterConfig{Key: e.Key, Value: e.Value, Op: ConfigSet})
		given[e.Key] = true
	}
	if t := r.TopicByName(topic); t != nil {
		for _, e := range t.Configs {
			if !given[e.Key] {
				ops = append(ops, AlterConfig{Key: e.Key, Op: ConfigDelete})
			}
		}
	}
	return ops
}

// DescribeTopicConfigs returns the configs a topic sets, sorted by key.
// Keys the topic does not set are not listed: their value is the broker
// default, which the controller does not know. It reads r as given (hold
// the FSM's view when r is the committed image) and sends nothing through
// the event loop, so it also works on a node that is not active.
func DescribeTopicConfigs(r fsm.Reader, topic string) ([]rl.ConfigEntry, error) {
	t := r.TopicByName(topic)
	if t == nil || t.Deleting {
		return nil, kafkaErr(kerr.UnknownTopicOrPartition, "topic %q", topic)
	}
	out := make([]rl.ConfigEntry, len(t.Configs))
	copy(out, t.Configs)
	return out, nil
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
		check, ok := topicConfigs[op.Key]
		if !ok {
			return kafkaErr(kerr.InvalidConfig, "unknown topic config %q", op.Key)
		}
		cur, set := t.Config(op.Key)
		var next string
		switch op.Op {
		case ConfigSet:
			next = op.Value
		case ConfigDelete:
			if set {
				changes = append(changes, change{key: op.Key, del: true})
			}
			continue
		case ConfigAppend, ConfigSubtract:
			def, isList := listConfigDefaults[op.Key]
			if !isList {
				return kafkaErr(kerr.InvalidConfig, "topic config %q is not a list: %s does not apply to it", op.Key, op.Op)
			}
			if !set {
				cur = def
			}
			next = alterList(cur, op.Value, op.Op == ConfigAppend)
		default:
			return kafkaErr(kerr.InvalidRequest, "unknown config operation %d for topic config %q", op.Op, op.Key)
		}
		if !check(next) {
			return kafkaErr(kerr.InvalidConfig, "invalid value %q for topic config %q", next, op.Key)
		}
		if op.Key == uncleanElectionKey && next == "true" {
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
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
