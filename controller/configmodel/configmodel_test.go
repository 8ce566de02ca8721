package configmodel

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// dyn is a Dynamic over a map of resource -> key -> value.
type dyn map[string]map[string]string

func (d dyn) Config(broker, key string) (string, bool) {
	v, ok := d[broker][key]
	return v, ok
}

// Every default passes its own check, and every topic config with a
// broker synonym has that synonym among the broker configs, dynamic.
func TestDefsAreConsistent(t *testing.T) {
	for _, d := range append(TopicDefs(), BrokerDefs()...) {
		if d.NullDefault || (d.Default == "" && d.Type == kmsg.ConfigTypeList) || (d.Default == "" && d.Scope == ReadOnly) {
			continue
		}
		if err := d.Check(d.Default); err != nil {
			t.Errorf("%s: default %q: %v", d.Name, d.Default, err)
		}
		if d.Doc == "" || d.Type == kmsg.ConfigTypeUnknown {
			t.Errorf("%s: no doc or type", d.Name)
		}
	}
	for _, d := range TopicDefs() {
		if d.BrokerName == "" {
			continue
		}
		b, ok := BrokerDef(d.BrokerName)
		if !ok || b.Scope != PerBroker || b.Type != d.Type || b.Default != d.Default {
			t.Errorf("%s: broker synonym %s: %+v %v", d.Name, d.BrokerName, b, ok)
		}
	}
	if !slices.IsSortedFunc(TopicDefs(), func(a, b Def) int { return cmpStr(a.Name, b.Name) }) {
		t.Error("topic configs are not sorted by name")
	}
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestChecks(t *testing.T) {
	for _, c := range []struct {
		name, value string
		ok          bool
	}{
		{"min.insync.replicas", "2", true},
		{"min.insync.replicas", "0", false},
		{"min.insync.replicas", "2147483648", false}, // not an INT
		{"retention.ms", "-1", true},
		{"retention.ms", "-2", false},
		{"cleanup.policy", "compact,delete", true},
		{"cleanup.policy", "", false},
		{"cleanup.policy", "compact,shred", false},
		{"unclean.leader.election.enable", "TRUE", true},
		{"unclean.leader.election.enable", "yes", false},
		{"min.cleanable.dirty.ratio", "0.75", true},
		{"min.cleanable.dirty.ratio", "1.5", false},
		{"compression.gzip.level", "-1", true},
		{"compression.gzip.level", "0", false},
		{"leader.replication.throttled.replicas", "0:1,1:2", true},
		{"leader.replication.throttled.replicas", "*", true},
		{"leader.replication.throttled.replicas", "0-1", false},
		{"message.format.version", "3.0-IV1", true},
		{"message.format.version", "three", false},
	} {
		d, ok := TopicDef(c.name)
		if !ok {
			t.Fatalf("no topic config %s", c.name)
		}
		if err := d.Check(c.value); (err == nil) != c.ok {
			t.Errorf("%s=%q: %v, want ok=%v", c.name, c.value, err, c.ok)
		}
	}
}

// A topic config comes from the topic, then the broker's dynamic config,
// the cluster default, static, Kafka's default, under the broker
// synonym's name below the topic.
func TestResolvePrecedence(t *testing.T) {
	d := dyn{"1": {"log.retention.ms": "3000"}, "": {"log.retention.ms": "2000"}}
	static := map[string]string{"log.retention.ms": "1000"}
	topic := []rl.ConfigEntry{{Key: "retention.ms", Value: "4000"}}
	for _, c := range []struct {
		lv   Levels
		want string
		src  kmsg.ConfigSource
		n    int
	}{
		{Levels{Topic: topic, Broker: "1", Dynamic: d, Static: static}, "4000", kmsg.ConfigSourceDynamicTopicConfig, 5},
		{Levels{Broker: "1", Dynamic: d, Static: static}, "3000", kmsg.ConfigSourceDynamicBrokerConfig, 4},
		{Levels{Broker: "2", Dynamic: d, Static: static}, "2000", kmsg.ConfigSourceDynamicDefaultBrokerConfig, 3},
		{Levels{Static: static}, "1000", kmsg.ConfigSourceStaticBrokerConfig, 2},
		{Levels{}, "604800000", kmsg.ConfigSourceDefaultConfig, 1},
	} {
		r, ok := ResolveTopic("retention.ms", c.lv)
		if !ok || r.Value != c.want || r.Source != c.src || len(r.Synonyms) != c.n {
			t.Errorf("%+v: %s %s %d synonyms, want %s %s %d", c.lv, r.Value, r.Source, len(r.Synonyms), c.want, c.src, c.n)
		}
		if last := r.Synonyms[len(r.Synonyms)-1]; last.Name != "log.retention.ms" || last.Source != kmsg.ConfigSourceDefaultConfig {
			t.Errorf("last synonym: %+v", last)
		}
	}
	if n := MinInsyncReplicas(Levels{Broker: "1", Dynamic: dyn{"1": {"min.insync.replicas": "2"}}}); n != 2 {
		t.Errorf("min.insync.replicas from the broker's config: %d", n)
	}
	if !UncleanLeaderElection(Levels{Topic: []rl.ConfigEntry{{Key: "unclean.leader.election.enable", Value: "True"}}}) {
		t.Error("unclean election: a topic's True is not taken")
	}
	// A cluster-wide config has no per-broker level.
	r, _ := ResolveBroker(KeyAutoLeaderRebalance, Levels{Broker: "1", Dynamic: dyn{"1": {KeyAutoLeaderRebalance: "false"}}})
	if r.Value != "true" || r.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("auto.leader.rebalance.enable read from one broker's config: %+v", r)
	}
}

func TestResolveBalance(t *testing.T) {
	if b := ResolveBalance(nil, nil); b != (Balance{Enabled: true, ImbalancePercent: 10, Interval: 300 * time.Second}) {
		t.Errorf("defaults: %+v", b)
	}
	b := ResolveBalance(dyn{"": {KeyAutoLeaderRebalance: "false", KeyLeaderImbalanceInterval: "2"}},
		map[string]string{KeyLeaderImbalancePercent: "25", KeyAutoLeaderRebalance: "true"})
	if b != (Balance{Enabled: false, ImbalancePercent: 25, Interval: 2 * time.Second}) {
		t.Errorf("cluster default over static: %+v", b)
	}
}

func TestDescribe(t *testing.T) {
	all := DescribeTopic(Levels{}, DescribeOptions{})
	if empty := DescribeTopic(Levels{}, DescribeOptions{Names: []string{}}); len(all) != len(TopicDefs()) || len(empty) != len(all) {
		t.Fatalf("%d topic configs described, %d defined", len(all), len(TopicDefs()))
	}
	got := DescribeTopic(Levels{Topic: []rl.ConfigEntry{{Key: "cleanup.policy", Value: "compact"}}},
		DescribeOptions{Names: []string{"cleanup.policy", "nope"}, Synonyms: true, Documentation: true})
	if len(got) != 1 || *got[0].Value != "compact" || got[0].Source != kmsg.ConfigSourceDynamicTopicConfig ||
		got[0].ConfigType != kmsg.ConfigTypeList || got[0].Documentation == nil || len(got[0].ConfigSynonyms) != 2 || got[0].ReadOnly {
		t.Fatalf("cleanup.policy: %+v", got)
	}
	b := DescribeBroker(BrokerFacts{ID: 3, Rack: "r1", Listeners: "PLAINTEXT://h:9092"}, dyn{"3": {"message.max.bytes": "2000"}}, nil, DescribeOptions{})
	by := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range b {
		by[c.Name] = c
	}
	if len(b) != len(BrokerDefs()) || *by["broker.id"].Value != "3" || !by["broker.id"].ReadOnly || *by["broker.rack"].Value != "r1" ||
		*by["message.max.bytes"].Value != "2000" || by["message.max.bytes"].Source != kmsg.ConfigSourceDynamicBrokerConfig || by["message.max.bytes"].ReadOnly {
		t.Fatalf("broker 3: %d configs, %+v", len(b), by)
	}
	cd := DescribeClusterDefault(dyn{"": {"min.insync.replicas": "2"}, "3": {"message.max.bytes": "2000"}}, DescribeOptions{})
	if len(cd) != 1 || cd[0].Name != "min.insync.replicas" || cd[0].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("cluster default: %+v", cd)
	}
}

// OverlayStatic gives the entries described without static settings what
// DescribeBroker with them gives.
func TestOverlayStatic(t *testing.T) {
	d := dyn{"": {"min.insync.replicas": "2"}}
	static := map[string]string{"min.insync.replicas": "3", "log.retention.ms": "1000", "broker.id": "9"}
	opts := DescribeOptions{Synonyms: true}
	facts := BrokerFacts{ID: 4, Rack: "r"}
	want := DescribeBroker(facts, d, static, opts)
	got := DescribeBroker(facts, d, nil, opts)
	OverlayStatic(got, static)
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
	str := func(p *string) string {
		if p == nil {
			return "null"
		}
		return *p
	}
	for i := range want {
		w, g := want[i], got[i]
		if w.Name != g.Name || str(w.Value) != str(g.Value) || w.Source != g.Source || w.IsDefault != g.IsDefault || len(w.ConfigSynonyms) != len(g.ConfigSynonyms) {
			t.Fatalf("%s: got %s %s %d synonyms, want %s %s %d", w.Name, str(g.Value), g.Source, len(g.ConfigSynonyms), str(w.Value), w.Source, len(w.ConfigSynonyms))
		}
		for j := range w.ConfigSynonyms {
			if w.ConfigSynonyms[j].Source != g.ConfigSynonyms[j].Source || str(w.ConfigSynonyms[j].Value) != str(g.ConfigSynonyms[j].Value) {
				t.Fatalf("%s synonym %d: got %+v, want %+v", w.Name, j, g.ConfigSynonyms[j], w.ConfigSynonyms[j])
			}
		}
	}
}
