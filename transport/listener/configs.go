package listener

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// topicConfigTypes gives DescribeConfigs (v3+) the type of each topic
// config the controller accepts, with Kafka's types for them. A key
// missing here is described as UNKNOWN.
var topicConfigTypes = map[string]kmsg.ConfigType{
	"unclean.leader.election.enable": kmsg.ConfigTypeBoolean,
	"min.insync.replicas":            kmsg.ConfigTypeInt,
	"cleanup.policy":                 kmsg.ConfigTypeList,
	"retention.ms":                   kmsg.ConfigTypeLong,
	"retention.bytes":                kmsg.ConfigTypeLong,
	"segment.bytes":                  kmsg.ConfigTypeInt,
	"segment.ms":                     kmsg.ConfigTypeLong,
	"max.message.bytes":              kmsg.ConfigTypeInt,
	"min.compaction.lag.ms":          kmsg.ConfigTypeLong,
	"delete.retention.ms":            kmsg.ConfigTypeLong,
	"compression.type":               kmsg.ConfigTypeString,
	"message.timestamp.type":         kmsg.ConfigTypeString,
	"flush.messages":                 kmsg.ConfigTypeLong,
	"flush.ms":                       kmsg.ConfigTypeLong,
	"preallocate":                    kmsg.ConfigTypeBoolean,
	"local.retention.ms":             kmsg.ConfigTypeLong,
	"local.retention.bytes":          kmsg.ConfigTypeLong,
	"remote.storage.enable":          kmsg.ConfigTypeBoolean,
	"message.downconversion.enable":  kmsg.ConfigTypeBoolean,
}

// describeConfigs answers topic resources from this voter's image: the
// configs a topic sets, as DYNAMIC_TOPIC_CONFIG. Keys a topic does not set
// are not listed: their value is the brokers' default, which the
// controller does not know. A broker resource naming this voter (or none)
// is answered with no configs, since the controller keeps no broker
// configs; one naming another node is INVALID_REQUEST, as a Kafka broker
// answers a request meant for another.
func (l *Listener) describeConfigs(req *kmsg.DescribeConfigsRequest) *kmsg.DescribeConfigsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	l.node.FSM.View(func(im *fsm.Image) {
		for _, rr := range req.Resources {
			out := kmsg.NewDescribeConfigsResponseResource()
			out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
			var err error
			switch rr.ResourceType {
			case kmsg.ConfigResourceTypeTopic:
				out.Configs, err = describeTopic(im, rr, req)
			case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
				err = l.checkBrokerResource(rr.ResourceName)
			default:
				err = kafkaErr(kerr.InvalidRequest, "config resource type %d is not served by the controller", rr.ResourceType)
			}
			out.ErrorCode, out.ErrorMessage = errorCode(err), errorMessage(err)
			resp.Resources = append(resp.Resources, out)
		}
	})
	return resp
}

func describeTopic(im *fsm.Image, rr kmsg.DescribeConfigsRequestResource, req *kmsg.DescribeConfigsRequest) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	if err := controller.ValidTopicName(rr.ResourceName); err != nil {
		return nil, err
	}
	entries, err := controller.DescribeTopicConfigs(im, rr.ResourceName)
	if err != nil {
		return nil, err
	}
	var want map[string]bool
	if rr.ConfigNames != nil {
		want = map[string]bool{}
		for _, n := range rr.ConfigNames {
			want[n] = true
		}
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, e := range entries {
		if want != nil && !want[e.Key] {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		value := e.Value
		c.Name, c.Value, c.Source = e.Key, &value, kmsg.ConfigSourceDynamicTopicConfig
		c.ConfigType = topicConfigTypes[e.Key]
		if req.IncludeSynonyms {
			s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			sv := e.Value
			s.Name, s.Value, s.Source = e.Key, &sv, kmsg.ConfigSourceDynamicTopicConfig
			c.ConfigSynonyms = append(c.ConfigSynonyms, s)
		}
		out = append(out, c)
	}
	return out, nil
}

// checkBrokerResource accepts a broker resource meant for this node.
func (l *Listener) checkBrokerResource(name string) error {
	if name == "" || name == strconv.Itoa(int(l.self)) {
		return nil
	}
	return kafkaErr(kerr.InvalidRequest, "broker resource %q sent to node %d", name, l.self)
}

// resourceKey identifies a config resource within one request.
type resourceKey struct {
	typ  kmsg.ConfigResourceType
	name string
}

// alterOne is one resource of a config mutation, ready for the controller.
type alterOne struct {
	topic string
	ops   []controller.AlterConfig
	// replace is the complete config set of a legacy AlterConfigs: the
	// controller works out what to delete inside its event.
	replace []rl.ConfigEntry
	err     error
}

// incrementalAlterConfigs maps IncrementalAlterConfigs onto
// Controller.IncrementalAlterTopicConfigs, one call per topic, run
// concurrently so that they share the event loop's rounds. Only topic
// resources are stored by the controller; anything else is
// INVALID_REQUEST. It runs where the active controller is (see
// atActive): clients send it to any broker and do not retry it on
// NOT_CONTROLLER.
func (l *Listener) incrementalAlterConfigs(ctx context.Context, c *kafkawire.Conn, req *kmsg.IncrementalAlterConfigsRequest) *kmsg.IncrementalAlterConfigsResponse {
	resp := l.atActive(ctx, c, req, func(ctx context.Context) kmsg.Response {
		return l.incrementalAlterHere(ctx, req)
	})
	return resp.(*kmsg.IncrementalAlterConfigsResponse)
}

func (l *Listener) incrementalAlterHere(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) *kmsg.IncrementalAlterConfigsResponse {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	work := make([]alterOne, len(req.Resources))
	keys := make([]resourceKey, len(req.Resources))
	for i, rr := range req.Resources {
		keys[i] = resourceKey{rr.ResourceType, rr.ResourceName}
		w := &work[i]
		w.topic = rr.ResourceName
		if rr.ResourceType != kmsg.ConfigResourceTypeTopic {
			w.err = l.nonTopicAlter(rr.ResourceType, rr.ResourceName)
			continue
		}
		for _, cfg := range rr.Configs {
			op := controller.AlterConfig{Key: cfg.Name, Op: controller.ConfigOp(cfg.Op)}
			if cfg.Value != nil {
				op.Value = *cfg.Value
			} else if cfg.Op != kmsg.IncrementalAlterConfigOpDelete {
				w.err = kafkaErr(kerr.InvalidRequest, "null value for topic config %q with operation %s", cfg.Name, op.Op)
				break
			}
			w.ops = append(w.ops, op)
		}
	}
	l.runAlters(ctx, keys, work, req.ValidateOnly)
	for i, rr := range req.Resources {
		out := kmsg.NewIncrementalAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		out.ErrorCode, out.ErrorMessage = errorCode(work[i].err), errorMessage(work[i].err)
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}

// alterConfigs serves the legacy AlterConfigs: the request gives a
// topic's complete config set, so every key given is SET and every key
// the topic sets but the request does not give is DELETEd, in one event
// (Controller.ReplaceTopicConfigs, which works out the keys to delete
// inside that event). A null value counts as not given, as in Kafka.
func (l *Listener) alterConfigs(ctx context.Context, c *kafkawire.Conn, req *kmsg.AlterConfigsRequest) *kmsg.AlterConfigsResponse {
	resp := l.atActive(ctx, c, req, func(ctx context.Context) kmsg.Response {
		return l.alterHere(ctx, req)
	})
	return resp.(*kmsg.AlterConfigsResponse)
}

func (l *Listener) alterHere(ctx context.Context, req *kmsg.AlterConfigsRequest) *kmsg.AlterConfigsResponse {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	work := make([]alterOne, len(req.Resources))
	keys := make([]resourceKey, len(req.Resources))
	for i, rr := range req.Resources {
		keys[i] = resourceKey{rr.ResourceType, rr.ResourceName}
		w := &work[i]
		w.topic = rr.ResourceName
		if rr.ResourceType != kmsg.ConfigResourceTypeTopic {
			w.err = l.nonTopicAlter(rr.ResourceType, rr.ResourceName)
			continue
		}
		w.replace = []rl.ConfigEntry{}
		for _, cfg := range rr.Configs {
			if cfg.Value != nil {
				w.replace = append(w.replace, rl.ConfigEntry{Key: cfg.Name, Value: *cfg.Value})
			}
		}
	}
	l.runAlters(ctx, keys, work, req.ValidateOnly)
	for i, rr := range req.Resources {
		out := kmsg.NewAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		out.ErrorCode, out.ErrorMessage = errorCode(work[i].err), errorMessage(work[i].err)
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}

// nonTopicAlter is the answer to a config change of a resource the
// controller does not store.
func (l *Listener) nonTopicAlter(typ kmsg.ConfigResourceType, name string) error {
	switch typ {
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		return kafkaErr(kerr.InvalidRequest, "broker configs (resource %q) are not stored by the controller: send them to the broker", name)
	}
	return kafkaErr(kerr.InvalidRequest, "config resource type %d is not served by the controller", typ)
}

// atActive runs a mutation clients send to any broker (config, ACL and
// SCRAM changes) where the active controller is: here when
// this voter is active, otherwise forwarded to the active one. While no
// controller takes it — an election in progress, a forward target that
// turns out to be a standby itself — it tries again until the request's
// time (ForwardTimeout) is up, as a Kafka broker's forwarding does, and then answers with
// what the last attempt got (NOT_CONTROLLER). Retrying is safe: a
// NOT_CONTROLLER answer means the controller changed nothing, and the
// changes are idempotent anyway. An answer in which every per-item error
// code (itemCodes) is NOT_CONTROLLER is retried.
func (l *Listener) atActive(ctx context.Context, c *kafkawire.Conn, req kmsg.Request, here func(context.Context) kmsg.Response) kmsg.Response {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.ForwardTimeout)
	defer cancel()
	canForward := !l.cfg.NoForward && !forwarded(c)
	backoff := 10 * time.Millisecond
	for {
		var resp kmsg.Response
		switch {
		case !l.standby():
			resp = here(ctx)
		case canForward:
			resp = l.forward(ctx, c, req)
		default:
			return here(ctx)
		}
		if resp != nil && !allNotController(itemCodes(resp)) {
			return resp
		}
		select {
		case <-ctx.Done():
			if resp == nil {
				resp = here(ctx)
			}
			return resp
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}

// itemCodes lists the per-item error codes of the responses atActive
// runs: one per resource, ACL creation, filter or user.
func itemCodes(resp kmsg.Response) []int16 {
	var codes []int16
	switch r := resp.(type) {
	case *kmsg.IncrementalAlterConfigsResponse:
		for _, x := range r.Resources {
			codes = append(codes, x.ErrorCode)
		}
	case *kmsg.AlterConfigsResponse:
		for _, x := range r.Resources {
			codes = append(codes, x.ErrorCode)
		}
	case *kmsg.CreateACLsResponse:
		for _, x := range r.Results {
			codes = append(codes, x.ErrorCode)
		}
	case *kmsg.DeleteACLsResponse:
		for _, x := range r.Results {
			codes = append(codes, x.ErrorCode)
		}
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		for _, x := range r.Results {
			codes = append(codes, x.ErrorCode)
		}
	}
	return codes
}

func allNotController(codes []int16) bool {
	for _, c := range codes {
		if c != kerr.NotController.Code {
			return false
		}
	}
	return len(codes) > 0
}

// runAlters checks what is common to both config mutations and runs the
// topic changes that passed, concurrently.
func (l *Listener) runAlters(ctx context.Context, keys []resourceKey, work []alterOne, validateOnly bool) {
	count := map[resourceKey]int{}
	for _, k := range keys {
		count[k]++
	}
	standby := l.standby()
	var notCtrl error
	if standby {
		notCtrl = l.notController()
	}
	var wg sync.WaitGroup
	for i := range work {
		w := &work[i]
		switch {
		case count[keys[i]] > 1:
			w.err = kafkaErr(kerr.InvalidRequest, "resource %q appears more than once in the request", keys[i].name)
			continue
		case w.err != nil:
			continue
		case standby:
			w.err = notCtrl
			continue
		}
		if err := controller.ValidTopicName(w.topic); err != nil {
			w.err = err
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w.replace != nil {
				w.err = l.node.Controller.ReplaceTopicConfigs(ctx, w.topic, w.replace, validateOnly)
				return
			}
			w.err = l.node.Controller.IncrementalAlterTopicConfigs(ctx, w.topic, w.ops, validateOnly)
		}()
	}
	wg.Wait()
}
