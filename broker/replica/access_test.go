package replica_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/server"
)

// anonymousRule is an ACL entry for every client of this plain-TCP
// cluster: they are all User:ANONYMOUS.
func anonymousRule(rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, name, kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:ANONYMOUS", "*", op, kmsg.ACLPermissionTypeAllow
	return c
}

// Produce needs WRITE on the topic, a consumer's Fetch READ, ListOffsets
// DESCRIBE, a follower's Fetch CLUSTER_ACTION, OffsetsForLeaderEpoch
// CLUSTER_ACTION or DESCRIBE: the brokers learn the rules from the
// controller, and a change is in force once it is answered.
func TestACLsOnDataAPIs(t *testing.T) {
	// A long session: once CLUSTER_ACTION is taken away, the brokers'
	// heartbeats are refused too.
	c := newClusterSession(t, 2, server.BrokerData{}, 60*time.Second)
	c.createTopic("open", 1, 2)
	c.createTopic("closed", 1, 2)
	leader := c.leaderOf("open", 0)
	closedLeader := c.leaderOf("closed", 0)
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.peers[0].Listener))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// The first rules turn enforcement on, in one record.
	create := kmsg.NewPtrCreateACLsRequest()
	create.Creations = []kmsg.CreateACLsRequestCreation{
		anonymousRule(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationAll),
		anonymousRule(kmsg.ACLResourceTypeTopic, "*", kmsg.ACLOperationDescribeConfigs),
		anonymousRule(kmsg.ACLResourceTypeTopic, "open", kmsg.ACLOperationWrite),
		anonymousRule(kmsg.ACLResourceTypeTopic, "open", kmsg.ACLOperationRead),
	}
	if resp, err := create.RequestWith(ctx, admin); err != nil {
		t.Fatal(err)
	} else {
		for _, r := range resp.Results {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				t.Fatal(err)
			}
		}
	}

	cl := c.client(kgo.RecordRetries(0), kgo.RequestRetries(0))
	if _, err := produce(ctx, cl, "open", 0, "allowed"); err != nil {
		t.Fatalf("produce with WRITE on the topic (and the follower replicating with CLUSTER_ACTION): %v", err)
	}
	if _, err := produce(ctx, cl, "closed", 0, "refused"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce without WRITE: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	fetch := func(broker int32, topic string, replica int32) int16 {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes, req.SessionEpoch = replica, 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(broker)))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	listOffsets := func(broker int32, topic string) int16 {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = 0, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(broker)))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	epochEnd := func(broker int32, topic string) int16 {
		t.Helper()
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = 0, -1, 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(broker)))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	follower := 3 - leader
	want := func(what string, got, want int16) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
		}
	}
	want("consumer fetch with READ", fetch(leader, "open", -1), 0)
	want("consumer fetch without READ", fetch(closedLeader, "closed", -1), kerr.TopicAuthorizationFailed.Code)
	want("ListOffsets with READ (implies DESCRIBE)", listOffsets(leader, "open"), 0)
	want("ListOffsets without DESCRIBE", listOffsets(closedLeader, "closed"), kerr.TopicAuthorizationFailed.Code)
	want("follower fetch with CLUSTER_ACTION", fetch(leader, "open", follower), 0)
	want("OffsetsForLeaderEpoch with CLUSTER_ACTION", epochEnd(closedLeader, "closed"), 0)

	// CLUSTER_ACTION taken away (what the brokers' own reads of the rules
	// need stays).
	create.Creations = []kmsg.CreateACLsRequestCreation{
		anonymousRule(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationDescribe),
		anonymousRule(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationDescribeConfigs),
	}
	if _, err := create.RequestWith(ctx, admin); err != nil {
		t.Fatal(err)
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	all := "kafka-cluster"
	f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeCluster, &all, kmsg.ACLResourcePatternTypeLiteral
	f.Operation, f.PermissionType = kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
	del.Filters = append(del.Filters, f)
	if resp, err := del.RequestWith(ctx, admin); err != nil || resp.Results[0].ErrorCode != 0 || len(resp.Results[0].MatchingACLs) != 1 {
		t.Fatalf("deleting the cluster rule: %+v, %v", resp, err)
	}
	want("follower fetch without CLUSTER_ACTION", fetch(leader, "open", follower), kerr.TopicAuthorizationFailed.Code)
	want("OffsetsForLeaderEpoch with DESCRIBE", epochEnd(leader, "open"), 0)
	want("OffsetsForLeaderEpoch without either", epochEnd(closedLeader, "closed"), kerr.TopicAuthorizationFailed.Code)
}
