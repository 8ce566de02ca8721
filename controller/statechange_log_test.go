package controller

import (
	"bytes"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// TestInvalidTransitionsAreLoggedAndCounted: a replica asked to make a
// move its state machine forbids is left alone, and the refusal is one
// line of the state.change logger (from, to and reason) and one count.
func TestInvalidTransitionsAreLoggedAndCounted(t *testing.T) {
	e := newManagerEnv(t)
	for id := int32(1); id <= 3; id++ {
		e.addBroker(id, "")
	}
	rm := e.m.replication
	e.run(func(w *work) error {
		_, err := rm.createTopic(w, CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 3}, false)
		return err
	})
	var out bytes.Buffer
	var count atomic.Int64
	rm.stateChanges = stateChangeLog{log: hclog.New(&hclog.LoggerOptions{Name: "state.change", Output: &out}), invalid: &count}

	p := e.partition("t", 0)
	var ref partRef
	e.image(func(im *fsm.Image) { ref = partRef{id: im.TopicByName("t").ID, name: "t", part: 0} })
	w := e.run(func(w *work) error {
		// OnlineReplica cannot become NewReplica; broker 9 holds no
		// replica of t-0.
		valid, err := rm.handleReplicaStateChanges(w, []replica{{ref, p.Replicas[0]}, {ref, 9}}, rl.NewReplica)
		if len(valid) != 0 {
			t.Errorf("valid %v, want none", valid)
		}
		return err
	})
	if len(w.records()) != 0 {
		t.Fatalf("staged %s for refused transitions", recordTypes(w))
	}
	if got := e.partition("t", 0).ReplicaState(p.Replicas[0]); got != rl.OnlineReplica {
		t.Fatalf("replica moved to %s", got)
	}
	if count.Load() != 2 {
		t.Fatalf("counted %d invalid transitions, want 2", count.Load())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("state.change logged %d lines, want 2:\n%s", len(lines), out.String())
	}
	for _, want := range []string{"[ERROR] state.change: invalid replica state transition", "from=OnlineReplica", "to=NewReplica", "reason=\"not a transition of the replica state machine\""} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("first line %q lacks %q", lines[0], want)
		}
	}
	for _, want := range []string{"broker=9", "from=NonExistentReplica", "reason=\"broker not in the assignment\""} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("second line %q lacks %q", lines[1], want)
		}
	}
}
