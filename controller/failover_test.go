package controller

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// partitionDigest hashes what the last-ISR case (docs/statemachines.md,
// the case the controller exists for) compares between its two cases:
// leader, ISR, epochs, partition state and replica states. Broker and
// controller epochs differ between the cases by construction (one more
// controller election in case 2), so they are left out.
func partitionDigest(p fsm.Partition) [32]byte {
	h := sha256.New()
	w := func(v int64) { _ = binary.Write(h, binary.BigEndian, v) }
	for _, s := range [][]int32{p.Replicas, p.ISR} {
		w(int64(len(s)))
		for _, b := range s {
			w(int64(b))
		}
	}
	w(int64(p.Leader))
	w(int64(p.LeaderEpoch))
	w(int64(p.PartitionEpoch))
	w(int64(p.State))
	for _, s := range p.ReplicaStates {
		w(int64(s))
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// runSection1Case plays the last-ISR case of docs/statemachines.md (the
// case the controller exists for): brokers A, B, C; one partition on A
// and B; stop A, then B. With controllerOnB the active controller runs in
// B's process, so stopping B also stops that voter.
// It returns the final partition as every remaining voter sees it.
func runSection1Case(t *testing.T, controllerOnB bool) (fsm.Partition, *nodeCluster, map[int32]int) {
	const session = 800 * time.Millisecond
	c := newNodeCluster(t, 3, session, nil)
	leaderIdx, _ := c.active(20 * time.Second)
	// Broker ids equal node ids: broker k runs beside voter k.
	leaderID := int32(leaderIdx + 1)
	var a, b, cc int32
	others := []int32{}
	for id := int32(1); id <= 3; id++ {
		if id != leaderID {
			others = append(others, id)
		}
	}
	if controllerOnB {
		b, a, cc = leaderID, others[0], others[1]
	} else {
		cc, a, b = leaderID, others[0], others[1]
	}
	nodeOf := map[int32]int{a: int(a - 1), b: int(b - 1), cc: int(cc - 1)}
	brokers := map[int32]*simBroker{}
	for _, id := range []int32{a, b, cc} {
		brokers[id] = c.startBroker(id, 1)
	}
	waitFor(t, 10*time.Second, "brokers unfenced", func() bool {
		i, _ := c.active(time.Second)
		return !c.brokerFenced(i, a) && !c.brokerFenced(i, b) && !c.brokerFenced(i, cc)
	})
	c.do("create topic", func(ctx context.Context, ctl *Controller) error {
		return ctl.CreateTopics(ctx, []CreateTopic{{Name: "t", NumPartitions: -1, ReplicationFactor: -1, Assignment: [][]int32{{a, b}}}}, false)[0].Err
	})

	// Stop A and wait until the active controller fenced it.
	brokers[a].stop()
	waitFor(t, 10*time.Second, "A fenced", func() bool { i, _ := c.active(10 * time.Second); return c.brokerFenced(i, a) })

	// Stop B: its broker, and in case 2 the active voter beside it.
	brokers[b].stop()
	if controllerOnB {
		c.stop(nodeOf[b])
	}
	waitFor(t, 15*time.Second, "B fenced", func() bool { i, _ := c.active(10 * time.Second); return c.brokerFenced(i, b) })
	c.converged(10 * time.Second)
	i, _ := c.active(time.Second)
	p, ok := c.partitionOn(i, "t", 0)
	if !ok {
		t.Fatal("partition vanished")
	}
	_ = brokers[cc]
	return p, c, map[int32]int{'A': int(a), 'B': int(b), 'C': int(cc)}
}

func TestFailoverSection1BothCasesEndIdentical(t *testing.T) {
	if testing.Short() {
		t.Skip("three-voter failover runs take seconds")
	}
	p1, _, ids1 := runSection1Case(t, false)
	p2, c2, ids2 := runSection1Case(t, true)
	t.Logf("case 1 (controller beside C): %+v", p1)
	t.Logf("case 2 (controller beside B): %+v", p2)

	for n, pc := range []struct {
		p   fsm.Partition
		ids map[int32]int
	}{{p1, ids1}, {p2, ids2}} {
		b := int32(pc.ids['B'])
		want := fmt.Sprintf("leader=-1 isr=[%d] state=%s", b, rl.OfflinePartition)
		got := fmt.Sprintf("leader=%d isr=%v state=%s", pc.p.Leader, pc.p.ISR, pc.p.State)
		if got != want {
			t.Errorf("case %d: %s, want %s", n+1, got, want)
		}
		for i, s := range pc.p.ReplicaStates {
			if s != rl.OfflineReplica {
				t.Errorf("case %d: replica on %d is %s", n+1, pc.p.Replicas[i], s)
			}
		}
	}
	// Broker ids differ between the runs (they follow who led raft), so
	// compare the digests with ids mapped to roles.
	norm := func(p fsm.Partition, ids map[int32]int) fsm.Partition {
		role := map[int32]int32{int32(ids['A']): 1, int32(ids['B']): 2, int32(ids['C']): 3}
		m := func(s []int32) []int32 {
			out := make([]int32, len(s))
			for i, v := range s {
				out[i] = role[v]
			}
			return out
		}
		q := p
		q.Replicas, q.ISR = m(p.Replicas), m(p.ISR)
		if p.Leader >= 0 {
			q.Leader = role[p.Leader]
		}
		return q
	}
	if partitionDigest(norm(p1, ids1)) != partitionDigest(norm(p2, ids2)) {
		t.Fatalf("the two cases ended differently:\n case 1 %+v\n case 2 %+v", p1, p2)
	}

	// Case 2 goes on: A returns first. It is not in the ISR and unclean
	// election is off, so it must not lead.
	a, b := int32(ids2['A']), int32(ids2['B'])
	c2.startBroker(a, 2)
	waitFor(t, 10*time.Second, "A unfenced", func() bool { i, _ := c2.active(time.Second); return !c2.brokerFenced(i, a) })
	i, _ := c2.active(time.Second)
	if p, _ := c2.partitionOn(i, "t", 0); p.Leader != rl.NoLeader {
		t.Fatalf("A became leader without being in the ISR: %+v", p)
	}
	// B returns (its voter too): it leads again, cleanly.
	c2.start(int(b-1), nil)
	c2.startBroker(b, 2)
	waitFor(t, 15*time.Second, "B leads again", func() bool {
		i, _ := c2.active(time.Second)
		p, _ := c2.partitionOn(i, "t", 0)
		return p.Leader == b
	})
	i, _ = c2.active(time.Second)
	p, _ := c2.partitionOn(i, "t", 0)
	if p.LeaderEpoch <= p2.LeaderEpoch || p.State != rl.OnlinePartition {
		t.Fatalf("after B returned: %+v", p)
	}
	c2.converged(10 * time.Second)
}
