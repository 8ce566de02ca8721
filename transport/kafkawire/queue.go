package kafkawire

import "sync"

// byteQueue bounds the bytes of request frames a Server holds across all
// its connections: frames being read, and frames read and not yet handled
// (Config.MaxQueuedBytes).
//
// A frame takes its bytes as its buffer grows, before the buffer is
// allocated (see connReader.readBody), so a client holds no more of the
// bound than the server allocated for what it sent. A frame whose next
// bytes do not fit waits, in arrival order, and its connection is not
// read meanwhile.
//
// Frames partly read could then wait on each other for ever, each
// holding bytes none can give back until it is complete. So when no frame
// read is waiting to be handled (nothing will give bytes back but a frame
// completing) the first waiter may go past the bound, and it alone, until
// its frame is complete. The bytes held stay within the bound plus one
// frame.
type byteQueue struct {
	max int64

	mu sync.Mutex
	// reading is held by frames being read, queued by frames read and
	// not yet handled.
	reading, queued int64
	// over is the frame allowed past max, nil when none is.
	over    *frameBytes
	waiters []*queueWaiter
}

// frameBytes is what one frame being read holds of a byteQueue.
type frameBytes struct{ n int64 }

// queueWaiter is a frame waiting for n more bytes. ready closes once
// they are the frame's.
type queueWaiter struct {
	f       *frameBytes
	n       int64
	ready   chan struct{}
	granted bool
}

func newByteQueue(max int64) *byteQueue { return &byteQueue{max: max} }

// take gives f n more bytes if it may have them now, and returns nil;
// otherwise it returns the waiter to wait on (or to cancel).
func (q *byteQueue) take(f *frameBytes, n int64) *queueWaiter {
	q.mu.Lock()
	defer q.mu.Unlock()
	// The frame past the bound goes on; others wait behind any waiter.
	if q.over == f || len(q.waiters) == 0 && q.admitLocked(f, n) {
		q.giveLocked(f, n)
		return nil
	}
	w := &queueWaiter{f: f, n: n, ready: make(chan struct{})}
	q.waiters = append(q.waiters, w)
	return w
}

// cancel gives up a wait. Bytes granted meanwhile are the frame's, given
// back with abandon.
func (q *byteQueue) cancel(w *queueWaiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.granted {
		return
	}
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			break
		}
	}
	// Those behind w may fit now that it stopped waiting first.
	q.grantLocked()
}

// complete marks f read: its bytes are held until release.
func (q *byteQueue) complete(f *frameBytes) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queued += f.n
	q.doneReadingLocked(f)
}

// abandon gives back the bytes of a frame that will not be read to its
// end.
func (q *byteQueue) abandon(f *frameBytes) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.doneReadingLocked(f)
}

// doneReadingLocked takes f's bytes off those being read.
func (q *byteQueue) doneReadingLocked(f *frameBytes) {
	q.reading -= f.n
	f.n = 0
	if q.over == f {
		q.over = nil
	}
	q.grantLocked()
}

// giveLocked gives f n more bytes.
func (q *byteQueue) giveLocked(f *frameBytes, n int64) {
	q.reading += n
	f.n += n
}

// release gives back the n bytes of a frame read to its end, once it has
// been handled (or will not be).
func (q *byteQueue) release(n int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queued -= n
	q.grantLocked()
}

// admitLocked tells whether f may have n more bytes now, if nobody waits
// ahead of it: they fit, or it may go past the bound (see byteQueue).
func (q *byteQueue) admitLocked(f *frameBytes, n int64) bool {
	switch {
	case q.reading+q.queued+n <= q.max:
		return true
	case q.over == nil && q.queued == 0:
		q.over = f
		return true
	}
	return false
}

// grantLocked serves the waiters in order while the first one may go on.
// Every change that gives bytes back, or removes a waiter, calls it.
func (q *byteQueue) grantLocked() {
	for len(q.waiters) > 0 {
		w := q.waiters[0]
		if !q.admitLocked(w.f, w.n) {
			return
		}
		q.waiters[0] = nil
		q.waiters = q.waiters[1:]
		q.giveLocked(w.f, w.n)
		w.granted = true
		close(w.ready)
	}
}
