package voter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
)

// Membership changes, as KIP-853 defines them for KRaft and hashicorp/raft
// carries them out: a voter is added as a non-voter first, which the
// leader replicates to (a snapshot, then the log) without counting it in
// any majority, and is promoted only once its log reaches the commit
// index, so that adding it never makes the quorum wait for a node still
// catching up. A voter removed is dropped from the configuration; the
// leader is never removed by itself: it hands leadership to another voter
// first and the new leader removes it (ErrHandedOver). One change runs at
// a time on a leader (ErrChangeInProgress), and raft itself accepts a
// configuration entry only once the previous one committed.
//
// Each voter's raft address is a raftnet.PeerAddress carrying its
// directory id and Kafka listener, so the configuration in the log is the
// record of who the voters are, and a node formatted again under an old
// id is refused by the stream layer as that voter.

// Errors of a membership change. The Kafka listener maps them onto the
// error codes Kafka returns for the same conditions.
var (
	// ErrChangeInProgress: another membership change has not finished
	// (Kafka: REQUEST_TIMED_OUT).
	ErrChangeInProgress = errors.New("another voter change is in progress")
	// ErrDuplicateVoter: the id is a voter already (DUPLICATE_VOTER).
	ErrDuplicateVoter = errors.New("the voter is already part of the set of voters")
	// ErrVoterNotFound: no voter of that id and directory (VOTER_NOT_FOUND).
	ErrVoterNotFound = errors.New("the voter is not part of the set of voters")
	// ErrNotCaughtUp: the new voter's log did not reach the commit index
	// in time; it was taken out of the configuration again
	// (REQUEST_TIMED_OUT).
	ErrNotCaughtUp = errors.New("the new voter did not catch up in time")
	// ErrHandedOver: the voter to remove was this leader, which handed
	// leadership over; the new leader is to be asked (NOT_CONTROLLER).
	ErrHandedOver = errors.New("leadership handed over before removing this voter: ask the new leader")
	// ErrLastVoter: removing the voter would leave none (INVALID_REQUEST).
	ErrLastVoter = errors.New("the last voter cannot be removed")
)

// Member is one server of the raft configuration.
type Member struct {
	ID      string
	Address raftnet.PeerAddress
	// Voter is false for a non-voter: a voter being added, still
	// catching up (an observer, in Kafka's terms).
	Voter bool
}

// NodeID is the member's id as a Kafka node id, -1 when it is not one.
func (m Member) NodeID() int32 {
	n, err := strconv.ParseInt(m.ID, 10, 32)
	if err != nil {
		return -1
	}
	return int32(n)
}

// Members returns the latest raft configuration (committed or not), in its
// order, and the index of the log entry that holds it. An address raft
// holds that does not parse is returned as a legacy address of that text.
func (v *Voter) Members() ([]Member, uint64, error) {
	f := v.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, 0, err
	}
	var out []Member
	for _, s := range f.Configuration().Servers {
		a, err := raftnet.ParsePeerAddress(string(s.Address))
		if err != nil {
			a = raftnet.PeerAddress{HostPort: string(s.Address)}
		}
		out = append(out, Member{ID: string(s.ID), Address: a, Voter: s.Suffrage == raft.Voter})
	}
	return out, f.Index(), nil
}

// AddVoterRequest describes a voter to add.
type AddVoterRequest struct {
	ID      string
	Address raftnet.PeerAddress
	// LogEnd asks the new node for its last log index. hashicorp/raft
	// keeps the leader's match index of each follower to itself, so the
	// node is asked; it must answer as ID, from Address.DirectoryID.
	LogEnd func(ctx context.Context) (uint64, error)
	// Progress, if set, hears the catch-up: the node's log end, or an
	// error asking it, against the commit index.
	Progress func(logEnd, commitIndex uint64, err error)
	// PollInterval is how often the node is asked; zero: 100 ms.
	PollInterval time.Duration
}

// MembershipStats counts the membership changes this voter led: voters
// added and removed, and changes asked of it that ended in an error
// (refused, timed out, leadership lost).
type MembershipStats struct {
	Added, Removed, Failed uint64
	// InProgress is 1 while a change runs on this voter.
	InProgress uint64
}

type membership struct {
	busy                   atomic.Bool
	added, removed, failed atomic.Uint64
}

// MembershipStats returns the counts of the changes this voter led.
func (v *Voter) MembershipStats() MembershipStats {
	st := MembershipStats{Added: v.members.added.Load(), Removed: v.members.removed.Load(), Failed: v.members.failed.Load()}
	if v.members.busy.Load() {
		st.InProgress = 1
	}
	return st
}

// begin takes the one-change-at-a-time slot.
func (v *Voter) begin() (func(err *error), error) {
	if !v.members.busy.CompareAndSwap(false, true) {
		v.members.failed.Add(1)
		return nil, ErrChangeInProgress
	}
	return func(err *error) {
		// A handover is not a failure: the new leader does the change.
		if *err != nil && !errors.Is(*err, ErrHandedOver) {
			v.members.failed.Add(1)
		}
		v.members.busy.Store(false)
	}, nil
}

// changeTimeout bounds one configuration entry raft is asked to append.
func changeTimeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Millisecond)
	}
	return 0
}

// AddVoter adds req.ID as a voter on this leader: as a non-voter first,
// promoted once its log end reaches the commit index. It returns once the
// promotion is committed. If the node does not catch up before ctx ends,
// or leadership is lost on the way, the non-voter is removed again (when
// this voter still can) and the quorum is as it was.
func (v *Voter) AddVoter(ctx context.Context, req AddVoterRequest) (err error) {
	if req.ID == "" || req.Address.HostPort == "" || req.LogEnd == nil {
		return errors.New("voter: AddVoter needs an id, an address and LogEnd")
	}
	if v.raft.State() != raft.Leader {
		return raft.ErrNotLeader
	}
	done, err := v.begin()
	if err != nil {
		return err
	}
	defer done(&err)
	members, index, err := v.Members()
	if err != nil {
		return err
	}
	for _, m := range members {
		if m.ID == req.ID && m.Voter {
			return fmt.Errorf("%w: voter %s (directory %s) is one", ErrDuplicateVoter, m.ID, dirOrLegacy(m.Address))
		}
	}
	addr := raft.ServerAddress(req.Address.String())
	v.log.Info("adding a voter: as a non-voter until it catches up", "voter", req.ID, "address", addr)
	f := v.raft.AddNonvoter(raft.ServerID(req.ID), addr, index, changeTimeout(ctx))
	if err := f.Error(); err != nil {
		return fmt.Errorf("add %s as a non-voter: %w", req.ID, err)
	}
	index = f.Index()
	if err := v.awaitCatchUp(ctx, req); err != nil {
		v.log.Warn("the voter being added did not catch up: removing it again", "voter", req.ID, "error", err)
		v.dropNonvoter(req.ID)
		return err
	}
	f = v.raft.AddVoter(raft.ServerID(req.ID), addr, index, changeTimeout(ctx))
	if err := f.Error(); err != nil {
		v.dropNonvoter(req.ID)
		return fmt.Errorf("promote %s to voter: %w", req.ID, err)
	}
	v.members.added.Add(1)
	v.log.Info("voter added", "voter", req.ID, "address", addr, "index", f.Index())
	return nil
}

// awaitCatchUp waits for the new node's log end to reach the commit
// index as it was when the node was asked.
func (v *Voter) awaitCatchUp(ctx context.Context, req AddVoterRequest) error {
	every := req.PollInterval
	if every <= 0 {
		every = 100 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if v.raft.State() != raft.Leader {
			return raft.ErrLeadershipLost
		}
		commit := v.raft.CommitIndex()
		end, err := req.LogEnd(ctx)
		if req.Progress != nil {
			req.Progress(end, commit, err)
		}
		if err == nil && end >= commit {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("%w: %v (last answer: %v)", ErrNotCaughtUp, ctx.Err(), err)
			}
			return fmt.Errorf("%w: %v with its log at %d of %d", ErrNotCaughtUp, ctx.Err(), end, commit)
		case <-t.C:
		}
	}
}

// dropNonvoter takes a voter being added out of the configuration again,
// if it is still a non-voter there and this voter still leads.
func (v *Voter) dropNonvoter(id string) {
	members, index, err := v.Members()
	if err != nil || v.raft.State() != raft.Leader {
		return
	}
	for _, m := range members {
		if m.ID == id && !m.Voter {
			if err := v.raft.RemoveServer(raft.ServerID(id), index, 10*time.Second).Error(); err != nil {
				v.log.Warn("could not remove the non-voter of a failed add", "voter", id, "error", err)
				return
			}
			v.log.Info("non-voter of a failed add removed", "voter", id)
		}
	}
}

// RemoveVoter removes voter id, of directory dirID, on this leader. An
// empty dirID, or a voter whose address names no directory (a legacy
// one), matches any. A non-voter left by an add that did not finish is
// removed the same way. When id is this leader, leadership is handed to
// another voter first and ErrHandedOver returned: the new leader is to
// remove it.
func (v *Voter) RemoveVoter(ctx context.Context, id, dirID string) (err error) {
	if v.raft.State() != raft.Leader {
		return raft.ErrNotLeader
	}
	done, err := v.begin()
	if err != nil {
		return err
	}
	defer done(&err)
	members, index, err := v.Members()
	if err != nil {
		return err
	}
	var target *Member
	voters := 0
	for i, m := range members {
		if m.Voter {
			voters++
		}
		if m.ID == id && (dirID == "" || m.Address.Legacy() || m.Address.DirectoryID == dirID) {
			target = &members[i]
		}
	}
	if target == nil {
		return fmt.Errorf("%w: no voter %s of directory %s in %s", ErrVoterNotFound, id, orAny(dirID), describeMembers(members))
	}
	if target.Voter && voters == 1 {
		return ErrLastVoter
	}
	if id == v.id {
		v.log.Info("removing this voter, the leader: handing leadership over first", "voter", id)
		if err := v.raft.LeadershipTransfer().Error(); err != nil {
			return fmt.Errorf("hand leadership over before removing %s: %w", id, err)
		}
		return ErrHandedOver
	}
	v.log.Info("removing a voter", "voter", id, "directory", dirOrLegacy(target.Address), "voter_role", target.Voter)
	f := v.raft.RemoveServer(raft.ServerID(id), index, changeTimeout(ctx))
	if err := f.Error(); err != nil {
		return fmt.Errorf("remove %s: %w", id, err)
	}
	v.members.removed.Add(1)
	v.log.Info("voter removed", "voter", id, "directory", dirOrLegacy(target.Address), "index", f.Index())
	return nil
}

func dirOrLegacy(a raftnet.PeerAddress) string {
	if a.Legacy() {
		return "(none: legacy address)"
	}
	return a.DirectoryID
}

func orAny(dir string) string {
	if dir == "" {
		return "(any)"
	}
	return dir
}

func describeMembers(ms []Member) string {
	s := "["
	for i, m := range ms {
		if i > 0 {
			s += " "
		}
		s += m.ID + "/" + dirOrLegacy(m.Address)
		if !m.Voter {
			s += "(non-voter)"
		}
	}
	return s + "]"
}

// Snapshots lists the snapshots this voter keeps, newest first.
func (v *Voter) Snapshots() ([]*raft.SnapshotMeta, error) { return v.stores.Snapshots.List() }
