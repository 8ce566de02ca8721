package listener

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// maxPartitionsPerTopic bounds NumPartitions in CreateTopics. The
// controller places every partition in memory within one event, so a
// count near 2^31 would exhaust the active node (and, when the client
// retries, the next one). It is the limit CreatePartitions applies to the
// partitions one request may add.
const maxPartitionsPerTopic = 1_000_000

// createTopics maps CreateTopics onto Controller.CreateTopics: one call
// for the whole request, so its topics share the event loop's rounds.
//
// Timeout: the request's TimeoutMillis bounds the wait for the commit; a
// topic not committed by then is answered REQUEST_TIMED_OUT (its creation
// may still commit). A non-positive timeout, which asked old Kafka not to
// wait for the new partitions' leaders, waits for the commit all the
// same, bounded by RequestTimeout: a topic's leaders are elected in the
// commit that creates it, so there is no earlier point at which the
// creation is known to have happened.
func (l *Listener) createTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	resp.Topics = make([]kmsg.CreateTopicsResponseTopic, len(req.Topics))
	errs := make([]error, len(req.Topics))
	var count map[string]int // only a request of several topics can repeat one
	if len(req.Topics) > 1 {
		count = make(map[string]int, len(req.Topics))
		for _, t := range req.Topics {
			count[t.Topic]++
		}
	}
	var notCtrl error
	if l.standby() {
		notCtrl = l.notController()
	}
	var calls []controller.CreateTopic
	var at []int
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		*rt = kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		if notCtrl != nil {
			errs[i] = notCtrl
			continue
		}
		if count[t.Topic] > 1 {
			errs[i] = kafkaErr(kerr.InvalidRequest, "topic %q appears more than once in the request", t.Topic)
			continue
		}
		ct, err := createTopic(t)
		if err != nil {
			errs[i] = err
			continue
		}
		calls = append(calls, ct)
		at = append(at, i)
	}
	if len(calls) > 0 {
		cctx, cancel := l.requestContext(ctx, req.TimeoutMillis)
		res := l.node.Controller.CreateTopics(cctx, calls, req.ValidateOnly)
		cancel()
		for j, r := range res {
			i := at[j]
			errs[i] = r.Err
			if r.Err != nil {
				continue
			}
			rt := &resp.Topics[i]
			rt.TopicID = r.TopicID
			rt.NumPartitions = r.NumPartitions
			rt.ReplicationFactor = r.ReplicationFactor
			for _, c := range r.Configs {
				rc := kmsg.NewCreateTopicsResponseTopicConfig()
				value := c.Value
				rc.Name, rc.Value, rc.Source = c.Key, &value, int8(kmsg.ConfigSourceDynamicTopicConfig)
				rt.Configs = append(rt.Configs, rc)
			}
		}
	}
	for i, err := range errs {
		if err != nil {
			resp.Topics[i].ErrorCode = errorCode(err)
			resp.Topics[i].ErrorMessage = errorMessage(err)
		}
	}
	return resp
}

// createTopic checks what the controller's types cannot carry and
// converts the rest.
func createTopic(t kmsg.CreateTopicsRequestTopic) (controller.CreateTopic, error) {
	ct := controller.CreateTopic{Name: t.Topic, NumPartitions: t.NumPartitions, ReplicationFactor: t.ReplicationFactor}
	if t.NumPartitions > maxPartitionsPerTopic {
		return ct, kafkaErr(kerr.InvalidPartitions, "%d partitions requested, the limit is %d", t.NumPartitions, maxPartitionsPerTopic)
	}
	if len(t.ReplicaAssignment) > 0 {
		if len(t.ReplicaAssignment) > maxPartitionsPerTopic {
			return ct, kafkaErr(kerr.InvalidPartitions, "%d partitions requested, the limit is %d", len(t.ReplicaAssignment), maxPartitionsPerTopic)
		}
		// The request lists partitions by number, in any order; they
		// must be exactly 0..n-1.
		as := append([]kmsg.CreateTopicsRequestTopicReplicaAssignment(nil), t.ReplicaAssignment...)
		sort.SliceStable(as, func(i, j int) bool { return as[i].Partition < as[j].Partition })
		ct.Assignment = make([][]int32, len(as))
		for i, a := range as {
			if a.Partition != int32(i) {
				return ct, kafkaErr(kerr.InvalidReplicaAssignment, "partitions in the replica assignment must be numbered 0 to %d without gaps or repeats", len(as)-1)
			}
			ct.Assignment[i] = append([]int32(nil), a.Replicas...)
		}
	}
	for _, c := range t.Configs {
		if c.Value == nil {
			return ct, kafkaErr(kerr.InvalidConfig, "null value for topic config %q", c.Name)
		}
		ct.Configs = append(ct.Configs, rl.ConfigEntry{Key: c.Name, Value: *c.Value})
	}
	return ct, nil
}

// createPartitions maps CreatePartitions onto Controller.CreatePartitions,
// with CreateTopics' timeout semantics.
func (l *Listener) createPartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest) *kmsg.CreatePartitionsResponse {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	resp.Topics = make([]kmsg.CreatePartitionsResponseTopic, len(req.Topics))
	errs := make([]error, len(req.Topics))
	for i, t := range req.Topics {
		resp.Topics[i] = kmsg.NewCreatePartitionsResponseTopic()
		resp.Topics[i].Topic = t.Topic
	}
	if l.standby() {
		err := l.notController()
		for i := range errs {
			errs[i] = err
		}
	} else if len(req.Topics) > 0 {
		calls := make([]controller.CreatePartitions, len(req.Topics))
		for i, t := range req.Topics {
			calls[i] = controller.CreatePartitions{Topic: t.Topic, Count: t.Count}
			for _, a := range t.Assignment {
				calls[i].Assignment = append(calls[i].Assignment, append([]int32(nil), a.Replicas...))
			}
		}
		cctx, cancel := l.requestContext(ctx, req.TimeoutMillis)
		res := l.node.Controller.CreatePartitions(cctx, calls, req.ValidateOnly)
		cancel()
		for i, r := range res {
			errs[i] = r.Err
		}
	}
	for i, err := range errs {
		resp.Topics[i].ErrorCode = errorCode(err)
		resp.Topics[i].ErrorMessage = errorMessage(err)
	}
	return resp
}

// deleteTopics maps DeleteTopics onto Controller.DeleteTopics, with
// CreateTopics' timeout semantics. Versions 0–5 name topics; 6+ name each
// by name or by id, never both. A topic named twice in one request is
// refused both times (INVALID_REQUEST), as Kafka does.
func (l *Listener) deleteTopics(ctx context.Context, req *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	var asked []controller.DeleteTopic
	if req.Version < 6 {
		for _, n := range req.TopicNames {
			asked = append(asked, controller.DeleteTopic{Name: n})
		}
	} else {
		for _, t := range req.Topics {
			d := controller.DeleteTopic{TopicID: rl.TopicID(t.TopicID)}
			if t.Topic != nil {
				d.Name = *t.Topic
			}
			asked = append(asked, d)
		}
	}
	errs := make([]error, len(asked))
	resp.Topics = make([]kmsg.DeleteTopicsResponseTopic, len(asked))
	for i, d := range asked {
		rt := &resp.Topics[i]
		*rt = kmsg.NewDeleteTopicsResponseTopic()
		if d.Name != "" || d.TopicID.IsZero() {
			name := d.Name
			rt.Topic = &name
		}
		rt.TopicID = d.TopicID
	}
	if l.standby() {
		err := l.notController()
		for i := range errs {
			errs[i] = err
		}
	} else if len(asked) > 0 {
		// The controller refuses a topic named both ways, or twice.
		cctx, cancel := l.requestContext(ctx, req.TimeoutMillis)
		res := l.node.Controller.DeleteTopics(cctx, asked)
		cancel()
		for i, r := range res {
			errs[i] = r.Err
			rt := &resp.Topics[i]
			if r.Name != "" {
				name := r.Name
				rt.Topic = &name
			}
			if !r.TopicID.IsZero() {
				rt.TopicID = r.TopicID
			}
		}
	}
	for i, err := range errs {
		resp.Topics[i].ErrorCode = errorCode(err)
		resp.Topics[i].ErrorMessage = errorMessage(err)
	}
	return resp
}
