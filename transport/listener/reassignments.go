package listener

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
)

// alterReassignments maps AlterPartitionReassignments onto
// Controller.AlterPartitionReassignments: a replica list starts (or
// replaces) a partition's reassignment, a null one cancels it. With
// AllowReplicationFactorChange false (v1+), a target whose size differs
// from the partition's replication factor is INVALID_REPLICATION_FACTOR,
// checked against the active controller's image before the request goes
// in.
func (l *Listener) alterReassignments(ctx context.Context, req *kmsg.AlterPartitionAssignmentsRequest) *kmsg.AlterPartitionAssignmentsResponse {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	if l.standby() {
		err := l.notController()
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return resp
	}
	type slot struct{ t, p int }
	var calls []controller.Reassign
	var at []slot
	pre := map[slot]error{}
	checkRF := req.Version >= 1 && !req.AllowReplicationFactorChange
	l.node.FSM.View(func(im *fsm.Image) {
		for ti, t := range req.Topics {
			for pi, p := range t.Partitions {
				s := slot{ti, pi}
				if checkRF && p.Replicas != nil {
					if tp := im.TopicByName(t.Topic); tp != nil {
						if part := im.Partition(tp.ID, p.Partition); part != nil {
							rf := len(part.Replicas)
							if ra, ok := tp.Reassignments[p.Partition]; ok {
								rf = len(part.Replicas) - len(ra.Removing)
							}
							if len(p.Replicas) != rf {
								pre[s] = kafkaErr(kerr.InvalidReplicationFactor, "%s-%d: the replication factor would change from %d to %d and the request does not allow it",
									t.Topic, p.Partition, rf, len(p.Replicas))
								continue
							}
						}
					}
				}
				var replicas []int32
				if p.Replicas != nil {
					replicas = append([]int32{}, p.Replicas...)
				}
				calls = append(calls, controller.Reassign{Topic: t.Topic, Partition: p.Partition, Replicas: replicas})
				at = append(at, s)
			}
		}
	})
	results := map[slot]error{}
	if len(calls) > 0 {
		cctx, cancel := l.requestContext(ctx, req.TimeoutMillis)
		res := l.node.Controller.AlterPartitionReassignments(cctx, calls)
		cancel()
		lost := true
		for i, r := range res {
			results[at[i]] = r.Err
			lost = lost && isNotController(r.Err)
		}
		// Leadership lost under the request: clients look for
		// NOT_CONTROLLER at the top level before retrying elsewhere.
		if lost && len(pre) == 0 {
			err := l.notController()
			resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		}
	}
	for ti, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for pi, p := range t.Partitions {
			s := slot{ti, pi}
			err, ok := pre[s]
			if !ok {
				err = results[s]
			}
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// listReassignments answers ListPartitionReassignments from the active
// controller's image: it is the node clients route it to, and the one
// whose image already holds every acknowledged reassignment. Topics and
// partitions that do not exist or are not being reassigned are left out,
// as Kafka does.
func (l *Listener) listReassignments(req *kmsg.ListPartitionReassignmentsRequest) *kmsg.ListPartitionReassignmentsResponse {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if l.standby() {
		err := l.notController()
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return resp
	}
	var filter []controller.TopicPartition
	if req.Topics != nil {
		filter = []controller.TopicPartition{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				filter = append(filter, controller.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	var list []controller.ReassignmentStatus
	l.node.FSM.View(func(im *fsm.Image) { list = controller.ListReassignments(im, filter) })
	for _, r := range list {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != r.Topic {
			rt := kmsg.NewListPartitionReassignmentsResponseTopic()
			rt.Topic = r.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition = r.Partition
		rp.Replicas = append([]int32{}, r.Replicas...)
		rp.AddingReplicas = append([]int32{}, r.Adding...)
		rp.RemovingReplicas = append([]int32{}, r.Removing...)
		last := &resp.Topics[len(resp.Topics)-1]
		last.Partitions = append(last.Partitions, rp)
	}
	return resp
}
