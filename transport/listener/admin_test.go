package listener

import (
	"context"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// TestAdminOverTheWire drives the listener with kadm the way an operator's
// scripts would: topics, configs, partitions, elections, cluster and
// quorum descriptions, against three voters and three brokers.
func TestAdminOverTheWire(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	c.startBrokers(3)
	cl, adm := c.admin()
	ctx := ctxT(t)
	// kadm answers Metadata-based calls from kgo's cache unless asked for
	// authorized operations: polls must reach a node.
	fresh := kadm.WithAuthorizedOps(ctx)

	t.Run("describe cluster", func(t *testing.T) {
		active := c.active(10 * time.Second)
		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeClusterAuthorizedOperations = true
		var resp *kmsg.DescribeClusterResponse
		var ids []int32
		// Any node may answer, from an image that may trail by a commit.
		waitFor(t, 10*time.Second, "every node listed", func() bool {
			var err error
			resp, err = req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			ids = ids[:0]
			for _, b := range resp.Brokers {
				ids = append(ids, b.NodeID)
			}
			return slices.Equal(ids, []int32{1, 2, 3})
		})
		// The brokers (endpoint type 1): a live broker is the controller.
		if resp.ErrorCode != 0 || resp.ClusterID != testClusterID || resp.ControllerID != 1 || resp.ClusterAuthorizedOperations != clusterOps {
			t.Fatalf("describe cluster: error %d cluster %q controller %d, want controller 1", resp.ErrorCode, resp.ClusterID, resp.ControllerID)
		}
		for _, b := range resp.Brokers {
			if b.NodeID >= 1001 {
				p := c.peers[b.NodeID-1001]
				if b.Host != p.Host || b.Port != p.Port {
					t.Errorf("voter %d listed at %s:%d, want %s", b.NodeID, b.Host, b.Port, p.addr())
				}
			} else {
				want := c.broker(b.NodeID).srv.Addr().String()
				if got := hostPort(b.Host, b.Port); got != want || b.Rack == nil || *b.Rack != "rack-"+itoa(b.NodeID) {
					t.Errorf("broker %d listed at %s rack %v, want %s", b.NodeID, got, b.Rack, want)
				}
			}
		}
		// Controllers only (KIP-919).
		req.EndpointType = 2
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		ids = nil
		for _, b := range resp.Brokers {
			ids = append(ids, b.NodeID)
		}
		if resp.EndpointType != 2 || !slices.Equal(ids, []int32{1001, 1002, 1003}) || resp.ControllerID != c.ids[active] {
			t.Fatalf("controllers endpoint type: %d %v controller %d, want %d", resp.EndpointType, ids, resp.ControllerID, c.ids[active])
		}
		// kadm's Metadata lists the brokers, with a broker as controller.
		var md kadm.Metadata
		waitFor(t, 10*time.Second, "metadata to list the brokers", func() bool {
			md, err = adm.BrokerMetadata(fresh)
			if err != nil {
				t.Fatal(err)
			}
			return slices.Equal(md.Brokers.NodeIDs(), []int32{1, 2, 3})
		})
		if md.Controller != 1 || md.Cluster != testClusterID {
			t.Fatalf("metadata: controller %d, %d brokers, cluster %q", md.Controller, len(md.Brokers), md.Cluster)
		}
	})

	t.Run("create list describe", func(t *testing.T) {
		res, err := adm.CreateTopics(ctx, 3, 3, map[string]*string{"retention.ms": kadm.StringPtr("60000")}, "orders", "payments")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil || r.ID == (kadm.TopicID{}) || r.NumPartitions != 3 || r.ReplicationFactor != 3 {
				t.Fatalf("create %s: %+v", r.Topic, r)
			}
		}
		// validateOnly creates nothing.
		vres, err := adm.ValidateCreateTopics(ctx, 2, 2, nil, "dry-run")
		if err != nil || vres["dry-run"].Err != nil || vres["dry-run"].NumPartitions != 2 {
			t.Fatalf("validate only: %+v %v", vres, err)
		}
		var td kadm.TopicDetails
		waitFor(t, 10*time.Second, "topics listed", func() bool {
			td, err = adm.ListTopics(fresh)
			return err == nil && len(td) == 2
		})
		for _, name := range []string{"orders", "payments"} {
			d := td[name]
			if d.Err != nil || len(d.Partitions) != 3 || d.ID != res[name].ID || len(d.AuthorizedOperations) != 8 {
				t.Fatalf("%s: %+v", name, d)
			}
			for _, p := range d.Partitions {
				if p.Err != nil || len(p.Replicas) != 3 || !slices.Contains(p.Replicas, p.Leader) || len(p.ISR) != 3 || p.LeaderEpoch < 0 {
					t.Fatalf("%s-%d: %+v", name, p.Partition, p)
				}
			}
		}
		if _, ok := td["dry-run"]; ok {
			t.Fatal("a validate-only topic was created")
		}
		// Unknown topics are reported as such.
		md, err := adm.Metadata(fresh, "nope")
		if err != nil {
			t.Fatal(err)
		}
		if !errorsIs(md.Topics["nope"].Err, kerr.UnknownTopicOrPartition) {
			t.Fatalf("unknown topic: %v", md.Topics["nope"].Err)
		}
		waitConfig(t, adm, "orders", map[string]string{"retention.ms": "60000"})

		// By topic id (Metadata v10+).
		mreq := kmsg.NewPtrMetadataRequest()
		mreq.SetVersion(mreq.MaxVersion())
		mreq.Topics = []kmsg.MetadataRequestTopic{{TopicID: res["orders"].ID}, {TopicID: [16]byte{9, 9}}}
		mr, err := call(ctx, c.listener(c.active(10*time.Second)).Addr().String(), "test", mreq)
		if err != nil {
			t.Fatal(err)
		}
		byID := mr.(*kmsg.MetadataResponse).Topics
		if len(byID) != 2 || byID[0].Topic == nil || *byID[0].Topic != "orders" || len(byID[0].Partitions) != 3 ||
			byID[1].ErrorCode != kerr.UnknownTopicID.Code || byID[1].TopicID != [16]byte{9, 9} {
			t.Fatalf("metadata by topic id: %+v", byID)
		}
	})

	t.Run("configs", func(t *testing.T) {
		ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")},
			{Op: kadm.DeleteConfig, Name: "retention.ms"},
		}, "orders")
		if err != nil || ar[0].Err != nil {
			t.Fatalf("incremental alter: %+v %v", ar, err)
		}
		waitConfig(t, adm, "orders", map[string]string{"cleanup.policy": "compact"})
		ar, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kadm.StringPtr("delete")}}, "orders")
		if err != nil || ar[0].Err != nil {
			t.Fatalf("append: %+v %v", ar, err)
		}
		waitConfig(t, adm, "orders", map[string]string{"cleanup.policy": "compact,delete"})
		// Legacy AlterConfigs replaces the whole set.
		ar, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "min.insync.replicas", Value: kadm.StringPtr("2")}}, "orders")
		if err != nil || ar[0].Err != nil {
			t.Fatalf("legacy alter: %+v %v", ar, err)
		}
		waitConfig(t, adm, "orders", map[string]string{"min.insync.replicas": "2"})
		// A bad value changes nothing.
		ar, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: kadm.StringPtr("zero")}}, "orders")
		if err != nil || !errorsIs(ar[0].Err, kerr.InvalidConfig) {
			t.Fatalf("bad value: %+v %v", ar, err)
		}
		// Synonyms and types (DescribeConfigs v1+, v3+).
		dreq := kmsg.NewPtrDescribeConfigsRequest()
		dreq.IncludeSynonyms = true
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "orders"
		dreq.Resources = append(dreq.Resources, rr)
		var dresp *kmsg.DescribeConfigsResponse
		waitFor(t, 10*time.Second, "the replaced config set", func() bool {
			var err error
			dresp, err = dreq.RequestWith(ctx, cl)
			if err != nil || len(dresp.Resources) != 1 {
				t.Fatalf("describe: %+v %v", dresp, err)
			}
			var set []string
			for _, c := range dresp.Resources[0].Configs {
				if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
					set = append(set, c.Name)
				}
			}
			return slices.Equal(set, []string{"min.insync.replicas"})
		})
		for _, cfg := range dresp.Resources[0].Configs {
			if cfg.Name != "min.insync.replicas" {
				continue
			}
			// The topic's own value, then Kafka's default under the
			// broker synonym.
			if cfg.ConfigType != kmsg.ConfigTypeInt || len(cfg.ConfigSynonyms) != 2 ||
				cfg.ConfigSynonyms[0].Source != kmsg.ConfigSourceDynamicTopicConfig || *cfg.ConfigSynonyms[0].Value != "2" ||
				cfg.ConfigSynonyms[1].Source != kmsg.ConfigSourceDefaultConfig || *cfg.ConfigSynonyms[1].Value != "1" {
				t.Fatalf("described config: %+v", cfg)
			}
		}
	})

	t.Run("create partitions", func(t *testing.T) {
		// kadm reads the current count from any node first.
		c.converged(10 * time.Second)
		res, err := adm.CreatePartitions(ctx, 2, "orders")
		if err != nil || res["orders"].Err != nil {
			t.Fatalf("create partitions: %+v %v", res, err)
		}
		waitFor(t, 10*time.Second, "five partitions", func() bool {
			td, err := adm.ListTopics(fresh, "orders")
			return err == nil && len(td["orders"].Partitions) == 5
		})
		res, err = adm.UpdatePartitions(ctx, 4, "orders")
		if err != nil || !errorsIs(res["orders"].Err, kerr.InvalidPartitions) {
			t.Fatalf("shrinking: %+v %v", res, err)
		}
	})

	t.Run("describe quorum", func(t *testing.T) {
		active := c.active(10 * time.Second)
		n := c.node(active)
		waitFor(t, 20*time.Second, "every voter caught up in DescribeQuorum", func() bool {
			req := kmsg.NewPtrDescribeQuorumRequest()
			rt := kmsg.NewDescribeQuorumRequestTopic()
			rt.Topic = "__cluster_metadata"
			rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Fatalf("describe quorum: %+v", resp)
			}
			p := resp.Topics[0].Partitions[0]
			if p.LeaderID != c.ids[active] || uint64(p.LeaderEpoch) != n.Voter.Raft().CurrentTerm() || p.HighWatermark < int64(n.FSM.AppliedIndex()) {
				t.Fatalf("leader %d epoch %d hw %d; want leader %d term %d hw >= %d", p.LeaderID, p.LeaderEpoch, p.HighWatermark,
					c.ids[active], n.Voter.Raft().CurrentTerm(), n.FSM.AppliedIndex())
			}
			if len(p.CurrentVoters) != 3 || len(p.Observers) != 0 || len(resp.Nodes) != 3 {
				t.Fatalf("voters %+v observers %+v nodes %+v", p.CurrentVoters, p.Observers, resp.Nodes)
			}
			for _, v := range p.CurrentVoters {
				if v.LogEndOffset < p.HighWatermark || v.LastFetchTimestamp <= 0 && v.ReplicaID != c.ids[active] {
					return false
				}
			}
			return true
		})
	})

	t.Run("preferred election", func(t *testing.T) {
		// Broker 1 asks to be fenced: partitions it led move away and it
		// leaves their ISRs. Back unfenced, it is not in the ISR until the
		// leader says so, so a preferred election cannot pick it yet.
		active := c.active(10 * time.Second)
		if _, err := adm.CreateTopics(ctx, 1, 3, nil, "pref"); err != nil {
			t.Fatal(err)
		}
		var p fsm.Partition
		waitFor(t, 10*time.Second, "pref created", func() bool {
			var ok bool
			p, ok = c.partition(active, "pref", 0)
			return ok
		})
		preferred := p.Replicas[0]
		b := c.broker(preferred)
		b.wantFence.Store(true)
		waitFor(t, 10*time.Second, "leadership to move off the fenced broker", func() bool {
			p, _ = c.partition(c.active(10*time.Second), "pref", 0)
			return p.Leader != preferred && p.Leader >= 0 && !p.InISR(preferred)
		})
		// DescribeCluster v2 lists it, flagged, when asked to.
		waitFor(t, 10*time.Second, "the fenced broker in DescribeCluster", func() bool {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.IncludeFencedBrokers = true
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			return slices.ContainsFunc(resp.Brokers, func(b kmsg.DescribeClusterResponseBroker) bool { return b.NodeID == preferred && b.IsFenced })
		})
		b.wantFence.Store(false)
		c.waitBrokers(3)
		set := kadm.TopicsSet{}
		set.Add("pref", 0)
		er, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
		if err != nil {
			t.Fatal(err)
		}
		if got := er["pref"][0].Err; !errorsIs(got, kerr.PreferredLeaderNotAvailable) {
			t.Fatalf("preferred replica out of the ISR: %v", got)
		}
		// The leader brings it back into the ISR (AlterPartition over the
		// wire), and then the election moves leadership home.
		p, _ = c.partition(c.active(10*time.Second), "pref", 0)
		want := append(slices.Clone(p.ISR), preferred)
		if got := alterISR(t, c, cl, "pref", 0, p, want); !sameSet(got, want) {
			t.Fatalf("ISR after AlterPartition: %v, want %v", got, want)
		}
		er, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
		if err != nil || er["pref"][0].Err != nil {
			t.Fatalf("preferred election: %+v %v", er, err)
		}
		waitFor(t, 10*time.Second, "the preferred replica to lead", func() bool {
			td, err := adm.ListTopics(fresh, "pref")
			return err == nil && td["pref"].Partitions[0].Leader == preferred
		})
		er, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
		if err != nil || !errorsIs(er["pref"][0].Err, kerr.ElectionNotNeeded) {
			t.Fatalf("second election: %+v %v", er, err)
		}
	})

	t.Run("unclean election", func(t *testing.T) {
		// A partition on brokers 3 and 2 whose ISR shrinks to 3, then 3 is
		// fenced: no ISR member is live, so it has no leader until an
		// unclean election picks 2.
		createRaw(t, cl, "unclean", [][]int32{{3, 2}})
		active := c.active(10 * time.Second)
		var p fsm.Partition
		waitFor(t, 10*time.Second, "unclean created", func() bool {
			var ok bool
			p, ok = c.partition(active, "unclean", 0)
			return ok && p.Leader == 3
		})
		if got := alterISR(t, c, cl, "unclean", 0, p, []int32{3}); !slices.Equal(got, []int32{3}) {
			t.Fatalf("ISR after AlterPartition: %v", got)
		}
		c.broker(3).wantFence.Store(true)
		waitFor(t, 10*time.Second, "the partition to lose its leader", func() bool {
			p, _ = c.partition(c.active(10*time.Second), "unclean", 0)
			return p.Leader == rl.NoLeader
		})
		set := kadm.TopicsSet{}
		set.Add("unclean", 0)
		er, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
		if err != nil || !errorsIs(er["unclean"][0].Err, kerr.PreferredLeaderNotAvailable) {
			t.Fatalf("preferred on a leaderless partition: %+v %v", er, err)
		}
		er, err = adm.ElectLeaders(ctx, kadm.ElectLiveReplica, set)
		if err != nil || er["unclean"][0].Err != nil {
			t.Fatalf("unclean election: %+v %v", er, err)
		}
		p, _ = c.partition(c.active(10*time.Second), "unclean", 0)
		if p.Leader != 2 || !slices.Equal(p.ISR, []int32{2}) {
			t.Fatalf("after the unclean election: leader %d ISR %v", p.Leader, p.ISR)
		}
		c.broker(3).wantFence.Store(false)
		c.waitBrokers(3)
	})

	t.Run("list reassignments", func(t *testing.T) {
		// Nothing is being reassigned: the list is empty, for all topics
		// and for named ones.
		if all := listAllReassignments(t, cl); len(all.Topics) != 0 {
			t.Fatalf("list all: %+v", all)
		}
		set := kadm.TopicsSet{}
		set.Add("orders", 0, 1)
		lr, err := adm.ListPartitionReassignments(ctx, set)
		if err != nil || len(lr) != 0 {
			t.Fatalf("list orders: %+v %v", lr, err)
		}
	})

	t.Run("unregister", func(t *testing.T) {
		b := c.startBroker(4)
		c.waitBrokers(4)
		b.stop()
		req := kmsg.NewPtrUnregisterBrokerRequest()
		req.BrokerID = 4
		resp := c.toControllerRetry(t, cl, req, func(r kmsg.Response) int16 { return r.(*kmsg.UnregisterBrokerResponse).ErrorCode })
		if ec := resp.(*kmsg.UnregisterBrokerResponse).ErrorCode; ec != 0 {
			t.Fatal(kerr.ErrorForCode(ec))
		}
		c.view(c.active(10*time.Second), func(im *fsm.Image) {
			if im.Broker(4) != nil {
				t.Error("broker 4 still registered")
			}
		})
		resp = c.toControllerRetry(t, cl, req, func(r kmsg.Response) int16 { return r.(*kmsg.UnregisterBrokerResponse).ErrorCode })
		if ec := resp.(*kmsg.UnregisterBrokerResponse).ErrorCode; ec != kerr.BrokerIDNotRegistered.Code {
			t.Fatalf("second unregister: %v", kerr.ErrorForCode(ec))
		}
	})

	t.Run("voter ids win", func(t *testing.T) {
		// A broker registered under a voter's id (only possible by going
		// around the listener) is left out of Metadata's broker list and
		// does not take the voter's place among the controllers: clients
		// must still reach the voter under its id.
		active := c.active(10 * time.Second)
		n := c.node(active)
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := n.Controller.RegisterBroker(rctx, controller.BrokerRegistration{BrokerID: 1003, IncarnationID: rl.IncarnationID{7},
			Endpoints: []rl.Endpoint{{Name: "PLAINTEXT", Host: "10.9.9.9", Port: 9092}}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(req.MaxVersion())
		resp, err := call(ctx, c.listener(active).Addr().String(), "test", req)
		if err != nil {
			t.Fatal(err)
		}
		if ids := metadataIDs(resp.(*kmsg.MetadataResponse)); !slices.Equal(ids, []int32{1, 2, 3}) {
			t.Fatalf("metadata lists %v, want the brokers [1 2 3]", ids)
		}
		dreq := kmsg.NewPtrDescribeClusterRequest()
		dreq.SetVersion(dreq.MaxVersion())
		dreq.EndpointType = 2
		dresp, err := call(ctx, c.listener(active).Addr().String(), "test", dreq)
		if err != nil {
			t.Fatal(err)
		}
		var listed []kmsg.DescribeClusterResponseBroker
		for _, b := range dresp.(*kmsg.DescribeClusterResponse).Brokers {
			if b.NodeID == 1003 {
				listed = append(listed, b)
			}
		}
		if len(listed) != 1 || listed[0].Host != c.peers[2].Host || listed[0].Port != c.peers[2].Port {
			t.Fatalf("controller 1003 listed as %+v", listed)
		}
	})

	c.converged(20 * time.Second)
}

// waitConfig polls DescribeTopicConfigs (any node may answer, from an
// image that may trail) until the topic sets exactly want.
func waitConfig(t *testing.T, adm *kadm.Client, topic string, want map[string]string) {
	t.Helper()
	var last map[string]string
	ctx := context.Background()
	waitFor(t, 10*time.Second, "configs of "+topic, func() bool {
		rc, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil || len(rc) != 1 || rc[0].Err != nil {
			return false
		}
		// Every config is described; those the topic sets itself carry
		// DYNAMIC_TOPIC_CONFIG (v1+: v0 has no source).
		last = map[string]string{}
		for _, c := range rc[0].Configs {
			last[c.Key] = c.MaybeValue()
			if _, wanted := want[c.Key]; !wanted && c.Source == kmsg.ConfigSourceDynamicTopicConfig {
				return false
			}
		}
		for k, v := range want {
			if last[k] != v {
				return false
			}
		}
		return true
	})
}

// alterISR sends the partition leader's AlterPartition (topic-id
// version) setting the ISR, waits for it to commit and returns the ISR
// the controller answered with.
func alterISR(t *testing.T, c *testCluster, cl *kgo.Client, topic string, part int32, p fsm.Partition, isr []int32) []int32 {
	t.Helper()
	var id rl.TopicID
	c.view(c.active(10*time.Second), func(im *fsm.Image) { id = im.TopicByName(topic).ID })
	req := kmsg.NewPtrAlterPartitionRequest()
	req.BrokerID, req.BrokerEpoch = p.Leader, c.broker(p.Leader).epoch.Load()
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.TopicID = id
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = part, p.LeaderEpoch, p.PartitionEpoch
	for _, b := range isr {
		m := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
		m.BrokerID, m.BrokerEpoch = b, c.broker(b).epoch.Load()
		rp.NewEpochISR = append(rp.NewEpochISR, m)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.toControllerRetry(t, cl, req, func(r kmsg.Response) int16 { return r.(*kmsg.AlterPartitionResponse).ErrorCode }).(*kmsg.AlterPartitionResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("alter partition: %+v", resp)
	}
	got := resp.Topics[0].Partitions[0]
	if got.ErrorCode == kerr.InvalidUpdateVersion.Code {
		now, _ := c.partition(c.active(10*time.Second), topic, part)
		t.Logf("sent %+v; image now %+v", p, now)
	}
	if got.ErrorCode != 0 || got.PartitionEpoch <= p.PartitionEpoch || resp.Topics[0].TopidID != id {
		t.Fatalf("alter partition %s-%d: %v, ISR %v epoch %d", topic, part, kerr.ErrorForCode(got.ErrorCode), got.ISR, got.PartitionEpoch)
	}
	return got.ISR
}

// createRaw creates a topic with an explicit replica assignment (which
// kadm does not offer) through kgo's controller routing.
func createRaw(t *testing.T, cl *kgo.Client, topic string, assignment [][]int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for i, r := range assignment {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), r
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if ec := resp.Topics[0].ErrorCode; ec != 0 {
		t.Fatalf("create %s: %v %v", topic, kerr.ErrorForCode(ec), resp.Topics[0].ErrorMessage)
	}
}

func sameSet(a, b []int32) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	sort.Slice(a, func(i, j int) bool { return a[i] < a[j] })
	sort.Slice(b, func(i, j int) bool { return b[i] < b[j] })
	return slices.Equal(a, b)
}

// listAllReassignments asks for every reassignment in progress (null
// topics), which kadm does not offer.
func listAllReassignments(t *testing.T, cl *kgo.Client) *kmsg.ListPartitionReassignmentsResponse {
	t.Helper()
	resp, err := kmsg.NewPtrListPartitionReassignmentsRequest().RequestWith(context.Background(), cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("list reassignments: %+v %v", resp, err)
	}
	return resp
}
