package broker

import (
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// API keys of the control requests.
const (
	KeyLeaderAndIsr   int16 = 4
	KeyStopReplica    int16 = 5
	KeyUpdateMetadata int16 = 6
)

// ControlRecord is one decision of the agent about a control request: the
// request as a whole (Partition -1) or one of its partitions. The agent
// keeps them so that checkers can verify its invariants: no stale
// controller epoch accepted, leader epochs never going back, at most one
// leader per partition and leader epoch across brokers.
type ControlRecord struct {
	// Seq numbers the records of this agent from 1, with no gaps.
	Seq uint64
	At  time.Time
	// Key is the request's API key (KeyLeaderAndIsr, …).
	Key             int16
	ControllerID    int32
	ControllerEpoch int32
	// BrokerEpoch is the one the request carried (-1 when it has none).
	BrokerEpoch    int64
	MetadataOffset uint64

	// Partition is -1 for the record of the request as a whole.
	Partition      int32
	Topic          string
	TopicID        rl.TopicID
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
	// Deleted is set for the partitions of a deleting StopReplica, and
	// for UpdateMetadata partitions that announce a deleted topic.
	Deleted bool

	// Accepted tells whether the agent applied it; otherwise ErrorCode
	// says why not (for an accepted StopReplica partition, ErrorCode is
	// what the Host returned).
	Accepted  bool
	ErrorCode int16
}

func (r ControlRecord) String() string {
	out := "accepted"
	if !r.Accepted {
		out = "refused " + kerr.ErrorForCode(r.ErrorCode).Error()
	}
	name := map[int16]string{KeyLeaderAndIsr: "LeaderAndIsr", KeyStopReplica: "StopReplica", KeyUpdateMetadata: "UpdateMetadata"}[r.Key]
	if r.Partition < 0 {
		return fmt.Sprintf("#%d %s ce=%d be=%d off=%d: %s", r.Seq, name, r.ControllerEpoch, r.BrokerEpoch, r.MetadataOffset, out)
	}
	return fmt.Sprintf("#%d %s ce=%d %s-%d leader=%d le=%d pe=%d isr=%v: %s", r.Seq, name, r.ControllerEpoch, r.Topic, r.Partition, r.Leader, r.LeaderEpoch, r.PartitionEpoch, r.ISR, out)
}

// controlLog keeps the newest records, up to a limit.
type controlLog struct {
	mu    sync.Mutex
	limit int
	buf   []ControlRecord // ring once full
	start int             // index of the oldest record when full
	seq   uint64
}

func (l *controlLog) add(recs []ControlRecord) {
	l.addN(len(recs), func(i int) ControlRecord { return recs[i] })
}

// addN appends n records made by gen. Only the ones that stay within the
// limit are made: a request with more partitions than the limit costs no
// more than the limit.
func (l *controlLog) addN(n int, gen func(i int) ControlRecord) {
	if n == 0 {
		return
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	first := 0
	if n > l.limit {
		first = n - l.limit
	}
	l.seq += uint64(first)
	for i := first; i < n; i++ {
		r := gen(i)
		l.seq++
		r.Seq, r.At = l.seq, now
		if len(l.buf) < l.limit {
			l.buf = append(l.buf, r)
			continue
		}
		l.buf[l.start] = r
		l.start = (l.start + 1) % len(l.buf)
	}
}

func (l *controlLog) snapshot() ([]ControlRecord, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]ControlRecord, 0, len(l.buf))
	out = append(out, l.buf[l.start:]...)
	out = append(out, l.buf[:l.start]...)
	return out, l.seq
}
