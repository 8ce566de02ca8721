// Package admin holds the client-side logic of cluster administration
// that is more than one request: reassignment plans in the JSON format
// of Kafka's kafka-reassign-partitions tool, and the generation of a plan
// that moves every replica off a broker.
package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// PlanPartition is one partition's target replicas.
type PlanPartition struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Replicas  []int32  `json:"replicas"`
	LogDirs   []string `json:"log_dirs,omitempty"`
}

// Plan is a reassignment plan:
//
//	{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}
type Plan struct {
	Version    int             `json:"version"`
	Partitions []PlanPartition `json:"partitions"`
}

// ReadPlan decodes and checks a plan: version 1, no partition twice, no
// replica twice in one partition, at least one replica each.
func ReadPlan(r io.Reader) (Plan, error) {
	var p Plan
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Plan{}, fmt.Errorf("plan: %w", err)
	}
	return p, p.Check()
}

// Check validates the plan's shape.
func (p Plan) Check() error {
	if p.Version != 1 {
		return fmt.Errorf("plan: version %d, want 1", p.Version)
	}
	if len(p.Partitions) == 0 {
		return fmt.Errorf("plan: no partitions")
	}
	type tp struct {
		t string
		p int32
	}
	seen := map[tp]bool{}
	for i, pp := range p.Partitions {
		if pp.Topic == "" {
			return fmt.Errorf("plan: partitions[%d]: no topic", i)
		}
		if pp.Partition < 0 {
			return fmt.Errorf("plan: partitions[%d]: partition %d is negative", i, pp.Partition)
		}
		k := tp{pp.Topic, pp.Partition}
		if seen[k] {
			return fmt.Errorf("plan: %s-%d is listed twice", pp.Topic, pp.Partition)
		}
		seen[k] = true
		if len(pp.Replicas) == 0 {
			return fmt.Errorf("plan: %s-%d: no replicas", pp.Topic, pp.Partition)
		}
		dup := map[int32]bool{}
		for _, r := range pp.Replicas {
			if r < 0 {
				return fmt.Errorf("plan: %s-%d: replica %d is negative", pp.Topic, pp.Partition, r)
			}
			if dup[r] {
				return fmt.Errorf("plan: %s-%d: broker %d is listed twice", pp.Topic, pp.Partition, r)
			}
			dup[r] = true
		}
		if len(pp.LogDirs) > 0 && len(pp.LogDirs) != len(pp.Replicas) {
			return fmt.Errorf("plan: %s-%d: %d log_dirs for %d replicas", pp.Topic, pp.Partition, len(pp.LogDirs), len(pp.Replicas))
		}
	}
	return nil
}

// Sort orders the plan by topic and partition.
func (p *Plan) Sort() {
	sort.Slice(p.Partitions, func(i, j int) bool {
		a, b := p.Partitions[i], p.Partitions[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
}

// Assignment is a partition's current replicas.
type Assignment struct {
	Topic     string
	Partition int32
	Replicas  []int32
}

// Move is one partition of a generated plan, from its current replicas to
// the proposed ones.
type Move struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Current   []int32 `json:"current"`
	Proposed  []int32 `json:"proposed"`
}

// GenerateDrain proposes a plan that moves every replica off broker
// remove. Each replica on it is replaced, in the same position of the
// assignment (so a preferred leader is replaced by the new preferred
// leader), by the target broker that holds the fewest replicas so far and
// is not already a replica of the partition; ties go to the lowest id.
// Partitions without a replica on remove are left out. It fails when a
// partition has no target broker left to take the replica.
func GenerateDrain(current []Assignment, targets []int32, remove int32) (Plan, []Move, error) {
	load := map[int32]int{}
	var cands []int32
	for _, b := range targets {
		if b == remove {
			continue
		}
		if _, dup := load[b]; dup {
			continue
		}
		load[b] = 0
		cands = append(cands, b)
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i] < cands[j] })
	sorted := append([]Assignment(nil), current...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	for _, a := range sorted {
		for _, r := range a.Replicas {
			if _, ok := load[r]; ok {
				load[r]++
			}
		}
	}
	plan := Plan{Version: 1, Partitions: []PlanPartition{}}
	var moves []Move
	for _, a := range sorted {
		idx := -1
		for i, r := range a.Replicas {
			if r == remove {
				idx = i
			}
		}
		if idx < 0 {
			continue
		}
		in := map[int32]bool{}
		for _, r := range a.Replicas {
			in[r] = true
		}
		best := int32(-1)
		for _, c := range cands {
			if in[c] {
				continue
			}
			if best < 0 || load[c] < load[best] {
				best = c
			}
		}
		if best < 0 {
			return Plan{}, nil, fmt.Errorf("%s-%d: no broker left to take the replica of broker %d (targets %v, replicas %v)",
				a.Topic, a.Partition, remove, cands, a.Replicas)
		}
		load[best]++
		proposed := append([]int32(nil), a.Replicas...)
		proposed[idx] = best
		plan.Partitions = append(plan.Partitions, PlanPartition{Topic: a.Topic, Partition: a.Partition, Replicas: proposed})
		moves = append(moves, Move{Topic: a.Topic, Partition: a.Partition, Current: append([]int32(nil), a.Replicas...), Proposed: proposed})
	}
	return plan, moves, nil
}
