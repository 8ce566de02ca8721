package controller

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// deleteResponder is a Sender standing in for brokers that answer every
// StopReplica with delete=true at once, through
// HandleStopReplicaResponse, as the transport's sender does with the
// brokers' answers. Brokers marked down answer nothing. Requests are
// recorded too, unless the recording sender is nil.
type deleteResponder struct {
	rec  *RecordingSender
	c    atomic.Pointer[Controller]
	mu   sync.Mutex
	down map[int32]bool
	// answered counts the replicas confirmed.
	answered atomic.Int64
}

func newDeleteResponder(rec *RecordingSender) *deleteResponder {
	return &deleteResponder{rec: rec, down: map[int32]bool{}}
}

func (d *deleteResponder) setDown(b int32, down bool) {
	d.mu.Lock()
	d.down[b] = down
	d.mu.Unlock()
}

// Send implements Sender.
func (d *deleteResponder) Send(r Requests) {
	if d.rec != nil {
		d.rec.Send(r)
	}
	if r.StopReplica == nil {
		return
	}
	d.mu.Lock()
	down := d.down[r.Broker]
	d.mu.Unlock()
	if down {
		return
	}
	var res []StopReplicaResult
	for _, p := range r.StopReplica.Partitions {
		if p.Delete {
			res = append(res, StopReplicaResult{TopicID: p.TopicID, Topic: p.Topic, Partition: p.Partition})
		}
	}
	if c := d.c.Load(); c != nil && len(res) > 0 {
		d.answered.Add(int64(len(res)))
		c.HandleStopReplicaResponse(r.Broker, res)
	}
}

// prefixLog is a MemLog that, once armed, commits a given number of
// further entries and fails every later one as a deposed raft leader's
// would: the log then holds a prefix of what the controller proposed.
type prefixLog struct {
	*MemLog
	mu    sync.Mutex
	armed bool
	left  int
	// cut is set once an entry was refused.
	cut bool
}

func (l *prefixLog) arm(n int) {
	l.mu.Lock()
	l.armed, l.left, l.cut = n >= 0, n, false
	l.mu.Unlock()
}

func (l *prefixLog) wasCut() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.cut }

func (l *prefixLog) Apply(data []byte, timeout time.Duration) raft.ApplyFuture {
	l.mu.Lock()
	if l.armed {
		if l.left == 0 {
			l.cut = true
			l.mu.Unlock()
			return &memFuture{err: raft.ErrLeadershipLost}
		}
		l.left--
	}
	l.mu.Unlock()
	return l.MemLog.Apply(data, timeout)
}
