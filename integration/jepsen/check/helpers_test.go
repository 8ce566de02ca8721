package check

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// at is t0 plus ms milliseconds.
func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// hist builds histories: each call appends one op with the next id.
type hist struct{ ops []history.Op }

func (h *hist) add(client int, kind history.Kind, topic string, from, to int, args history.Args) *history.Op {
	h.ops = append(h.ops, history.Op{ID: int64(len(h.ops) + 1), Client: client, Kind: kind, Topic: topic, Args: args,
		Invoke: at(from), Complete: at(to), Outcome: history.OK})
	return &h.ops[len(h.ops)-1]
}

func (h *hist) create(client int, topic string, from, to int, id string) *history.Op {
	op := h.add(client, history.Create, topic, from, to, history.Args{Partitions: 3, ReplicationFactor: 2})
	op.Result = &history.Result{TopicID: id}
	return op
}

func (h *hist) delete(client int, topic string, from, to int) *history.Op {
	return h.add(client, history.Delete, topic, from, to, history.Args{})
}

// present is a describe that saw the topic with id and 3 partitions.
func (h *hist) present(client int, topic string, from, to int, id string) *history.Op {
	op := h.add(client, history.Describe, topic, from, to, history.Args{})
	op.Result = &history.Result{TopicID: id, Partitions: 3}
	return op
}

// absent is a describe answered UNKNOWN_TOPIC_OR_PARTITION.
func (h *hist) absent(client int, topic string, from, to int) *history.Op {
	op := h.add(client, history.Describe, topic, from, to, history.Args{})
	return fail(op, kerr.UnknownTopicOrPartition)
}

func fail(op *history.Op, e *kerr.Error) *history.Op {
	op.Outcome, op.Code, op.Error = history.Fail, e.Code, e.Message
	op.Result = nil
	return op
}

func unknown(op *history.Op) *history.Op {
	op.Outcome, op.Complete, op.Error, op.Result = history.Unknown, time.Time{}, "i/o timeout", nil
	return op
}

func lin(t *testing.T, ops []history.Op) Result {
	t.Helper()
	return Linearizability(ops, LinearizabilityOptions{Timeout: 30 * time.Second})
}

func wantValid(t *testing.T, r Result) {
	t.Helper()
	if !r.Valid {
		t.Fatalf("want valid, got:\n%s", r)
	}
	if r.Inconclusive != "" {
		t.Fatalf("want a conclusive check, got:\n%s", r)
	}
}

// wantViolation asserts that r failed with exactly n violations, each
// description containing every one of words.
func wantViolation(t *testing.T, r Result, n int, words ...string) {
	t.Helper()
	if r.Valid || len(r.Violations) != n {
		t.Fatalf("want %d violations, got:\n%s", n, r)
	}
	for _, v := range r.Violations {
		if v.Checker != r.Checker {
			t.Errorf("violation names checker %q, result is %q", v.Checker, r.Checker)
		}
		for _, w := range words {
			if !strings.Contains(v.Description, w) {
				t.Errorf("violation %q does not mention %q", v.Description, w)
			}
		}
	}
}

// parts is a describe's partitions: each "leader@epoch:replicas" as
// p(leader, epoch, replicas...).
func p(leader, epoch int32, replicas ...int32) history.PartitionInfo {
	return history.PartitionInfo{Leader: leader, LeaderEpoch: epoch, Replicas: replicas}
}

// describe is a describe that saw the topic with id and these partitions.
func (h *hist) describe(client int, topic string, from, to int, id string, parts ...history.PartitionInfo) *history.Op {
	op := h.add(client, history.Describe, topic, from, to, history.Args{})
	for i := range parts {
		parts[i].Partition = int32(i)
	}
	op.Result = &history.Result{TopicID: id, Partitions: int32(len(parts)), Parts: parts}
	return op
}

// createN is an acknowledged create of n partitions.
func (h *hist) createN(client int, topic string, from, to int, id string, n int32) *history.Op {
	op := h.add(client, history.Create, topic, from, to, history.Args{Partitions: n, ReplicationFactor: 2})
	op.Result = &history.Result{TopicID: id, Partitions: n}
	return op
}

func (h *hist) reassign(client int, topic string, from, to int, part int32, replicas ...int32) *history.Op {
	return h.add(client, history.Reassign, topic, from, to, history.Args{Partition: part, Replicas: replicas})
}

func (h *hist) cancel(client int, topic string, from, to int, part int32) *history.Op {
	return h.add(client, history.CancelReassign, topic, from, to, history.Args{Partition: part})
}

func (h *hist) elect(client int, topic string, from, to int, part int32, how string) *history.Op {
	return h.add(client, history.Elect, topic, from, to, history.Args{Partition: part, Election: how})
}
