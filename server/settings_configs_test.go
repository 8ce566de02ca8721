package server

import (
	"maps"
	"strings"
	"testing"
)

// TestStaticConfigSettings: the controller's broker configs are settings
// under Kafka's names; only those given explicitly are static, and a bad
// value is refused naming the setting and where it was set.
func TestStaticConfigSettings(t *testing.T) {
	base := map[string]string{"node.id": "1001", "data.dir": "/tmp/x", "raft.listener": "127.0.0.1:9093", "listener": "127.0.0.1:9092",
		"voters": "1001@127.0.0.1:9093", "voter.listeners": "1001@127.0.0.1:9092"}
	build := func(file string, flags map[string]string) (NodeConfig, error) {
		t.Helper()
		fv, err := ParseSettings(strings.NewReader(file), "node.conf")
		if err != nil {
			t.Fatal(err)
		}
		all := maps.Clone(base)
		maps.Copy(all, flags)
		vals, err := ResolveSettings(fv, nil, all)
		if err != nil {
			t.Fatal(err)
		}
		return BuildNodeConfig(vals)
	}
	nc, err := build("", nil)
	if err != nil || len(nc.StaticConfigs) != 0 {
		t.Fatalf("defaults only: %v static %v", err, nc.StaticConfigs)
	}
	nc, err = build("auto.leader.rebalance.enable = false\nmin.insync.replicas = 2\n", map[string]string{"leader.imbalance.check.interval.seconds": "30"})
	want := map[string]string{"auto.leader.rebalance.enable": "false", "min.insync.replicas": "2", "leader.imbalance.check.interval.seconds": "30"}
	if err != nil || !maps.Equal(nc.StaticConfigs, want) {
		t.Fatalf("static: %v %v, want %v", nc.StaticConfigs, err, want)
	}
	_, err = build("leader.imbalance.per.broker.percentage = 101\n", nil)
	if err == nil || !strings.HasPrefix(err.Error(), "leader.imbalance.per.broker.percentage (from node.conf line 1): value 101 must be 0 to 100") {
		t.Fatalf("bad value: %v", err)
	}
	_, err = build("", map[string]string{"unclean.leader.election.enable": "sometimes"})
	if err == nil || !strings.Contains(err.Error(), "unclean.leader.election.enable (from flag --unclean-leader-election-enable)") {
		t.Fatalf("bad boolean: %v", err)
	}
}
