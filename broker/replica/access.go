package replica

import (
	"github.com/ctrlquorum/ctrlquorum/broker"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// Authorization of the data APIs, as Kafka's brokers do it, with the
// rules the agent read from the controller (broker.Agent.Authorize):
// Produce needs WRITE on the topic, a consumer's Fetch READ, ListOffsets
// DESCRIBE (TOPIC_AUTHORIZATION_FAILED otherwise, per partition); a
// follower's Fetch needs CLUSTER_ACTION on the cluster (each partition
// TOPIC_AUTHORIZATION_FAILED otherwise, as Kafka answers), and
// OffsetsForLeaderEpoch CLUSTER_ACTION or else DESCRIBE on the topic.
// Where the cluster enforces no rules everything is allowed.

// topicAccess answers, per topic, once per request.
type topicAccess struct {
	m    *Manager
	c    *kafkawire.Conn
	op   rl.AclOperation
	seen map[string]bool
}

func (m *Manager) topicAccess(c *kafkawire.Conn, op rl.AclOperation) *topicAccess {
	return &topicAccess{m: m, c: c, op: op, seen: map[string]bool{}}
}

func (t *topicAccess) allowed(topic string) bool {
	ok, done := t.seen[topic]
	if !done {
		ok = t.m.authorize(t.c, t.op, rl.ResourceTopic, topic, false)
		t.seen[topic] = ok
	}
	return ok
}

// authorize asks the agent; without one, nothing is enforced. A denial
// is logged unless quiet (a question whose no is not a refusal).
func (m *Manager) authorize(c *kafkawire.Conn, op rl.AclOperation, rt rl.ResourceType, name string, quiet bool) bool {
	a := m.getAgent()
	if a == nil {
		return true
	}
	d := a.Authorize(c, op, rt, name)
	if !d.Allowed && !quiet {
		remote := ""
		if c != nil && c.Remote != nil {
			remote = c.Remote.String()
		}
		m.log.Info("request denied", "principal", broker.Principal(c), "operation", op.String(), "resource", rt.String()+":"+name, "reason", d.Reason, "remote", remote)
	}
	return d.Allowed
}

func (m *Manager) clusterAction(c *kafkawire.Conn, quiet bool) bool {
	return m.authorize(c, rl.OpClusterAction, rl.ResourceCluster, rl.ClusterResourceName, quiet)
}
