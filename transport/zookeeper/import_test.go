package zookeeper

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

const (
	ordersID = "x7SJ2tHzRTW7bS2Gv3FQmg"
	movingID = "Q2x0V9mCSxeq3bLmT0d9Aw"
	staleID  = "b1l0XUhqQ4mS3TQ3rQ8e1Q"
	doomedID = "Zt3Hk0u9T6m4wq1nR0bB2g"
)

// writeKafkaLayout writes znodes the way a ZooKeeper-mode Kafka cluster
// (brokers 1-3 live, broker 4 gone) leaves them.
func writeKafkaLayout(r *rawZK) {
	r.put("/controller_epoch", "7")
	r.put("/controller", `{"version":1,"brokerid":2,"timestamp":"1700000000000"}`)
	r.put("/brokers/ids/1", `{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","SSL":"SSL"},"endpoints":["PLAINTEXT://kafka-1:9092","SSL://kafka-1:9093"],"jmx_port":-1,"port":9092,"host":"kafka-1","version":5,"timestamp":"1700000000001","rack":"r1"}`)
	r.put("/brokers/ids/2", `{"features":{},"listener_security_protocol_map":{"INTERNAL":"SASL_PLAINTEXT","PLAINTEXT":"PLAINTEXT"},"endpoints":["INTERNAL://10.0.0.2:9094","PLAINTEXT://kafka-2:9092"],"jmx_port":-1,"port":9092,"host":"kafka-2","version":5,"timestamp":"1700000000002","rack":"r2"}`)
	r.put("/brokers/ids/3", `{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://kafka-3:9092"],"rack":null,"jmx_port":9999,"port":9092,"host":"kafka-3","version":4,"timestamp":"1700000000003"}`)

	r.put("/brokers/topics/orders", `{"partitions":{"0":[1,2,3],"1":[2,3,1],"2":[3,1,2]},"topic_id":"`+ordersID+`","adding_replicas":{},"removing_replicas":{},"version":3}`)
	r.put("/brokers/topics/orders/partitions/0/state", `{"controller_epoch":5,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}`)
	r.put("/brokers/topics/orders/partitions/1/state", `{"controller_epoch":7,"leader":3,"version":1,"leader_epoch":4,"isr":[3,1]}`)
	r.put("/brokers/topics/orders/partitions/2/state", `{"controller_epoch":6,"leader":3,"version":1,"leader_epoch":7,"isr":[3,1,2]}`)
	r.put("/config/topics/orders", `{"version":1,"config":{"min.insync.replicas":"2","unclean.leader.election.enable":"false","retention.ms":"86400000"}}`)

	// Written by a Kafka before 2.8: no topic id.
	r.put("/brokers/topics/legacy", `{"version":1,"partitions":{"0":[2,1]}}`)
	r.put("/brokers/topics/legacy/partitions/0/state", `{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":1,"isr":[2,1]}`)
	r.put("/config/topics/legacy", `{"version":1,"config":{}}`)

	// One replica per partition: leader epochs of the wrong parity.
	r.put("/brokers/topics/solo", `{"version":2,"partitions":{"0":[1],"1":[2]},"adding_replicas":{},"removing_replicas":{}}`)
	r.put("/brokers/topics/solo/partitions/0/state", `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":2,"isr":[1]}`)
	r.put("/brokers/topics/solo/partitions/1/state", `{"controller_epoch":7,"leader":-1,"version":1,"leader_epoch":3,"isr":[2]}`)

	// A reassignment in flight: 1 leaves, 3 joins.
	r.put("/brokers/topics/moving", `{"version":3,"partitions":{"0":[1,2,3]},"adding_replicas":{"0":[3]},"removing_replicas":{"0":[1]},"topic_id":"`+movingID+`"}`)
	r.put("/brokers/topics/moving/partitions/0/state", `{"controller_epoch":7,"leader":2,"version":1,"leader_epoch":2,"isr":[2,1]}`)

	// Led by broker 4, which is gone: the transitions the old controller
	// died before running.
	r.put("/brokers/topics/stale", `{"version":3,"partitions":{"0":[4,1]},"adding_replicas":{},"removing_replicas":{},"topic_id":"`+staleID+`"}`)
	r.put("/brokers/topics/stale/partitions/0/state", `{"controller_epoch":7,"leader":4,"version":1,"leader_epoch":3,"isr":[4,1]}`)

	// Queued for deletion.
	r.put("/brokers/topics/doomed", `{"version":3,"partitions":{"0":[1,2]},"adding_replicas":{},"removing_replicas":{},"topic_id":"`+doomedID+`"}`)
	r.put("/brokers/topics/doomed/partitions/0/state", `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}`)
	r.put("/admin/delete_topics/doomed", "")
}

type wantPart struct {
	replicas, isr []int32
	leader, le    int32
	state         rl.PartitionState
}

func TestImportKafkaLayout(t *testing.T) {
	addr, _ := chrootAddr(t)
	r := dialRaw(t, addr)
	writeKafkaLayout(r)

	c := newCluster(t, 1, time.Minute, "", false)
	_, node := c.active(20 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Dry run: the plan, and nothing committed.
	before := node.FSM.AppliedIndex()
	hashBefore, _ := node.FSM.StateHash()
	plan, err := Migrate(ctx, addr, node, true, nil)
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, plan)
	}
	t.Logf("dry run:\n%s", plan)
	if plan.Brokers != 3 || plan.Topics != 6 || plan.Partitions != 9 || plan.PendingDeletions != 1 || plan.Reassignments != 1 || plan.EpochTo != 8 {
		t.Errorf("dry-run plan counts: %+v", plan)
	}
	if !strings.Contains(plan.String(), "import   topic  orders") {
		t.Errorf("plan text does not list topic orders:\n%s", plan)
	}
	if h, i := node.FSM.StateHash(); h != hashBefore || i != before {
		t.Fatalf("dry run changed the image: index %d -> %d", before, i)
	}

	plan, err = Migrate(ctx, addr, node, false, nil)
	if err != nil {
		t.Fatalf("import: %v\n%s", err, plan)
	}
	t.Logf("import:\n%s", plan)
	if plan.Index <= before {
		t.Fatalf("import committed nothing: index %d", plan.Index)
	}
	// The settle event runs after the topics: wait until applied.
	waitFor(t, 10*time.Second, "import applied", func() bool { return node.FSM.AppliedIndex() >= plan.Index })

	node.FSM.View(func(im *fsm.Image) {
		epoch, holder := im.ControllerEpoch()
		if epoch != 8 || holder != 1 {
			t.Errorf("controller epoch %d held by %d, want 8 held by 1", epoch, holder)
		}
		// Brokers: endpoints, racks, live.
		wantBrokers := map[int32]string{
			1: "PLAINTEXT=kafka-1:9092/0,SSL=kafka-1:9093/1,|r1",
			2: "INTERNAL=10.0.0.2:9094/2,PLAINTEXT=kafka-2:9092/0,|r2",
			3: "PLAINTEXT=kafka-3:9092/0,|",
		}
		if n := len(im.Brokers()); n != 3 {
			t.Errorf("%d brokers, want 3", n)
		}
		for id, want := range wantBrokers {
			b := im.Broker(id)
			if b == nil {
				t.Errorf("broker %d missing", id)
				continue
			}
			if got := brokerKey(b.Endpoints, b.Rack); got != want {
				t.Errorf("broker %d: %s, want %s", id, got, want)
			}
			if b.Fenced {
				t.Errorf("broker %d imported fenced", id)
			}
		}

		orders := im.TopicByName("orders")
		if orders == nil || EncodeKafkaUUID(orders.ID) != ordersID {
			t.Fatalf("orders: %+v, want topic id %s", orders, ordersID)
		}
		if v, _ := orders.Config("min.insync.replicas"); v != "2" {
			t.Errorf("orders min.insync.replicas = %q", v)
		}
		if v, _ := orders.Config("retention.ms"); v != "86400000" || len(orders.Configs) != 3 {
			t.Errorf("orders configs %v", orders.Configs)
		}
		legacy := im.TopicByName("legacy")
		if legacy == nil || legacy.ID != derivedTopicID("legacy", topicCzxid(t, r, "legacy")) {
			t.Errorf("legacy: %+v, want the id derived from its znode", legacy)
		}
		doomed := im.TopicByName("doomed")
		if doomed == nil || !doomed.Deleting {
			t.Errorf("doomed: %+v, want queued for deletion", doomed)
		}
		moving := im.TopicByName("moving")
		if moving == nil {
			t.Fatal("moving missing")
		}
		if ra, ok := moving.Reassignments[0]; !ok || fmt.Sprint(ra.Adding, ra.Removing) != "[3] [1]" {
			t.Errorf("moving reassignment %+v", moving.Reassignments)
		}

		want := map[string][]wantPart{
			// Kafka's epoch 0 with a leader is ours 1 (see leaderWalk).
			"orders": {
				{[]int32{1, 2, 3}, []int32{1, 2, 3}, 1, 1, rl.OnlinePartition},
				{[]int32{2, 3, 1}, []int32{3, 1}, 3, 4, rl.OnlinePartition},
				{[]int32{3, 1, 2}, []int32{3, 1, 2}, 3, 7, rl.OnlinePartition},
			},
			"legacy": {{[]int32{2, 1}, []int32{2, 1}, 2, 1, rl.OnlinePartition}},
			// Single replica: 2 -> 3 (parity); partition 1 had no leader
			// though its ISR member is live: imported at epoch 4 and
			// elected, as the old controller would have on takeover.
			"solo": {
				{[]int32{1}, []int32{1}, 1, 3, rl.OnlinePartition},
				{[]int32{2}, []int32{2}, 2, 5, rl.OnlinePartition},
			},
			"moving": {{[]int32{1, 2, 3}, []int32{2, 1}, 2, 2, rl.OnlinePartition}},
			// Broker 4 is gone: 1 takes over, leader epoch 3 -> 4.
			"stale": {{[]int32{4, 1}, []int32{1}, 1, 4, rl.OnlinePartition}},
		}
		for name, parts := range want {
			tp := im.TopicByName(name)
			if tp == nil {
				t.Errorf("topic %s missing", name)
				continue
			}
			if n := int(im.PartitionCount(tp.ID)); n != len(parts) {
				t.Errorf("%s: %d partitions, want %d", name, n, len(parts))
			}
			for i, w := range parts {
				p := im.Partition(tp.ID, int32(i))
				if p == nil {
					t.Errorf("%s-%d missing", name, i)
					continue
				}
				got := fmt.Sprintf("replicas=%v isr=%v leader=%d leader_epoch=%d %s", p.Replicas, p.ISR, p.Leader, p.LeaderEpoch, p.State)
				exp := fmt.Sprintf("replicas=%v isr=%v leader=%d leader_epoch=%d %s", w.replicas, w.isr, w.leader, w.le, w.state)
				if got != exp {
					t.Errorf("%s-%d: %s\n  want %s", name, i, got, exp)
				}
			}
		}
		// Replica states: live brokers online, the gone one offline.
		st := im.TopicByName("stale")
		if p := im.Partition(st.ID, 0); p.ReplicaState(4) != rl.OfflineReplica || p.ReplicaState(1) != rl.OnlineReplica {
			t.Errorf("stale-0 replica states %v", p.ReplicaStates)
		}
	})

	// Twice: nothing new, the image unchanged.
	hash1, idx1 := node.FSM.StateHash()
	again, err := Migrate(ctx, addr, node, false, nil)
	if err != nil {
		t.Fatalf("second import: %v\n%s", err, again)
	}
	if again.Brokers != 0 || again.Topics != 0 || again.Records != 0 || again.SkippedTopics != 6 || again.SkippedBrokers != 3 {
		t.Errorf("second import plan: %+v\n%s", again, again)
	}
	if hash2, idx2 := node.FSM.StateHash(); hash2 != hash1 || idx2 != idx1 {
		t.Fatalf("second import changed the image: index %d -> %d", idx1, idx2)
	}
}

func topicCzxid(t *testing.T, r *rawZK, name string) int64 {
	t.Helper()
	_, st, err := r.conn.Get(r.root + topicPath(name))
	if err != nil {
		t.Fatal(err)
	}
	return st.Czxid
}

func TestImportRefusesConflictingTopicID(t *testing.T) {
	addr, _ := chrootAddr(t)
	r := dialRaw(t, addr)
	r.put("/brokers/ids/1", `{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://kafka-1:9092"],"rack":null,"jmx_port":-1,"port":9092,"host":"kafka-1","version":4,"timestamp":"1"}`)
	r.put("/brokers/topics/orders", `{"partitions":{"0":[1]},"topic_id":"`+ordersID+`","adding_replicas":{},"removing_replicas":{},"version":3}`)
	r.put("/brokers/topics/orders/partitions/0/state", `{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":1,"isr":[1]}`)

	c := newCluster(t, 1, time.Minute, "", false)
	_, node := c.active(20 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := Migrate(ctx, addr, node, false, nil); err != nil {
		t.Fatal(err)
	}
	// The topic is re-created in ZooKeeper under another id.
	r.put("/brokers/topics/orders", `{"partitions":{"0":[1]},"topic_id":"`+movingID+`","adding_replicas":{},"removing_replicas":{},"version":3}`)
	h, i := node.FSM.StateHash()
	plan, err := Migrate(ctx, addr, node, false, nil)
	if err == nil || len(plan.Problems) != 1 {
		t.Fatalf("want a conflict, got %v\n%s", err, plan)
	}
	if h2, i2 := node.FSM.StateHash(); h2 != h || i2 != i {
		t.Fatal("a refused import changed the image")
	}
}

func TestLeaderWalk(t *testing.T) {
	for _, tc := range []struct {
		replicas    []int32
		leader, le  int32
		wantReached int32
	}{
		{[]int32{1, 2, 3}, 1, 0, 1},
		{[]int32{1, 2, 3}, 1, 1, 1},
		{[]int32{1, 2, 3}, 2, 2, 2},
		{[]int32{1, 2, 3}, 3, 9, 9},
		{[]int32{1, 2}, -1, 0, 0},
		{[]int32{1, 2}, -1, 1, 2},
		{[]int32{1, 2}, -1, 3, 3},
		{[]int32{1, 2}, -1, 6, 6},
		{[]int32{1}, 1, 2, 3},
		{[]int32{1}, 1, 5, 5},
		{[]int32{1}, -1, 3, 4},
		{[]int32{1}, -1, 4, 4},
	} {
		walk, reached := leaderWalk(tc.replicas, tc.leader, tc.le)
		if reached != tc.wantReached || int32(len(walk)) != reached {
			t.Errorf("%v leader %d epoch %d: walk %v reached %d, want %d", tc.replicas, tc.leader, tc.le, walk, reached, tc.wantReached)
			continue
		}
		// Replay as the FSM would: every step changes the leader.
		cur, epoch := rl.NoLeader, int32(0)
		for _, l := range walk {
			if l == cur || (l != rl.NoLeader && !contains(tc.replicas, l)) {
				t.Errorf("%v leader %d epoch %d: bad step %d in %v", tc.replicas, tc.leader, tc.le, l, walk)
			}
			cur, epoch = l, epoch+1
		}
		if cur != tc.leader || epoch != reached {
			t.Errorf("%v: walk %v ends at leader %d epoch %d", tc.replicas, walk, cur, epoch)
		}
	}
}

func TestZNodeFormatsRoundTrip(t *testing.T) {
	id, err := DecodeKafkaUUID(ordersID)
	if err != nil || EncodeKafkaUUID(id) != ordersID {
		t.Fatalf("uuid round trip: %v %s", err, EncodeKafkaUUID(id))
	}
	eps := []rl.Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9092}, {Name: "SSL", Host: "::1", Port: 9093, SecurityProtocol: 1}}
	got, rack, err := parseBroker(encodeBroker(eps, "r1", 5))
	if err != nil || brokerKey(got, rack) != brokerKey(eps, "r1") {
		t.Fatalf("broker round trip: %v %v %q", err, got, rack)
	}
	a := topicAssignment{ID: id, Replicas: [][]int32{{1, 2}, {2, 3}}, Adding: map[int32][]int32{1: {3}}, Removing: map[int32][]int32{1: {1}}}
	back, err := parseTopic(encodeTopic(a))
	if err != nil || topicKey(back) != topicKey(a) {
		t.Fatalf("topic round trip: %v %s vs %s", err, encodeTopic(back), encodeTopic(a))
	}
	s := partitionState{Leader: 2, LeaderEpoch: 7, ControllerEpoch: 3, ISR: []int32{2, 1}}
	if string(encodePartitionState(s)) != `{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":7,"isr":[2,1]}` {
		t.Fatalf("state znode %s", encodePartitionState(s))
	}
}
