package replica

import (
	"context"
	"errors"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/broker/partlog"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

type role int

const (
	roleNone role = iota
	roleLeader
	roleFollower
)

// partition is a local replica.
type partition struct {
	tp      broker.TopicPartition
	topicID rl.TopicID
	dir     string
	// fetcher is the fetcher the replica follows with; guarded by the
	// manager's mu.
	fetcher *fetcher

	mu             sync.Mutex
	log            *partlog.Log
	role           role
	leader         int32
	leaderEpoch    int32
	partitionEpoch int32
	isr            []int32
	replicas       []int32
	hw             int64
	// Leader only: what each follower told by its fetches.
	followers map[int32]*followerState
	// alterInFlight is set while an AlterPartition of this leader runs,
	// and proposedISR is the ISR it asks for.
	alterInFlight bool
	proposedISR   []int32
	// Follower only: the log has yet to be truncated to the leader's end
	// of its epoch before fetching.
	mustTruncate bool
}

// followerState is a leader's view of one follower.
type followerState struct {
	leo             int64 // -1 until it fetched in this leader epoch
	lastFetch       time.Time
	leaderEndAtLast int64 // the leader's end offset at the last fetch
	lastCaughtUp    time.Time
}

func (p *partition) open(m *Manager) error {
	cfg := m.cfg.Log
	cfg.TopicID = p.topicID
	l, err := partlog.Open(p.dir, cfg)
	if errors.Is(err, partlog.ErrOtherTopic) {
		m.log.Info("a replica directory of a deleted topic of the same name: removing it", "dir", p.dir)
		if err := os.RemoveAll(p.dir); err != nil {
			return err
		}
		l, err = partlog.Open(p.dir, cfg)
	}
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.log = l
	p.mu.Unlock()
	return nil
}

// newer reports whether st is a newer state than the replica's.
func (p *partition) newer(st broker.PartitionState) bool {
	if st.LeaderEpoch != p.leaderEpoch {
		return st.LeaderEpoch > p.leaderEpoch
	}
	return st.PartitionEpoch >= p.partitionEpoch
}

// becomeLeader takes st; reports whether the leader epoch is new, and
// the log's end then.
func (p *partition) becomeLeader(m *Manager, st broker.PartitionState) (fresh bool, logEnd int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.log == nil || !p.newer(st) {
		return false, -1
	}
	fresh = p.role != roleLeader || st.LeaderEpoch != p.leaderEpoch
	p.role, p.leader, p.leaderEpoch, p.partitionEpoch = roleLeader, st.Leader, st.LeaderEpoch, st.PartitionEpoch
	p.isr, p.replicas = slices.Clone(st.ISR), slices.Clone(st.Replicas)
	p.mustTruncate = false
	if fresh {
		if err := p.log.AssignEpoch(st.LeaderEpoch); err != nil {
			m.log.Error("cannot record the leader epoch", "topic", p.tp.Topic, "partition", p.tp.Partition, "error", err)
		}
		now := time.Now()
		p.followers = map[int32]*followerState{}
		for _, r := range st.Replicas {
			if r != m.cfg.BrokerID {
				// Every follower gets the lag time from now to catch up.
				p.followers[r] = &followerState{leo: -1, lastCaughtUp: now, leaderEndAtLast: -1}
			}
		}
		p.alterInFlight, p.proposedISR = false, nil
	} else {
		if !p.alterInFlight {
			// The controller's state settles a change whose outcome
			// was unknown.
			p.proposedISR = nil
		}
		for _, r := range st.Replicas {
			if _, ok := p.followers[r]; !ok && r != m.cfg.BrokerID {
				p.followers[r] = &followerState{leo: -1, lastCaughtUp: time.Now(), leaderEndAtLast: -1}
			}
		}
	}
	p.hw = min(p.hw, p.log.EndOffset())
	p.advanceHWLocked(m)
	return fresh, p.log.EndOffset()
}

// becomeFollower takes st; reports whether the leader epoch is new, and
// the log's end then.
func (p *partition) becomeFollower(st broker.PartitionState) (fresh bool, logEnd int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.log == nil || !p.newer(st) {
		return false, -1
	}
	fresh = p.role != roleFollower || st.LeaderEpoch != p.leaderEpoch
	p.role, p.leader, p.leaderEpoch, p.partitionEpoch = roleFollower, st.Leader, st.LeaderEpoch, st.PartitionEpoch
	p.isr, p.replicas = slices.Clone(st.ISR), slices.Clone(st.Replicas)
	p.followers = nil
	if fresh {
		p.mustTruncate = true
	}
	p.hw = min(p.hw, p.log.EndOffset())
	return fresh, p.log.EndOffset()
}

// checkLocked applies the leader checks of a request carrying
// currentLeaderEpoch (-1: none given): 0 when the replica leads in that
// epoch, else the Kafka error. p.mu is held.
func (p *partition) checkLocked(currentLeaderEpoch int32, wantLeader bool) int16 {
	if p.log == nil || p.role == roleNone {
		return kerr.NotLeaderForPartition.Code
	}
	if currentLeaderEpoch >= 0 {
		if currentLeaderEpoch < p.leaderEpoch {
			return kerr.FencedLeaderEpoch.Code
		}
		if currentLeaderEpoch > p.leaderEpoch {
			return kerr.UnknownLeaderEpoch.Code
		}
	}
	if wantLeader && p.role != roleLeader {
		return kerr.NotLeaderForPartition.Code
	}
	return 0
}

// advanceHWLocked moves the high watermark to the smallest log end offset
// of the ISR, if that is higher; with an ISR of the leader alone, to the
// leader's log end. A follower that has not fetched in this epoch holds
// it back. p.mu is held; waiters are woken.
func (p *partition) advanceHWLocked(m *Manager) {
	if p.role != roleLeader {
		return
	}
	hw := p.log.EndOffset()
	for _, r := range p.maximalISRLocked() {
		if r == m.cfg.BrokerID {
			continue
		}
		f := p.followers[r]
		if f == nil || f.leo < 0 {
			return
		}
		hw = min(hw, f.leo)
	}
	if hw > p.hw {
		p.hw = hw
		m.notify()
	}
}

// maximalISRLocked is the ISR the high watermark waits for: the ISR, and
// while an AlterPartition is in flight, or its outcome unknown, the
// replicas it adds too (Kafka's maximal ISR, KIP-497). A follower is added once it has reached the
// high watermark; were the watermark to move past it before the change
// commits, the ISR would hold a replica without every record below the
// high watermark, which could then be elected and lose them (a jepsen
// run: records acknowledged while broker 6's addition was in flight were
// gone once broker 6 led).
func (p *partition) maximalISRLocked() []int32 {
	out := p.isr
	for _, r := range p.proposedISR {
		if !slices.Contains(out, r) {
			out = append(slices.Clone(out), r)
		}
	}
	return out
}

// followerFetched records a follower's fetch at offset: its log end. It
// moves the high watermark, and puts a follower outside the ISR that
// caught up back in.
func (p *partition) followerFetched(m *Manager, id int32, offset int64, now time.Time) {
	f := p.followers[id]
	if f == nil {
		return // not a replica of this partition as this leader knows it
	}
	leaderEnd := p.log.EndOffset()
	if offset >= leaderEnd {
		f.lastCaughtUp = now
	} else if f.leaderEndAtLast >= 0 && offset >= f.leaderEndAtLast {
		f.lastCaughtUp = f.lastFetch
	}
	f.leo, f.lastFetch, f.leaderEndAtLast = offset, now, leaderEnd
	p.advanceHWLocked(m)
	if !slices.Contains(p.isr, id) && offset >= p.hw && offset >= p.epochStartLocked() {
		p.alterISRLocked(m, append(slices.Clone(p.isr), id), "caught up")
	}
}

// epochStartLocked is where the current leader epoch began in the log: a
// follower joins the ISR only past it (as Kafka requires).
func (p *partition) epochStartLocked() int64 {
	for _, e := range slices.Backward(p.log.Epochs()) {
		if e.Epoch == p.leaderEpoch {
			return e.StartOffset
		}
	}
	return 0
}

// maybeShrinkISR takes out of the ISR the followers that have not caught
// up within the lag time.
func (p *partition) maybeShrinkISR(m *Manager, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role != roleLeader || p.alterInFlight {
		return
	}
	var keep []int32
	var out []int32
	for _, r := range p.isr {
		if f := p.followers[r]; r != m.cfg.BrokerID && f != nil && now.Sub(f.lastCaughtUp) > m.cfg.ReplicaLagTime {
			out = append(out, r)
			continue
		}
		keep = append(keep, r)
	}
	if len(out) > 0 {
		m.log.Info("followers lagging: shrinking the ISR", "topic", p.tp.Topic, "partition", p.tp.Partition, "lagging", out, "lag_time", m.cfg.ReplicaLagTime)
		p.alterISRLocked(m, keep, "lagging")
	}
}

// alterISRLocked asks the controller, in the background, for a new ISR;
// one request at a time per partition. p.mu is held.
func (p *partition) alterISRLocked(m *Manager, isr []int32, why string) {
	a := m.getAgent()
	if a == nil || p.alterInFlight {
		return
	}
	p.alterInFlight = true
	epoch := p.leaderEpoch
	sort.Slice(isr, func(i, j int) bool { return isr[i] < isr[j] })
	// An earlier addition whose outcome is unknown stays in too.
	for _, r := range isr {
		if !slices.Contains(p.proposedISR, r) {
			p.proposedISR = append(p.proposedISR, r)
		}
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		st, err := a.AlterPartition(ctx, p.tp.Topic, p.tp.Partition, isr)
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.leaderEpoch == epoch {
			p.alterInFlight = false
			if err == nil || refused(err) {
				p.proposedISR = nil
			}
		}
		if err != nil {
			m.log.Warn("ISR change refused or failed", "topic", p.tp.Topic, "partition", p.tp.Partition, "isr", isr, "why", why, "error", err)
			// Refused, the addition is off and the high watermark may
			// move on without it. A change whose outcome is unknown
			// (a timeout, a controller that failed over) may have
			// committed: the high watermark keeps waiting for the
			// follower until the controller's next state for the
			// partition says (becomeLeader).
			p.advanceHWLocked(m)
			m.notify()
			return
		}
		if p.role == roleLeader && st.LeaderEpoch == p.leaderEpoch && st.PartitionEpoch >= p.partitionEpoch {
			m.log.Info("ISR changed", "topic", p.tp.Topic, "partition", p.tp.Partition, "isr", st.ISR, "why", why)
			p.isr, p.partitionEpoch = slices.Clone(st.ISR), st.PartitionEpoch
			p.advanceHWLocked(m)
			m.notify()
		}
	}()
}

func (p *partition) maybeFlush(m *Manager, now time.Time) {
	p.mu.Lock()
	l := p.log
	p.mu.Unlock()
	if l == nil {
		return
	}
	if err := l.MaybeFlush(now); err != nil && !errors.Is(err, partlog.ErrClosed) {
		m.log.Warn("flushing a partition log failed", "topic", p.tp.Topic, "partition", p.tp.Partition, "error", err)
	}
}

func sortReplicas(s []Replica) {
	sort.Slice(s, func(i, j int) bool {
		if s[i].Topic != s[j].Topic {
			return s[i].Topic < s[j].Topic
		}
		return s[i].Partition < s[j].Partition
	})
}

// refused reports whether err from AlterPartition is the controller's
// refusal of a change it did not make, against what this leader knows.
// A timeout or a lost connection leaves the outcome unknown, and
// INVALID_UPDATE_VERSION says this leader's partition epoch is behind,
// perhaps by that very change: the controller's next state settles both.
func refused(err error) bool {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return false
	}
	switch ke.Code {
	case kerr.RequestTimedOut.Code, kerr.NotController.Code, kerr.InvalidUpdateVersion.Code:
		return false
	}
	return true
}
