package check

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

// The model's rules about what calls do (model.go), each with a history
// that keeps it and one that breaks it.
func TestModelRules(t *testing.T) {
	cases := []struct {
		name  string
		build func(h *hist)
		valid bool
	}{
		// Partition count.
		{"add-partitions then the new count", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.add(0, history.CreatePartitions, "a", 20, 30, history.Args{Partitions: 3})
			h.describe(1, "a", 40, 50, "aa", p(1, 0, 1, 2), p(2, 0, 2, 3), p(3, 0, 3, 1))
		}, true},
		{"describe shows the old count after an acknowledged add-partitions", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.add(0, history.CreatePartitions, "a", 20, 30, history.Args{Partitions: 3})
			h.describe(1, "a", 40, 50, "aa", p(1, 0, 1, 2))
		}, false},
		{"a list shows the old count after an acknowledged add-partitions", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.add(0, history.CreatePartitions, "a", 20, 30, history.Args{Partitions: 3})
			h.add(1, history.List, "", 40, 50, history.Args{}).Result = &history.Result{Topics: []history.TopicInfo{{Name: "a", TopicID: "aa", Partitions: 1}}}
		}, false},
		{"INVALID_PARTITIONS when the topic had fewer", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			fail(h.add(0, history.CreatePartitions, "a", 20, 30, history.Args{Partitions: 3}), kerr.InvalidPartitions)
		}, false},
		{"INVALID_PARTITIONS when the topic had as many", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 3)
			fail(h.add(0, history.CreatePartitions, "a", 20, 30, history.Args{Partitions: 3}), kerr.InvalidPartitions)
		}, true},
		{"a refused add-partitions that the history shows applied", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 3)
			fail(h.add(0, history.CreatePartitions, "a", 20, 30, history.Args{Partitions: 5}), kerr.InvalidReplicationFactor)
			h.describe(1, "a", 40, 50, "aa", p(1, 0, 1), p(1, 0, 1), p(1, 0, 1), p(1, 0, 1), p(1, 0, 1))
		}, false},
		{"add-partitions with no answer may have applied", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 3)
			unknown(h.add(0, history.CreatePartitions, "a", 20, 30, history.Args{Partitions: 5}))
			h.describe(1, "a", 40, 50, "aa", p(1, 0, 1), p(1, 0, 1), p(1, 0, 1), p(1, 0, 1), p(1, 0, 1))
		}, true},

		// Replicas.
		{"the first describe fixes the list; it stays", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(2, 0, 2, 3))
			h.describe(1, "a", 40, 50, "aa", p(3, 1, 2, 3))
		}, true},
		{"the list changes with no reassignment", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(2, 0, 2, 3))
			h.describe(1, "a", 40, 50, "aa", p(2, 0, 3, 2))
		}, false},
		{"a describe names a broker twice", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(2, 0, 2, 2))
		}, false},
		{"after a reassignment the target leads the list, old replicas go", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(1, 0, 1, 2))
			h.reassign(0, "a", 40, 50, 0, 3, 4)
			h.describe(1, "a", 60, 70, "aa", p(1, 0, 3, 4, 1, 2))
			h.describe(1, "a", 80, 90, "aa", p(3, 1, 3, 4, 2))
			h.describe(1, "a", 100, 110, "aa", p(3, 1, 3, 4))
		}, true},
		{"replicas do not match after an acknowledged reassignment", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(1, 0, 1, 2))
			h.reassign(0, "a", 40, 50, 0, 3, 4)
			h.describe(1, "a", 60, 70, "aa", p(1, 0, 1, 2))
		}, false},
		{"the target in another order", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.reassign(0, "a", 40, 50, 0, 3, 4)
			h.describe(1, "a", 60, 70, "aa", p(4, 0, 4, 3))
		}, false},
		{"a replica that left comes back", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(1, 0, 1, 2))
			h.reassign(0, "a", 40, 50, 0, 3)
			h.describe(1, "a", 60, 70, "aa", p(3, 1, 3))
			h.describe(1, "a", 80, 90, "aa", p(3, 1, 3, 1))
		}, false},
		{"a replica the partition never had follows the target", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(1, 0, 1, 2))
			h.reassign(0, "a", 40, 50, 0, 3)
			h.describe(1, "a", 60, 70, "aa", p(3, 1, 3, 5))
		}, false},
		{"a cancel puts the original replicas back first", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(1, 0, 1, 2))
			h.reassign(0, "a", 40, 50, 0, 2, 3)
			h.cancel(0, "a", 60, 70, 0)
			h.describe(1, "a", 80, 90, "aa", p(1, 0, 2, 1, 3))
			h.describe(1, "a", 100, 110, "aa", p(1, 0, 2, 1))
		}, true},
		{"replicas do not match after an acknowledged cancel", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(1, 0, 1, 2))
			h.reassign(0, "a", 40, 50, 0, 2, 3)
			h.cancel(0, "a", 60, 70, 0)
			h.describe(1, "a", 80, 90, "aa", p(2, 0, 2, 3))
		}, false},
		{"a cancel with no reassignment in progress", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.cancel(0, "a", 20, 30, 0)
		}, false},
		{"a cancel after the reassignment completed", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.reassign(0, "a", 20, 30, 0, 2, 3)
			fail(h.cancel(0, "a", 40, 50, 0), kerr.NoReassignmentInProgress)
			h.cancel(0, "a", 60, 70, 0)
		}, false},
		{"a refused reassignment that the history shows applied", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(1, 0, 1, 2))
			fail(h.reassign(0, "a", 40, 50, 0, 3), kerr.ReassignmentInProgress)
			h.describe(1, "a", 60, 70, "aa", p(3, 1, 3, 1, 2))
		}, false},
		{"a reassignment with no answer may apply later", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(1, 0, 1, 2))
			unknown(h.reassign(0, "a", 40, 50, 0, 3))
			h.describe(1, "a", 60, 70, "aa", p(1, 0, 1, 2))
			h.describe(1, "a", 80, 90, "aa", p(3, 1, 3, 1, 2))
		}, true},
		{"a reassignment answered NOT_CONTROLLER may have applied", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(1, 0, 1, 2))
			fail(h.reassign(0, "a", 40, 50, 0, 3), kerr.NotController)
			h.describe(1, "a", 60, 70, "aa", p(3, 1, 3, 1, 2))
		}, true},
		{"a standby's NOT_CONTROLLER did nothing", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(1, 0, 1, 2))
			fail(h.reassign(0, "a", 40, 50, 0, 3), kerr.NotController).Refused = true
			h.describe(1, "a", 60, 70, "aa", p(3, 1, 3, 1, 2))
		}, false},

		// Leaders.
		{"leaders move with faults, at higher epochs", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(1, 0, 1, 2))
			h.describe(1, "a", 40, 50, "aa", p(-1, 1, 1, 2))
			h.describe(1, "a", 60, 70, "aa", p(2, 2, 1, 2))
			h.describe(1, "a", 80, 90, "aa", p(-1, 2, 1, 2)) // not reachable
		}, true},
		{"the leader epoch goes back", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(1, 3, 1, 2))
			h.describe(1, "a", 40, 50, "aa", p(1, 2, 1, 2))
		}, false},
		{"two leaders at one epoch", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(1, 3, 1, 2))
			h.describe(1, "a", 40, 50, "aa", p(2, 3, 1, 2))
		}, false},
		{"a leader that is not a replica", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(4, 0, 1, 2))
		}, false},
		{"after a preferred election the first replica leads", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(2, 1, 1, 2))
			h.elect(0, "a", 40, 50, 0, "preferred")
			h.describe(1, "a", 60, 70, "aa", p(1, 2, 1, 2))
		}, true},
		{"after a preferred election a fault moved the leader", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(2, 1, 1, 2))
			h.elect(0, "a", 40, 50, 0, "preferred")
			h.describe(1, "a", 60, 70, "aa", p(2, 3, 1, 2))
		}, true},
		{"after a preferred election another leader at the next epoch", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(2, 1, 1, 2))
			h.elect(0, "a", 40, 50, 0, "preferred")
			h.describe(1, "a", 60, 70, "aa", p(2, 2, 1, 2))
		}, false},
		{"after a preferred election the epoch did not rise", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(2, 1, 1, 2))
			h.elect(0, "a", 40, 50, 0, "preferred")
			h.describe(1, "a", 60, 70, "aa", p(1, 1, 1, 2))
		}, false},
		{"after a reassignment the preferred replica is the target's first", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(1, 0, 1, 2))
			h.reassign(0, "a", 40, 50, 0, 2, 1)
			h.elect(0, "a", 60, 70, 0, "preferred")
			h.describe(1, "a", 80, 90, "aa", p(1, 1, 2, 1))
		}, false},
		{"ELECTION_NOT_NEEDED: the preferred replica leads", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(1, 4, 1, 2))
			fail(h.elect(0, "a", 40, 50, 0, "preferred"), kerr.ElectionNotNeeded)
			h.describe(1, "a", 60, 70, "aa", p(1, 4, 1, 2))
		}, true},
		{"ELECTION_NOT_NEEDED while another replica led at that epoch", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(2, 4, 1, 2))
			fail(h.elect(0, "a", 40, 50, 0, "preferred"), kerr.ElectionNotNeeded)
			h.describe(1, "a", 60, 70, "aa", p(2, 4, 1, 2))
		}, false},
		{"an unclean election raises the epoch", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(-1, 4, 1, 2))
			h.elect(0, "a", 40, 50, 0, "unclean")
			h.describe(1, "a", 60, 70, "aa", p(-1, 4, 1, 2))
		}, false},
		{"an election that may still be running says nothing", func(h *hist) {
			h.createN(0, "a", 0, 10, "aa", 1)
			h.describe(1, "a", 20, 30, "aa", p(2, 1, 1, 2))
			h.elect(0, "a", 40, 70, 0, "preferred")
			h.describe(1, "a", 50, 60, "aa", p(2, 1, 1, 2))
		}, true},

		// Existence, with a refusal before any proposal.
		{"a create refused by a standby that the history shows applied", func(h *hist) {
			fail(h.create(0, "a", 0, 10, ""), kerr.NotController).Refused = true
			h.present(1, "a", 20, 30, "aa")
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h hist
			c.build(&h)
			r := lin(t, h.ops)
			if c.valid {
				wantValid(t, r)
				return
			}
			wantViolation(t, r, 1, `topic "a" is not linearizable`)
		})
	}
}

// TestSegmentsDoNotChangeTheVerdict: cutting a topic's history as finely
// as it can be cut gives the verdict of checking it whole, on valid
// histories and on histories with one read changed.
func TestSegmentsDoNotChangeTheVerdict(t *testing.T) {
	n := 80
	if testing.Short() || raceEnabled {
		n = 20
	}
	agreeValid, agreeInvalid := 0, 0
	for seed := range uint64(n) {
		rng := rand.New(rand.NewPCG(seed, 11))
		ops := randomHistory(rng, 30)
		if seed%2 == 1 {
			mutateRead(rng, ops)
		}
		fine := Linearizability(ops, LinearizabilityOptions{Timeout: time.Minute, SegmentCalls: 1})
		whole := Linearizability(ops, LinearizabilityOptions{Timeout: time.Minute, SegmentCalls: 1 << 30})
		if fine.Valid != whole.Valid || fine.Inconclusive != "" || whole.Inconclusive != "" {
			for _, op := range ops {
				t.Log(op)
			}
			t.Fatalf("seed %d: cut finely:\n%s\nwhole:\n%s", seed, fine, whole)
		}
		if fine.Valid {
			agreeValid++
		} else {
			agreeInvalid++
		}
	}
	t.Logf("%d valid and %d invalid histories, the same verdict both ways", agreeValid, agreeInvalid)
	if agreeInvalid == 0 || agreeValid == 0 {
		t.Fatal("the histories did not cover both verdicts")
	}
}

// mutateRead changes one describe of ops: its leader epoch down, a replica
// list reversed, its leader to another replica, or its partition count.
func mutateRead(rng *rand.Rand, ops []history.Op) {
	var reads []int
	for i, op := range ops {
		if op.Kind == history.Describe && op.Outcome == history.OK && op.Result != nil && len(op.Result.Parts) > 0 {
			reads = append(reads, i)
		}
	}
	if len(reads) == 0 {
		return
	}
	r := ops[reads[rng.IntN(len(reads))]].Result
	parts := append([]history.PartitionInfo(nil), r.Parts...)
	r.Parts = parts
	pi := &parts[rng.IntN(len(parts))]
	switch rng.IntN(4) {
	case 0:
		pi.LeaderEpoch--
	case 1:
		rev := append([]int32(nil), pi.Replicas...)
		for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
			rev[i], rev[j] = rev[j], rev[i]
		}
		pi.Replicas = rev
	case 2:
		for _, b := range pi.Replicas {
			if b != pi.Leader {
				pi.Leader = b
				break
			}
		}
	default:
		r.Partitions++
		r.Parts = append(parts, history.PartitionInfo{Partition: int32(len(parts)), Leader: 1, Replicas: []int32{1}})
	}
}

// TestRandomHistoriesWithAChangedPartitionAreCaught changes a describe
// that follows another one of the same topic with nothing of the topic in
// between: it shows a lower leader epoch than the first, or a replica the
// first did not list. Nothing but a call can explain either, so every one
// must be caught.
func TestRandomHistoriesWithAChangedPartitionAreCaught(t *testing.T) {
	changed := 0
	for seed := range uint64(80) {
		rng := rand.New(rand.NewPCG(seed, 13))
		cfg := smallSim(40)
		cfg.Lost = 0
		ops := simulate(rng, cfg)
		first, second := quietRereads(ops)
		if second < 0 {
			continue
		}
		a := ops[first].Result.Parts[0]
		parts := append([]history.PartitionInfo(nil), ops[second].Result.Parts...)
		ops[second].Result = &history.Result{TopicID: ops[second].Result.TopicID, Partitions: ops[second].Result.Partitions, Parts: parts}
		b := &parts[0]
		what := "a lower leader epoch"
		if seed%2 == 0 && a.LeaderEpoch > 0 {
			b.LeaderEpoch = a.LeaderEpoch - 1
		} else {
			what = "a replica the first did not list"
			for x := int32(1); x <= 6; x++ {
				if !idsHas(a.Replicas, x) {
					b.Replicas = append(append([]int32(nil), b.Replicas...), x)
					break
				}
			}
		}
		changed++
		if r := Linearizability(ops, LinearizabilityOptions{Timeout: time.Minute}); r.Valid {
			t.Fatalf("seed %d: %s in %s (after %s) was not caught:\n%s", seed, what, ops[second], ops[first], r)
		}
	}
	t.Logf("%d changed describes, all caught", changed)
	if changed < 20 {
		t.Fatalf("only %d histories had a describe to change", changed)
	}
}

// quietRereads finds two describes of one topic incarnation, the second
// invoked after the first returned, with no other call on the topic (a
// list included) in flight between the first's invocation and the
// second's answer.
func quietRereads(ops []history.Op) (int, int) {
	for j, b := range ops {
		if b.Kind != history.Describe || b.Outcome != history.OK || len(b.Result.Parts) == 0 {
			continue
		}
		for i := j - 1; i >= 0; i-- {
			a := ops[i]
			if a.Kind != history.Describe || a.Topic != b.Topic || a.Outcome != history.OK || len(a.Result.Parts) == 0 ||
				a.Result.TopicID != b.Result.TopicID || !a.Complete.Before(b.Invoke) {
				continue
			}
			quiet := true
			for k, o := range ops {
				if k == i || k == j || (o.Topic != b.Topic && o.Kind != history.List) {
					continue
				}
				end := o.Complete
				if end.IsZero() {
					end = o.Invoke
				}
				if !end.Before(a.Invoke) && !o.Invoke.After(b.Complete) {
					quiet = false
					break
				}
			}
			if quiet {
				return i, j
			}
			break
		}
	}
	return -1, -1
}
