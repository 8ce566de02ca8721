package broker

import (
	"context"
	"net"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/authz"
	"github.com/ctrlquorum/ctrlquorum/controller/configmodel"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

// Cluster state for a data path. A broker that serves data obeys topic
// configs (min.insync.replicas, retention), dynamic broker configs and
// ACL rules, which live in the controllers' log; the agent has no copy
// of the log, and the control requests carry none of them. With
// Config.WatchClusterState the agent keeps a copy, read from the
// controller (DescribeConfigs of every topic it has a replica of and of
// its own broker resource with synonyms, DescribeAcls of every rule) over
// its forwarding connections:
//   - after every UpdateMetadata it accepts: the controller sends one to
//     every live broker after a config or ACL change commits, but the
//     sender coalesces the requests queued for a broker, so which one
//     carries the news cannot be told;
//   - when a LeaderAndIsr names a topic not read yet, before the Host is
//     told (a new topic's own configs, before the broker leads it);
//   - after a failed read, at the next heartbeat.
//
// The read is done before the control request is answered, and the
// controller answers a change only once every live broker answered what
// it sent after it (read your writes), so a config or ACL change is in
// force on every broker's data path when its client hears of it. Reads
// go on from the copy while a new one is read (the data path never waits
// for the controller).
//
// The agent decides nothing with it: TopicLevels hands the configs to
// configmodel's resolvers, Authorize the rules to authz, as the voters
// use them.

// clusterState is one reading of the cluster state; never changed once
// stored.
type clusterState struct {
	topics  map[string]describedTopic
	dynamic dynamicConfigs
	rules   []rl.AclRule
}

type describedTopic struct {
	id      rl.TopicID
	configs []rl.ConfigEntry
}

// dynamicConfigs are dynamic broker configs by resource ("" the cluster
// default) and key: configmodel.Dynamic.
type dynamicConfigs map[string]map[string]string

func (d dynamicConfigs) Config(broker, key string) (string, bool) {
	v, ok := d[broker][key]
	return v, ok
}

var emptyClusterState = &clusterState{}

func (a *Agent) clusterState() *clusterState {
	if st := a.state.Load(); st != nil {
		return st
	}
	return emptyClusterState
}

// TopicLevels are the levels a topic config of topic resolves from on
// this broker (configmodel.ResolveTopic): the topic's own configs, this
// broker's dynamic configs, the cluster-wide default and the broker's
// static settings. Without WatchClusterState only the static ones.
func (a *Agent) TopicLevels(topic string) configmodel.Levels {
	st := a.clusterState()
	return configmodel.Levels{Topic: st.topics[topic].configs, Broker: strconv.Itoa(int(a.cfg.BrokerID)),
		Dynamic: st.dynamic, Static: a.cfg.StaticConfigs}
}

// Authorize answers whether the client on c may do op on a resource, as
// a voter's listener answers it: the rules are enforced once SASL is on,
// once a rule exists, or with Config.Authorize; a voter's certificate
// may do anything, a broker's may do cluster actions (replicating);
// super users anything; otherwise the ACL rules decide (authz). The
// caller logs a denial it acts on.
func (a *Agent) Authorize(c *kafkawire.Conn, op rl.AclOperation, rt rl.ResourceType, name string) authz.Decision {
	st := a.clusterState()
	if !a.cfg.Authorize && !a.saslEnabled() && len(st.rules) == 0 {
		return authz.Decision{Allowed: true, Reason: "no authorizer"}
	}
	if c != nil && c.TLS != nil && len(c.TLS.PeerCertificates) > 0 && clientAuthOf(c).user == "" {
		if id, err := tlsconfig.PeerIdentity(c.TLS); err == nil {
			if id.IsVoter() {
				return authz.Decision{Allowed: true, Reason: "a voter's certificate"}
			}
			if id.IsBroker() && op == rl.OpClusterAction && rt == rl.ResourceCluster {
				return authz.Decision{Allowed: true, Reason: "a broker's certificate"}
			}
		}
	}
	host := ""
	if c != nil {
		if ta, ok := c.Remote.(*net.TCPAddr); ok {
			host = ta.IP.String()
		}
	}
	return authz.Authorize(st.rules, a.supers, authz.Request{Principal: principal(c), Host: host, Operation: op,
		ResourceType: rt, ResourceName: name})
}

// watchAfterUpdateMetadata reads the cluster state again (see above).
func (a *Agent) watchAfterUpdateMetadata(ctx context.Context) {
	if !a.cfg.WatchClusterState {
		return
	}
	a.refreshClusterStateNow(ctx, nil)
}

// watchBeforeLeaderAndIsr reads the cluster state again, with the
// topics of req, if req names a topic not read yet.
func (a *Agent) watchBeforeLeaderAndIsr(ctx context.Context, req *kmsg.LeaderAndISRRequest) {
	if !a.cfg.WatchClusterState {
		return
	}
	st := a.clusterState()
	extra := map[string]rl.TopicID{}
	for _, t := range req.TopicStates {
		if d, ok := st.topics[t.Topic]; !ok || d.id != rl.TopicID(t.TopicID) {
			extra[t.Topic] = rl.TopicID(t.TopicID)
		}
	}
	for _, p := range req.PartitionStates {
		if _, ok := st.topics[p.Topic]; !ok {
			extra[p.Topic] = rl.TopicID{}
		}
	}
	if len(extra) > 0 {
		a.refreshClusterStateNow(ctx, extra)
	}
}

// refreshClusterStateNow reads the cluster state, with the topics of
// extra beside those of the metadata cache, bounded by the request
// timeout; a failure is retried at the next heartbeat.
func (a *Agent) refreshClusterStateNow(ctx context.Context, extra map[string]rl.TopicID) {
	a.stateRead.now(ctx, a, func(ctx context.Context) error { return a.refreshClusterState(ctx, extra) })
}

// retryClusterState reads the cluster state in the background if the
// last read failed.
func (a *Agent) retryClusterState() {
	if a.cfg.WatchClusterState {
		a.stateRead.retry(a)
	}
}

// refreshClusterState reads the configs of every topic in the metadata
// cache with a replica on this broker and of those in extra, this
// broker's dynamic configs and the cluster default, and every ACL rule,
// and stores them as one new clusterState.
func (a *Agent) refreshClusterState(ctx context.Context, extra map[string]rl.TopicID) error {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if a.fwd == nil {
		return nil
	}
	a.mu.RLock()
	ids := make(map[string]rl.TopicID, len(a.topics))
	for name, t := range a.topics {
		for _, p := range t.parts {
			if slices.Contains(p.Replicas, a.cfg.BrokerID) {
				ids[name] = t.id
				break
			}
		}
	}
	a.mu.RUnlock()
	for name, id := range extra {
		if _, ok := ids[name]; !ok {
			ids[name] = id
		}
	}
	self := strconv.Itoa(int(a.cfg.BrokerID))

	creq := kmsg.NewPtrDescribeConfigsRequest()
	creq.IncludeSynonyms = true
	br := kmsg.NewDescribeConfigsRequestResource()
	br.ResourceType, br.ResourceName = kmsg.ConfigResourceTypeBroker, self
	creq.Resources = append(creq.Resources, br)
	names := make([]string, 0, len(ids))
	for name := range ids {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, name
		creq.Resources = append(creq.Resources, r)
	}
	cresp, err := a.askController(ctx, creq)
	if err != nil {
		return err
	}
	st := &clusterState{topics: make(map[string]describedTopic, len(ids)), dynamic: dynamicConfigs{}}
	for _, r := range cresp.(*kmsg.DescribeConfigsResponse).Resources {
		switch {
		case r.ResourceType == kmsg.ConfigResourceTypeBroker && r.ResourceName == self:
			if r.ErrorCode != 0 {
				return kerr.ErrorForCode(r.ErrorCode)
			}
			for _, c := range r.Configs {
				for _, s := range c.ConfigSynonyms {
					switch s.Source {
					case kmsg.ConfigSourceDynamicBrokerConfig:
						st.dynamic.set(self, s.Name, s.Value)
					case kmsg.ConfigSourceDynamicDefaultBrokerConfig:
						st.dynamic.set("", s.Name, s.Value)
					}
				}
			}
		case r.ResourceType == kmsg.ConfigResourceTypeTopic:
			if r.ErrorCode == kerr.UnknownTopicOrPartition.Code {
				continue // deleted meanwhile
			}
			if r.ErrorCode != 0 {
				return kerr.ErrorForCode(r.ErrorCode)
			}
			d := describedTopic{id: ids[r.ResourceName]}
			for _, c := range r.Configs {
				if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
					d.configs = append(d.configs, rl.ConfigEntry{Key: c.Name, Value: *c.Value})
				}
			}
			st.topics[r.ResourceName] = d
		}
	}

	areq := kmsg.NewPtrDescribeACLsRequest()
	areq.ResourceType, areq.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	areq.Operation, areq.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	aresp, err := a.askController(ctx, areq)
	if err != nil {
		return err
	}
	ar := aresp.(*kmsg.DescribeACLsResponse)
	if ar.ErrorCode != 0 {
		return kerr.ErrorForCode(ar.ErrorCode)
	}
	for _, res := range ar.Resources {
		for _, acl := range res.ACLs {
			st.rules = append(st.rules, rl.AclRule{Principal: acl.Principal, Host: acl.Host,
				ResourceType: rl.ResourceType(res.ResourceType), ResourceName: res.ResourceName,
				PatternType: rl.PatternType(res.ResourcePatternType), Operation: rl.AclOperation(acl.Operation),
				Permission: rl.AclPermission(acl.PermissionType)})
		}
	}
	a.state.Store(st)
	a.log.Debug("read topic configs and ACLs from the controller", "topics", len(st.topics), "rules", len(st.rules))
	return nil
}

func (d dynamicConfigs) set(resource, key string, v *string) {
	if v == nil {
		return
	}
	if d[resource] == nil {
		d[resource] = map[string]string{}
	}
	d[resource][key] = *v
}

// askController sends a read to the active controller over one of the
// forwarding connections.
func (a *Agent) askController(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	var ctl *kafkaclient.Controller
	select {
	case ctl = <-a.fwd.idle:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { a.fwd.idle <- ctl }()
	return ctl.Do(ctx, req, nil)
}
