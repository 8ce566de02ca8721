package server

import (
	"fmt"
	"strings"

	"github.com/ctrlquorum/ctrlquorum/controller/configmodel"
)

// staticConfigKeys are the broker configs a node's settings may give, by
// Kafka's names: the static level (STATIC_BROKER_CONFIG) of the configs
// the controller obeys, under the dynamic broker configs and cluster-wide
// defaults kept in the log. A setting left at its default is not static:
// the config then falls back to Kafka's default, which the row's default
// repeats for --help.
var staticConfigKeys = []string{
	configmodel.KeyAutoLeaderRebalance,
	configmodel.KeyLeaderImbalancePercent,
	configmodel.KeyLeaderImbalanceInterval,
	configmodel.KeyUncleanLeaderElection,
	configmodel.KeyMinInsyncReplicas,
}

// StaticConfigSettings are the settings rows of staticConfigKeys.
func StaticConfigSettings() []Setting {
	out := make([]Setting, 0, len(staticConfigKeys))
	for _, k := range staticConfigKeys {
		d, ok := configmodel.BrokerDef(k)
		if !ok {
			panic("server: no broker config " + k)
		}
		out = append(out, Setting{Key: k, Default: d.Default, Doc: strings.TrimSuffix(d.Doc, ".") + " (Kafka's broker config of the same name: a dynamic value set with any Kafka admin client wins over this setting)",
			Field: "StaticConfigs[" + k + "]", stage: stageValues, parse: readStaticConfig(k)})
	}
	return out
}

// readStaticConfig checks the value with Kafka's rules for the config and
// keeps it as static only when it was set, not defaulted.
func readStaticConfig(key string) func(nc *NodeConfig, v string) error {
	return func(nc *NodeConfig, v string) error {
		d, _ := configmodel.BrokerDef(key)
		if err := d.Check(v); err != nil {
			return fmt.Errorf("%v", err)
		}
		if src := nc.vals[key].Source; src == "" || src == "default" {
			return nil
		}
		if nc.StaticConfigs == nil {
			nc.StaticConfigs = map[string]string{}
		}
		nc.StaticConfigs[key] = v
		return nil
	}
}
