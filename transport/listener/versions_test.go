package listener

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestOldClients: a client that speaks only Kafka 0.11's versions, and
// raw requests at the oldest non-flexible versions, get correct answers.
func TestOldClients(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	c.startBrokers(3)
	ctx := ctxT(t)

	t.Run("kgo limited to 0.11", func(t *testing.T) {
		_, adm := c.admin(kgo.MaxVersions(kversion.V0_11_0()))
		res, err := adm.CreateTopics(ctx, 2, 3, map[string]*string{"retention.ms": kadm.StringPtr("1000")}, "old-a", "old-b")
		if err != nil || res.Error() != nil {
			t.Fatalf("%v %v", err, res.Error())
		}
		waitFor(t, 10*time.Second, "topics listed over Metadata v4", func() bool {
			td, err := adm.ListTopics(kadm.WithAuthorizedOps(ctx), "old-a", "old-b")
			if err != nil {
				t.Fatal(err)
			}
			return td["old-a"].Err == nil && td["old-b"].Err == nil && len(td["old-a"].Partitions) == 2 && td["old-a"].Partitions[0].Leader >= 1
		})
		waitConfig(t, adm, "old-a", map[string]string{"retention.ms": "1000"})
		dr, err := adm.DeleteTopics(ctx, "old-b")
		if err != nil || dr["old-b"].Err != nil {
			t.Fatalf("delete over v1: %+v %v", dr, err)
		}
		res, err = adm.CreateTopics(ctx, 1, 1, nil, "old-a")
		if err != nil || !errorsIs(res["old-a"].Err, kerr.TopicAlreadyExists) {
			t.Fatalf("duplicate over v2: %+v %v", res, err)
		}
	})

	addr := c.listener(c.active(10 * time.Second)).Addr().String()

	t.Run("ApiVersions v0-v3", func(t *testing.T) {
		for v := int16(0); v <= 3; v++ {
			req := kmsg.NewPtrApiVersionsRequest()
			req.SetVersion(v)
			if v >= 3 {
				req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
			}
			resp, err := call(ctx, addr, "old", req)
			if err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
			av := resp.(*kmsg.ApiVersionsResponse)
			if av.ErrorCode != 0 || len(av.ApiKeys) != len(APIs()) {
				t.Fatalf("v%d: error %d, %d keys", v, av.ErrorCode, len(av.ApiKeys))
			}
			for _, k := range av.ApiKeys {
				if k.MinVersion != MinVersions()[k.ApiKey] || k.MaxVersion != kmsg.RequestForKey(k.ApiKey).MaxVersion() {
					t.Errorf("v%d: key %d served %d-%d", v, k.ApiKey, k.MinVersion, k.MaxVersion)
				}
			}
		}
	})

	t.Run("CreateTopics v0-v3", func(t *testing.T) {
		for v := int16(0); v <= 3; v++ {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.SetVersion(v)
			for _, name := range []string{fmt.Sprintf("raw-v%d", v), "old-a"} {
				rt := kmsg.NewCreateTopicsRequestTopic()
				rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 3, 2
				req.Topics = append(req.Topics, rt)
			}
			resp, err := call(ctx, addr, "old", req)
			if err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
			ct := resp.(*kmsg.CreateTopicsResponse)
			if len(ct.Topics) != 2 || ct.Topics[0].ErrorCode != 0 || ct.Topics[1].ErrorCode != kerr.TopicAlreadyExists.Code {
				t.Fatalf("v%d: %+v", v, ct.Topics)
			}
			if v >= 1 && (ct.Topics[1].ErrorMessage == nil || ct.Topics[0].ErrorMessage != nil) {
				t.Fatalf("v%d: messages %v %v", v, ct.Topics[0].ErrorMessage, ct.Topics[1].ErrorMessage)
			}
		}
		// validateOnly (v1+) creates nothing.
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(1)
		req.ValidateOnly = true
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "raw-dry", 1, 1
		req.Topics = append(req.Topics, rt)
		resp, err := call(ctx, addr, "old", req)
		if err != nil || resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode != 0 {
			t.Fatalf("validate only: %+v %v", resp, err)
		}
	})

	t.Run("Metadata v0-v4", func(t *testing.T) {
		for v := int16(0); v <= 4; v++ {
			// v0 lists every topic for an empty list; later versions
			// need null for that.
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(v)
			if v == 0 {
				req.Topics = []kmsg.MetadataRequestTopic{}
			}
			resp, err := call(ctx, addr, "old", req)
			if err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
			md := resp.(*kmsg.MetadataResponse)
			names := map[string]kmsg.MetadataResponseTopic{}
			for _, mt := range md.Topics {
				names[*mt.Topic] = mt
			}
			if len(md.Brokers) != 3 || !slices.ContainsFunc(md.Brokers, func(b kmsg.MetadataResponseBroker) bool { return b.NodeID == md.ControllerID }) && v >= 1 {
				t.Fatalf("v%d: brokers %+v controller %d", v, md.Brokers, md.ControllerID)
			}
			if v >= 2 && (md.ClusterID == nil || *md.ClusterID != testClusterID) {
				t.Fatalf("v%d: cluster id %v", v, md.ClusterID)
			}
			a, ok := names["raw-v0"]
			if !ok || len(a.Partitions) != 3 || a.ErrorCode != 0 {
				t.Fatalf("v%d: raw-v0 %+v", v, a)
			}
			for _, p := range a.Partitions {
				if p.ErrorCode != 0 || len(p.Replicas) != 2 || len(p.ISR) != 2 || !slices.Contains(p.Replicas, p.Leader) {
					t.Fatalf("v%d: partition %+v", v, p)
				}
			}
			// A named unknown topic.
			req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("nope")}}
			resp, err = call(ctx, addr, "old", req)
			if err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
			if md := resp.(*kmsg.MetadataResponse); len(md.Topics) != 1 || md.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
				t.Fatalf("v%d unknown topic: %+v", v, md.Topics)
			}
		}
	})

	t.Run("DeleteTopics v0-v1", func(t *testing.T) {
		for v := int16(0); v <= 1; v++ {
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.SetVersion(v)
			req.TopicNames = []string{fmt.Sprintf("raw-v%d", v+2), "nope"}
			resp, err := call(ctx, addr, "old", req)
			if err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
			dt := resp.(*kmsg.DeleteTopicsResponse)
			if len(dt.Topics) != 2 || dt.Topics[0].ErrorCode != 0 || dt.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code || *dt.Topics[0].Topic != req.TopicNames[0] {
				t.Fatalf("v%d: %+v", v, dt.Topics)
			}
		}
	})
}

// TestEveryVersionAnswers sends every served API at every version kmsg
// knows, each as a minimal request, and checks an answer comes back that
// decodes at that version: the listener serves down to v0 and never
// closes the connection on a well-formed request.
func TestEveryVersionAnswers(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	c.startBrokers(3)
	_, adm := c.admin()
	ctx := ctxT(t)
	if res, err := adm.CreateTopics(ctx, 2, 3, nil, "t"); err != nil || res.Error() != nil {
		t.Fatalf("%v %v", err, res.Error())
	}
	addr := c.listener(c.active(10 * time.Second)).Addr().String()
	for key, max := range APIs() {
		for v := MinVersions()[key]; v <= max; v++ {
			req := minimalRequest(key)
			req.SetVersion(v)
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			resp, err := call(cctx, addr, "versions", req)
			cancel()
			if err != nil {
				t.Errorf("%s v%d: %v", kmsg.NameForKey(key), v, err)
				continue
			}
			if resp.GetVersion() != v {
				t.Errorf("%s v%d: response decoded as v%d", kmsg.NameForKey(key), v, resp.GetVersion())
			}
		}
	}
}

// minimalRequest is a request of the key with one harmless item in it,
// so that the per-item paths run too.
func minimalRequest(key int16) kmsg.Request {
	req := kmsg.RequestForKey(key)
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		r.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}
	case *kmsg.CreateTopicsRequest:
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", 1, 1 // exists
		r.Topics = append(r.Topics, rt)
	case *kmsg.DeleteTopicsRequest:
		r.TopicNames = []string{"missing"}
		r.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("missing")}}
	case *kmsg.CreatePartitionsRequest:
		r.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "t", Count: 1}}
	case *kmsg.ElectLeadersRequest:
		r.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	case *kmsg.AlterPartitionAssignmentsRequest:
		r.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: "t", Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: 0}}}}
	case *kmsg.ListPartitionReassignmentsRequest:
		r.Topics = []kmsg.ListPartitionReassignmentsRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	case *kmsg.DescribeQuorumRequest:
		r.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: metadataTopic, Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
	case *kmsg.DescribeConfigsRequest:
		r.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t"}}
	case *kmsg.IncrementalAlterConfigsRequest:
		r.ValidateOnly = true
		r.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t",
			Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: kmsg.StringPtr("1")}}}}
	case *kmsg.AlterConfigsRequest:
		r.ValidateOnly = true
		r.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t"}}
	case *kmsg.BrokerRegistrationRequest:
		r.BrokerID, r.ClusterID = 50, "another-cluster" // refused
	case *kmsg.BrokerHeartbeatRequest:
		r.BrokerID = 50 // not registered
	case *kmsg.AlterPartitionRequest:
		r.BrokerID = 50 // not registered
		r.Topics = []kmsg.AlterPartitionRequestTopic{{Topic: "t", TopicID: [16]byte{1}, Partitions: []kmsg.AlterPartitionRequestTopicPartition{{Partition: 0}}}}
	case *kmsg.UnregisterBrokerRequest:
		r.BrokerID = 50
	case *kmsg.ApiVersionsRequest:
		r.ClientSoftwareName, r.ClientSoftwareVersion = "test", "1"
	}
	return req
}
