package check

import (
	"fmt"
	"sort"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

// partKey names a partition across topic re-creations: a topic deleted
// and created again under the same name gets a new topic id, and its
// epochs start over. Observations from requests that carry no topic id
// can only be keyed by name.
type partKey struct {
	Topic     string
	TopicID   string
	Partition int32
}

func (k partKey) String() string {
	if k.TopicID == "" {
		return fmt.Sprintf("%s-%d", k.Topic, k.Partition)
	}
	id := k.TopicID
	if len(id) > 8 {
		id = id[:8]
	}
	return fmt.Sprintf("%s-%d (id %s)", k.Topic, k.Partition, id)
}

func keyOf(o history.Observation) partKey {
	return partKey{Topic: o.Topic, TopicID: o.TopicID, Partition: o.Partition}
}

// carriesLeader reports whether an observation states a partition's leader
// at a leader epoch (deletions and StopReplica do not).
func carriesLeader(o history.Observation) bool {
	return o.Partition >= 0 && !o.Deleted && o.LeaderEpoch >= 0 && o.Request != history.StopReplica
}

// OneLeaderPerEpoch checks that across every agent's accepted control
// requests, a partition never had two different leaders (or a leader and
// "no leader") at the same leader epoch. Two brokers that both believe
// they lead a partition at one epoch is a split brain.
func OneLeaderPerEpoch(obs []history.Observation) Result {
	res := newResult("one-leader-per-epoch")
	type epochKey struct {
		p  partKey
		le int32
	}
	type firstSeen struct {
		leader int32
		o      history.Observation
	}
	seen := map[epochKey]map[int32]history.Observation{} // leader → first observation stating it
	n := 0
	for _, o := range sortedObs(obs) {
		if !o.Accepted || !carriesLeader(o) {
			continue
		}
		n++
		k := epochKey{keyOf(o), o.LeaderEpoch}
		m := seen[k]
		if m == nil {
			m = map[int32]history.Observation{}
			seen[k] = m
		}
		if _, ok := m[o.Leader]; !ok {
			m[o.Leader] = o
		}
	}
	keys := make([]epochKey, 0, len(seen))
	for k, m := range seen {
		if len(m) > 1 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].p != keys[j].p {
			return keys[i].p.String() < keys[j].p.String()
		}
		return keys[i].le < keys[j].le
	})
	for _, k := range keys {
		m := seen[k]
		var firsts []firstSeen
		for l, o := range m {
			firsts = append(firsts, firstSeen{l, o})
		}
		sort.Slice(firsts, func(i, j int) bool { return firsts[i].o.Time.Before(firsts[j].o.Time) })
		v := Violation{Topic: k.p.Topic, Partition: k.p.Partition, Time: firsts[1].o.Time}
		desc := fmt.Sprintf("partition %s has %d leaders at leader epoch %d:", k.p, len(firsts), k.le)
		for _, f := range firsts {
			v.Brokers = append(v.Brokers, f.o.Broker)
			desc += fmt.Sprintf(" leader %d (first seen by %s);", f.leader, f.o)
		}
		v.Description = desc[:len(desc)-1]
		res.add(v)
	}
	res.Checked = fmt.Sprintf("%d accepted partition states over %d (partition, leader epoch) pairs", n, len(seen))
	return res
}

// sortedObs orders observations by agent, incarnation (in the order the
// incarnations first appear in time) and sequence (the order the agent
// decided them in), then time.
func sortedObs(obs []history.Observation) []history.Observation {
	first := map[agentKey]int64{}
	for _, o := range obs {
		k := agentKey{o.Broker, o.Incarnation}
		if t, ok := first[k]; !ok || o.Time.UnixNano() < t {
			first[k] = o.Time.UnixNano()
		}
	}
	out := append([]history.Observation(nil), obs...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Broker != b.Broker {
			return a.Broker < b.Broker
		}
		if a.Incarnation != b.Incarnation {
			fa, fb := first[agentKey{a.Broker, a.Incarnation}], first[agentKey{b.Broker, b.Incarnation}]
			if fa != fb {
				return fa < fb
			}
			return a.Incarnation < b.Incarnation
		}
		if a.Seq != b.Seq && a.Seq != 0 && b.Seq != 0 {
			return a.Seq < b.Seq
		}
		return a.Time.Before(b.Time)
	})
	return out
}

type agentKey struct {
	Broker      int32
	Incarnation string
}

// ControllerEpochFencing checks that no agent accepted a control request
// whose controller epoch was lower than one it had accepted before in the
// same process lifetime (an agent that restarts has seen nothing). A
// refusal for STALE_CONTROLLER_EPOCH is what should have happened instead.
func ControllerEpochFencing(obs []history.Observation) Result {
	res := newResult("controller-epoch-fencing")
	// Agents that record requests as a whole are judged on those; the
	// partitions of one request share its epoch and would only repeat it.
	wholes := map[agentKey]bool{}
	for _, o := range obs {
		if o.Partition < 0 {
			wholes[agentKey{o.Broker, o.Incarnation}] = true
		}
	}
	highest := map[agentKey]history.Observation{}
	n, refused := 0, 0
	for _, o := range sortedObs(obs) {
		k := agentKey{o.Broker, o.Incarnation}
		if wholes[k] && o.Partition >= 0 {
			continue
		}
		if !o.Accepted {
			refused++
			continue
		}
		n++
		h, ok := highest[k]
		if ok && o.ControllerEpoch < h.ControllerEpoch {
			res.add(Violation{Topic: o.Topic, Partition: o.Partition, Time: o.Time, Brokers: []int32{o.Broker},
				Description: fmt.Sprintf("broker %d accepted a %s with controller epoch %d after accepting epoch %d: %s (the earlier one: %s)",
					o.Broker, o.Request, o.ControllerEpoch, h.ControllerEpoch, o, h)})
			continue
		}
		if !ok || o.ControllerEpoch > h.ControllerEpoch {
			highest[k] = o
		}
	}
	lifetimes := map[agentKey]bool{}
	for _, o := range obs {
		lifetimes[agentKey{o.Broker, o.Incarnation}] = true
	}
	res.Checked = fmt.Sprintf("%d accepted and %d refused control requests over %d agent lifetimes", n, refused, len(lifetimes))
	return res
}

// EpochsMonotonic checks that in each agent's accepted partition states
// (one process lifetime at a time) a partition's leader epoch and partition
// epoch never went back. A deletion the agent accepted ends the
// partition's sequence: a topic created again under the same name starts
// from epoch 0.
func EpochsMonotonic(obs []history.Observation) Result {
	res := newResult("epochs-monotonic")
	type k struct {
		a agentKey
		p partKey
	}
	last := map[k]history.Observation{}
	n := 0
	for _, o := range sortedObs(obs) {
		if !o.Accepted || o.Partition < 0 {
			continue
		}
		key := k{agentKey{o.Broker, o.Incarnation}, keyOf(o)}
		if o.Deleted {
			delete(last, key)
			continue
		}
		if !carriesLeader(o) {
			continue
		}
		n++
		prev, ok := last[key]
		if ok && o.LeaderEpoch < prev.LeaderEpoch {
			res.add(Violation{Topic: o.Topic, Partition: o.Partition, Time: o.Time, Brokers: []int32{o.Broker},
				Description: fmt.Sprintf("broker %d: leader epoch of %s went back from %d to %d: %s after %s",
					o.Broker, keyOf(o), prev.LeaderEpoch, o.LeaderEpoch, o, prev)})
			continue
		}
		if ok && o.PartitionEpoch < prev.PartitionEpoch {
			res.add(Violation{Topic: o.Topic, Partition: o.Partition, Time: o.Time, Brokers: []int32{o.Broker},
				Description: fmt.Sprintf("broker %d: partition epoch of %s went back from %d to %d: %s after %s",
					o.Broker, keyOf(o), prev.PartitionEpoch, o.PartitionEpoch, o, prev)})
			continue
		}
		last[key] = o
	}
	res.Checked = fmt.Sprintf("%d accepted partition states", n)
	return res
}
