package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// imageDigest describes an image by what a client or broker could tell
// apart, leaving out what depends on when or by whom a change was made:
// no controller epoch, no broker epochs or change indexes (raft indexes),
// no topic ids (random). Topics go by name. Leader and partition epochs
// are in: a failover must not cost a partition an extra change.
func imageDigest(im fsm.Reader) (string, string) {
	var b strings.Builder
	for _, br := range im.Brokers() {
		fmt.Fprintf(&b, "broker %d rack=%q fenced=%v shutting-down=%v\n", br.ID, br.Rack, br.Fenced, br.ShuttingDown)
	}
	var topics []*fsm.Topic
	im.ForEachTopic(func(t *fsm.Topic) bool { topics = append(topics, t); return true })
	sort.Slice(topics, func(i, j int) bool { return topics[i].Name < topics[j].Name })
	for _, t := range topics {
		fmt.Fprintf(&b, "topic %s deleting=%v configs=%v\n", t.Name, t.Deleting, t.Configs)
		for i := int32(0); i < im.PartitionCount(t.ID); i++ {
			p := im.Partition(t.ID, i)
			if p == nil {
				fmt.Fprintf(&b, "  %d removed\n", i)
				continue
			}
			states := make([]string, len(p.Replicas))
			for j, r := range p.Replicas {
				states[j] = fmt.Sprintf("%d:%s", r, p.ReplicaStates[j])
			}
			fmt.Fprintf(&b, "  %d %s leader=%d le=%d pe=%d isr=%v replicas=[%s]", i, p.State, p.Leader, p.LeaderEpoch, p.PartitionEpoch, p.ISR, strings.Join(states, " "))
			if ra, ok := t.Reassignments[i]; ok {
				fmt.Fprintf(&b, " adding=%v removing=%v", ra.Adding, ra.Removing)
			}
			b.WriteByte('\n')
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:]), b.String()
}

// flowRun is what running a flow left: the digest of the final image,
// its text, each step's result lines, and the image itself for checks.
type flowRun struct {
	digest, text string
	results      [][]string
	logErrors    []string
	epoch        int32 // the final controller epoch
}

var epochNumber = regexp.MustCompile(`epoch=\d+`)

// runFlow runs scenario commands over the in-memory log. With disturb,
// the active controller loses leadership and a new activation takes over
// (a new controller epoch, resumers and all) before every step.
func runFlow(t *testing.T, steps []string, disturb bool, check func(t *testing.T, im *fsm.Image)) flowRun {
	var run flowRun
	logs := &scenarioLogBuffer{}
	synctest.Test(t, func(t *testing.T) {
		s := newScenario(t, logs)
		defer s.close()
		do := func(i int, cmd string) []string {
			out := s.run(&scenarioCase{line: i + 1, cmd: cmd})
			for _, l := range out {
				if strings.HasPrefix(l, "log: ") {
					run.logErrors = append(run.logErrors, cmd+": "+l)
				}
			}
			return out
		}
		for i, step := range steps {
			if disturb && i > 0 {
				do(i, "lose-leadership")
				if got := do(i, "regain"); !strings.HasPrefix(got[len(got)-1], "ok epoch=") {
					t.Fatalf("regain before %q: %v", step, got)
				}
			}
			var res []string
			for _, l := range do(i, step) {
				if !strings.HasPrefix(l, "@") && !strings.HasPrefix(l, "->") && !strings.HasPrefix(l, "     ") {
					res = append(res, epochNumber.ReplaceAllString(l, "epoch=N"))
				}
			}
			run.results = append(run.results, res)
		}
		s.fsm.View(func(im *fsm.Image) {
			run.digest, run.text = imageDigest(im)
			run.epoch, _ = im.ControllerEpoch()
			if check != nil {
				check(t, im)
			}
		})
	})
	return run
}

type flow struct {
	name  string
	steps []string
	check func(t *testing.T, im *fsm.Image)
}

func partitionOf(t *testing.T, im fsm.Reader, topic string, part int32) *fsm.Partition {
	t.Helper()
	tp := im.TopicByName(topic)
	if tp == nil {
		t.Fatalf("no topic %q", topic)
	}
	p := im.Partition(tp.ID, part)
	if p == nil {
		t.Fatalf("no partition %s-%d", topic, part)
	}
	return p
}

func wantGone(t *testing.T, im fsm.Reader, topic string) {
	t.Helper()
	if tp := im.TopicByName(topic); tp != nil {
		t.Fatalf("topic %q still exists (deleting=%v)", topic, tp.Deleting)
	}
}

func wantSettled(t *testing.T, im fsm.Reader, topic string, part int32, replicas []int32, leader int32) {
	t.Helper()
	p := partitionOf(t, im, topic, part)
	if !slices.Equal(p.Replicas, replicas) || p.Leader != leader || p.State != rl.OnlinePartition {
		t.Fatalf("%s-%d: replicas %v leader %d state %s, want replicas %v leader %d online", topic, part, p.Replicas, p.Leader, p.State, replicas, leader)
	}
	for j, s := range p.ReplicaStates {
		if s != rl.OnlineReplica {
			t.Fatalf("%s-%d: replica %d is %s", topic, part, p.Replicas[j], s)
		}
	}
	if tp := im.TopicByName(topic); len(tp.Reassignments) != 0 {
		t.Fatalf("%s: reassignment records left: %v", topic, tp.Reassignments)
	}
}

func registerSteps(n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf("register %d", i))
	}
	return out
}

func flowsUnderTest() []flow {
	return []flow{
		{
			name: "delete-all-brokers-up",
			steps: append(registerSteps(3),
				"create orders assign=1,2,3;2,3,1",
				"create keep assign=3,1",
				"delete orders",
				"stop-replica-response 1 orders ok",
				"stop-replica-response 2 orders ok",
				"stop-replica-response 3 orders ok",
			),
			check: func(t *testing.T, im *fsm.Image) {
				wantGone(t, im, "orders")
				wantSettled(t, im, "keep", 0, []int32{3, 1}, 3)
			},
		},
		{
			name: "delete-broker-down",
			steps: append(registerSteps(3),
				"create orders assign=1,2,3;3,1,2",
				"heartbeat 3 fence",
				"delete orders",
				"stop-replica-response 1 orders ok",
				"stop-replica-response 2 orders ok",
				"heartbeat 3",
				"stop-replica-response 3 orders/0 error",
				"stop-replica-response 3 orders/1 ok",
				"heartbeat 3 fence",
				"heartbeat 3",
				"stop-replica-response 3 orders/0 ok",
			),
			check: func(t *testing.T, im *fsm.Image) { wantGone(t, im, "orders") },
		},
		{
			name: "delete-then-recreate",
			steps: append(registerSteps(2),
				"create events assign=1,2",
				"delete events",
				"create events assign=2,1",
				"stop-replica-response 1 events ok",
				"stop-replica-response 2 events ok",
				"create events assign=2,1",
			),
			check: func(t *testing.T, im *fsm.Image) { wantSettled(t, im, "events", 0, []int32{2, 1}, 2) },
		},
		{
			name: "reassignment-completes",
			steps: append(registerSteps(4),
				"create orders assign=1,2,3;2,3,1",
				"reassign orders/0 replicas=2,3,4",
				"alter-isr orders/0 by=1 isr=1,2,3,4",
				"stop-replica-response 1 orders/0 ok",
				"reassign orders/1 replicas=2,3",
				"stop-replica-response 1 orders/1 ok",
			),
			check: func(t *testing.T, im *fsm.Image) {
				wantSettled(t, im, "orders", 0, []int32{2, 3, 4}, 2)
				wantSettled(t, im, "orders", 1, []int32{2, 3}, 2)
			},
		},
		{
			name: "reassignment-removed-replica-on-a-down-broker",
			steps: append(registerSteps(4),
				"create orders assign=1,2,3",
				"reassign orders/0 replicas=2,3,4",
				"heartbeat 1 fence",
				"alter-isr orders/0 by=2 isr=2,3,4",
				"heartbeat 1",
				"stop-replica-response 1 orders/0 ok",
			),
			check: func(t *testing.T, im *fsm.Image) { wantSettled(t, im, "orders", 0, []int32{2, 3, 4}, 2) },
		},
		{
			name: "reassignment-replaced-and-cancelled",
			steps: append(registerSteps(5),
				"create orders assign=1,2,3",
				"reassign orders/0 replicas=1,2,4",
				"reassign orders/0 replicas=1,5,4",
				"reassign orders/0 replicas=1,2,5",
				"cancel orders/0",
				"stop-replica-response 4 orders/0 ok",
				"stop-replica-response 5 orders/0 ok",
				"reassign orders/0 replicas=4,5",
				"alter-isr orders/0 by=1 isr=1,2,3,4",
				"elect preferred orders/0",
				"cancel orders/0",
				"stop-replica-response 4 orders/0 ok",
				"stop-replica-response 5 orders/0 ok",
			),
			check: func(t *testing.T, im *fsm.Image) { wantSettled(t, im, "orders", 0, []int32{1, 2, 3}, 1) },
		},
		{
			name: "preferred-election-and-rebalance",
			steps: append(registerSteps(3),
				"create orders assign=1,2,3;1,3,2;1,2,3;2,3,1;3,1,2",
				"heartbeat 1 fence",
				"heartbeat 1",
				"elect preferred orders/0",
				"alter-isr orders/0 by=2 isr=2,3,1",
				"alter-isr orders/1 by=3 isr=3,2,1",
				"alter-isr orders/2 by=2 isr=2,3,1",
				"elect preferred orders/0",
				"balance percent=70",
				"balance percent=60 max=1",
			),
			check: func(t *testing.T, im *fsm.Image) {
				if n := PreferredReplicaImbalance(im); n != 0 {
					t.Fatalf("imbalance %d after the rebalance", n)
				}
			},
		},
		{
			name: "unclean-election",
			steps: append(registerSteps(2),
				"create a assign=1,2",
				"create b assign=1,2",
				"heartbeat 2 fence",
				"heartbeat 1 fence",
				"heartbeat 2",
				"elect unclean a/0",
				"alter-config b unclean.leader.election.enable=true",
			),
			check: func(t *testing.T, im *fsm.Image) {
				for _, n := range []string{"a", "b"} {
					if p := partitionOf(t, im, n, 0); p.Leader != 2 || !slices.Equal(p.ISR, []int32{2}) {
						t.Fatalf("%s-0: leader %d isr %v, want 2 and [2]", n, p.Leader, p.ISR)
					}
				}
			},
		},
	}
}

// TestFlowsUnderChangingActiveController runs each flow twice, once
// undisturbed and once with the active controller replaced before every
// step, and wants the same final image (by a digest that leaves out
// controller epochs and raft indexes), the same answer to every step,
// and no error in the controller's log.
func TestFlowsUnderChangingActiveController(t *testing.T) {
	for _, f := range flowsUnderTest() {
		t.Run(f.name, func(t *testing.T) {
			plain := runFlow(t, f.steps, false, f.check)
			disturbed := runFlow(t, f.steps, true, f.check)
			if plain.epoch != 1 || disturbed.epoch != int32(len(f.steps)) {
				t.Fatalf("controller epochs %d undisturbed and %d under failovers, want 1 and %d", plain.epoch, disturbed.epoch, len(f.steps))
			}
			for _, r := range []flowRun{plain, disturbed} {
				if len(r.logErrors) > 0 {
					t.Errorf("controller logged errors:\n%s", strings.Join(r.logErrors, "\n"))
				}
			}
			for i := range f.steps {
				if !slices.Equal(plain.results[i], disturbed.results[i]) {
					t.Errorf("step %q answered %v undisturbed and %v under failovers", f.steps[i], plain.results[i], disturbed.results[i])
				}
			}
			if plain.digest != disturbed.digest {
				t.Fatalf("final images differ\nundisturbed:\n%s\nunder failovers:\n%s", plain.text, disturbed.text)
			}
		})
	}
}

// TestImageDigestSeesDifferences makes sure the digest would catch a
// difference: the same flow with one step more ends elsewhere.
func TestImageDigestSeesDifferences(t *testing.T) {
	f := flowsUnderTest()[3] // reassignment-completes
	a := runFlow(t, f.steps, false, nil)
	b := runFlow(t, f.steps[:len(f.steps)-1], false, nil)
	if a.digest == b.digest {
		t.Fatalf("different images, same digest:\n%s", a.text)
	}
}
