package logstore

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"
)

// DefaultSegmentBytes is the size past which appends go to a new segment.
// Compaction frees whole segments, so
// smaller segments give back disk sooner; larger ones mean fewer files.
// 16 MiB holds tens of thousands of typical entries, more than raft keeps
// between snapshots.
const DefaultSegmentBytes = 16 << 20

const lockFile = "LOCK"

// Options tune a Store. The zero value is usable.
type Options struct {
	SegmentBytes int64
	Logger       hclog.Logger
	// Syncs and Written, when set, count the store's fdatasync and
	// directory fsync calls and the bytes its appends write (zeros
	// included), for benchmarks.
	Syncs, Written *atomic.Int64

	// noSync skips every fsync. Only the fuzz test sets it: the fuzzer
	// keeps its coverage in a large memory-mapped file in the temp
	// directory, and on ext4 each sync here would also write that out.
	noSync bool
	// dirSync, when set, replaces the directory sync of deletes: tests
	// make it fail.
	dirSync func(dir string) error
}

// Store is a raft.LogStore kept in append-only segment files with one
// checksum per entry and one fdatasync per StoreLogs. It is monotonic (see
// raft.MonotonicLogStore): it never holds a gap. Entries are appended after
// the last one; an append that starts further on (raft's next entry after
// a snapshot) replaces the whole log.
//
// Readers (GetLog) run alongside an append: an append writes past the end
// readers can see and publishes its entries only after they are on disk.
type Store struct {
	dir    string
	opts   Options
	logger hclog.Logger
	lock   *os.File

	// writeMu serialises the operations that change the files: StoreLogs,
	// DeleteRange and Close.
	writeMu sync.Mutex
	buf     []byte // frame buffer reused across appends
	broken  error  // set when a failed write could not be undone

	// mu guards what readers see.
	mu          sync.RWMutex
	segs        []*segment // ordered by first index; the last one takes appends
	first, last uint64     // both 0 when the store is empty
	closed      bool
}

var (
	// ErrClosed is returned by every call on a closed Store.
	ErrClosed = errors.New("logstore: closed")
	// ErrNotContiguous is returned when StoreLogs is given entries that do
	// not start right after the last stored one.
	ErrNotContiguous = errors.New("logstore: entries do not follow the last stored entry")
)

// Open opens (creating if needed) the log kept in dir. It takes an exclusive
// lock on the directory, checks every frame, and drops a damaged tail left by
// a crash in the middle of an append; any other damage makes it fail with an
// error naming the file and offset.
func Open(dir string, opts Options) (*Store, error) {
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = DefaultSegmentBytes
	}
	logger := opts.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("logstore: create %s: %w", dir, err)
	}
	// A new directory's name is durable only once its parent is synced:
	// until then a power cut can take it with every append acknowledged
	// in it.
	if errors.Is(statErr, os.ErrNotExist) && !opts.noSync {
		if err := SyncDir(filepath.Dir(dir)); err != nil {
			return nil, err
		}
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("logstore: open lock file: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("logstore: %s is in use by another store (lock: %w)", dir, err)
	}
	s := &Store{dir: dir, opts: opts, logger: logger, lock: lock}
	if err := s.load(); err != nil {
		s.closeFiles()
		return nil, err
	}
	if len(s.segs) > 0 {
		logger.Info("raft log opened", "dir", dir, "segments", len(s.segs), "first", s.first, "last", s.last)
	}
	return s, nil
}

func (s *Store) load() error {
	names, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("logstore: list %s: %w", s.dir, err)
	}
	for _, e := range names {
		first, ok := parseSegmentName(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		path := filepath.Join(s.dir, e.Name())
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("logstore: open %s: %w", path, err)
		}
		s.segs = append(s.segs, &segment{path: path, f: f, first: first, noSync: s.opts.noSync, syncs: s.opts.Syncs})
	}
	slices.SortFunc(s.segs, func(a, b *segment) int { return cmp.Compare(a.first, b.first) })
	// Everything is checked before the one repair, so a refused open
	// changes nothing.
	var damage *tailDamage
	for i, seg := range s.segs {
		if damage != nil {
			prev := s.segs[i-1]
			return &corruptError{path: prev.path, offset: damage.offset, err: damage.reason}
		}
		if damage, err = seg.scan(); err != nil {
			return err
		}
		if i > 0 {
			prev := s.segs[i-1]
			if prev.entries() == 0 || seg.first != prev.last()+1 {
				return &corruptError{path: seg.path, offset: 0,
					err: fmt.Errorf("segment starts at index %d but the one before it ends at %d", seg.first, prev.first+prev.entries()-1)}
			}
		}
	}
	if damage != nil {
		seg := s.segs[len(s.segs)-1]
		s.logger.Warn("dropping the end of the raft log left by an append that a crash interrupted before it was acknowledged",
			"file", seg.path, "offset", damage.offset, "bytes", damage.bytes, "reason", damage.reason)
		if err := seg.cut(damage.offset); err != nil {
			return err
		}
	}
	// An empty last segment is one whose first append never completed.
	if n := len(s.segs); n > 0 && s.segs[n-1].entries() == 0 {
		if err := s.segs[n-1].remove(); err != nil {
			return err
		}
		s.segs = s.segs[:n-1]
		if err := s.syncDir(); err != nil {
			return err
		}
	}
	if len(s.segs) > 0 {
		s.first = s.segs[0].first
		s.last = s.segs[len(s.segs)-1].last()
	}
	return nil
}

// IsMonotonic tells raft that this store never holds a gap, so after a
// snapshot restore raft clears the log instead of leaving old entries
// behind a gap.
func (s *Store) IsMonotonic() bool { return true }

// FirstIndex implements raft.LogStore.
func (s *Store) FirstIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.readable(); err != nil {
		return 0, err
	}
	return s.first, nil
}

// LastIndex implements raft.LogStore.
func (s *Store) LastIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.readable(); err != nil {
		return 0, err
	}
	return s.last, nil
}

// GetLog implements raft.LogStore. The frame's checksum is checked again on
// every read.
func (s *Store) GetLog(index uint64, l *raft.Log) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.readable(); err != nil {
		return err
	}
	if s.last == 0 || index < s.first || index > s.last {
		return raft.ErrLogNotFound
	}
	seg := s.segmentOf(index)
	start, end := seg.frameBounds(index)
	frame := make([]byte, end-start)
	if _, err := seg.f.ReadAt(frame, start); err != nil {
		return fmt.Errorf("logstore: read index %d from %s: %w", index, seg.path, err)
	}
	if err := checkFrame(frame); err != nil {
		return &corruptError{path: seg.path, offset: start, err: err}
	}
	if err := decodeFrame(frame, l); err != nil {
		return &corruptError{path: seg.path, offset: start, err: err}
	}
	if l.Index != index {
		return &corruptError{path: seg.path, offset: start, err: fmt.Errorf("frame holds index %d, expected %d", l.Index, index)}
	}
	return nil
}

// segmentOf returns the segment holding index, which must be in the store.
func (s *Store) segmentOf(index uint64) *segment {
	i := sort.Search(len(s.segs), func(i int) bool { return s.segs[i].first > index }) - 1
	return s.segs[i]
}

// StoreLog implements raft.LogStore.
func (s *Store) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

// StoreLogs implements raft.LogStore: the entries are written with one write
// and made durable with one fdatasync before it returns.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.writable(); err != nil {
		return err
	}
	for i, l := range logs {
		if i > 0 && l.Index != logs[i-1].Index+1 {
			return fmt.Errorf("%w: entry %d follows %d in one batch", ErrNotContiguous, l.Index, logs[i-1].Index)
		}
		if bodyFixedSize+len(l.Data)+len(l.Extensions) > MaxEntryBytes {
			return fmt.Errorf("logstore: entry %d is larger than %d bytes", l.Index, MaxEntryBytes)
		}
	}
	// s.last and s.segs change only under writeMu, which we hold.
	if s.last != 0 && logs[0].Index <= s.last {
		return fmt.Errorf("%w: got %d, last stored is %d", ErrNotContiguous, logs[0].Index, s.last)
	}
	if s.last != 0 && logs[0].Index > s.last+1 {
		// Raft stores past a gap only after a snapshot that covers it,
		// for example when a crash came between installing a snapshot and
		// clearing the log: what is before the gap is no longer needed.
		s.logger.Info("raft log continues after a snapshot: dropping the entries before it", "dropped_first", s.first, "dropped_last", s.last, "next", logs[0].Index)
		s.mu.Lock()
		err := s.deleteAll()
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
	if logs[0].Index == 0 {
		return errors.New("logstore: log index 0 is not valid")
	}

	size := 0
	for _, l := range logs {
		size += frameSize(l)
	}
	active, err := s.activeFor(logs[0].Index, int64(size))
	if err != nil {
		return err
	}
	buf := s.buf[:0]
	offsets := make([]int64, 0, len(logs))
	for _, l := range logs {
		offsets = append(offsets, active.size+int64(len(buf)))
		buf = appendFrame(buf, l, logs[0].Index)
	}
	framed := len(buf)
	buf = active.zeroAhead(buf)
	s.buf = buf
	if cap(s.buf) > 4<<20 {
		s.buf = nil // do not pin a one-off large batch
	}

	if err := s.write(active, buf); err != nil {
		return err
	}

	s.mu.Lock()
	active.offsets = append(active.offsets, offsets...)
	active.size += int64(framed)
	if s.last == 0 {
		s.first = logs[0].Index
	}
	s.last = logs[len(logs)-1].Index
	s.mu.Unlock()
	return nil
}

// activeFor returns the segment the next append of size bytes starting at
// index goes to, starting a new one when there is none, when the store is
// empty, or when the current one would grow past SegmentBytes.
func (s *Store) activeFor(index uint64, size int64) (*segment, error) {
	if n := len(s.segs); n > 0 {
		cur := s.segs[n-1]
		switch {
		case cur.entries() == 0 && cur.first == index:
			return cur, nil // started by an append that failed and was undone
		case cur.entries() == 0:
			if err := cur.remove(); err != nil {
				return nil, err
			}
			s.mu.Lock()
			s.segs = s.segs[:n-1]
			s.mu.Unlock()
		case cur.size+size <= s.opts.SegmentBytes:
			return cur, nil
		default:
			if err := cur.seal(); err != nil {
				s.logger.Warn("could not give back the zeros past the end of a full raft log segment", "file", cur.path, "error", err)
			}
		}
	}
	seg, err := createSegment(s.dir, index, s.opts.noSync, s.opts.Syncs)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.segs = append(s.segs, seg)
	s.mu.Unlock()
	s.logger.Debug("raft log segment started", "file", seg.path)
	return seg, nil
}

// write puts buf at the end of seg's frames and syncs it. A failed write is
// undone by cutting the file back; if even that fails, the store refuses
// further writes, since what is on disk past its end is unknown.
func (s *Store) write(seg *segment, buf []byte) error {
	if s.opts.Written != nil {
		s.opts.Written.Add(int64(len(buf)))
	}
	_, err := seg.f.WriteAt(buf, seg.size)
	if err == nil {
		err = seg.sync()
	}
	if err == nil {
		seg.written = max(seg.written, seg.size+int64(len(buf)))
		return nil
	}
	err = fmt.Errorf("logstore: append to %s: %w", seg.path, err)
	seg.written = seg.size
	if terr := seg.truncate(seg.size); terr != nil {
		s.mu.Lock()
		s.fail(fmt.Errorf("%w; undoing it failed too: %v", err, terr))
		s.mu.Unlock()
	}
	return err
}

// readable is nil while reads can be served; the caller holds mu.
func (s *Store) readable() error {
	switch {
	case s.closed:
		return ErrClosed
	case s.broken != nil:
		return s.broken
	}
	return nil
}

func (s *Store) writable() error {
	if s.broken != nil {
		return s.broken
	}
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	return nil
}

// DeleteRange implements raft.LogStore for the two shapes raft uses: from
// the first entry (compaction after a snapshot, or clearing the whole log)
// and up to the last one (dropping a follower's conflicting tail).
//
// Compaction frees whole segments only. Entries before the new first index
// that share a segment with kept ones stay in the file, and after a restart
// the store reports them again; they are committed entries matching every
// other voter's log, so raft reads them back as it would any other.
func (s *Store) DeleteRange(from, to uint64) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.writable(); err != nil {
		return err
	}
	if s.last == 0 || to < s.first || from > s.last || from > to {
		return nil
	}
	lo, hi := max(from, s.first), min(to, s.last)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case lo == s.first && hi == s.last:
		return s.deleteAll()
	case lo == s.first:
		return s.deleteHead(hi)
	case hi == s.last:
		return s.deleteTail(lo)
	}
	return fmt.Errorf("logstore: cannot delete [%d, %d] from the middle of the log [%d, %d]", lo, hi, s.first, s.last)
}

func (s *Store) deleteAll() error {
	for len(s.segs) > 0 {
		if err := s.segs[len(s.segs)-1].remove(); err != nil {
			return s.fail(err)
		}
		s.segs = s.segs[:len(s.segs)-1]
	}
	s.first, s.last = 0, 0
	if err := s.syncDir(); err != nil {
		return s.fail(err)
	}
	return nil
}

func (s *Store) deleteHead(hi uint64) error {
	n := 0
	for n < len(s.segs)-1 && s.segs[n].last() <= hi {
		n++
	}
	for range n {
		if err := s.segs[0].remove(); err != nil {
			return s.fail(err)
		}
		s.segs = s.segs[1:]
	}
	s.first = hi + 1
	if n > 0 {
		if err := s.syncDir(); err != nil {
			return s.fail(err)
		}
	}
	return nil
}

// deleteTail removes entries lo..last. Later segments go first, so a crash
// part way leaves a shorter prefix of the same log.
func (s *Store) deleteTail(lo uint64) error {
	removed := false
	for len(s.segs) > 0 && s.segs[len(s.segs)-1].first >= lo {
		seg := s.segs[len(s.segs)-1]
		if err := seg.remove(); err != nil {
			return s.fail(err)
		}
		s.segs = s.segs[:len(s.segs)-1]
		removed = true
	}
	if removed {
		if err := s.syncDir(); err != nil {
			return s.fail(err)
		}
	}
	// When lo started a segment, that segment is gone and nothing of the
	// one before it is cut.
	seg := s.segs[len(s.segs)-1]
	if keep := lo - seg.first; keep < seg.entries() {
		if err := seg.cut(seg.offsets[keep]); err != nil {
			return s.fail(err)
		}
		seg.offsets = seg.offsets[:keep]
	}
	s.last = lo - 1
	return nil
}

// fail marks the store unusable, for reads too, after a change that
// stopped part way: the files still form a valid log (the same one or a
// shorter one), but this process's view of them is no longer known to
// match, and reading through it could index segments that are gone.
// Reopening rebuilds the view. The caller holds mu.
func (s *Store) fail(err error) error {
	s.broken = err
	s.logger.Error("raft log store stopped; restart to reopen it", "error", err)
	return err
}

// Close releases the files and the directory lock. Calling it again is a
// no-op.
func (s *Store) Close() error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.closeFiles()
	return nil
}

func (s *Store) syncDir() error {
	switch {
	case s.opts.dirSync != nil:
		return s.opts.dirSync(s.dir)
	case s.opts.noSync:
		return nil
	}
	count(s.opts.Syncs)
	return SyncDir(s.dir)
}

func (s *Store) closeFiles() {
	for _, seg := range s.segs {
		_ = seg.f.Close()
	}
	s.segs = nil
	if s.lock != nil {
		_ = s.lock.Close() // closing the descriptor drops the flock
		s.lock = nil
	}
}
