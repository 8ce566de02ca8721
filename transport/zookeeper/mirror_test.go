package zookeeper

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	"github.com/ctrlquorum/ctrlquorum/transport/zookeeper/zktest"
)

// zkDiff compares, with its own parsing of Kafka's JSON, what ZooKeeper
// holds with node's image: live brokers, topics (assignment, topic id,
// reassignment), partition states (leader, leader epoch, ISR), configs,
// pending deletions, /controller and /controller_epoch. It returns the
// differences.
func zkDiff(r *rawZK, node *controller.Node) []string {
	var diffs []string
	add := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }
	node.FSM.View(func(im *fsm.Image) {
		epoch, holder := im.ControllerEpoch()
		if v, _ := r.get("/controller_epoch"); v != strconv.Itoa(int(epoch)) {
			add("/controller_epoch %q, image epoch %d", v, epoch)
		}
		var ctl struct {
			BrokerID int32 `json:"brokerid"`
		}
		if v, ok := r.get("/controller"); !ok || json.Unmarshal([]byte(v), &ctl) != nil || ctl.BrokerID != holder {
			add("/controller %q, image holder %d", v, holder)
		}

		var live []string
		for _, b := range im.Brokers() {
			if !b.Live() {
				continue
			}
			live = append(live, strconv.Itoa(int(b.ID)))
			v, _ := r.get("/brokers/ids/" + strconv.Itoa(int(b.ID)))
			var z struct {
				Endpoints []string `json:"endpoints"`
				Rack      *string  `json:"rack"`
			}
			_ = json.Unmarshal([]byte(v), &z)
			var want []string
			for _, e := range b.Endpoints {
				want = append(want, fmt.Sprintf("%s://%s:%d", e.Name, e.Host, e.Port))
			}
			rack := ""
			if z.Rack != nil {
				rack = *z.Rack
			}
			if fmt.Sprint(z.Endpoints) != fmt.Sprint(want) || rack != b.Rack {
				add("broker %d: znode %s, image %v rack %q", b.ID, v, want, b.Rack)
			}
		}
		sort.Strings(live)
		if got := r.children("/brokers/ids"); fmt.Sprint(got) != fmt.Sprint(live) {
			add("/brokers/ids %v, live brokers %v", got, live)
		}

		var names, deleting []string
		for _, t := range im.Topics() {
			names = append(names, t.Name)
			if t.Deleting {
				deleting = append(deleting, t.Name)
			}
			v, _ := r.get("/brokers/topics/" + t.Name)
			var z struct {
				Partitions map[string][]int32 `json:"partitions"`
				Adding     map[string][]int32 `json:"adding_replicas"`
				Removing   map[string][]int32 `json:"removing_replicas"`
				TopicID    string             `json:"topic_id"`
			}
			if err := json.Unmarshal([]byte(v), &z); err != nil {
				add("topic %s: %q: %v", t.Name, v, err)
				continue
			}
			if z.TopicID != base64.RawURLEncoding.EncodeToString(t.ID[:]) {
				add("topic %s: topic_id %q, image %s", t.Name, z.TopicID, t.ID)
			}
			n := int(im.PartitionCount(t.ID))
			if len(z.Partitions) != n {
				add("topic %s: %d partitions in znode, %d in image", t.Name, len(z.Partitions), n)
			}
			if got := r.children("/brokers/topics/" + t.Name + "/partitions"); len(got) != n {
				add("topic %s: partition znodes %v, %d in image", t.Name, got, n)
			}
			for i := int32(0); i < int32(n); i++ {
				p := im.Partition(t.ID, i)
				if p == nil {
					continue
				}
				k := strconv.Itoa(int(i))
				if fmt.Sprint(z.Partitions[k]) != fmt.Sprint(p.Replicas) {
					add("%s-%d: replicas %v, image %v", t.Name, i, z.Partitions[k], p.Replicas)
				}
				ra := t.Reassignments[i]
				if fmt.Sprint(z.Adding[k]) != fmt.Sprint(ra.Adding) || fmt.Sprint(z.Removing[k]) != fmt.Sprint(ra.Removing) {
					add("%s-%d: adding %v removing %v, image %+v", t.Name, i, z.Adding[k], z.Removing[k], ra)
				}
				sv, _ := r.get(fmt.Sprintf("/brokers/topics/%s/partitions/%d/state", t.Name, i))
				var s struct {
					Leader      int32   `json:"leader"`
					LeaderEpoch int32   `json:"leader_epoch"`
					ISR         []int32 `json:"isr"`
				}
				if err := json.Unmarshal([]byte(sv), &s); err != nil || s.Leader != p.Leader || s.LeaderEpoch != p.LeaderEpoch || fmt.Sprint(s.ISR) != fmt.Sprint(p.ISR) {
					add("%s-%d: state %s, image leader %d epoch %d isr %v", t.Name, i, sv, p.Leader, p.LeaderEpoch, p.ISR)
				}
			}
			cv, _ := r.get("/config/topics/" + t.Name)
			var cz struct {
				Config map[string]string `json:"config"`
			}
			_ = json.Unmarshal([]byte(cv), &cz)
			want := map[string]string{}
			for _, e := range t.Configs {
				want[e.Key] = e.Value
			}
			if fmt.Sprint(cz.Config) != fmt.Sprint(want) {
				add("topic %s: config %s, image %v", t.Name, cv, want)
			}
		}
		if got := r.children("/brokers/topics"); fmt.Sprint(got) != fmt.Sprint(names) {
			add("/brokers/topics %v, image %v", got, names)
		}
		if got := r.children("/admin/delete_topics"); fmt.Sprint(got) != fmt.Sprint(deleting) {
			add("/admin/delete_topics %v, image %v", got, deleting)
		}
	})
	return diffs
}

func waitMirrorSynced(t *testing.T, m *Mirror, node *controller.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := m.WaitSynced(ctx, node.FSM.AppliedIndex()); err != nil {
		t.Fatalf("%v (stats %+v)", err, m.Stats())
	}
}

func TestMirrorCatchesUpAfterZooKeeperRestart(t *testing.T) {
	srv := zktest.Start(t, "preAllocSize=4096")
	addr := srv.Addr() + "/kafka"
	r := dialRaw(t, addr)
	writeKafkaLayout(r)

	c := newCluster(t, 1, time.Minute, "", false)
	_, node := c.active(20 * time.Second)
	// Each call has a deadline of its own: the waits for the mirror in
	// between have theirs, and a deadline for the whole test ran out on a
	// loaded host.
	step := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	if _, err := Migrate(step(), addr, node, false, nil); err != nil {
		t.Fatal(err)
	}
	m, err := StartMirror(MirrorConfig{Addr: addr, Node: node, RetryInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	waitMirrorSynced(t, m, node)
	if d := zkDiff(r, node); len(d) > 0 {
		t.Fatalf("after the first reconcile ZooKeeper differs from the image:\n%v", d)
	}
	// The import moved the stale partition's leadership: ZooKeeper shows it.
	if v, _ := r.get("/brokers/topics/stale/partitions/0/state"); v != `{"controller_epoch":8,"leader":1,"version":1,"leader_epoch":4,"isr":[1]}` {
		t.Errorf("stale-0 state znode %s", v)
	}

	// ZooKeeper goes away; the controller carries on.
	srv.Stop()
	ctl := node.Controller
	if res := ctl.CreateTopics(step(), []controller.CreateTopic{{Name: "fresh", NumPartitions: -1, ReplicationFactor: -1, Assignment: [][]int32{{1, 2}, {2, 3}, {3, 1}}}}, false); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if res := ctl.CreatePartitions(step(), []controller.CreatePartitions{{Topic: "orders", Count: 5, Assignment: [][]int32{{1, 2, 3}, {2, 3, 1}}}}, false); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if err := ctl.IncrementalAlterTopicConfigs(step(), "orders", []controller.AlterConfig{{Key: "retention.ms", Op: controller.ConfigDelete}}, false); err != nil {
		t.Fatal(err)
	}
	var epoch3 int64
	node.FSM.View(func(im *fsm.Image) { epoch3 = im.Broker(3).Epoch })
	if _, err := ctl.Heartbeat(step(), controller.Heartbeat{BrokerID: 3, BrokerEpoch: epoch3, MetadataOffset: node.FSM.AppliedIndex(), WantFence: true}); err != nil {
		t.Fatal(err)
	}
	if res := ctl.DeleteTopics(step(), []controller.DeleteTopic{{Name: "legacy"}}); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	applied := node.FSM.AppliedIndex()
	if s := m.Stats(); s.Synced >= applied {
		t.Fatalf("mirror claims to be synced through %d with ZooKeeper down (applied %d): %+v", s.Synced, applied, s)
	}

	if err := srv.StartAgain(); err != nil {
		t.Fatal(err)
	}
	r = dialRaw(t, addr)
	waitMirrorSynced(t, m, node)
	if d := zkDiff(r, node); len(d) > 0 {
		t.Fatalf("after ZooKeeper came back the mirror left differences:\n%v", d)
	}
	if _, ok := r.get("/brokers/ids/3"); ok {
		t.Error("the fenced broker 3 is still registered in ZooKeeper")
	}
	if _, ok := r.get("/admin/delete_topics/legacy"); !ok {
		t.Error("legacy's deletion is not queued in ZooKeeper")
	}
	if s := m.Stats(); s.Reconciles < 2 {
		t.Errorf("expected a full reconcile after the restart: %+v", s)
	}

	// Incremental again: one more change goes through without a restart.
	if res := ctl.CreatePartitions(step(), []controller.CreatePartitions{{Topic: "fresh", Count: 4, Assignment: [][]int32{{1, 2}}}}, false); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	waitMirrorSynced(t, m, node)
	if d := zkDiff(r, node); len(d) > 0 {
		t.Fatalf("incremental write left differences:\n%v", d)
	}
}

func TestMirrorFencesDeposedNode(t *testing.T) {
	addr, _ := chrootAddr(t)
	r := dialRaw(t, addr)
	c := newCluster(t, 3, 2*time.Second, addr, false)
	for id := int32(1); id <= 3; id++ {
		c.startBroker(id, 1)
	}
	waitFor(t, 10*time.Second, "brokers unfenced", func() bool {
		i, _ := c.active(time.Second)
		return !c.brokerFenced(i, 1) && !c.brokerFenced(i, 2) && !c.brokerFenced(i, 3)
	})
	c.do("create topic", func(ctx context.Context, ctl *controller.Controller) error {
		return ctl.CreateTopics(ctx, []controller.CreateTopic{{Name: "t", NumPartitions: 3, ReplicationFactor: 3}}, false)[0].Err
	})
	oldIdx, old := c.active(10 * time.Second)
	oldMirror := c.mirror(oldIdx)
	waitMirrorSynced(t, oldMirror, old)
	oldFence := oldMirror.Stats()
	if oldFence.Epoch <= 0 || oldFence.Version < 0 {
		t.Fatalf("active node's mirror holds no claim: %+v", oldFence)
	}

	// The active voter stops; its mirror's writer is held back so that
	// it can make a late write once another node has taken over.
	c.mu.Lock()
	c.mirrors[oldIdx] = nil
	c.mu.Unlock()
	oldMirror.fsm.SetCommitListener(nil)
	close(oldMirror.stop)
	<-oldMirror.done
	defer oldMirror.cl.close()
	c.stop(oldIdx)

	newIdx, node := c.active(20 * time.Second)
	newMirror := c.mirror(newIdx)
	waitMirrorSynced(t, newMirror, node)
	claim := newMirror.Stats()
	if claim.Epoch <= oldFence.Epoch || claim.Version <= oldFence.Version {
		t.Fatalf("new claim %+v does not supersede the old %+v", claim, oldFence)
	}
	if d := zkDiff(r, node); len(d) > 0 {
		t.Fatalf("new controller's mirror left differences:\n%v", d)
	}
	path := statePath("t", 0)
	before, _ := r.get(path)

	// The deposed node's late write fails on the fence and changes nothing.
	late := []op{{kind: 's', path: path, data: []byte(`{"controller_epoch":1,"leader":99,"version":1,"leader_epoch":0,"isr":[99]}`), key: "late"}}
	err := oldMirror.apply(fence{epoch: oldFence.Epoch, version: oldFence.Version}, late)
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("late write: %v, want ErrFenced", err)
	}
	if after, _ := r.get(path); after != before {
		t.Fatalf("fenced write changed %s: %s -> %s", path, before, after)
	}
	// Its claim path refuses too: ZooKeeper holds a newer epoch.
	if _, err := oldMirror.claim(oldFence.Epoch); !errors.Is(err, ErrFenced) {
		t.Fatalf("stale claim: %v, want ErrFenced", err)
	}
	var ctl struct {
		BrokerID int32 `json:"brokerid"`
	}
	v, _ := r.get("/controller")
	if err := json.Unmarshal([]byte(v), &ctl); err != nil || ctl.BrokerID != int32(newIdx+1) {
		t.Fatalf("/controller %s, want node %d", v, newIdx+1)
	}
}

// section1Case plays the last-ISR case (docs/statemachines.md, the case
// the controller exists for: brokers A, B, C; a partition on A and B;
// stop A, then B) with a mirror on every voter, and returns the state
// znode ZooKeeper ends with, /controller_epoch, and the broker ids by role.
func section1Case(t *testing.T, controllerOnB bool) (state, epoch string, roles map[byte]int32, part fsm.Partition) {
	addr, _ := chrootAddr(t)
	r := dialRaw(t, addr)
	c := newCluster(t, 3, 800*time.Millisecond, addr, false)
	leaderIdx, _ := c.active(20 * time.Second)
	leaderID := int32(leaderIdx + 1)
	var others []int32
	for id := int32(1); id <= 3; id++ {
		if id != leaderID {
			others = append(others, id)
		}
	}
	var a, b, cc int32
	if controllerOnB {
		b, a, cc = leaderID, others[0], others[1]
	} else {
		cc, a, b = leaderID, others[0], others[1]
	}
	brokers := map[int32]*simBroker{}
	for _, id := range []int32{a, b, cc} {
		brokers[id] = c.startBroker(id, 1)
	}
	waitFor(t, 10*time.Second, "brokers unfenced", func() bool {
		i, _ := c.active(time.Second)
		return !c.brokerFenced(i, a) && !c.brokerFenced(i, b) && !c.brokerFenced(i, cc)
	})
	c.do("create topic", func(ctx context.Context, ctl *controller.Controller) error {
		return ctl.CreateTopics(ctx, []controller.CreateTopic{{Name: "t", NumPartitions: -1, ReplicationFactor: -1, Assignment: [][]int32{{a, b}}}}, false)[0].Err
	})
	brokers[a].stop()
	waitFor(t, 10*time.Second, "A fenced", func() bool { i, _ := c.active(10 * time.Second); return c.brokerFenced(i, a) })
	brokers[b].stop()
	if controllerOnB {
		c.stop(int(b - 1))
	}
	waitFor(t, 15*time.Second, "B fenced", func() bool { i, _ := c.active(10 * time.Second); return c.brokerFenced(i, b) })
	c.converged(10 * time.Second)
	i, node := c.active(time.Second)
	waitMirrorSynced(t, c.mirror(i), node)
	part, _ = c.partitionOn(i, "t", 0)
	if d := zkDiff(r, node); len(d) > 0 {
		t.Errorf("ZooKeeper differs from the image:\n%v", d)
	}
	state, _ = r.get(statePath("t", 0))
	epoch, _ = r.get("/controller_epoch")
	return state, epoch, map[byte]int32{'A': a, 'B': b, 'C': cc}, part
}

func TestSection1ThroughZooKeeperBothCasesEndIdentical(t *testing.T) {
	if testing.Short() {
		t.Skip("three-voter failover runs take seconds")
	}
	needZK(t)
	type stateZ struct {
		ControllerEpoch int32   `json:"controller_epoch"`
		Leader          int32   `json:"leader"`
		Version         int     `json:"version"`
		LeaderEpoch     int32   `json:"leader_epoch"`
		ISR             []int32 `json:"isr"`
	}
	var norm [2]stateZ
	for n, onB := range []bool{false, true} {
		raw, epoch, roles, part := section1Case(t, onB)
		t.Logf("case %d (controller beside %s): state znode %s, /controller_epoch %s, image %+v", n+1, map[bool]string{false: "C", true: "B"}[onB], raw, epoch, part)
		var s stateZ
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			t.Fatalf("case %d: state znode %q: %v", n+1, raw, err)
		}
		// The controller that made the last change is the one in office.
		if strconv.Itoa(int(s.ControllerEpoch)) != epoch {
			t.Errorf("case %d: state written under controller epoch %d, /controller_epoch %s", n+1, s.ControllerEpoch, epoch)
		}
		// Leader -1 and B kept in the ISR, in both cases (the last-ISR rule).
		if s.Leader != -1 || fmt.Sprint(s.ISR) != fmt.Sprint([]int32{roles['B']}) {
			t.Errorf("case %d: leader %d isr %v, want -1 [%d]", n+1, s.Leader, s.ISR, roles['B'])
		}
		role := map[int32]int32{roles['A']: 1, roles['B']: 2, roles['C']: 3}
		for i, b := range s.ISR {
			s.ISR[i] = role[b]
		}
		s.ControllerEpoch = 0 // counts elections: case 2 has one more
		norm[n] = s
	}
	if fmt.Sprint(norm[0]) != fmt.Sprint(norm[1]) {
		t.Fatalf("the two cases left different state znodes (broker ids by role, controller epoch aside):\n case 1 %+v\n case 2 %+v", norm[0], norm[1])
	}
}
