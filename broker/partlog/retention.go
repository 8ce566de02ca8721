package partlog

import "time"

// Retention: Kafka's delete cleanup policy. The owner calls
// DeleteRetained on a timer with the topic's retention.ms and
// retention.bytes; whole segments go from the front of the log, never the
// active one, and only those below the high watermark (what no consumer
// has been allowed to read may not expire unread). The log start offset
// moves to the first segment kept, and the leader-epoch cache forgets
// what starts before it. SetRoll changes segment.bytes and segment.ms of
// an open log, for a topic config changed while it runs.

type rollPolicy struct {
	bytes int64
	ms    time.Duration
}

// Retention is a topic's retention.ms and retention.bytes; a negative
// value (Kafka's -1) is no limit.
type Retention struct {
	Ms    int64
	Bytes int64
}

// SetRoll sets segment.bytes and segment.ms for the appends to come;
// bytes <= 0 keeps Config's.
func (l *Log) SetRoll(bytes int64, ms time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if bytes <= 0 {
		bytes = l.cfg.SegmentBytes
	}
	l.roll = rollPolicy{bytes: bytes, ms: ms}
}

// rollDueLocked says whether segment.ms has passed for the active
// segment: as Kafka measures it, from the max timestamp of its first
// batch to now.
func (l *Log) rollDueLocked(act *segment) bool {
	if l.roll.ms <= 0 || act.firstTS < 0 {
		return false
	}
	return time.Now().UnixMilli()-act.firstTS >= l.roll.ms.Milliseconds()
}

// DeleteRetained deletes, from the front, the closed segments that r
// says are past retention at now and that end at or below hw: by time,
// one whose largest timestamp is more than r.Ms old; by size, as long as
// the log without it still holds at least r.Bytes. It returns how many
// went and the log start offset after.
func (l *Log) DeleteRetained(r Retention, hw int64, now time.Time) (int, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, 0, ErrClosed
	}
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	n := 0
	for n < len(l.segs)-1 {
		s := l.segs[n]
		if s.next > hw {
			break
		}
		byTime := r.Ms >= 0 && s.maxTS >= 0 && now.UnixMilli()-s.maxTS > r.Ms
		bySize := r.Bytes >= 0 && total-s.size >= r.Bytes
		if !byTime && !bySize {
			break
		}
		total -= s.size
		n++
	}
	if n == 0 {
		return 0, l.segs[0].base, nil
	}
	start := l.segs[n].base
	return n, start, l.dropFrontLocked(n)
}

// DeleteBefore deletes, from the front, the closed segments that end at
// or below offset: a follower's log start following its leader's (Kafka's
// maybeIncrementLogStartOffset, at segment granularity here). It returns
// how many went and the log start offset after.
func (l *Log) DeleteBefore(offset int64) (int, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, 0, ErrClosed
	}
	n := 0
	for n < len(l.segs)-1 && l.segs[n].next <= offset {
		n++
	}
	start := l.segs[n].base
	if n == 0 {
		return 0, start, nil
	}
	return n, start, l.dropFrontLocked(n)
}

// dropFrontLocked removes the first n segments (not all of them) and
// moves the epoch cache's start. l.mu is held.
func (l *Log) dropFrontLocked(n int) error {
	// The epoch cache first: a crash after it leaves segments the cache
	// no longer covers from their start, which Open adds back from their
	// batches, never a cache pointing before the log.
	start := l.segs[n].base
	if l.epochs.truncateFromStart(start) {
		if err := l.epochs.save(); err != nil {
			return err
		}
	}
	for i := 0; i < n; i++ {
		if err := l.segs[0].remove(l.dir); err != nil {
			return err
		}
		l.segs = l.segs[1:]
	}
	return nil
}

// TruncateFullyAndStartAt empties the log and starts it at offset: what a
// follower does whose log ends before its leader's log start (Kafka's
// truncateFullyAndStartAt), as the records in between are gone from the
// leader.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	s, err := createSegment(l.dir, offset)
	if err != nil {
		return err
	}
	// Removing the old segments after the new one exists: a crash
	// between leaves a gap, which Open resolves by keeping what is before
	// it, and the follower truncates and refetches.
	for _, old := range l.segs {
		if old.base == offset {
			old.close()
			continue
		}
		if err := old.remove(l.dir); err != nil {
			s.close()
			return err
		}
	}
	l.segs, l.end = []*segment{s}, offset
	l.epochs.entries = nil
	return l.epochs.save()
}

// truncateFromStart drops the entries wholly before offset and moves the
// last of them that starts before it to start at offset (Kafka's
// truncateFromStart); reports whether the cache changed.
func (c *epochCache) truncateFromStart(offset int64) bool {
	i := 0
	for i < len(c.entries) && c.entries[i].StartOffset <= offset {
		i++
	}
	if i == 0 {
		return false
	}
	last := c.entries[i-1]
	if i == 1 && last.StartOffset == offset {
		return false
	}
	last.StartOffset = offset
	c.entries = append([]EpochEntry{last}, c.entries[i:]...)
	return true
}
