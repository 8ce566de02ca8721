package listener

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/controller/configmodel"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// describeConfigs answers from this voter's image with Kafka's config
// model (controller/configmodel): a topic's every config with its
// effective value and source, resolved as this node resolves it; a
// broker's every config, its dynamic ones from the image and, for this
// node's own id, this node's static settings; the cluster-wide default
// resource (the empty name) with the configs set there. The controller
// package decides what each entry holds; this only maps the request.
func (l *Listener) describeConfigs(req *kmsg.DescribeConfigsRequest) *kmsg.DescribeConfigsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	static := l.node.Controller.StaticConfigs()
	l.node.FSM.View(func(im *fsm.Image) {
		for _, rr := range req.Resources {
			out := kmsg.NewDescribeConfigsResponseResource()
			out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
			opts := configmodel.DescribeOptions{Names: rr.ConfigNames, Synonyms: req.IncludeSynonyms, Documentation: req.IncludeDocumentation}
			var err error
			switch rr.ResourceType {
			case kmsg.ConfigResourceTypeTopic:
				if err = controller.ValidTopicName(rr.ResourceName); err == nil {
					out.Configs, err = controller.DescribeTopic(im, rr.ResourceName, l.self, static, opts)
				}
			case kmsg.ConfigResourceTypeBroker:
				out.Configs, err = l.describeBroker(im, rr.ResourceName, static, opts)
			case kmsg.ConfigResourceTypeBrokerLogger:
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

// describeBroker describes a broker resource: the cluster-wide default
// for the empty name, otherwise the broker of that id (this node's
// static settings only for its own id: another node's are its own).
func (l *Listener) describeBroker(im *fsm.Image, name string, static map[string]string, opts configmodel.DescribeOptions) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	if err := controller.CheckBrokerResourceName(name); err != nil {
		return nil, err
	}
	if name == fsm.ClusterDefault {
		return configmodel.DescribeClusterDefault(im.BrokerConfigs(), opts), nil
	}
	id, _ := strconv.Atoi(name)
	if int32(id) != l.self {
		static = nil
	}
	return controller.DescribeBrokerConfigs(im, int32(id), static, opts), nil
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
	// topic is the resource's name: a topic, or with broker a broker
	// resource (a broker id, or empty for the cluster-wide default).
	topic  string
	broker bool
	ops    []controller.AlterConfig
	// replace is the complete config set of a legacy AlterConfigs: the
	// controller works out what to delete inside its event.
	replace []rl.ConfigEntry
	err     error
}

// incrementalAlterConfigs maps IncrementalAlterConfigs onto
// Controller.IncrementalAlterTopicConfigs and
// IncrementalAlterBrokerConfigs, one call per resource, run concurrently
// so that they share the event loop's rounds. Topic and broker resources
// (a broker id, or the empty name for the cluster-wide default) are
// stored by the controller; anything else is INVALID_REQUEST. It runs where the active controller is (see
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
		if w.err = l.alterable(w, rr.ResourceType, rr.ResourceName); w.err != nil {
			continue
		}
		for _, cfg := range rr.Configs {
			op := controller.AlterConfig{Key: cfg.Name, Op: controller.ConfigOp(cfg.Op)}
			if cfg.Value != nil {
				op.Value = *cfg.Value
			} else if cfg.Op != kmsg.IncrementalAlterConfigOpDelete {
				w.err = kafkaErr(kerr.InvalidRequest, "Null value not supported for : %s", cfg.Name)
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
// resource's complete config set, so every key given is SET and every key
// the resource sets but the request does not give is DELETEd, in one
// event (Controller.ReplaceTopicConfigs and ReplaceBrokerConfigs, which
// work out the keys to delete inside that event). A null value counts as
// not given.
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
		if w.err = l.alterable(w, rr.ResourceType, rr.ResourceName); w.err != nil {
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

// alterable marks a config change's resource as a topic or a broker
// resource, and refuses the kinds the controller does not store: broker
// loggers (each broker's own, not in the log) and unknown types.
func (l *Listener) alterable(w *alterOne, typ kmsg.ConfigResourceType, name string) error {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		return nil
	case kmsg.ConfigResourceTypeBroker:
		w.broker = true
		return nil
	case kmsg.ConfigResourceTypeBrokerLogger:
		return kafkaErr(kerr.InvalidRequest, "broker logger levels (resource %q) are not stored by the controller: send them to the broker", name)
	}
	return kafkaErr(kerr.InvalidRequest, "Unknown resource type %d", typ)
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
		if !w.broker {
			if err := controller.ValidTopicName(w.topic); err != nil {
				w.err = err
				continue
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch {
			case w.broker && w.replace != nil:
				w.err = l.node.Controller.ReplaceBrokerConfigs(ctx, w.topic, w.replace, validateOnly)
				return
			case w.broker:
				w.err = l.node.Controller.IncrementalAlterBrokerConfigs(ctx, w.topic, w.ops, validateOnly)
				return
			}
			if w.replace != nil {
				w.err = l.node.Controller.ReplaceTopicConfigs(ctx, w.topic, w.replace, validateOnly)
				return
			}
			w.err = l.node.Controller.IncrementalAlterTopicConfigs(ctx, w.topic, w.ops, validateOnly)
		}()
	}
	wg.Wait()
}
