package controller

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/controller/configmodel"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// checkTopicConfig checks one topic config's key and value against
// Kafka's topic configs (configmodel), with Kafka's errors: an unknown
// key or a bad value is INVALID_CONFIG naming the key.
func checkTopicConfig(key, value string) error {
	d, ok := configmodel.TopicDef(key)
	if !ok {
		return kafkaErr(kerr.InvalidConfig, "Unknown topic config name: %s", key)
	}
	if err := d.Check(value); err != nil {
		return kafkaErr(kerr.InvalidConfig, "Invalid value %s for configuration %s: %v", value, key, err)
	}
	return nil
}

// validateConfigs checks keys and values and returns them sorted by key.
func validateConfigs(in []rl.ConfigEntry) ([]rl.ConfigEntry, error) {
	out := append([]rl.ConfigEntry(nil), in...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	for i, e := range out {
		if err := checkTopicConfig(e.Key, e.Value); err != nil {
			return nil, err
		}
		if i > 0 && out[i-1].Key == e.Key {
			return nil, kafkaErr(kerr.InvalidConfig, "topic config %q given twice", e.Key)
		}
	}
	return out, nil
}
