package controller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// gatedLog lets a test stop a controller's proposals after a number of
// entries: once armed, the entry past the limit blocks until the gate
// opens, and it and every later one then fail as they would on a voter
// that lost leadership. The first limit entries go to raft and commit.
type gatedLog struct {
	Log
	armed   atomic.Bool
	limit   int64
	count   atomic.Int64
	blocked chan struct{}
	gate    chan struct{}
	once    sync.Once
}

func (g *gatedLog) Apply(data []byte, timeout time.Duration) raft.ApplyFuture {
	if g.armed.Load() && g.count.Add(1) > g.limit {
		g.once.Do(func() { close(g.blocked) })
		<-g.gate
		return &memFuture{err: raft.ErrLeadershipLost}
	}
	return g.Log.Apply(data, timeout)
}

// TestKillActiveMidElections fences a broker that leads about a third of
// 3000 partitions, with the controller's work split into small log entries,
// and stops the active voter after a few of them committed. The new active
// controller must finish the work from the log alone, and across everything
// any broker was ever sent, no partition may have two leaders in one
// leader epoch.
func TestKillActiveMidElections(t *testing.T) {
	if testing.Short() {
		t.Skip("three-voter run")
	}
	const session = time.Second
	var gates sync.Map // node id -> *gatedLog
	c := newNodeCluster(t, 3, session, func(cc *Config) {
		g := &gatedLog{Log: cc.Log, limit: 5, blocked: make(chan struct{}), gate: make(chan struct{})}
		gates.Store(cc.NodeID, g)
		cc.Log = g
		cc.MaxRecordsPerEntry = 100
	})
	activeIdx, _ := c.active(20 * time.Second)
	// Brokers 1..3 beside voters 1..3; the one to fail is beside a
	// follower, so only the fence is in flight when the voter stops.
	victim := int32((activeIdx+1)%3 + 1)
	brokers := map[int32]*simBroker{}
	for id := int32(1); id <= 3; id++ {
		brokers[id] = c.startBroker(id, 1)
	}
	waitFor(t, 10*time.Second, "brokers unfenced", func() bool {
		i, _ := c.active(time.Second)
		return !c.brokerFenced(i, 1) && !c.brokerFenced(i, 2) && !c.brokerFenced(i, 3)
	})
	for n := 0; n < 30; n++ {
		c.do("create", func(ctx context.Context, ctl *Controller) error {
			return ctl.CreateTopics(ctx, []CreateTopic{{Name: fmt.Sprintf("t%02d", n), NumPartitions: 100, ReplicationFactor: 3}}, false)[0].Err
		})
	}
	led := 0
	_, n := c.active(time.Second)
	n.FSM.View(func(im *fsm.Image) {
		im.ForEachTopic(func(t *fsm.Topic) bool {
			for i := int32(0); i < im.PartitionCount(t.ID); i++ {
				if im.Partition(t.ID, i).Leader == victim {
					led++
				}
			}
			return true
		})
	})
	if led < 500 {
		t.Fatalf("victim leads only %d partitions", led)
	}

	// Arm the active node's log, let the victim's session lapse, and stop
	// the active voter once the fence has committed a few entries.
	activeIdx, _ = c.active(time.Second)
	gv, _ := gates.Load(int32(activeIdx + 1))
	g := gv.(*gatedLog)
	g.armed.Store(true)
	brokers[victim].stop()
	select {
	case <-g.blocked:
	case <-time.After(20 * time.Second):
		t.Fatal("the fence never reached the gate")
	}
	close(g.gate)
	c.stop(activeIdx)
	t.Logf("stopped voter %d after %d entries of the fence of broker %d (leader of %d partitions)", activeIdx+1, g.limit, victim, led)

	// The new active controller finishes the work.
	waitFor(t, 20*time.Second, "work finished", func() bool {
		i, n := c.active(10 * time.Second)
		_ = i
		done := true
		n.FSM.View(func(im *fsm.Image) {
			if b := im.Broker(victim); b == nil || !b.Fenced {
				done = false
				return
			}
			im.ForEachTopic(func(t *fsm.Topic) bool {
				for i := int32(0); i < im.PartitionCount(t.ID); i++ {
					p := im.Partition(t.ID, i)
					if p.Leader == victim || p.Leader == rl.NoLeader || p.InISR(victim) || p.State != rl.OnlinePartition ||
						p.ReplicaState(victim) != rl.OfflineReplica {
						done = false
						return false
					}
				}
				return true
			})
		})
		return done
	})
	c.converged(10 * time.Second)

	// One leader per (partition, leader epoch) in everything ever sent.
	type key struct {
		topic string
		part  int32
		epoch int32
	}
	leaders := map[key]int32{}
	sent := 0
	for _, s := range c.senders {
		for _, b := range s.Brokers() {
			for _, r := range s.Sent(b) {
				var states []PartitionState
				if r.LeaderAndIsr != nil {
					for _, ps := range r.LeaderAndIsr.Partitions {
						states = append(states, *ps)
					}
				}
				if r.UpdateMetadata != nil {
					states = append(states, r.UpdateMetadata.Partitions...)
				}
				for _, ps := range states {
					sent++
					k := key{ps.Topic, ps.Partition, ps.LeaderEpoch}
					if l, ok := leaders[k]; ok && l != ps.Leader {
						t.Fatalf("%s-%d leader epoch %d: leaders %d and %d", ps.Topic, ps.Partition, ps.LeaderEpoch, l, ps.Leader)
					}
					leaders[k] = ps.Leader
				}
			}
		}
	}
	if sent == 0 {
		t.Fatal("no partition state was sent at all")
	}
	t.Logf("checked %d partition states in requests, %d distinct (partition, leader epoch)", sent, len(leaders))
}
