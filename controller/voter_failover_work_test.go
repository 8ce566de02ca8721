package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// deletesSentTo lists the partitions of topic that a node's sender was
// told to delete on broker b.
func deletesSentTo(s *RecordingSender, b int32, topic string) []int32 {
	var out []int32
	for _, r := range s.Sent(b) {
		if r.StopReplica == nil {
			continue
		}
		for _, p := range r.StopReplica.Partitions {
			if p.Delete && p.Topic == topic && !slices.Contains(out, p.Partition) {
				out = append(out, p.Partition)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestDeletionAndReassignmentAcrossVoterFailover runs a topic deletion and
// a reassignment over three real voters and stops the active one while
// both wait for brokers: the next active controller must ask the brokers
// again (its predecessor's requests may never have left), finish both
// from the log alone, and every voter must end with the same state.
func TestDeletionAndReassignmentAcrossVoterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("three-voter run")
	}
	c := newNodeCluster(t, 3, 2*time.Second, nil)
	c.active(20 * time.Second)
	for id := int32(1); id <= 4; id++ {
		c.startBroker(id, 1)
	}
	waitFor(t, 10*time.Second, "brokers unfenced", func() bool {
		i, _ := c.active(time.Second)
		for id := int32(1); id <= 4; id++ {
			if c.brokerFenced(i, id) {
				return false
			}
		}
		return true
	})
	c.do("create", func(ctx context.Context, ctl *Controller) error {
		for _, ct := range []CreateTopic{
			{Name: "gone", NumPartitions: -1, ReplicationFactor: -1, Assignment: [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}},
			{Name: "moved", NumPartitions: -1, ReplicationFactor: -1, Assignment: [][]int32{{1, 2, 3}}},
		} {
			if r := ctl.CreateTopics(ctx, []CreateTopic{ct}, false); r[0].Err != nil {
				return r[0].Err
			}
		}
		return nil
	})
	c.do("delete", func(ctx context.Context, ctl *Controller) error {
		return ctl.DeleteTopics(ctx, []DeleteTopic{{Name: "gone"}})[0].Err
	})
	c.do("reassign", func(ctx context.Context, ctl *Controller) error {
		return ctl.AlterPartitionReassignments(ctx, []Reassign{{Topic: "moved", Replicas: []int32{2, 3, 4}}})[0].Err
	})

	first, _ := c.active(time.Second)
	c.stop(first)
	idx, n := c.active(20 * time.Second)
	if idx == first {
		t.Fatal("the stopped voter is still active")
	}
	// The new controller asks every broker again.
	waitFor(t, 10*time.Second, "StopReplica delete=true sent again", func() bool {
		for b := int32(1); b <= 3; b++ {
			if !slices.Equal(deletesSentTo(c.senders[idx], b, "gone"), []int32{0, 1, 2}) {
				return false
			}
		}
		return true
	})
	for b := int32(1); b <= 3; b++ {
		var res []StopReplicaResult
		for p := int32(0); p < 3; p++ {
			res = append(res, StopReplicaResult{Topic: "gone", Partition: p})
		}
		n.Controller.HandleStopReplicaResponse(b, res)
	}
	waitFor(t, 10*time.Second, "topic removed", func() bool {
		var gone bool
		n.FSM.View(func(im *fsm.Image) { gone = im.TopicByName("gone") == nil })
		return gone
	})

	// The reassignment completes when broker 4 joins the ISR.
	c.do("join ISR", func(ctx context.Context, ctl *Controller) error {
		var req AlterPartitionRequest
		ctl.FSM().View(func(im *fsm.Image) {
			tp := im.TopicByName("moved")
			p := im.Partition(tp.ID, 0)
			req = AlterPartitionRequest{BrokerID: p.Leader, Partitions: []AlterPartitionItem{{TopicID: tp.ID,
				LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: append(slices.Clone(p.ISR), 4)}}}
			req.BrokerEpoch = im.Broker(p.Leader).Epoch
		})
		res, err := ctl.AlterPartition(ctx, req)
		if err != nil {
			return err
		}
		return res[0].Err
	})
	idx, n = c.active(time.Second)
	waitFor(t, 10*time.Second, "broker 1 told to delete its replica", func() bool {
		return slices.Equal(deletesSentTo(c.senders[idx], 1, "moved"), []int32{0})
	})
	n.Controller.HandleStopReplicaResponse(1, []StopReplicaResult{{Topic: "moved", Partition: 0}})
	waitFor(t, 10*time.Second, "reassignment finished", func() bool {
		done := false
		n.FSM.View(func(im *fsm.Image) {
			tp := im.TopicByName("moved")
			p := im.Partition(tp.ID, 0)
			done = slices.Equal(p.Replicas, []int32{2, 3, 4}) && len(tp.Reassignments) == 0 && p.ReplicaState(4) == rl.OnlineReplica
		})
		return done
	})

	// The stopped voter comes back and catches up: one state everywhere.
	c.start(first, nil)
	c.converged(20 * time.Second)
}
