package controller

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ctrlquorum/ctrlquorum/internal/plantedbug"
	"github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Strategy names one of the leader election strategies of the partition
// state machine. The zero value is deliberately not a strategy, so that a
// request that forgot to name one fails loudly instead of silently running
// an offline election.
type Strategy uint8

const (
	// OfflineElection replaces a leader that is gone: the partition is
	// leaderless or its leader's broker is no longer live.
	OfflineElection Strategy = iota + 1
	// PreferredElection moves leadership back to the first replica of the
	// assignment, which is how leadership is rebalanced across brokers.
	PreferredElection
	// ReassignedElection picks a leader from the target replica set of a
	// reassignment, so that the replicas being removed can be dropped.
	ReassignedElection
	// ControlledShutdownElection moves leadership off brokers that asked to
	// shut down, so that they can stop without leaving a partition
	// unavailable.
	ControlledShutdownElection
	// NoOpElection keeps leader and ISR as they are. It exists so that the
	// controller can record a partition online again and resend its
	// current state through the same code path as a real election
	// (reconcile, after a failover). Leader and ISR being unchanged, no
	// PartitionChange is staged: neither the leader epoch nor the
	// partition epoch moves.
	NoOpElection
)

var strategyNames = [...]string{
	OfflineElection:            "Offline",
	PreferredElection:          "Preferred",
	ReassignedElection:         "Reassigned",
	ControlledShutdownElection: "ControlledShutdown",
	NoOpElection:               "NoOp",
}

func (s Strategy) String() string {
	if s.Valid() {
		return strategyNames[s]
	}
	return fmt.Sprintf("Strategy(%d)", uint8(s))
}

// Valid reports whether s is one of the five strategies.
func (s Strategy) Valid() bool { return s >= OfflineElection && s <= NoOpElection }

// PartitionView is what an election needs to know about one partition. The
// election reads it and never writes to it, so a caller may pass slices that
// alias its metadata image.
type PartitionView struct {
	// Replicas is the assignment, preferred leader first. During a
	// reassignment it holds every replica, old and new.
	Replicas []int32
	// ISR is the in-sync replica set in the order the image keeps it.
	ISR []int32
	// Leader is the current leader, or raftlog.NoLeader.
	Leader int32
	// Target is the replica set a reassignment moves to. Only
	// ReassignedElection reads it.
	Target []int32
}

// ElectionInput is everything an election decides from. The broker groups
// are views rather than copies so that electing for many partitions costs
// no allocation per partition for the groups.
type ElectionInput struct {
	Partition PartitionView
	// Live are the brokers that may lead or receive requests. Brokers in
	// controlled shutdown are still running and should be included: they
	// then receive the LeaderAndIsr that tells them they no longer lead,
	// which is what Kafka's controller did.
	Live Brokers
	// ShuttingDown are the brokers in controlled shutdown. Only
	// ControlledShutdownElection reads it; nil means none.
	ShuttingDown Brokers
	// Unclean allows OfflineElection to pick a live replica outside the
	// ISR when no ISR member is live (topic config
	// unclean.leader.election.enable, or ElectLeaders with type UNCLEAN).
	// Other strategies ignore it.
	Unclean bool
	// lists, when set, provides the memory of the result's lists: an
	// event electing leaders for many partitions takes it from a few
	// blocks instead of allocating each list on its own.
	lists *int32Arena
}

// Election is the outcome of an election: the leader and ISR to commit, and
// the brokers that must get a LeaderAndIsr once the change is committed.
// Every slice is freshly allocated and never nil, so a caller may keep or
// modify it, and an empty set encodes the same way wherever it goes.
type Election struct {
	// Leader is the new leader, or raftlog.NoLeader.
	Leader int32
	// ISR is the new in-sync replica set.
	ISR []int32
	// Receivers are the brokers to send LeaderAndIsr to. Empty when there is
	// no leader to announce: such a partition gets UpdateMetadata only.
	Receivers []int32
	// Unclean is true when the leader was taken from outside the ISR, so
	// committed data may have been lost. The controller should log it and
	// count it; it is the one outcome an operator must hear about.
	Unclean bool
}

// Errors an election can fail with. Each is wrapped in an *ElectionError
// that says which strategy failed and why; match them with errors.Is.
//
// Mapping to Kafka error codes, for the ElectLeaders API and friends:
//
//	ErrNoEligibleLeader      ELIGIBLE_LEADERS_NOT_AVAILABLE
//	ErrPreferredNotAvailable PREFERRED_LEADER_NOT_AVAILABLE
//	ErrElectionNotNeeded     ELECTION_NOT_NEEDED
//	ErrUnknownStrategy       a bug in the caller; UNKNOWN_SERVER_ERROR
//
// ElectLeaders UNCLEAN on a partition that still has a leader should be
// answered ELECTION_NOT_NEEDED by the caller before any election runs, as
// Kafka does: the offline strategy does not look at whether the current
// leader is alive.
var (
	// ErrNoEligibleLeader: no replica satisfies the strategy's rule.
	ErrNoEligibleLeader = errors.New("no eligible leader")
	// ErrPreferredNotAvailable: the preferred replica is not live or not
	// in the ISR.
	ErrPreferredNotAvailable = errors.New("preferred leader not available")
	// ErrElectionNotNeeded: the preferred replica already leads.
	ErrElectionNotNeeded = errors.New("election not needed")
	// ErrUnknownStrategy: the Strategy value is not one of the five.
	ErrUnknownStrategy = errors.New("unknown election strategy")
)

// ElectionError says which strategy failed, with one of the sentinel errors
// above as the reason and a deterministic, human-readable detail naming the
// brokers involved (it ends up in logs and in the error message that Kafka
// clients print).
type ElectionError struct {
	Strategy Strategy
	Err      error
	Detail   string
}

func (e *ElectionError) Error() string {
	return fmt.Sprintf("%s election: %v: %s", e.Strategy, e.Err, e.Detail)
}

func (e *ElectionError) Unwrap() error { return e.Err }

// Elect runs strategy s on one partition. It is a pure function of its
// arguments: the same input gives the same result on every controller, which
// is what lets a decision be replayed or checked against the log.
//
// On success the Election is the change to commit.
//
// On failure the Election is still meaningful, so that the caller never has
// to invent a state of its own:
//
//   - OfflineElection with ErrNoEligibleLeader returns the leaderless state
//     that must be committed: Leader = raftlog.NoLeader, ISR = the current
//     ISR unchanged, no receivers. Keeping the ISR is the last-ISR rule
//     (docs/statemachines.md, the case the controller exists for): none of
//     its members can lead now, yet every one of them holds every
//     committed record (that is what being in the ISR means), so whichever
//     returns first can lead again without losing data. Emptying it, as
//     the earliest ZooKeeper-era controllers did, left unclean election as
//     the only way back. In the usual case the ISR has already shrunk to
//     one member as brokers failed one by one (see ShrinkISR), and that
//     member is kept.
//   - Every other failure, and ErrElectionNotNeeded, returns the partition
//     unchanged (current leader, current ISR, no receivers): there is
//     nothing to commit, and committing it by mistake would change nothing.
func Elect(s Strategy, in ElectionInput) (Election, error) {
	switch s {
	case OfflineElection:
		return electOffline(in)
	case PreferredElection:
		return electPreferred(in)
	case ReassignedElection:
		return electReassigned(in)
	case ControlledShutdownElection:
		return electControlledShutdown(in)
	case NoOpElection:
		p := in.Partition
		return Election{Leader: p.Leader, ISR: in.lists.clone(p.ISR), Receivers: in.lists.clone(p.Replicas)}, nil
	default:
		return unchanged(in.Partition), &ElectionError{Strategy: s, Err: ErrUnknownStrategy,
			Detail: fmt.Sprintf("strategy value %d", uint8(s))}
	}
}

// ShrinkISR removes the brokers in gone from isr, except that it never turns
// a non-empty ISR into an empty one: if every member is gone the ISR is
// returned unchanged. That is the last-ISR rule as the replica state machine
// needs it when a replica goes offline — the last in-sync replica stays in
// the ISR so that it can lead again, without data loss, when it returns. The
// order of the remaining members is kept, and the result is a fresh slice.
func ShrinkISR(isr []int32, gone Brokers) []int32 {
	return (*int32Arena)(nil).shrinkISR(isr, gone)
}

func (a *int32Arena) shrinkISR(isr []int32, gone Brokers) []int32 {
	out := a.make(len(isr))
	for _, id := range isr {
		if !has(gone, id) {
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return a.clone(isr)
	}
	return out
}

func electOffline(in ElectionInput) (Election, error) {
	p := in.Partition
	if plantedbug.On(plantedbug.UncleanElection) {
		for _, r := range p.Replicas {
			if has(in.Live, r) && !slices.Contains(p.ISR, r) {
				return Election{Leader: r, ISR: []int32{r}, Receivers: in.lists.liveOf(p.Replicas, in.Live), Unclean: true}, nil
			}
		}
	}
	for _, r := range p.Replicas {
		if has(in.Live, r) && slices.Contains(p.ISR, r) {
			return Election{
				Leader:    r,
				ISR:       in.lists.filter(p.ISR, func(id int32) bool { return has(in.Live, id) }),
				Receivers: in.lists.liveOf(p.Replicas, in.Live),
			}, nil
		}
	}
	detail := fmt.Sprintf("no live replica of %v is in ISR %v and unclean election is disabled", p.Replicas, p.ISR)
	if in.Unclean {
		for _, r := range p.Replicas {
			if has(in.Live, r) {
				return Election{
					Leader:    r,
					ISR:       []int32{r},
					Receivers: in.lists.liveOf(p.Replicas, in.Live),
					Unclean:   true,
				}, nil
			}
		}
		detail = fmt.Sprintf("no replica of %v is live", p.Replicas)
	}
	leaderless := Election{Leader: raftlog.NoLeader, ISR: in.lists.clone(p.ISR), Receivers: []int32{}}
	return leaderless, &ElectionError{Strategy: OfflineElection, Err: ErrNoEligibleLeader, Detail: detail}
}

func electPreferred(in ElectionInput) (Election, error) {
	p := in.Partition
	fail := func(err error, format string, args ...any) (Election, error) {
		return unchanged(p), &ElectionError{Strategy: PreferredElection, Err: err, Detail: fmt.Sprintf(format, args...)}
	}
	if len(p.Replicas) == 0 {
		return fail(ErrPreferredNotAvailable, "partition has no replicas")
	}
	pref := p.Replicas[0]
	// Checked before liveness, as Kafka does: a preferred leader that leads
	// already needs no election even if its broker has just died — that is
	// the offline election's business.
	if p.Leader != raftlog.NoLeader && p.Leader == pref {
		return fail(ErrElectionNotNeeded, "preferred replica %d is already the leader", pref)
	}
	if !has(in.Live, pref) {
		return fail(ErrPreferredNotAvailable, "preferred replica %d is not live", pref)
	}
	if !slices.Contains(p.ISR, pref) {
		return fail(ErrPreferredNotAvailable, "preferred replica %d is not in ISR %v", pref, p.ISR)
	}
	return Election{Leader: pref, ISR: in.lists.clone(p.ISR), Receivers: in.lists.liveOf(p.Replicas, in.Live)}, nil
}

func electReassigned(in ElectionInput) (Election, error) {
	p := in.Partition
	for _, r := range p.Target {
		if has(in.Live, r) && slices.Contains(p.ISR, r) {
			return Election{Leader: r, ISR: in.lists.clone(p.ISR), Receivers: in.lists.clone(p.Target)}, nil
		}
	}
	return unchanged(p), &ElectionError{Strategy: ReassignedElection, Err: ErrNoEligibleLeader,
		Detail: fmt.Sprintf("no replica of target %v is both live and in ISR %v", p.Target, p.ISR)}
}

func electControlledShutdown(in ElectionInput) (Election, error) {
	p := in.Partition
	for _, r := range p.Replicas {
		if slices.Contains(p.ISR, r) && has(in.Live, r) && !has(in.ShuttingDown, r) {
			return Election{
				Leader:    r,
				ISR:       in.lists.filter(p.ISR, func(id int32) bool { return !has(in.ShuttingDown, id) }),
				Receivers: in.lists.liveOf(p.Replicas, in.Live),
			}, nil
		}
	}
	return unchanged(p), &ElectionError{Strategy: ControlledShutdownElection, Err: ErrNoEligibleLeader,
		Detail: fmt.Sprintf("no replica of %v is in ISR %v, live and not shutting down", p.Replicas, p.ISR)}
}

// unchanged is the result of an election that changes nothing.
func unchanged(p PartitionView) Election {
	return Election{Leader: p.Leader, ISR: clone(p.ISR), Receivers: []int32{}}
}

// liveOf returns the members of ids that are live, in the order of ids.
func liveOf(ids []int32, live Brokers) []int32 {
	return (*int32Arena)(nil).liveOf(ids, live)
}

func (a *int32Arena) liveOf(ids []int32, live Brokers) []int32 {
	return a.filter(ids, func(id int32) bool { return has(live, id) })
}

func (a *int32Arena) filter(ids []int32, keep func(int32) bool) []int32 {
	out := a.make(len(ids))
	for _, id := range ids {
		if keep(id) {
			out = append(out, id)
		}
	}
	return out
}

// clone copies ids into a fresh, never-nil slice.
func clone(ids []int32) []int32 { return (*int32Arena)(nil).clone(ids) }

func (a *int32Arena) clone(ids []int32) []int32 {
	return append(a.make(len(ids)), ids...)
}
