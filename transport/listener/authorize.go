package listener

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/authz"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// access answers authorization questions for one request.
type access struct {
	l       *Listener
	c       *kafkawire.Conn
	id      identity
	sec     *fsm.Security
	enforce bool
	supers  map[string]bool
}

// access is what a request is authorized with. Who the client is is
// worked out only when the rules are enforced: in dev mode a request pays
// for nothing but one atomic load.
func (l *Listener) access(c *kafkawire.Conn) *access {
	a := &access{l: l, c: c, sec: l.securityState(), supers: l.superUsers}
	a.enforce = l.cfg.Security.Authorize || l.saslEnabled() || len(a.sec.Rules()) > 0
	if a.enforce {
		a.id = l.identify(c)
	}
	return a
}

// allowed answers one question and logs a denial when quiet is false.
func (a *access) allowed(op rl.AclOperation, rt rl.ResourceType, name string, quiet bool) bool {
	if !a.enforce {
		return true
	}
	if a.id.hasCert && a.id.cert.IsVoter() && !forwarded(a.c) {
		return true
	}
	if a.id.hasCert && a.id.cert.IsBroker() && op == rl.OpClusterAction && rt == rl.ResourceCluster {
		return true
	}
	// A broker reads the configs and the ACL rules its data path obeys
	// (broker.Agent's cluster state) with its own certificate.
	if a.id.hasCert && a.id.cert.IsBroker() && !forwarded(a.c) &&
		(op == rl.OpDescribeConfigs || (op == rl.OpDescribe && rt == rl.ResourceCluster)) {
		return true
	}
	d := authz.Authorize(a.sec.Rules(), a.supers, authz.Request{Principal: a.id.principal, Host: hostOf(a.c),
		Operation: op, ResourceType: rt, ResourceName: name})
	if !d.Allowed && !quiet {
		a.l.secStats.denials.Add(1)
		a.l.log.Warn("request denied", "principal", a.id.principal, "operation", op.String(),
			"resource", rt.String()+":"+name, "reason", d.Reason, "remote", remoteOf(a.c))
	}
	return d.Allowed
}

func (a *access) cluster(op rl.AclOperation) bool {
	return a.allowed(op, rl.ResourceCluster, rl.ClusterResourceName, false)
}

func (a *access) topic(op rl.AclOperation, name string) bool {
	return a.allowed(op, rl.ResourceTopic, name, false)
}

// authorize checks req before it is served. It returns either a complete
// refusal to send (deny), or the request to serve — req itself, or a copy
// without the resources the principal may not touch — and a function that
// adds the refused resources' errors to the response (nil when nothing
// was refused).
func (l *Listener) authorize(a *access, req kmsg.Request) (deny kmsg.Response, serve kmsg.Request, post func(kmsg.Response)) {
	if !a.enforce {
		return nil, req, nil
	}
	clusterOp := func(op rl.AclOperation) (kmsg.Response, kmsg.Request, func(kmsg.Response)) {
		if a.cluster(op) {
			return nil, req, nil
		}
		return clusterDenied(req, "the principal may not do this on the cluster"), nil, nil
	}
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		return nil, req, func(resp kmsg.Response) { a.filterMetadata(r, resp.(*kmsg.MetadataResponse)) }
	case *kmsg.CreateTopicsRequest:
		return a.createTopics(r)
	case *kmsg.DeleteTopicsRequest:
		return a.deleteTopics(r)
	case *kmsg.CreatePartitionsRequest:
		return a.createPartitions(r)
	case *kmsg.DescribeConfigsRequest:
		return a.describeConfigs(r)
	case *kmsg.AlterConfigsRequest:
		return a.alterConfigs(r)
	case *kmsg.IncrementalAlterConfigsRequest:
		return a.incrementalAlterConfigs(r)
	case *kmsg.ElectLeadersRequest, *kmsg.AlterPartitionAssignmentsRequest, *kmsg.CreateACLsRequest,
		*kmsg.DeleteACLsRequest, *kmsg.AlterUserSCRAMCredentialsRequest, *kmsg.AddRaftVoterRequest,
		*kmsg.RemoveRaftVoterRequest, *kmsg.UpdateFeaturesRequest:
		return clusterOp(rl.OpAlter)
	case *kmsg.ListPartitionReassignmentsRequest, *kmsg.DescribeQuorumRequest, *kmsg.DescribeACLsRequest,
		*kmsg.DescribeUserSCRAMCredentialsRequest:
		return clusterOp(rl.OpDescribe)
	case *kmsg.BrokerRegistrationRequest, *kmsg.BrokerHeartbeatRequest, *kmsg.AlterPartitionRequest,
		*kmsg.UnregisterBrokerRequest:
		return clusterOp(rl.OpClusterAction)
	}
	// DescribeCluster, SaslHandshake, SaslAuthenticate: any client.
	return nil, req, nil
}

// clusterDenied is req's response with CLUSTER_AUTHORIZATION_FAILED, and
// msg where the response has room for one.
func clusterDenied(req kmsg.Request, msg string) kmsg.Response {
	code := kerr.ClusterAuthorizationFailed.Code
	switch r := req.ResponseKind().(type) {
	case *kmsg.BrokerRegistrationResponse:
		r.ErrorCode = code
		return r
	case *kmsg.BrokerHeartbeatResponse:
		r.ErrorCode = code // IsFenced keeps its default, true
		return r
	case *kmsg.AlterPartitionResponse:
		r.ErrorCode = code
		return r
	case *kmsg.UnregisterBrokerResponse:
		r.ErrorCode, r.ErrorMessage = code, &msg
		return r
	case *kmsg.ElectLeadersResponse:
		r.ErrorCode = code
		for _, t := range req.(*kmsg.ElectLeadersRequest).Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, code, &msg
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
		return r
	case *kmsg.AlterPartitionAssignmentsResponse:
		r.ErrorCode, r.ErrorMessage = code, &msg
		return r
	case *kmsg.ListPartitionReassignmentsResponse:
		r.ErrorCode, r.ErrorMessage = code, &msg
		return r
	case *kmsg.DescribeQuorumResponse:
		r.ErrorCode = code
		return r
	case *kmsg.AddRaftVoterResponse:
		r.ErrorCode, r.ErrorMessage = code, &msg
		return r
	case *kmsg.RemoveRaftVoterResponse:
		r.ErrorCode, r.ErrorMessage = code, &msg
		return r
	case *kmsg.DescribeACLsResponse:
		r.ErrorCode, r.ErrorMessage = code, &msg
		return r
	case *kmsg.CreateACLsResponse:
		for range req.(*kmsg.CreateACLsRequest).Creations {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = code, &msg
			r.Results = append(r.Results, res)
		}
		return r
	case *kmsg.DeleteACLsResponse:
		for range req.(*kmsg.DeleteACLsRequest).Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = code, &msg
			r.Results = append(r.Results, res)
		}
		return r
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		seen := map[string]bool{}
		ar := req.(*kmsg.AlterUserSCRAMCredentialsRequest)
		add := func(u string) {
			if !seen[u] {
				seen[u] = true
				res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				res.User, res.ErrorCode, res.ErrorMessage = u, code, &msg
				r.Results = append(r.Results, res)
			}
		}
		for _, d := range ar.Deletions {
			add(d.Name)
		}
		for _, u := range ar.Upsertions {
			add(u.Name)
		}
		return r
	case *kmsg.DescribeUserSCRAMCredentialsResponse:
		r.ErrorCode, r.ErrorMessage = code, &msg
		return r
	case *kmsg.UpdateFeaturesResponse:
		r.ErrorCode, r.ErrorMessage = code, &msg
		return r
	}
	return nil
}

func topicDeniedMsg(op rl.AclOperation) *string {
	s := "the principal may not " + op.String() + " this topic"
	return &s
}

// filterMetadata drops the topics the principal may not describe from a
// listing of all topics, and answers TOPIC_AUTHORIZATION_FAILED for those
// it named (whether they exist or not, so existence does not leak).
func (a *access) filterMetadata(req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	all := req.Topics == nil
	kept := resp.Topics[:0]
	for _, t := range resp.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if a.allowed(rl.OpDescribe, rl.ResourceTopic, name, all) {
			kept = append(kept, t)
			continue
		}
		if all {
			continue
		}
		d := kmsg.NewMetadataResponseTopic()
		d.Topic, d.TopicID, d.ErrorCode = t.Topic, t.TopicID, kerr.TopicAuthorizationFailed.Code
		kept = append(kept, d)
	}
	resp.Topics = kept
}

// createTopics: CREATE on the cluster covers every topic; otherwise CREATE
// on each topic.
func (a *access) createTopics(r *kmsg.CreateTopicsRequest) (kmsg.Response, kmsg.Request, func(kmsg.Response)) {
	if a.allowed(rl.OpCreate, rl.ResourceCluster, rl.ClusterResourceName, true) {
		return nil, r, nil
	}
	var denied []string
	cp := *r
	cp.Topics = nil
	for _, t := range r.Topics {
		if a.topic(rl.OpCreate, t.Topic) {
			cp.Topics = append(cp.Topics, t)
		} else {
			denied = append(denied, t.Topic)
		}
	}
	if len(denied) == 0 {
		return nil, r, nil
	}
	return nil, &cp, func(resp kmsg.Response) {
		cr := resp.(*kmsg.CreateTopicsResponse)
		for _, name := range denied {
			t := kmsg.NewCreateTopicsResponseTopic()
			t.Topic, t.ErrorCode, t.ErrorMessage = name, kerr.TopicAuthorizationFailed.Code, topicDeniedMsg(rl.OpCreate)
			t.NumPartitions, t.ReplicationFactor = -1, -1
			cr.Topics = append(cr.Topics, t)
		}
	}
}

func (a *access) deleteTopics(r *kmsg.DeleteTopicsRequest) (kmsg.Response, kmsg.Request, func(kmsg.Response)) {
	type refused struct {
		name *string
		id   [16]byte
	}
	var denied []refused
	cp := *r
	cp.TopicNames, cp.Topics = nil, nil
	for _, n := range r.TopicNames {
		if a.topic(rl.OpDelete, n) {
			cp.TopicNames = append(cp.TopicNames, n)
		} else {
			denied = append(denied, refused{name: &n})
		}
	}
	for _, t := range r.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		} else if found := a.l.topicNameByID(t.TopicID); found != "" {
			name = found
		} else {
			// An unknown id: the handler answers UNKNOWN_TOPIC_ID.
			cp.Topics = append(cp.Topics, t)
			continue
		}
		if a.topic(rl.OpDelete, name) {
			cp.Topics = append(cp.Topics, t)
		} else {
			denied = append(denied, refused{name: t.Topic, id: t.TopicID})
		}
	}
	if len(denied) == 0 {
		return nil, r, nil
	}
	return nil, &cp, func(resp kmsg.Response) {
		dr := resp.(*kmsg.DeleteTopicsResponse)
		for _, d := range denied {
			t := kmsg.NewDeleteTopicsResponseTopic()
			t.Topic, t.TopicID, t.ErrorCode, t.ErrorMessage = d.name, d.id, kerr.TopicAuthorizationFailed.Code, topicDeniedMsg(rl.OpDelete)
			dr.Topics = append(dr.Topics, t)
		}
	}
}

func (a *access) createPartitions(r *kmsg.CreatePartitionsRequest) (kmsg.Response, kmsg.Request, func(kmsg.Response)) {
	var denied []string
	cp := *r
	cp.Topics = nil
	for _, t := range r.Topics {
		if a.topic(rl.OpAlter, t.Topic) {
			cp.Topics = append(cp.Topics, t)
		} else {
			denied = append(denied, t.Topic)
		}
	}
	if len(denied) == 0 {
		return nil, r, nil
	}
	return nil, &cp, func(resp kmsg.Response) {
		cr := resp.(*kmsg.CreatePartitionsResponse)
		for _, name := range denied {
			t := kmsg.NewCreatePartitionsResponseTopic()
			t.Topic, t.ErrorCode, t.ErrorMessage = name, kerr.TopicAuthorizationFailed.Code, topicDeniedMsg(rl.OpAlter)
			cr.Topics = append(cr.Topics, t)
		}
	}
}

// configResource authorizes op on a config resource: topics by name,
// broker resources as the cluster. It returns the error code to answer
// with, 0 when allowed.
func (a *access) configResource(op rl.AclOperation, typ kmsg.ConfigResourceType, name string) int16 {
	if typ == kmsg.ConfigResourceTypeTopic {
		if a.topic(op, name) {
			return 0
		}
		return kerr.TopicAuthorizationFailed.Code
	}
	if a.cluster(op) {
		return 0
	}
	return kerr.ClusterAuthorizationFailed.Code
}

type deniedResource struct {
	typ  kmsg.ConfigResourceType
	name string
	code int16
}

// splitConfigs authorizes op on each config resource of a request. With
// nothing refused it returns a nil post; otherwise the resources to serve
// and a post that adds each refused one to the response's list (at), made
// by mk.
func splitConfigs[R, O any](a *access, op rl.AclOperation, in []R, key func(R) (kmsg.ConfigResourceType, string),
	at func(kmsg.Response) *[]O, mk func(deniedResource) O) ([]R, func(kmsg.Response)) {
	var kept []R
	var denied []deniedResource
	for _, rr := range in {
		typ, name := key(rr)
		if code := a.configResource(op, typ, name); code != 0 {
			denied = append(denied, deniedResource{typ, name, code})
		} else {
			kept = append(kept, rr)
		}
	}
	if len(denied) == 0 {
		return in, nil
	}
	return kept, func(resp kmsg.Response) {
		list := at(resp)
		for _, d := range denied {
			*list = append(*list, mk(d))
		}
	}
}

func (a *access) describeConfigs(r *kmsg.DescribeConfigsRequest) (kmsg.Response, kmsg.Request, func(kmsg.Response)) {
	kept, post := splitConfigs(a, rl.OpDescribeConfigs, r.Resources,
		func(rr kmsg.DescribeConfigsRequestResource) (kmsg.ConfigResourceType, string) {
			return rr.ResourceType, rr.ResourceName
		},
		func(resp kmsg.Response) *[]kmsg.DescribeConfigsResponseResource {
			return &resp.(*kmsg.DescribeConfigsResponse).Resources
		},
		func(d deniedResource) kmsg.DescribeConfigsResponseResource {
			out := kmsg.NewDescribeConfigsResponseResource()
			out.ResourceType, out.ResourceName, out.ErrorCode = d.typ, d.name, d.code
			return out
		})
	if post == nil {
		return nil, r, nil
	}
	cp := *r
	cp.Resources = kept
	return nil, &cp, post
}

func (a *access) alterConfigs(r *kmsg.AlterConfigsRequest) (kmsg.Response, kmsg.Request, func(kmsg.Response)) {
	kept, post := splitConfigs(a, rl.OpAlterConfigs, r.Resources,
		func(rr kmsg.AlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
			return rr.ResourceType, rr.ResourceName
		},
		func(resp kmsg.Response) *[]kmsg.AlterConfigsResponseResource {
			return &resp.(*kmsg.AlterConfigsResponse).Resources
		},
		func(d deniedResource) kmsg.AlterConfigsResponseResource {
			out := kmsg.NewAlterConfigsResponseResource()
			out.ResourceType, out.ResourceName, out.ErrorCode = d.typ, d.name, d.code
			return out
		})
	if post == nil {
		return nil, r, nil
	}
	cp := *r
	cp.Resources = kept
	return nil, &cp, post
}

func (a *access) incrementalAlterConfigs(r *kmsg.IncrementalAlterConfigsRequest) (kmsg.Response, kmsg.Request, func(kmsg.Response)) {
	kept, post := splitConfigs(a, rl.OpAlterConfigs, r.Resources,
		func(rr kmsg.IncrementalAlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
			return rr.ResourceType, rr.ResourceName
		},
		func(resp kmsg.Response) *[]kmsg.IncrementalAlterConfigsResponseResource {
			return &resp.(*kmsg.IncrementalAlterConfigsResponse).Resources
		},
		func(d deniedResource) kmsg.IncrementalAlterConfigsResponseResource {
			out := kmsg.NewIncrementalAlterConfigsResponseResource()
			out.ResourceType, out.ResourceName, out.ErrorCode = d.typ, d.name, d.code
			return out
		})
	if post == nil {
		return nil, r, nil
	}
	cp := *r
	cp.Resources = kept
	return nil, &cp, post
}

// topicNameByID looks a topic id up in the committed image.
func (l *Listener) topicNameByID(id [16]byte) string {
	name := ""
	l.node.FSM.View(func(im *fsm.Image) {
		if t := im.Topic(rl.TopicID(id)); t != nil {
			name = t.Name
		}
	})
	return name
}
