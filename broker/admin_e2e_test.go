package broker_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
)

// brokerAdmin is a kadm client bootstrapped at the brokers only: it never
// learns a voter's address, so every admin request goes through a
// broker.
func (c *e2eCluster) brokerAdmin() (*kadm.Client, *kgo.Client) {
	c.t.Helper()
	var seeds []string
	for _, a := range c.agents {
		seeds = append(seeds, a.Addr())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return kadm.NewClient(cl), cl
}

// startBrokerCluster starts three voters and three registered, unfenced
// brokers.
func startBrokerCluster(t *testing.T) *e2eCluster {
	if testing.Short() {
		t.Skip("three raft voters and three brokers over TCP")
	}
	c := newE2ECluster(t, 2*time.Second)
	c.active()
	c.startBrokers(3)
	return c
}

// TestAdminThroughABroker runs every admin operation kadm offers that
// the cluster supports with a client that knows only the brokers: the
// brokers forward what only the controller answers and relay its
// answers, and the results are those of the controller.
func TestAdminThroughABroker(t *testing.T) {
	c := startBrokerCluster(t)
	adm, cl := c.brokerAdmin()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The cluster a broker shows: brokers only, a live broker as
	// controller.
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ids := md.Brokers.NodeIDs(); !slices.Equal(ids, []int32{1, 2, 3}) || md.Controller < 1 || md.Controller > 3 {
		t.Fatalf("metadata from a broker: brokers %v controller %d", ids, md.Controller)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dcr, err := dc.RequestWith(ctx, cl)
	if err != nil || dcr.ErrorCode != 0 || len(dcr.Brokers) != 3 || dcr.ControllerID < 1 || dcr.ControllerID > 3 {
		t.Fatalf("DescribeCluster from a broker: %v %+v", err, dcr)
	}
	dc.EndpointType = 2
	if dcr, err = dc.RequestWith(ctx, cl); err != nil || dcr.ErrorCode != kerr.MismatchedEndpointType.Code {
		t.Fatalf("DescribeCluster for controllers from a broker: %v %+v", err, dcr)
	}
	// ApiVersions names exactly what a broker serves: every forwarded
	// admin API among it.
	vs, err := adm.ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vs.Each(func(v kadm.BrokerApiVersions) {
		if v.Err != nil {
			t.Fatalf("ApiVersions of %d: %v", v.NodeID, v.Err)
		}
		for k, max := range kafkaclient.Forwardable() {
			if _, got, ok := v.KeyVersions(k); !ok || got != max {
				t.Errorf("broker %d serves %s up to %d, want %d", v.NodeID, kmsg.NameForKey(k), got, max)
			}
		}
	})

	// Topics.
	created, err := adm.CreateTopics(ctx, 2, 3, map[string]*string{"retention.ms": kmsg.StringPtr("60000")}, "orders", "audit")
	if err != nil || created.Error() != nil {
		t.Fatalf("create: %v %v", err, created.Error())
	}
	dup, err := adm.CreateTopic(ctx, 1, 1, nil, "orders")
	if !errors.Is(dup.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("create again: %v %+v", err, dup)
	}
	c.waitAgree("orders")
	c.waitAgree("audit")
	waitFor(t, "both topics listed by the brokers", func() bool {
		td, err := adm.ListTopics(ctx)
		return err == nil && td.Has("orders") && td.Has("audit") && len(td["orders"].Partitions) == 2
	})
	parts, err := adm.CreatePartitions(ctx, 2, "orders")
	if err != nil || parts.Error() != nil {
		t.Fatalf("create partitions: %v %v", err, parts.Error())
	}
	waitFor(t, "orders with 4 partitions", func() bool {
		td, err := adm.ListTopics(ctx, "orders")
		return err == nil && len(td["orders"].Partitions) == 4
	})

	// Configs: incremental and legacy alters, then describe.
	if r, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: kmsg.StringPtr("compact")}}, "orders"); err != nil || r[0].Err != nil {
		t.Fatalf("incremental alter: %v %+v", err, r)
	}
	if r, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "segment.ms", Value: kmsg.StringPtr("3600000")}}, "audit"); err != nil || r[0].Err != nil {
		t.Fatalf("legacy alter: %v %+v", err, r)
	}
	if r, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "no.such.config", Value: kmsg.StringPtr("1")}}, "orders"); err != nil || !errors.Is(r[0].Err, kerr.InvalidConfig) {
		t.Fatalf("alter of an unknown config: %v %+v", err, r)
	}
	value := func(topic, name string) string {
		rc, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil || len(rc) != 1 || rc[0].Err != nil {
			t.Fatalf("describe %s: %v %+v", topic, err, rc)
		}
		for _, cfg := range rc[0].Configs {
			if cfg.Key == name {
				return cfg.MaybeValue()
			}
		}
		return ""
	}
	if v := value("orders", "cleanup.policy"); v != "compact" {
		t.Fatalf("orders cleanup.policy %q", v)
	}
	if v := value("orders", "retention.ms"); v != "60000" {
		t.Fatalf("orders retention.ms %q", v)
	}
	if v := value("audit", "segment.ms"); v != "3600000" {
		t.Fatalf("audit segment.ms %q", v)
	}

	// SCRAM users.
	alt, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "secret"}})
	if err != nil || alt.Error() != nil {
		t.Fatalf("upsert SCRAM: %v %v", err, alt.Error())
	}
	users, err := adm.DescribeUserSCRAMs(ctx, "alice")
	if err != nil || users.Error() != nil || len(users["alice"].CredInfos) != 1 || users["alice"].CredInfos[0].Mechanism != kadm.ScramSha256 {
		t.Fatalf("describe SCRAM: %v %+v", err, users)
	}
	if alt, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}}, nil); err != nil || alt.Error() != nil {
		t.Fatalf("delete SCRAM: %v %v", err, alt.Error())
	}

	// Elections: every leader is already the preferred one.
	el, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"orders": {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range el["orders"] {
		if p.Err != nil && !errors.Is(p.Err, kerr.ElectionNotNeeded) {
			t.Fatalf("preferred election of orders-%d: %v", p.Partition, p.Err)
		}
	}
	if len(el["orders"]) != 2 {
		t.Fatalf("elections: %+v", el)
	}

	// Reassignments: move a single-replica partition and list it.
	if r, err := adm.CreateTopic(ctx, 1, 1, nil, "moving"); err != nil || r.Err != nil {
		t.Fatalf("create moving: %v %+v", err, r)
	}
	c.waitAgree("moving")
	parts0, _ := c.image("moving")
	target := parts0[0].replicas[0]%3 + 1
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("moving", 0, []int32{target})
	ar, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil || ar.Error() != nil {
		t.Fatalf("reassign: %v %v", err, ar.Error())
	}
	// The simulated brokers copy no data, so the move stays in progress
	// (the new replica never joins the ISR) until it is cancelled.
	lr, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"moving": {0: {}}})
	if err != nil || len(lr) != 1 || !slices.Contains(lr.Sorted()[0].AddingReplicas, target) {
		t.Fatalf("list reassignments: %v %+v", err, lr)
	}
	var cancelReq kadm.AlterPartitionAssignmentsReq
	cancelReq.CancelAssign("moving", 0)
	if ar, err = adm.AlterPartitionAssignments(ctx, cancelReq); err != nil || ar.Error() != nil {
		t.Fatalf("cancel reassignment: %v %v", err, ar.Error())
	}
	if lr, err = adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"moving": {0: {}}}); err != nil || len(lr) != 0 {
		t.Fatalf("reassignments after the cancel: %v %+v", err, lr)
	}

	// ACLs. The first rule turns authorization on: allow the anonymous
	// clients (as the brokers' connections are too) everything, then
	// deny config changes of one topic, which the controller must apply
	// to the client's request that a broker forwarded.
	allow := kadm.NewACLs().Allow("User:ANONYMOUS").AllowHosts().Topics("*").Clusters().Operations(kadm.OpAll)
	if r, err := adm.CreateACLs(ctx, allow); err != nil || firstACLErr(r) != nil {
		t.Fatalf("create ACLs: %v %v", err, firstACLErr(r))
	}
	deny := kadm.NewACLs().Deny("User:ANONYMOUS").DenyHosts().Topics("audit").Operations(kadm.OpAlterConfigs)
	if r, err := adm.CreateACLs(ctx, deny); err != nil || firstACLErr(r) != nil {
		t.Fatalf("create deny ACL: %v %v", err, firstACLErr(r))
	}
	desc, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().Deny().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny).AllowHosts().DenyHosts())
	if err != nil || len(desc) != 1 || desc[0].Err != nil || len(desc[0].Described) != 3 {
		t.Fatalf("describe ACLs: %v %+v", err, desc)
	}
	waitFor(t, "the deny rule to apply", func() bool {
		r, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "segment.ms", Value: kmsg.StringPtr("7200000")}}, "audit")
		return err == nil && errors.Is(r[0].Err, kerr.TopicAuthorizationFailed)
	})
	if r, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "segment.ms", Value: kmsg.StringPtr("7200000")}}, "orders"); err != nil || r[0].Err != nil {
		t.Fatalf("alter of a topic the rule does not name: %v %+v", err, r)
	}
	if v := value("audit", "segment.ms"); v != "3600000" {
		t.Fatalf("a denied alter changed audit segment.ms to %q", v)
	}
	del, err := adm.DeleteACLs(ctx, kadm.NewACLs().AnyResource().Allow().Deny().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny).AllowHosts().DenyHosts())
	if err != nil || len(del) != 1 || del[0].Err != nil || len(del[0].Deleted) != 3 {
		t.Fatalf("delete ACLs: %v %+v", err, del)
	}

	// Deletion: gone from every broker.
	dr, err := adm.DeleteTopics(ctx, "orders", "audit", "moving")
	if err != nil || dr.Error() != nil {
		t.Fatalf("delete: %v %v", err, dr.Error())
	}
	for _, topic := range []string{"orders", "audit", "moving"} {
		c.waitRemoved(topic)
		for _, a := range c.agents {
			c.waitForgotten(a, topic)
		}
	}
	// A fresh client at each broker (kadm's own answers come from kgo's
	// metadata cache for a few seconds) lists no topic.
	for _, a := range c.agents {
		if md := clientMetadata(t, a.Addr()); len(md.Topics) != 0 {
			t.Fatalf("broker %d still lists %v", a.BrokerID(), slices.Collect(maps.Keys(md.Topics)))
		}
	}
}

func firstACLErr(r kadm.CreateACLsResults) error {
	for _, x := range r {
		if x.Err != nil {
			return x.Err
		}
	}
	return nil
}

// TestBrokerDescribesItsOwnConfigs: DescribeConfigs of a broker's own
// resource, sent to that broker, holds its static settings
// (STATIC_BROKER_CONFIG) under the dynamic configs the controller keeps;
// another broker's, without static settings, holds the defaults.
func TestBrokerDescribesItsOwnConfigs(t *testing.T) {
	if testing.Short() {
		t.Skip("three raft voters and three brokers over TCP")
	}
	c := newE2ECluster(t, 2*time.Second)
	c.static = map[int32]map[string]string{1: {"log.retention.ms": "1000"}}
	c.active()
	c.startBrokers(3)
	adm, _ := c.brokerAdmin()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	entry := func(id int32, name string) kadm.Config {
		rc, err := adm.DescribeBrokerConfigs(ctx, id)
		if err != nil || len(rc) != 1 || rc[0].Err != nil {
			t.Fatalf("describe broker %d: %v %+v", id, err, rc)
		}
		for _, cfg := range rc[0].Configs {
			if cfg.Key == name {
				return cfg
			}
		}
		t.Fatalf("broker %d's configs have no %s", id, name)
		return kadm.Config{}
	}
	if e := entry(1, "log.retention.ms"); e.MaybeValue() != "1000" || e.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Fatalf("broker 1 log.retention.ms: %q %v", e.MaybeValue(), e.Source)
	}
	if e := entry(2, "log.retention.ms"); e.MaybeValue() == "1000" || e.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("broker 2 log.retention.ms: %q %v", e.MaybeValue(), e.Source)
	}
	// A dynamic config of broker 1 overrides its static one.
	r, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: kmsg.StringPtr("2000")}}, 1)
	if err != nil || r[0].Err != nil {
		t.Fatalf("alter broker 1: %v %+v", err, r)
	}
	if e := entry(1, "log.retention.ms"); e.MaybeValue() != "2000" || e.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Fatalf("broker 1 log.retention.ms after a dynamic change: %q %v", e.MaybeValue(), e.Source)
	}
}
