package controller

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// ElectionType is the election an ElectLeaders request asks for, with
// Kafka's wire values.
type ElectionType int8

const (
	// PreferredLeaderElection moves leadership back to each partition's
	// preferred (first) replica, if it is live and in the ISR.
	PreferredLeaderElection ElectionType = 0
	// UncleanLeaderElection gives a leaderless partition a leader, from
	// outside the ISR if no ISR member is live: committed data may be lost,
	// which is why it is done only on request or for a topic whose
	// unclean.leader.election.enable is true.
	UncleanLeaderElection ElectionType = 1
)

func (t ElectionType) String() string {
	switch t {
	case PreferredLeaderElection:
		return "PREFERRED"
	case UncleanLeaderElection:
		return "UNCLEAN"
	}
	return "ElectionType(" + strconv.Itoa(int(t)) + ")"
}

// TopicPartition names a partition by topic name.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// ElectLeadersResult is the outcome for one partition.
type ElectLeadersResult struct {
	Topic     string
	Partition int32
	Err       error
}

// ElectLeaders runs elections on demand, all in one event. A nil partition
// list means every partition, and then, as Kafka does, only partitions an
// election could change are attempted and reported: for a preferred
// election those whose leader is not their preferred replica, for an
// unclean one those with no leader. With an explicit list every partition
// named is reported, each once, in the order first named.
//
// Per-partition errors: ELECTION_NOT_NEEDED (the preferred replica leads
// already, or, for an unclean election, the partition has a leader),
// PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, and
// UNKNOWN_TOPIC_OR_PARTITION (topics being deleted included).
func (c *Controller) ElectLeaders(ctx context.Context, typ ElectionType, partitions []TopicPartition) ([]ElectLeadersResult, error) {
	if typ != PreferredLeaderElection && typ != UncleanLeaderElection {
		return nil, kafkaErr(kerr.InvalidRequest, "unknown election type %d", typ)
	}
	v, _, err := c.submit(ctx, "elect-leaders", func(m *managers, w *work) (eventOutcome, error) {
		return answer(m.replication.electLeaders(w, typ, partitions))
	}, nil)
	if err != nil {
		return nil, err
	}
	return v.([]ElectLeadersResult), nil
}

func (m *replicationManager) electLeaders(w *work, typ ElectionType, partitions []TopicPartition) ([]ElectLeadersResult, error) {
	w.because(strings.ToLower(typ.String()) + " leader election requested")
	all := partitions == nil
	var out []ElectLeadersResult
	var refs []partRef
	at := map[partRef]int{} // where each attempted partition's result is
	if all {
		for _, ref := range w.allPartitionRefs() {
			p := w.img().Partition(ref.id, ref.part)
			switch typ {
			case PreferredLeaderElection:
				if len(p.Replicas) > 0 && p.Leader == p.Replicas[0] {
					continue
				}
			case UncleanLeaderElection:
				if p.Leader != rl.NoLeader {
					continue
				}
			}
			at[ref] = len(out)
			out = append(out, ElectLeadersResult{Topic: ref.name, Partition: ref.part})
			refs = append(refs, ref)
		}
	} else {
		seen := map[TopicPartition]bool{}
		for _, tp := range partitions {
			if seen[tp] {
				continue
			}
			seen[tp] = true
			res := ElectLeadersResult{Topic: tp.Topic, Partition: tp.Partition}
			t := w.img().TopicByName(tp.Topic)
			if t == nil || t.Deleting || w.img().Partition(t.ID, tp.Partition) == nil {
				res.Err = kafkaErr(kerr.UnknownTopicOrPartition, "%s-%d", tp.Topic, tp.Partition)
				out = append(out, res)
				continue
			}
			ref := partRef{id: t.ID, name: t.Name, part: tp.Partition}
			at[ref] = len(out)
			out = append(out, res)
			refs = append(refs, ref)
		}
	}
	if len(refs) == 0 {
		return out, nil
	}
	var failed map[partRef]error
	var err error
	switch typ {
	case PreferredLeaderElection:
		failed, err = m.handlePartitionStateChanges(w, refs, rl.OnlinePartition, PreferredElection, nil)
	case UncleanLeaderElection:
		failed, err = m.electUnclean(w, refs)
	}
	if err != nil {
		return nil, err
	}
	for ref, e := range failed {
		out[at[ref]].Err = electionError(ref, e)
	}
	return out, nil
}

// electUnclean runs an unclean election on the partitions that have no
// leader: a live ISR member if there is one, otherwise the first live
// replica with an ISR of itself alone. A partition that has a leader is
// answered ELECTION_NOT_NEEDED without an election, as Kafka does: the
// offline strategy would otherwise replace a live leader.
func (m *replicationManager) electUnclean(w *work, refs []partRef) (map[partRef]error, error) {
	failed := map[partRef]error{}
	var leaderless []partRef
	for _, ref := range refs {
		p := w.img().Partition(ref.id, ref.part)
		if p != nil && p.Leader != rl.NoLeader {
			failed[ref] = kafkaErr(kerr.ElectionNotNeeded, "%s-%d: broker %d is the leader", ref.name, ref.part, p.Leader)
			continue
		}
		leaderless = append(leaderless, ref)
	}
	if len(leaderless) == 0 {
		return failed, nil
	}
	f, err := m.handlePartitionStateChanges(w, leaderless, rl.OnlinePartition, OfflineElection, func(partRef) bool { return true })
	if err != nil {
		return nil, err
	}
	for ref, e := range f {
		failed[ref] = e
	}
	return failed, nil
}

// electionError turns an election failure into the Kafka error a client
// of ElectLeaders expects, naming the partition.
func electionError(ref partRef, err error) error {
	var ke *Error
	switch {
	case errors.Is(err, ErrElectionNotNeeded):
		return kafkaErr(kerr.ElectionNotNeeded, "%s-%d: %v", ref.name, ref.part, err)
	case errors.Is(err, ErrPreferredNotAvailable):
		return kafkaErr(kerr.PreferredLeaderNotAvailable, "%s-%d: %v", ref.name, ref.part, err)
	case errors.Is(err, ErrNoEligibleLeader):
		return kafkaErr(kerr.EligibleLeadersNotAvailable, "%s-%d: %v", ref.name, ref.part, err)
	case errors.As(err, &ke):
		return err
	default:
		return kafkaErr(unknownServerError, "%s-%d: %v", ref.name, ref.part, err)
	}
}
