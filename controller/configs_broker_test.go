package controller

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

func brokerConfigsOf(e *managerEnv, resource string) []rl.ConfigEntry {
	var out []rl.ConfigEntry
	e.image(func(im *fsm.Image) { out = slices.Clone(im.BrokerConfigs().Configs(resource)) })
	return out
}

// The config manager's broker config changes: records for the keys that
// change, replayed as the log would; APPEND on a list config; the legacy
// replacement deleting what it leaves out; validate-only and refused
// requests staging nothing, with Kafka's errors.
func TestConfigManagerBrokerConfigs(t *testing.T) {
	e := newManagerEnv(t)
	cm := e.m.configs
	// BrokerConfig records need metadata.version 2; the env's image, with
	// no FeatureLevel record, is a log of the release before, where a
	// change is refused and stages nothing.
	w, err := e.call(func(w *work) error {
		return cm.alterBrokerConfigs(w, "", []AlterConfig{{Key: "min.insync.replicas", Value: "2"}}, false)
	})
	if !errors.Is(err, kerr.UnsupportedVersion) || len(w.records()) != 0 {
		t.Fatalf("at metadata.version 1: %v, staged %s", err, recordTypes(w))
	}
	e.atLatestLevel()
	w = e.run(func(w *work) error {
		return cm.alterBrokerConfigs(w, "", []AlterConfig{
			{Key: "min.insync.replicas", Value: "2", Op: ConfigSet},
			{Key: "log.cleanup.policy", Value: "compact", Op: ConfigAppend},
		}, false)
	})
	if got := recordTypes(w); got != "BrokerConfig BrokerConfig" {
		t.Fatalf("staged %s", got)
	}
	want := []rl.ConfigEntry{{Key: "log.cleanup.policy", Value: "delete,compact"}, {Key: "min.insync.replicas", Value: "2"}}
	if got := brokerConfigsOf(e, ""); !slices.Equal(got, want) {
		t.Fatalf("cluster default: %v, want %v", got, want)
	}
	// Setting a value the resource already has stages nothing.
	if w := e.run(func(w *work) error {
		return cm.alterBrokerConfigs(w, "", []AlterConfig{{Key: "min.insync.replicas", Value: "2", Op: ConfigSet}}, false)
	}); len(w.records()) != 0 {
		t.Fatalf("an unchanged value staged %s", recordTypes(w))
	}
	e.run(func(w *work) error {
		return cm.replaceBrokerConfigs(w, "", []rl.ConfigEntry{{Key: "message.max.bytes", Value: "2000000"}}, false)
	})
	if got := brokerConfigsOf(e, ""); !slices.Equal(got, []rl.ConfigEntry{{Key: "message.max.bytes", Value: "2000000"}}) {
		t.Fatalf("after the replacement: %v", got)
	}
	for _, c := range []struct {
		name     string
		resource string
		ops      []AlterConfig
		want     *kerr.Error
	}{
		{"validate only", "4", []AlterConfig{{Key: "min.insync.replicas", Value: "3"}}, nil},
		{"read-only", "4", []AlterConfig{{Key: "min.insync.replicas", Value: "3"}, {Key: "broker.rack", Value: "r"}}, kerr.InvalidRequest},
		{"cluster-wide only", "4", []AlterConfig{{Key: "leader.imbalance.check.interval.seconds", Value: "3"}}, kerr.InvalidRequest},
		{"unknown", "", []AlterConfig{{Key: "log.retention.mins", Value: "3"}}, kerr.InvalidConfig},
		{"bad value", "", []AlterConfig{{Key: "leader.imbalance.per.broker.percentage", Value: "-1"}}, kerr.InvalidRequest},
		{"append to a non-list", "", []AlterConfig{{Key: "min.insync.replicas", Value: "3", Op: ConfigAppend}}, kerr.InvalidConfig},
		{"duplicate key", "", []AlterConfig{{Key: "min.insync.replicas", Value: "3"}, {Key: "min.insync.replicas", Op: ConfigDelete}}, kerr.InvalidRequest},
		{"not a broker id", "04", []AlterConfig{{Key: "min.insync.replicas", Value: "3"}}, kerr.InvalidRequest},
	} {
		w, err := e.call(func(w *work) error { return cm.alterBrokerConfigs(w, c.resource, c.ops, c.want == nil) })
		var ke *kerr.Error
		switch {
		case c.want == nil && err != nil, c.want != nil && (!errors.As(err, &ke) || ke.Code != c.want.Code):
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		case len(w.records()) != 0:
			t.Errorf("%s: staged %s", c.name, recordTypes(w))
		}
	}
}
