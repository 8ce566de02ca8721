package listener

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller/configmodel"
	"github.com/ctrlquorum/ctrlquorum/fsm"
)

// described is one config as a client sees it.
type described struct {
	value  string
	source kmsg.ConfigSource
}

// describedConfigs reads a resource's configs from kadm's answer.
func describedConfigs(rc kadm.ResourceConfigs, name string) (map[string]described, error) {
	for _, r := range rc {
		if r.Name != name {
			continue
		}
		if r.Err != nil {
			return nil, r.Err
		}
		out := map[string]described{}
		for _, c := range r.Configs {
			out[c.Key] = described{c.MaybeValue(), c.Source}
		}
		return out, nil
	}
	return nil, fmt.Errorf("resource %q not in the answer", name)
}

// waitDescribed polls describe (any node may answer, from an image that
// may trail) until check accepts what it returns.
func waitDescribed(t *testing.T, what string, describe func() (kadm.ResourceConfigs, error), name string, check func(map[string]described) bool) map[string]described {
	t.Helper()
	var last map[string]described
	var lastErr error
	waitFor(t, 10*time.Second, what, func() bool {
		rc, err := describe()
		if err != nil {
			lastErr = err
			return false
		}
		last, lastErr = describedConfigs(rc, name)
		return lastErr == nil && check(last)
	})
	return last
}

// TestConfigsOverTheWire drives the config model with kadm: a topic
// describes every one of Kafka's topic configs with its source; the
// cluster-wide default and a broker's dynamic configs are set with
// IncrementalAlterConfigs and AlterConfigs, and reach a topic's configs
// with Kafka's precedence; refused and validate-only changes change
// nothing.
func TestConfigsOverTheWire(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	c.startBrokers(3)
	ctx := ctxT(t)
	_, adm := c.admin()
	if res, err := adm.CreateTopics(ctx, 1, 3, map[string]*string{"retention.ms": kadm.StringPtr("1000")}, "cfg"); err != nil || res.Error() != nil {
		t.Fatalf("create: %v %v", err, res.Error())
	}
	topic := func() (kadm.ResourceConfigs, error) { return adm.DescribeTopicConfigs(ctx, "cfg") }
	clusterDefault := func() (kadm.ResourceConfigs, error) { return adm.DescribeBrokerConfigs(ctx) }
	broker2 := func() (kadm.ResourceConfigs, error) { return adm.DescribeBrokerConfigs(ctx, 2) }

	got := waitDescribed(t, "the topic's configs", topic, "cfg", func(m map[string]described) bool {
		return m["retention.ms"] == described{"1000", kmsg.ConfigSourceDynamicTopicConfig}
	})
	if len(got) != len(configmodel.TopicDefs()) {
		t.Fatalf("%d topic configs described, Kafka has %d", len(got), len(configmodel.TopicDefs()))
	}
	for key, want := range map[string]described{
		"min.insync.replicas":            {"1", kmsg.ConfigSourceDefaultConfig},
		"unclean.leader.election.enable": {"false", kmsg.ConfigSourceDefaultConfig},
		"cleanup.policy":                 {"delete", kmsg.ConfigSourceDefaultConfig},
		"segment.bytes":                  {"1073741824", kmsg.ConfigSourceDefaultConfig},
		"max.message.bytes":              {"1048588", kmsg.ConfigSourceDefaultConfig},
	} {
		if got[key] != want {
			t.Errorf("%s: %+v, want %+v", key, got[key], want)
		}
	}

	// The cluster-wide default, incrementally.
	ar, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: kadm.StringPtr("2")},
		{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kadm.StringPtr("5000")},
	})
	if err != nil || len(ar) != 1 || ar[0].Err != nil {
		t.Fatalf("alter the cluster default: %+v %v", ar, err)
	}
	waitDescribed(t, "the cluster default", clusterDefault, "", func(m map[string]described) bool {
		return len(m) == 2 && m["min.insync.replicas"] == described{"2", kmsg.ConfigSourceDynamicDefaultBrokerConfig} &&
			m["log.retention.ms"] == described{"5000", kmsg.ConfigSourceDynamicDefaultBrokerConfig}
	})
	// The topic takes min.insync.replicas from it and keeps its own
	// retention.ms.
	waitDescribed(t, "the topic's configs over the cluster default", topic, "cfg", func(m map[string]described) bool {
		return m["min.insync.replicas"] == described{"2", kmsg.ConfigSourceDynamicDefaultBrokerConfig} &&
			m["retention.ms"] == described{"1000", kmsg.ConfigSourceDynamicTopicConfig}
	})

	// One broker's own config.
	ar, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "message.max.bytes", Value: kadm.StringPtr("2000000")}}, 2)
	if err != nil || len(ar) != 1 || ar[0].Err != nil {
		t.Fatalf("alter broker 2: %+v %v", ar, err)
	}
	got = waitDescribed(t, "broker 2's configs", broker2, "2", func(m map[string]described) bool {
		return m["message.max.bytes"] == described{"2000000", kmsg.ConfigSourceDynamicBrokerConfig}
	})
	for key, want := range map[string]described{
		"min.insync.replicas":                     {"2", kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		"broker.id":                               {"2", kmsg.ConfigSourceStaticBrokerConfig},
		"broker.rack":                             {"rack-2", kmsg.ConfigSourceStaticBrokerConfig},
		"auto.leader.rebalance.enable":            {"true", kmsg.ConfigSourceDefaultConfig},
		"leader.imbalance.check.interval.seconds": {"300", kmsg.ConfigSourceDefaultConfig},
	} {
		if got[key] != want {
			t.Errorf("broker 2 %s: %+v, want %+v", key, got[key], want)
		}
	}
	if len(got) != len(configmodel.BrokerDefs()) {
		t.Errorf("%d broker configs described, the cluster knows %d", len(got), len(configmodel.BrokerDefs()))
	}

	// The legacy AlterConfigs replaces the cluster default's whole set.
	ar, err = adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Name: "min.insync.replicas", Value: kadm.StringPtr("3")}})
	if err != nil || len(ar) != 1 || ar[0].Err != nil {
		t.Fatalf("legacy alter of the cluster default: %+v %v", ar, err)
	}
	waitDescribed(t, "the replaced cluster default", clusterDefault, "", func(m map[string]described) bool {
		return len(m) == 1 && m["min.insync.replicas"] == described{"3", kmsg.ConfigSourceDynamicDefaultBrokerConfig}
	})

	// Refused: nothing changes, with Kafka's errors.
	for _, r := range []struct {
		what    string
		configs []kadm.AlterConfig
		brokers []int32
		want    *kerr.Error
	}{
		{"a read-only config", []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "broker.id", Value: kadm.StringPtr("9")}}, []int32{2}, kerr.InvalidRequest},
		{"a cluster-wide config for one broker", []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "auto.leader.rebalance.enable", Value: kadm.StringPtr("false")}}, []int32{2}, kerr.InvalidRequest},
		{"an unknown config beside a good one", []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "no.such.config", Value: kadm.StringPtr("1")},
			{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: kadm.StringPtr("1")}}, nil, kerr.InvalidConfig},
		{"a bad value", []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "leader.imbalance.per.broker.percentage", Value: kadm.StringPtr("200")}}, nil, kerr.InvalidRequest},
	} {
		ar, err := adm.AlterBrokerConfigs(ctx, r.configs, r.brokers...)
		if err != nil || len(ar) != 1 || !errorsIs(ar[0].Err, r.want) {
			t.Errorf("%s: %+v %v, want %v", r.what, ar, err, r.want)
		}
	}
	vr, err := adm.ValidateAlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "leader.imbalance.check.interval.seconds", Value: kadm.StringPtr("7")}})
	if err != nil || len(vr) != 1 || vr[0].Err != nil {
		t.Fatalf("validate only: %+v %v", vr, err)
	}
	// A change made after the refused ones shows they left nothing
	// behind once it is visible.
	if ar, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.cleaner.delete.retention.ms", Value: kadm.StringPtr("100")}}); err != nil || ar[0].Err != nil {
		t.Fatalf("alter after the refusals: %+v %v", ar, err)
	}
	waitDescribed(t, "the cluster default after the refusals", clusterDefault, "", func(m map[string]described) bool {
		return len(m) == 2 && m["min.insync.replicas"].value == "3" && m["log.cleaner.delete.retention.ms"].value == "100"
	})
	var bc []string
	c.view(c.active(10*time.Second), func(im *fsm.Image) { bc = im.BrokerConfigs().Resources() })
	if !slices.Equal(bc, []string{"", "2"}) {
		t.Fatalf("broker config resources in the image: %q", bc)
	}
}

// TestAutomaticRebalanceFromConfigs: with the automatic rebalance on at
// the cluster level (Kafka's default) and a 1 s check interval set as the
// cluster default, a cluster left imbalanced by a broker's restart gets
// its preferred leaders back by itself; turned off at the cluster level,
// it stays as it is through several checks.
func TestAutomaticRebalanceFromConfigs(t *testing.T) {
	c := newTestCluster(t, clusterOpts{session: 2 * time.Second, stable: true})
	c.startBrokers(3)
	ctx := ctxT(t)
	cl, adm := c.admin()
	if ar, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "leader.imbalance.check.interval.seconds", Value: kadm.StringPtr("1")}}); err != nil || ar[0].Err != nil {
		t.Fatalf("set the interval: %+v %v", ar, err)
	}
	if res, err := adm.CreateTopics(ctx, 6, 3, nil, "bal"); err != nil || res.Error() != nil {
		t.Fatalf("create: %v %v", err, res.Error())
	}
	waitFor(t, 10*time.Second, "every partition led by its preferred replica", func() bool { return imbalanced(c, "bal") == 0 })

	restart(t, c, cl, "bal", 1)
	waitFor(t, 20*time.Second, "the automatic rebalance to move leadership back", func() bool { return imbalanced(c, "bal") == 0 })

	if ar, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "auto.leader.rebalance.enable", Value: kadm.StringPtr("false")}}); err != nil || ar[0].Err != nil {
		t.Fatalf("turn the rebalance off: %+v %v", ar, err)
	}
	restart(t, c, cl, "bal", 1)
	n := imbalanced(c, "bal")
	if n == 0 {
		t.Fatal("the restart left no imbalance to keep")
	}
	active := c.active(10 * time.Second)
	from := c.node(active).Controller.BalanceChecks()
	waitFor(t, 20*time.Second, "three balance checks", func() bool {
		return c.node(c.active(10*time.Second)).Controller.BalanceChecks() >= from+3
	})
	if got := imbalanced(c, "bal"); got != n || c.active(10*time.Second) != active {
		t.Fatalf("with the rebalance off: %d partitions led elsewhere, was %d (active voter %d, was %d)", got, n, c.active(10*time.Second), active)
	}
}

// imbalanced counts the topic's partitions not led by their preferred
// replica, in the active voter's image.
func imbalanced(c *testCluster, topic string) int {
	n := 0
	c.view(c.active(10*time.Second), func(im *fsm.Image) {
		t := im.TopicByName(topic)
		if t == nil {
			n = -1
			return
		}
		im.EachPartition(t.ID, func(_ int32, p *fsm.Partition) bool {
			if p.Leader != p.Replicas[0] {
				n++
			}
			return true
		})
	})
	return n
}

// restart stops broker id's heartbeats until it is fenced and leads
// nothing, starts it again, and has each partition's leader take it back
// into the ISR, as a real leader does once the returning replica has
// caught up. Its preferred partitions are then led by others.
func restart(t *testing.T, c *testCluster, cl *kgo.Client, topic string, id int32) {
	t.Helper()
	c.broker(id).stop()
	waitFor(t, 20*time.Second, fmt.Sprintf("broker %d fenced and leading nothing", id), func() bool {
		fenced, leads := false, false
		c.view(c.active(10*time.Second), func(im *fsm.Image) {
			b := im.Broker(id)
			fenced = b != nil && b.Fenced
			t := im.TopicByName(topic)
			im.EachPartition(t.ID, func(_ int32, p *fsm.Partition) bool {
				leads = leads || p.Leader == id
				return true
			})
		})
		return fenced && !leads
	})
	c.startBroker(id)
	c.waitBrokers(3)
	for p := int32(0); p < 6; p++ {
		part, ok := c.partition(c.active(10*time.Second), topic, p)
		if !ok {
			t.Fatalf("%s-%d missing", topic, p)
		}
		if part.InISR(id) {
			continue
		}
		alterISR(t, c, cl, topic, p, part, append(slices.Clone(part.ISR), id))
	}
}

// TestDescribeConfigsVersions: a raw DescribeConfigs at the newest
// version carries each config's type and, when asked, its documentation
// and synonyms; at v0, which has no source, IsDefault marks the defaults.
func TestDescribeConfigsVersions(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	c.startBrokers(1)
	ctx := ctxT(t)
	_, adm := c.admin()
	if res, err := adm.CreateTopics(ctx, 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, "vers"); err != nil || res.Error() != nil {
		t.Fatalf("create: %v %v", err, res.Error())
	}
	describe := func(version int16, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.SetVersion(version)
		req.IncludeSynonyms, req.IncludeDocumentation = version >= 1, docs
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "vers"
		rr.ConfigNames = []string{"cleanup.policy", "segment.ms"}
		req.Resources = append(req.Resources, rr)
		var out []kmsg.DescribeConfigsResponseResourceConfig
		waitFor(t, 10*time.Second, fmt.Sprintf("DescribeConfigs v%d", version), func() bool {
			// A raw call, at exactly the version set.
			resp, err := call(ctx, c.listener(c.active(10*time.Second)).Addr().String(), "versions", req)
			if err != nil {
				t.Fatal(err)
			}
			r := resp.(*kmsg.DescribeConfigsResponse).Resources
			if len(r) != 1 || r[0].ErrorCode != 0 {
				return false
			}
			out = r[0].Configs
			return len(out) == 2
		})
		return out
	}
	byName := func(cs []kmsg.DescribeConfigsResponseResourceConfig) map[string]kmsg.DescribeConfigsResponseResourceConfig {
		m := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, c := range cs {
			m[c.Name] = c
		}
		return m
	}
	top := byName(describe(kmsg.NewPtrDescribeConfigsRequest().MaxVersion(), true))
	cp, seg := top["cleanup.policy"], top["segment.ms"]
	if cp.ConfigType != kmsg.ConfigTypeList || cp.Documentation == nil || *cp.Documentation == "" || cp.Source != kmsg.ConfigSourceDynamicTopicConfig ||
		len(cp.ConfigSynonyms) != 2 || cp.ConfigSynonyms[1].Name != "log.cleanup.policy" || *cp.ConfigSynonyms[1].Value != "delete" {
		t.Fatalf("cleanup.policy at the newest version: %+v", cp)
	}
	if seg.ConfigType != kmsg.ConfigTypeLong || *seg.Value != "604800000" || seg.Source != kmsg.ConfigSourceDefaultConfig || seg.ReadOnly {
		t.Fatalf("segment.ms at the newest version: %+v", seg)
	}
	if undocumented := byName(describe(kmsg.NewPtrDescribeConfigsRequest().MaxVersion(), false)); undocumented["segment.ms"].Documentation != nil {
		t.Fatal("documentation sent without being asked for")
	}
	v0 := byName(describe(0, false))
	if v0["cleanup.policy"].IsDefault || !v0["segment.ms"].IsDefault || *v0["cleanup.policy"].Value != "compact" {
		t.Fatalf("v0: %+v", v0)
	}
}
