package controller

import (
	"context"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller/configmodel"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Dynamic broker configs: a broker resource is a broker id in decimal, or
// fsm.ClusterDefault ("") for the cluster-wide default. Each change is a
// BrokerConfig record. The checks are Kafka's broker-side ones
// (ConfigAdminManager and DynamicBrokerConfig): the resource name must be
// a broker id, an unknown config is INVALID_CONFIG, and a config that
// cannot change dynamically (or not at that level) or a value that does
// not fit is INVALID_REQUEST, as Kafka answers those (its broker wraps
// the validation failure in InvalidRequestException, KAFKA-13609).
// Unlike Kafka, which takes any unknown key for a broker, an unknown
// broker config is refused: nothing here would read it.

// IncrementalAlterBrokerConfigs changes the dynamic configs of a broker
// resource, all operations or none. With validateOnly the checks run and
// nothing is committed.
func (c *Controller) IncrementalAlterBrokerConfigs(ctx context.Context, resource string, ops []AlterConfig, validateOnly bool) error {
	_, _, err := c.submit(ctx, "alter-broker-configs", func(m *managers, w *work) (eventOutcome, error) {
		return answer(nil, m.configs.alterBrokerConfigs(w, resource, ops, validateOnly))
	}, nil)
	return err
}

// ReplaceBrokerConfigs makes configs the complete dynamic config set of a
// broker resource, as the legacy AlterConfigs does: every key given is
// SET and every key the resource sets that configs leaves out is DELETEd,
// worked out inside the event as ReplaceTopicConfigs does.
func (c *Controller) ReplaceBrokerConfigs(ctx context.Context, resource string, configs []rl.ConfigEntry, validateOnly bool) error {
	_, _, err := c.submit(ctx, "alter-broker-configs", func(m *managers, w *work) (eventOutcome, error) {
		return answer(nil, m.configs.replaceBrokerConfigs(w, resource, configs, validateOnly))
	}, nil)
	return err
}

func (m *configManager) replaceBrokerConfigs(w *work, resource string, configs []rl.ConfigEntry, validateOnly bool) error {
	return m.alterBrokerConfigs(w, resource, replacing(w.img().BrokerConfigs().Configs(resource), configs), validateOnly)
}

// CheckBrokerResourceName is the answer to a broker config resource that
// does not name a broker: INVALID_REQUEST, as Kafka's.
func CheckBrokerResourceName(resource string) error {
	if fsm.CheckBrokerResource(resource) != nil {
		return kafkaErr(kerr.InvalidRequest, "Node id must be an integer, but it is: %s", resource)
	}
	return nil
}

func (m *configManager) alterBrokerConfigs(w *work, resource string, ops []AlterConfig, validateOnly bool) error {
	if err := CheckBrokerResourceName(resource); err != nil {
		return err
	}
	bc := w.img().BrokerConfigs()
	var changes []rl.BrokerConfig
	var readOnly, clusterOnly []string
	seen := map[string]bool{}
	enableUnclean := false
	for _, op := range ops {
		if seen[op.Key] {
			return kafkaErr(kerr.InvalidRequest, "Error due to duplicate config keys")
		}
		seen[op.Key] = true
		def, ok := configmodel.BrokerDef(op.Key)
		if !ok {
			return kafkaErr(kerr.InvalidConfig, "Unknown config name: %s", op.Key)
		}
		cur, set := bc.Config(resource, op.Key)
		var next string
		var err error
		switch op.Op {
		case ConfigSet:
			next = op.Value
		case ConfigDelete:
			if set {
				changes = append(changes, rl.BrokerConfig{Broker: resource, Key: op.Key, Delete: true})
			}
			continue
		case ConfigAppend, ConfigSubtract:
			if next, err = listOp(def, op, cur, set); err != nil {
				return err
			}
		default:
			return kafkaErr(kerr.InvalidRequest, "Unknown operations type %d for config %s", op.Op, op.Key)
		}
		switch {
		case def.Scope == configmodel.ReadOnly:
			readOnly = append(readOnly, op.Key)
			continue
		case def.Scope == configmodel.ClusterWide && resource != fsm.ClusterDefault:
			clusterOnly = append(clusterOnly, op.Key)
			continue
		}
		if err := def.Check(next); err != nil {
			return kafkaErr(kerr.InvalidRequest, "Invalid value %s for configuration %s: %v", next, op.Key, err)
		}
		if on, _ := configmodel.ParseBool(next); op.Key == configmodel.KeyUncleanLeaderElection && on {
			enableUnclean = true
		}
		if !set || cur != next {
			changes = append(changes, rl.BrokerConfig{Broker: resource, Key: op.Key, Value: next})
		}
	}
	if len(readOnly) > 0 {
		return kafkaErr(kerr.InvalidRequest, "Cannot update these configs dynamically: %v", readOnly)
	}
	if len(clusterOnly) > 0 {
		return kafkaErr(kerr.InvalidRequest, "Cannot update these configs for one broker, only as the cluster-wide default (empty broker name): %v", clusterOnly)
	}
	if validateOnly {
		return nil
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Key < changes[j].Key })
	for i := range changes {
		if err := w.stageEach(&changes[i]); err != nil {
			return err
		}
	}
	if len(changes) > 0 {
		w.log.Info("broker configs changed", "resource", describeResource(resource), "keys", len(changes))
		// As for topic configs: brokers read them again when told.
		w.plan.updateMetadataToAll = true
	}
	if enableUnclean {
		m.electUncleanWhereAllowed(w)
	}
	return nil
}

func describeResource(resource string) string {
	if resource == fsm.ClusterDefault {
		return "cluster default"
	}
	return "broker " + resource
}

// electUncleanWhereAllowed runs an unclean election for the leaderless
// partitions of every topic that, with the configs as now staged, allows
// one: turning unclean.leader.election.enable on for the cluster (or for
// the controller's node) brings offline partitions back at once, as
// turning it on for a topic does. A partition that stays leaderless is
// logged; it does not fail the change.
func (m *configManager) electUncleanWhereAllowed(w *work) {
	var leaderless []partRef
	for _, ref := range w.allPartitionRefs() {
		if w.img().Partition(ref.id, ref.part).Leader == rl.NoLeader && w.uncleanAllowed(ref) {
			leaderless = append(leaderless, ref)
		}
	}
	if len(leaderless) == 0 {
		return
	}
	w.atomically("unclean election after enabling it", func(sub *work) error {
		failed, err := m.replication.electUnclean(sub, leaderless)
		for _, ref := range sortedRefs(failed) {
			sub.log.Warn("unclean election after enabling it: partition stays leaderless", "topic", ref.name, "partition", ref.part, "error", failed[ref])
		}
		return err
	})
}

// DescribeBrokerConfigs describes broker resource id's configs from r's
// dynamic configs and the describing node's static settings; the
// broker's own facts (rack, listeners) come from its registration when r
// has one. It reads r as given (hold the FSM's view when r is the
// committed image). A broker agent answering for itself calls
// configmodel.DescribeBroker with the facts it knows and its own static
// settings.
func DescribeBrokerConfigs(r fsm.Reader, id int32, static map[string]string, opts configmodel.DescribeOptions) []kmsg.DescribeConfigsResponseResourceConfig {
	facts := configmodel.BrokerFacts{ID: id}
	if b := r.Broker(id); b != nil {
		facts.Rack = b.Rack
		facts.Listeners = Listeners(b.Endpoints)
	}
	return configmodel.DescribeBroker(facts, r.BrokerConfigs(), static, opts)
}

// Listeners writes a broker's endpoints as Kafka's advertised.listeners:
// NAME://host:port, comma-separated.
func Listeners(eps []rl.Endpoint) string {
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = e.Name + "://" + net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
	}
	return strings.Join(out, ",")
}

// StaticConfigs returns this node's static broker configs
// (Config.StaticConfigs). The map must not be changed.
func (c *Controller) StaticConfigs() map[string]string { return c.cfg.StaticConfigs }
