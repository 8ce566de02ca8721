package replica

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker/partlog"
	"github.com/ctrlquorum/ctrlquorum/internal/plantedbug"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
)

// fetcher replicates, for the partitions this broker follows on one
// leader broker, from that leader: one connection, one Fetch for all of
// them at a time, after the truncation each needs.
type fetcher struct {
	m      *Manager
	leader int32

	mu    sync.Mutex
	parts map[*partition]struct{}
	wake  chan struct{}

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func newFetcher(m *Manager, leader int32) *fetcher {
	f := &fetcher{m: m, leader: leader, parts: map[*partition]struct{}{}, wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go f.run()
	return f
}

func (f *fetcher) add(p *partition) {
	f.mu.Lock()
	f.parts[p] = struct{}{}
	f.mu.Unlock()
	f.poke()
}

// remove takes p off and returns how many partitions are left.
func (f *fetcher) remove(p *partition) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.parts, p)
	return len(f.parts)
}

func (f *fetcher) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fetcher) close() {
	f.stopOnce.Do(func() { close(f.stop) })
	<-f.done
}

// sleep waits d, a poke or the stop; false on stop.
func (f *fetcher) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-f.wake:
		return true
	case <-f.stop:
		return false
	}
}

// fetchState is a partition as one round of the fetcher sees it.
type fetchState struct {
	p           *partition
	leaderEpoch int32
	truncate    bool
	latestEpoch int32
	offset      int64
}

func (f *fetcher) states() []fetchState {
	f.mu.Lock()
	parts := make([]*partition, 0, len(f.parts))
	for p := range f.parts {
		parts = append(parts, p)
	}
	f.mu.Unlock()
	out := make([]fetchState, 0, len(parts))
	for _, p := range parts {
		p.mu.Lock()
		if p.role == roleFollower && p.leader == f.leader && p.log != nil {
			out = append(out, fetchState{p: p, leaderEpoch: p.leaderEpoch, truncate: p.mustTruncate,
				latestEpoch: p.log.LatestEpoch(), offset: p.log.EndOffset()})
		}
		p.mu.Unlock()
	}
	return out
}

func (f *fetcher) run() {
	defer close(f.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-f.stop
		cancel()
	}()
	log := f.m.log.With("leader", f.leader)
	var conn *kafkaclient.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	backoff := 50 * time.Millisecond
	fail := func(what string, err error) bool {
		if conn != nil {
			_ = conn.Close()
			conn = nil
		}
		if ctx.Err() == nil {
			log.Debug("replica fetch failed; retrying", "step", what, "error", err)
		}
		backoff = min(2*backoff, time.Second)
		return f.sleep(backoff)
	}
	for {
		select {
		case <-f.stop:
			return
		default:
		}
		states := f.states()
		if len(states) == 0 {
			if !f.sleep(time.Second) {
				return
			}
			continue
		}
		if conn == nil {
			addr, err := f.leaderAddr()
			if err == nil {
				conn, err = kafkaclient.Dial(ctx, addr, kafkaclient.Options{
					ClientID: "ctrlquorum-replica-" + strconv.Itoa(int(f.m.cfg.BrokerID)), Dial: f.m.cfg.Dial,
					SASL: f.m.cfg.SASL, SASLIfOffered: true,
				})
			}
			if err != nil {
				if !fail("connect", err) {
					return
				}
				continue
			}
		}
		if err := f.truncate(ctx, conn, states); err != nil {
			if !fail("truncate", err) {
				return
			}
			continue
		}
		retry, err := f.fetchOnce(ctx, conn, states)
		if err != nil {
			if !fail("fetch", err) {
				return
			}
			continue
		}
		backoff = 50 * time.Millisecond
		if retry && !f.sleep(100*time.Millisecond) {
			return
		}
	}
}

// leaderAddr is the leader's listener as the agent's metadata has it.
func (f *fetcher) leaderAddr() (string, error) {
	a := f.m.getAgent()
	if a == nil {
		return "", errors.New("no agent attached yet")
	}
	for _, b := range a.Brokers() {
		if b.ID == f.leader {
			return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), nil
		}
	}
	return "", fmt.Errorf("broker %d is not in the metadata", f.leader)
}

// truncate asks the leader where each partition's latest epoch ends and
// truncates there (KIP-101, KIP-279): the records past it were written
// by a leader of that epoch, or a later one, that the current leader
// does not have.
func (f *fetcher) truncate(ctx context.Context, conn *kafkaclient.Conn, states []fetchState) error {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = f.m.cfg.BrokerID
	var asked []*fetchState
	byTopic := map[string]int{}
	for i := range states {
		s := &states[i]
		if !s.truncate {
			continue
		}
		if s.latestEpoch < 0 || plantedbug.On(plantedbug.NoTruncation) {
			// Nothing written under any epoch: nothing to truncate.
			f.truncated(s, s.offset, false)
			continue
		}
		k, ok := byTopic[s.p.tp.Topic]
		if !ok {
			k = len(req.Topics)
			byTopic[s.p.tp.Topic] = k
			t := kmsg.NewOffsetForLeaderEpochRequestTopic()
			t.Topic = s.p.tp.Topic
			req.Topics = append(req.Topics, t)
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = s.p.tp.Partition, s.leaderEpoch, s.latestEpoch
		req.Topics[k].Partitions = append(req.Topics[k].Partitions, rp)
		asked = append(asked, s)
	}
	if len(asked) == 0 {
		return nil
	}
	if err := conn.Pick(req, 3); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := conn.Request(rctx, req)
	if err != nil {
		return err
	}
	resp := r.(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			for _, s := range asked {
				if s.p.tp.Topic != rt.Topic || s.p.tp.Partition != rp.Partition {
					continue
				}
				if rp.ErrorCode != 0 {
					f.m.log.Debug("leader refused OffsetsForLeaderEpoch", "topic", rt.Topic, "partition", rp.Partition, "error", kerr.ErrorForCode(rp.ErrorCode))
					continue
				}
				to, again := s.offset, false
				if rp.LeaderEpoch < 0 || rp.EndOffset < 0 {
					// The leader knows no epoch as old: keep only what
					// was committed (Kafka's fallback to the high
					// watermark).
					s.p.mu.Lock()
					to = s.p.hw
					s.p.mu.Unlock()
				} else {
					// The leader's answer is for the largest epoch it has
					// at or below ours. Cut at the smaller of its end
					// there and ours; if this log has no such epoch, what
					// is left may still hold an epoch the leader lacks:
					// ask again with the latest epoch left (KIP-279).
					s.p.mu.Lock()
					if s.p.log == nil {
						// Stopped while the leader answered.
						s.p.mu.Unlock()
						continue
					}
					mineEpoch, mine := s.p.log.EndOffsetForEpoch(rp.LeaderEpoch)
					s.p.mu.Unlock()
					if mine < 0 {
						mine = s.offset
					}
					to = min(rp.EndOffset, mine, s.offset)
					again = mineEpoch != rp.LeaderEpoch
				}
				f.truncated(s, to, again)
			}
		}
	}
	return nil
}

// truncated truncates a partition's log to offset, if it still follows
// in the same epoch, and lets it fetch, or with again has it ask the
// leader once more first.
func (f *fetcher) truncated(s *fetchState, offset int64, again bool) {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role != roleFollower || p.leaderEpoch != s.leaderEpoch || p.log == nil {
		return
	}
	if end := p.log.EndOffset(); offset < end {
		if err := p.log.Truncate(offset); err != nil {
			f.m.log.Error("truncation failed", "topic", p.tp.Topic, "partition", p.tp.Partition, "error", err)
			return
		}
		f.m.log.Info("truncated to the leader's epoch end", "topic", p.tp.Topic, "partition", p.tp.Partition,
			"from", end, "to", p.log.EndOffset(), "leader", f.leader, "leader_epoch", s.leaderEpoch)
	}
	p.hw = min(p.hw, p.log.EndOffset())
	p.mustTruncate = again && p.log.LatestEpoch() >= 0
	s.truncate = p.mustTruncate
	s.offset = p.log.EndOffset()
}

// fetchOnce sends one Fetch for every partition ready to fetch and
// appends what comes back. retry says some partition was refused (a
// leader change under way): the caller waits a little.
func (f *fetcher) fetchOnce(ctx context.Context, conn *kafkaclient.Conn, states []fetchState) (bool, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = f.m.cfg.BrokerID
	req.MaxWaitMillis = int32(f.m.cfg.FetchMaxWait / time.Millisecond)
	req.MinBytes, req.MaxBytes = 1, 16<<20
	req.SessionEpoch = -1 // no session
	byTopic := map[string]int{}
	var ready []*fetchState
	for i := range states {
		s := &states[i]
		if s.truncate {
			continue
		}
		k, ok := byTopic[s.p.tp.Topic]
		if !ok {
			k = len(req.Topics)
			byTopic[s.p.tp.Topic] = k
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = s.p.tp.Topic, s.p.topicID
			req.Topics = append(req.Topics, t)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.FetchOffset = s.p.tp.Partition, s.leaderEpoch, s.offset
		rp.LastFetchedEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = -1, -1, 1<<20
		req.Topics[k].Partitions = append(req.Topics[k].Partitions, rp)
		ready = append(ready, s)
	}
	if len(ready) == 0 {
		return true, nil
	}
	if err := conn.Pick(req, 9); err != nil {
		return false, err
	}
	if req.Version >= 13 {
		req.SetVersion(12) // partitions by topic name
	}
	rctx, cancel := context.WithTimeout(ctx, f.m.cfg.FetchMaxWait+10*time.Second)
	defer cancel()
	r, err := conn.Request(rctx, req)
	if err != nil {
		return false, err
	}
	resp := r.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		return true, kerr.ErrorForCode(resp.ErrorCode)
	}
	retry := false
	for _, rt := range resp.Topics {
		for i := range rt.Partitions {
			rp := &rt.Partitions[i]
			for _, s := range ready {
				if s.p.tp.Topic == rt.Topic && s.p.tp.Partition == rp.Partition {
					if !f.apply(s, rp) {
						retry = true
					}
				}
			}
		}
	}
	return retry, nil
}

// apply appends a partition's fetched batches, if it still follows in the
// same epoch from the same offset; false when the leader refused.
func (f *fetcher) apply(s *fetchState, rp *kmsg.FetchResponseTopicPartition) bool {
	p := s.p
	switch rp.ErrorCode {
	case 0:
	case kerr.OffsetOutOfRange.Code:
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.leaderEpoch != s.leaderEpoch || p.role != roleFollower || p.log == nil {
			return false
		}
		if end := p.log.EndOffset(); rp.LogStartOffset > end {
			// The leader deleted, past retention, records this replica
			// never had: it starts again at the leader's log start
			// (Kafka's truncateFullyAndStartAt).
			if err := p.log.TruncateFullyAndStartAt(rp.LogStartOffset); err != nil {
				f.m.log.Error("starting the log at the leader's log start failed", "topic", p.tp.Topic, "partition", p.tp.Partition, "error", err)
				return false
			}
			p.hw = rp.LogStartOffset
			f.m.log.Info("log ends before the leader's log start: starting it there", "topic", p.tp.Topic, "partition", p.tp.Partition,
				"log_end", end, "leader_log_start", rp.LogStartOffset, "leader", f.leader)
			return false
		}
		// The leader's log ends before ours: find out where again.
		p.mustTruncate = true
		return false
	default:
		f.m.log.Debug("leader refused a replica fetch", "topic", p.tp.Topic, "partition", p.tp.Partition, "error", kerr.ErrorForCode(rp.ErrorCode))
		return false
	}
	batches := completeBatches(rp.RecordBatches)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role != roleFollower || p.leaderEpoch != s.leaderEpoch || p.log == nil || p.mustTruncate || p.log.EndOffset() != s.offset {
		return true
	}
	if len(batches) > 0 {
		if err := p.log.AppendAsFollower(batches); err != nil {
			f.m.log.Warn("appending fetched records failed", "topic", p.tp.Topic, "partition", p.tp.Partition, "error", err)
			return false
		}
	}
	if hw := min(rp.HighWatermark, p.log.EndOffset()); hw > p.hw {
		p.hw = hw
	}
	// The log start follows the leader's (whose retention may be the
	// leader broker's own), a whole segment at a time.
	if rp.LogStartOffset > p.log.StartOffset() {
		if n, start, err := p.log.DeleteBefore(min(rp.LogStartOffset, p.hw)); err != nil {
			f.m.log.Warn("following the leader's log start failed", "topic", p.tp.Topic, "partition", p.tp.Partition, "error", err)
		} else if n > 0 {
			f.m.log.Info("deleted segments below the leader's log start", "topic", p.tp.Topic, "partition", p.tp.Partition,
				"segments", n, "log_start", start, "leader_log_start", rp.LogStartOffset)
		}
	}
	f.m.notify()
	return true
}

// completeBatches parses fetched bytes into batches, leaving out a last
// batch cut short by the fetch's size limit (Kafka's leaders may send
// one).
func completeBatches(b []byte) []partlog.Batch {
	var out []partlog.Batch
	for len(b) > 0 {
		bt, err := partlog.ParseBatch(b)
		if err != nil {
			break
		}
		out = append(out, bt)
		b = b[len(bt.Bytes):]
	}
	return out
}
