package broker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// The deletion tests run the end-to-end cluster (three voters, three
// broker agents) and check what "deleted" means for brokers: a topic
// being deleted leaves every live broker's metadata at once, and once the
// deletion is done no broker caches it, including one that was down
// during it and across a controller failover.

// startDeletionCluster starts the cluster with its three brokers
// registered and unfenced, and a topic "keep" that is not deleted.
func startDeletionCluster(t *testing.T) (*e2eCluster, *kadm.Client, context.Context) {
	if testing.Short() {
		t.Skip("three raft voters and three brokers over TCP")
	}
	c := newE2ECluster(t, 2*time.Second)
	c.active()
	c.startBrokers(3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	// The admin client knows only the brokers, as a client should: the
	// deletions go through a broker, forwarded to the controller.
	adm, _ := c.brokerAdmin()
	c.create(ctx, adm, "keep", 2, 3)
	return c, adm, ctx
}

// create creates a topic, retrying through a failover (a retry of a
// create that went through finds the topic), and waits until every
// broker's cache has it as the image does.
func (c *e2eCluster) create(ctx context.Context, adm *kadm.Client, topic string, partitions int32, rf int16) {
	c.t.Helper()
	for {
		r, err := adm.CreateTopic(ctx, partitions, rf, nil, topic)
		if err == nil {
			err = r.Err
		}
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			break
		}
		if ctx.Err() != nil {
			c.t.Fatalf("create %s: %v", topic, err)
		}
		c.t.Logf("create %s: %v; retrying", topic, err)
		time.Sleep(50 * time.Millisecond)
	}
	c.waitAgree(topic)
}

// deleteTopic asks for a deletion, retrying through a failover.
func (c *e2eCluster) deleteTopic(ctx context.Context, adm *kadm.Client, topic string) {
	c.t.Helper()
	for {
		rs, err := adm.DeleteTopics(ctx, topic)
		if err == nil {
			err = rs[topic].Err
		}
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			c.t.Fatalf("delete %s: %v", topic, err)
		}
		c.t.Logf("delete %s: %v; retrying", topic, err)
		time.Sleep(50 * time.Millisecond)
	}
}

// waitRemoved waits until the active controller's image no longer has
// the topic: its deletion is finished.
func (c *e2eCluster) waitRemoved(topic string) {
	c.t.Helper()
	waitFor(c.t, topic+" removed from the image", func() bool {
		parts, _ := c.image(topic)
		return len(parts) == 0
	})
}

// waitForgotten waits until an agent neither caches the topic nor lists
// it to a client asking for every topic.
func (c *e2eCluster) waitForgotten(a *broker.Agent, topic string) {
	c.t.Helper()
	waitFor(c.t, fmt.Sprintf("broker %d to forget %s", a.BrokerID(), topic), func() bool {
		if slices.Contains(cachedTopics(a), topic) {
			return false
		}
		_, listed := allTopics(c.t, a.Addr())[topic]
		return !listed
	})
}

// checkDeleted checks, once a deletion finished, that no agent serves the
// topic, that the replicas the image had for it were deleted from the
// brokers' hosts, and that the topics left are served as the image has
// them.
func (c *e2eCluster) checkDeleted(topic string, hosted map[int32][]int32, others ...string) {
	c.t.Helper()
	for id, a := range c.agents {
		c.waitForgotten(a, topic)
		checkGone(c.t, a, topic)
		host := a.Host().(*broker.MemoryHost)
		for _, p := range hosted[id] {
			if r, ok := host.Replica(topic, p); ok {
				c.t.Fatalf("broker %d still runs %s-%d: %+v", id, topic, p, r)
			}
			if !slices.Contains(host.Deleted(), broker.TopicPartition{Topic: topic, Partition: p}) {
				c.t.Fatalf("broker %d never deleted %s-%d: %v", id, topic, p, host.Deleted())
			}
		}
	}
	for _, o := range others {
		c.waitAgree(o)
		c.checkClientView(o)
	}
	c.checkInvariants()
}

// hostedBy maps each broker to the partitions of topic it hosts in the
// image.
func (c *e2eCluster) hostedBy(topic string) map[int32][]int32 {
	parts, _ := c.image(topic)
	out := map[int32][]int32{}
	for i, p := range parts {
		for _, b := range p.replicas {
			out[b] = append(out[b], int32(i))
		}
	}
	return out
}

func TestDeleteTopicReachesEveryBroker(t *testing.T) {
	c, adm, ctx := startDeletionCluster(t)
	c.create(ctx, adm, "g", 3, 3)
	hosted := c.hostedBy("g")
	c.deleteTopic(ctx, adm, "g")
	c.waitRemoved("g")
	c.checkDeleted("g", hosted, "keep")

	// The name is free again: a new topic under it reaches every broker
	// with its own id.
	c.create(ctx, adm, "g", 1, 3)
	c.checkClientView("g")
}

func TestDeleteTopicWhileABrokerIsDown(t *testing.T) {
	c, adm, ctx := startDeletionCluster(t)
	c.create(ctx, adm, "g", 3, 3)
	hosted := c.hostedBy("g")

	c.stopAgent(3)
	waitFor(t, "broker 3 fenced", func() bool { return c.liveBrokers() == 2 })
	c.deleteTopic(ctx, adm, "g")
	// The live brokers forget it at once; the deletion itself waits for
	// broker 3, whose replicas cannot be deleted while it is down.
	for _, a := range c.agents {
		c.waitForgotten(a, "g")
	}

	// Broker 3 comes back (a new process, as after a crash): it catches
	// up, its replicas are deleted, and it never serves the topic.
	a3 := c.startAgent(3)
	waitFor(t, "broker 3 unfenced again", func() bool { s := a3.Status(); return s.Registered && !s.Fenced })
	c.waitRemoved("g")
	c.checkDeleted("g", map[int32][]int32{3: hosted[3]}, "keep")
	for _, r := range a3.ControlLog() {
		if r.Accepted && r.Partition >= 0 && r.Topic == "g" && r.Key != broker.KeyStopReplica && !r.Deleted {
			t.Fatalf("broker 3 was given g, which was being deleted, as a live topic: %v", r)
		}
	}
}

func TestDeleteTopicAcrossFailover(t *testing.T) {
	c, adm, ctx := startDeletionCluster(t)
	c.create(ctx, adm, "g", 3, 3)
	hosted := c.hostedBy("g")
	old := c.active()
	_, epoch := c.nodes[old].Controller.Active()

	// Broker 1 caches a topic no controller has, as a broker that missed
	// a deletion would: a control request at the current controller epoch.
	a1 := c.agents[1]
	ctl := controlClient(t, a1.Addr(), 0)
	ghost := part{topic: "ghost", id: rl.TopicID{0x99}, p: 0, leader: 1, le: 1, pe: 1, isr: []int32{1}, reps: []int32{1}}
	var brokers []liveBroker
	for _, b := range a1.Brokers() {
		brokers = append(brokers, liveBroker{b.ID, fmt.Sprintf("%s:%d", b.Host, b.Port)})
	}
	if resp := send[*kmsg.UpdateMetadataResponse](t, ctl, um(epoch, -1, brokers, ghost)); resp.ErrorCode != 0 {
		t.Fatalf("UpdateMetadata for the ghost topic: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if _, ok := allTopics(t, a1.Addr())["ghost"]; !ok {
		t.Fatal("broker 1 does not serve the ghost topic: the test would prove nothing")
	}

	// The deletion starts, and the active controller goes at once: the
	// next one carries the deletion on, and its catch-up of every broker
	// names only the topics it has.
	c.deleteTopic(ctx, adm, "g")
	c.listeners[old].Close()
	c.nodes[old].Shutdown()
	c.listeners[old], c.nodes[old] = nil, nil
	next := c.active()
	if _, newEpoch := c.nodes[next].Controller.Active(); newEpoch <= epoch {
		t.Fatalf("controller epoch %d after %d", newEpoch, epoch)
	}
	c.waitRemoved("g")
	c.checkDeleted("g", hosted, "keep")
	c.waitForgotten(a1, "ghost")
	checkGone(t, a1, "ghost")

	// New work reaches every broker from the new controller.
	c.create(ctx, adm, "after", 2, 3)
	c.checkClientView("after")
	c.checkInvariants()
}
