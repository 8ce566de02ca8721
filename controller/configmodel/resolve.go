package configmodel

import (
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Dynamic is where the dynamic broker configs are read from:
// *fsm.BrokerConfigs, the image's. The cluster-wide default is the broker
// resource "".
type Dynamic interface {
	Config(broker, key string) (string, bool)
}

// Levels are the levels a resolution reads, beside the config's default.
type Levels struct {
	// Topic holds the topic's own configs; nil for a broker config.
	Topic []rl.ConfigEntry
	// Broker is the broker resource (the broker id in decimal) whose
	// dynamic configs apply: a broker's own id on its data path, the
	// active controller's node id for the controller's decisions, as in
	// Kafka. Empty: no broker level.
	Broker string
	// Dynamic holds the dynamic broker configs and the cluster-wide
	// default; nil: none.
	Dynamic Dynamic
	// Static holds the node's static settings by Kafka's names, only
	// those set (a setting left at its default is not static); nil: none.
	Static map[string]string
}

// Synonym is one level that sets a config, with the name the config has
// there.
type Synonym struct {
	Name   string
	Value  string
	Null   bool
	Source kmsg.ConfigSource
}

// Resolved is a config's effective value: the first of Synonyms, which
// lists every level that sets it, highest precedence first, ending with
// the default.
type Resolved struct {
	Def      Def
	Value    string
	Null     bool
	Source   kmsg.ConfigSource
	Synonyms []Synonym
}

// ResolveTopic resolves a topic config: the topic's own value, then its
// broker synonym at the broker levels, then the default. An unknown name
// is not resolved.
func ResolveTopic(name string, lv Levels) (Resolved, bool) {
	d := topicByName[name]
	if d == nil {
		return Resolved{}, false
	}
	var syns []Synonym
	for _, e := range lv.Topic {
		if e.Key == name {
			syns = append(syns, Synonym{Name: name, Value: e.Value, Source: kmsg.ConfigSourceDynamicTopicConfig})
			break
		}
	}
	defName := name
	if d.BrokerName != "" {
		syns = brokerLevels(syns, d.BrokerName, PerBroker, lv)
		defName = d.BrokerName
	}
	return finish(*d, append(syns, Synonym{Name: defName, Value: d.Default, Null: d.NullDefault, Source: kmsg.ConfigSourceDefaultConfig})), true
}

// ResolveBroker resolves a broker config at the broker levels: the
// broker's own (unless the config is cluster-wide or read-only), the
// cluster-wide default (unless read-only), static, default.
func ResolveBroker(name string, lv Levels) (Resolved, bool) {
	d := brokerByName[name]
	if d == nil {
		return Resolved{}, false
	}
	syns := brokerLevels(nil, name, d.Scope, lv)
	return finish(*d, append(syns, Synonym{Name: name, Value: d.Default, Null: d.NullDefault, Source: kmsg.ConfigSourceDefaultConfig})), true
}

func brokerLevels(syns []Synonym, name string, scope Scope, lv Levels) []Synonym {
	if lv.Dynamic != nil && scope != ReadOnly {
		if lv.Broker != "" && scope == PerBroker {
			if v, ok := lv.Dynamic.Config(lv.Broker, name); ok {
				syns = append(syns, Synonym{Name: name, Value: v, Source: kmsg.ConfigSourceDynamicBrokerConfig})
			}
		}
		if v, ok := lv.Dynamic.Config("", name); ok {
			syns = append(syns, Synonym{Name: name, Value: v, Source: kmsg.ConfigSourceDynamicDefaultBrokerConfig})
		}
	}
	if v, ok := lv.Static[name]; ok {
		syns = append(syns, Synonym{Name: name, Value: v, Source: kmsg.ConfigSourceStaticBrokerConfig})
	}
	return syns
}

func finish(d Def, syns []Synonym) Resolved {
	top := syns[0]
	return Resolved{Def: d, Value: top.Value, Null: top.Null, Source: top.Source, Synonyms: syns}
}

// MinInsyncReplicas is a topic's effective min.insync.replicas: the
// fewest in-sync replicas with which a partition leader accepts an
// acks=all write. A broker's data path resolves it with its own id as
// lv.Broker. A value that does not parse (a static setting is checked at
// start, a dynamic one when it is set, so none should) counts as Kafka's
// default, 1.
func MinInsyncReplicas(lv Levels) int {
	r, _ := ResolveTopic(KeyMinInsyncReplicas, lv)
	n, err := strconv.Atoi(r.Value)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// UncleanLeaderElection reports whether a topic allows a replica outside
// the ISR to be elected leader when no in-sync replica is live.
func UncleanLeaderElection(lv Levels) bool {
	r, _ := ResolveTopic(KeyUncleanLeaderElection, lv)
	v, _ := ParseBool(r.Value)
	return v
}

// Balance is the controller's automatic leader rebalance as the configs
// set it.
type Balance struct {
	// Enabled is auto.leader.rebalance.enable.
	Enabled bool
	// ImbalancePercent is leader.imbalance.per.broker.percentage.
	ImbalancePercent int
	// Interval is leader.imbalance.check.interval.seconds.
	Interval time.Duration
}

// ResolveBalance reads the automatic rebalance's configs, which are
// cluster-wide: the cluster default, then static, then Kafka's defaults
// (on, 10%, every 300 s).
func ResolveBalance(dyn Dynamic, static map[string]string) Balance {
	lv := Levels{Dynamic: dyn, Static: static}
	var b Balance
	r, _ := ResolveBroker(KeyAutoLeaderRebalance, lv)
	b.Enabled, _ = ParseBool(r.Value)
	r, _ = ResolveBroker(KeyLeaderImbalancePercent, lv)
	if n, err := strconv.Atoi(r.Value); err == nil && n >= 0 && n <= 100 {
		b.ImbalancePercent = n
	} else {
		b.ImbalancePercent = 10
	}
	r, _ = ResolveBroker(KeyLeaderImbalanceInterval, lv)
	switch n, err := strconv.ParseInt(r.Value, 10, 64); {
	case err != nil || n < 1:
		b.Interval = 300 * time.Second
	case n > maxIntervalSeconds:
		b.Interval = time.Duration(maxIntervalSeconds) * time.Second
	default:
		b.Interval = time.Duration(n) * time.Second
	}
	return b
}

// maxIntervalSeconds caps the check interval where a time.Duration still
// holds it (about 292 years).
const maxIntervalSeconds = int64(1<<63-1) / int64(time.Second)

func itoa(n int32) string { return strconv.Itoa(int(n)) }
