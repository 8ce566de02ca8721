package controller

// Scenario commands for configs (see scenario_test.go for the script
// format):
//
//	alter-broker-config R key=value [key=value...] [delete=key] [validate-only]
//	    IncrementalAlterBrokerConfigs for broker resource R: a broker id,
//	    or "default" for the cluster-wide default (the empty name); SET
//	    for each key=value, DELETE for delete=key.
//	describe-config T key
//	    The effective value and source of topic T's config key, as the
//	    controller resolves it (topic, the controller node's broker
//	    configs, cluster default, static, default).
//	describe-broker-config B key
//	    The effective value and source of broker B's config key.
//	balance-tick
//	    What one tick of the automatic rebalance does with the settings
//	    the configs give (the loop's own ticker never fires in a
//	    scenario): "disabled interval=… percent=…" when
//	    auto.leader.rebalance.enable is off, otherwise the rebalance's
//	    outcome as the balance command prints it.

import (
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller/configmodel"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

func init() {
	scenarioCommands["alter-broker-config"] = (*scenario).alterBrokerConfig
	scenarioCommands["describe-config"] = (*scenario).describeConfig
	scenarioCommands["describe-broker-config"] = (*scenario).describeBrokerConfig
	scenarioCommands["balance-tick"] = (*scenario).balanceTick
}

func (s *scenario) balanceTick(a *scenarioArgs) ([]string, error) {
	if err := a.done(); err != nil {
		return nil, err
	}
	bal, _ := s.c.balance()
	if !bal.enabled {
		return []string{fmt.Sprintf("disabled interval=%s percent=%d", bal.cfg.Interval, bal.cfg.ImbalancePercent)}, nil
	}
	res, err := s.c.rebalance(s.ctx, bal.cfg)
	if err != nil {
		return []string{"error " + kafkaErrorName(err)}, nil
	}
	return []string{fmt.Sprintf("ok interval=%s percent=%d brokers=%s moved=%d failed=%d runs=%d",
		bal.cfg.Interval, bal.cfg.ImbalancePercent, formatInts(res.Brokers), res.Moved, res.Failed, res.Runs)}, nil
}

func scenarioResource(name string) string {
	if name == "default" {
		return fsm.ClusterDefault
	}
	return name
}

func (s *scenario) alterBrokerConfig(a *scenarioArgs) ([]string, error) {
	if len(a.positional) < 1 {
		return nil, errors.New("alter-broker-config takes a broker resource and key=value pairs")
	}
	resource := scenarioResource(a.positional[0])
	validateOnly := false
	for _, p := range a.positional[1:] {
		if p != "validate-only" {
			return nil, fmt.Errorf("alter-broker-config: unknown word %q", p)
		}
		validateOnly = true
	}
	a.positional = nil
	var ops []AlterConfig
	for k, v := range a.kv {
		a.used[k] = true
		if k == "delete" {
			ops = append(ops, AlterConfig{Key: v, Op: ConfigDelete})
			continue
		}
		ops = append(ops, AlterConfig{Key: k, Value: v, Op: ConfigSet})
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].Key < ops[j].Key })
	if err := a.done(); err != nil {
		return nil, err
	}
	return []string{okOrError(s.c.IncrementalAlterBrokerConfigs(s.ctx, resource, ops, validateOnly), "ok")}, nil
}

func (s *scenario) describeConfig(a *scenarioArgs) ([]string, error) {
	if len(a.positional) != 2 {
		return nil, errors.New("describe-config takes a topic and a key")
	}
	topic, key := a.positional[0], a.positional[1]
	a.positional = nil
	if err := a.done(); err != nil {
		return nil, err
	}
	var out []string
	s.fsm.View(func(im *fsm.Image) {
		_, node := im.ControllerEpoch()
		entries, err := DescribeTopic(im, topic, node, nil, configmodel.DescribeOptions{Names: []string{key}})
		out = describedLine(entries, err)
	})
	return out, nil
}

func (s *scenario) describeBrokerConfig(a *scenarioArgs) ([]string, error) {
	id, err := a.broker()
	if err != nil {
		return nil, err
	}
	if len(a.positional) != 1 {
		return nil, errors.New("describe-broker-config takes a broker id and a key")
	}
	key := a.positional[0]
	a.positional = nil
	if err := a.done(); err != nil {
		return nil, err
	}
	var out []string
	s.fsm.View(func(im *fsm.Image) {
		out = describedLine(DescribeBrokerConfigs(im, id, nil, configmodel.DescribeOptions{Names: []string{key}}), nil)
	})
	return out, nil
}

func describedLine(entries []kmsg.DescribeConfigsResponseResourceConfig, err error) []string {
	if err != nil {
		return []string{"error " + kafkaErrorName(err)}
	}
	if len(entries) != 1 {
		return []string{fmt.Sprintf("error: %d entries", len(entries))}
	}
	e := entries[0]
	v := "null"
	if e.Value != nil {
		v = *e.Value
	}
	return []string{fmt.Sprintf("%s=%s %s read-only=%v", e.Name, v, e.Source, e.ReadOnly)}
}

// formatBrokerConfig prints a BrokerConfig record: "BrokerConfig default
// k=v" for the cluster-wide default, "BrokerConfig 2 delete k".
func formatBrokerConfig(r *rl.BrokerConfig) string {
	res := r.Broker
	if res == fsm.ClusterDefault {
		res = "default"
	}
	if r.Delete {
		return fmt.Sprintf("BrokerConfig %s delete %s", res, r.Key)
	}
	return fmt.Sprintf("BrokerConfig %s %s=%s", res, r.Key, r.Value)
}
