package listener

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/fsm"
)

// TestDeleteAndReassignOverTheWire deletes topics (by name and by id) and
// moves a partition between brokers with kadm and raw requests, to
// completion: the test brokers confirm every replica deletion.
func TestDeleteAndReassignOverTheWire(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	c.startBrokers(3)
	cl, adm := c.admin()
	ctx := ctxT(t)

	t.Run("delete", func(t *testing.T) {
		res, err := adm.CreateTopics(ctx, 2, 3, nil, "doomed", "doomed-by-id", "kept")
		if err != nil || res.Error() != nil {
			t.Fatalf("%v %v", err, res.Error())
		}
		oldID := res["doomed"].ID
		dr, err := adm.DeleteTopics(ctx, "doomed")
		if err != nil || dr["doomed"].Err != nil || dr["doomed"].ID != oldID {
			t.Fatalf("delete: %+v %v", dr, err)
		}
		// By id (DeleteTopics v6+).
		req := kmsg.NewPtrDeleteTopicsRequest()
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.TopicID = res["doomed-by-id"].ID
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.Topics[0].ErrorCode != 0 || resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != "doomed-by-id" {
			t.Fatalf("delete by id: %+v %v", resp, err)
		}
		waitFor(t, 20*time.Second, "deletions to complete", func() bool {
			gone := true
			c.view(c.active(10*time.Second), func(im *fsm.Image) {
				gone = im.TopicByName("doomed") == nil && im.TopicByName("doomed-by-id") == nil
			})
			return gone
		})
		c.converged(20 * time.Second)
		td, err := adm.ListTopics(kadm.WithAuthorizedOps(ctx))
		if err != nil || len(td) != 1 || td["kept"].Err != nil {
			t.Fatalf("after deletion: %+v %v", td, err)
		}
		// The name is free again, under a new id.
		res, err = adm.CreateTopics(ctx, 1, 3, nil, "doomed")
		if err != nil || res.Error() != nil || res["doomed"].ID == oldID {
			t.Fatalf("recreate: %+v %v", res, err)
		}
		// Deleting what does not exist.
		dr, err = adm.DeleteTopics(ctx, "never-was")
		if err != nil || !errorsIs(dr["never-was"].Err, kerr.UnknownTopicOrPartition) {
			t.Fatalf("unknown: %+v %v", dr, err)
		}
		req = kmsg.NewPtrDeleteTopicsRequest()
		rt = kmsg.NewDeleteTopicsRequestTopic()
		rt.TopicID = [16]byte{0xde, 0xad}
		req.Topics = append(req.Topics, rt)
		resp, err = req.RequestWith(ctx, cl)
		if err != nil || resp.Topics[0].ErrorCode != kerr.UnknownTopicID.Code {
			t.Fatalf("unknown id: %+v %v", resp, err)
		}
	})

	t.Run("reassign", func(t *testing.T) {
		createRaw(t, cl, "moving", [][]int32{{1, 2}, {2, 3}})
		active := c.active(10 * time.Second)
		var p fsm.Partition
		waitFor(t, 10*time.Second, "moving created", func() bool {
			var ok bool
			p, ok = c.partition(active, "moving", 0)
			return ok
		})
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign("moving", 0, []int32{2, 3})
		ar, err := adm.AlterPartitionAssignments(ctx, req)
		if err != nil || ar.Error() != nil {
			t.Fatalf("reassign: %+v %v", ar, err)
		}
		set := kadm.TopicsSet{}
		set.Add("moving", 0, 1)
		lr, err := adm.ListPartitionReassignments(ctx, set)
		if err != nil {
			t.Fatal(err)
		}
		got := lr["moving"][0]
		if len(lr["moving"]) != 1 || !sameSet(got.Replicas, []int32{1, 2, 3}) || !slices.Equal(got.AddingReplicas, []int32{3}) || !slices.Equal(got.RemovingReplicas, []int32{1}) {
			t.Fatalf("listed: %+v", lr)
		}
		if all := listAllReassignments(t, cl); len(all.Topics) != 1 || all.Topics[0].Topic != "moving" || len(all.Topics[0].Partitions) != 1 {
			t.Fatalf("list all: %+v", all)
		}
		// The new replica catches up: the leader adds it to the ISR, and
		// the reassignment completes in that commit.
		p, _ = c.partition(c.active(10*time.Second), "moving", 0)
		// The answer already carries the completed partition.
		if got := alterISR(t, c, cl, "moving", 0, p, []int32{1, 2, 3}); !sameSet(got, []int32{2, 3}) {
			t.Fatalf("ISR in the AlterPartition answer: %v", got)
		}
		waitFor(t, 20*time.Second, "the reassignment to complete", func() bool {
			p, _ = c.partition(c.active(10*time.Second), "moving", 0)
			return sameSet(p.Replicas, []int32{2, 3}) && !p.InISR(1) && (p.Leader == 2 || p.Leader == 3)
		})
		if all := listAllReassignments(t, cl); len(all.Topics) != 0 {
			t.Fatalf("after completion: %+v", all)
		}
		// Start one and cancel it: the partition keeps its replicas.
		req = nil
		req.Assign("moving", 1, []int32{1, 2})
		if ar, err := adm.AlterPartitionAssignments(ctx, req); err != nil || ar.Error() != nil {
			t.Fatalf("reassign: %+v %v", ar, err)
		}
		req = nil
		req.CancelAssign("moving", 1)
		if ar, err := adm.AlterPartitionAssignments(ctx, req); err != nil || ar.Error() != nil {
			t.Fatalf("cancel: %+v %v", ar, err)
		}
		waitFor(t, 20*time.Second, "the cancellation to settle", func() bool {
			p, _ := c.partition(c.active(10*time.Second), "moving", 1)
			return len(listAllReassignments(t, cl).Topics) == 0 && sameSet(p.Replicas, []int32{2, 3})
		})
		// A replication factor change refused on request (v1).
		req = nil
		req.Assign("moving", 1, []int32{1, 2, 3})
		ar, err = adm.AlterPartitionAssignments(kadm.ForbidAlterRf(ctx), req)
		if err != nil || !errorsIs(ar["moving"][1].Err, kerr.InvalidReplicationFactor) {
			t.Fatalf("forbidden RF change: %+v %v", ar, err)
		}
	})
	c.converged(20 * time.Second)
}

// reassignmentBadRequests are the reassignment cases of the bad-request
// table: they need the table's fixtures ("existing").
func reassignmentBadRequests(t *testing.T, c *testCluster, cl *kgo.Client) []badCase {
	alter := func(topic string, part int32, replicas []int32) func() int16 {
		return func() int16 {
			req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
			rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			rp.Partition, rp.Replicas = part, replicas
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(context.Background(), cl)
			if err != nil {
				t.Fatal(err)
			}
			if resp.ErrorCode != 0 {
				return resp.ErrorCode
			}
			return resp.Topics[0].Partitions[0].ErrorCode
		}
	}
	deleteByName := func(name string) func() int16 {
		return func() int16 {
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.TopicNames = []string{name}
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(context.Background(), cl)
			if err != nil {
				t.Fatal(err)
			}
			return resp.Topics[0].ErrorCode
		}
	}
	return []badCase{
		{"cancelling a reassignment that is not in progress", alter("existing", 0, nil), kerr.NoReassignmentInProgress},
		{"reassigning an unknown topic", alter("missing", 0, []int32{1, 2}), kerr.UnknownTopicOrPartition},
		{"reassigning onto an unknown broker", alter("existing", 0, []int32{1, 99}), kerr.InvalidReplicaAssignment},
		{"deleting an unknown topic", deleteByName("missing"), kerr.UnknownTopicOrPartition},
	}
}
