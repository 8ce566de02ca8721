package partlog

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Config configures a Log. Zero values take the defaults.
type Config struct {
	// TopicID is the id of the topic the partition belongs to, kept in
	// partition.metadata. Open refuses a directory kept for another id
	// (ErrOtherTopic).
	TopicID [16]byte
	// SegmentBytes rolls a new segment once the active one holds this
	// many bytes (Kafka's segment.bytes). Default 1 GiB.
	SegmentBytes int64
	// SegmentMs rolls a new segment at an append once the active one's
	// first batch is this old by its timestamp, so that retention.ms can
	// delete it (Kafka's segment.ms). 0: never by time.
	SegmentMs time.Duration
	// IndexIntervalBytes is the bytes between offset index entries
	// (Kafka's index.interval.bytes). Default 4096.
	IndexIntervalBytes int64
	// FlushMessages syncs the log once this many records were appended
	// since the last sync (Kafka's flush.messages); 1 syncs before each
	// append returns. 0: never by count. See the package doc.
	FlushMessages int64
	// FlushInterval syncs, in MaybeFlush, a log whose oldest unsynced
	// record is this old (Kafka's flush.ms). 0: never by time.
	FlushInterval time.Duration
}

// ErrOffsetOutOfRange is returned for a read outside the log.
var ErrOffsetOutOfRange = kerr.OffsetOutOfRange

// ErrOtherTopic is returned by Open for a directory that holds a
// partition of another topic of the same name (a topic deleted and
// created again while the replica was away): its data is not this
// topic's.
var ErrOtherTopic = errors.New("the directory holds a partition of another topic id")

// Log is one partition replica's log. Its methods are safe for concurrent
// use; reads run in parallel with each other.
type Log struct {
	dir string
	cfg Config

	mu     sync.RWMutex
	roll   rollPolicy // segment.bytes and segment.ms now (SetRoll)
	segs   []*segment // by base offset; the last is the active one
	end    int64      // log end offset: the offset the next record gets
	epochs *epochCache
	closed bool

	flushMu sync.Mutex
	// unflushed counts the records appended since the last sync and
	// unflushedAt is when the first of them was.
	unflushed   int64
	unflushedAt time.Time
}

const metadataName = "partition.metadata"

// Open opens the log in dir, creating it if needed, and recovers it (see
// the package doc).
func Open(dir string, cfg Config) (*Log, error) {
	if cfg.SegmentBytes <= 0 {
		cfg.SegmentBytes = 1 << 30
	}
	if cfg.IndexIntervalBytes <= 0 {
		cfg.IndexIntervalBytes = 4096
	}
	if err := mkdirSynced(dir); err != nil {
		return nil, err
	}
	if err := checkTopicID(dir, cfg.TopicID); err != nil {
		return nil, err
	}
	l := &Log{dir: dir, cfg: cfg, roll: rollPolicy{bytes: cfg.SegmentBytes, ms: cfg.SegmentMs}}
	var err error
	if l.epochs, err = loadEpochs(dir); err != nil {
		return nil, err
	}
	bases, err := segmentBases(dir)
	if err != nil {
		return nil, err
	}
	if len(bases) == 0 {
		s, err := createSegment(dir, 0)
		if err != nil {
			return nil, err
		}
		l.segs = []*segment{s}
	}
	epochsAdded := false
	for i, base := range bases {
		last := i == len(bases)-1
		var onBatch func(*Batch)
		if last {
			onBatch = func(b *Batch) {
				if b.LeaderEpoch >= 0 && l.epochs.assign(b.LeaderEpoch, b.BaseOffset) {
					epochsAdded = true
				}
			}
		}
		s, err := openSegment(dir, base, last, cfg.IndexIntervalBytes, onBatch)
		if err != nil {
			l.closeSegments()
			return nil, err
		}
		if n := len(l.segs); n > 0 && l.segs[n-1].next != s.base {
			// A gap: what follows it cannot be read in order. Kafka
			// would refuse to start; here the tail after the gap goes,
			// as it can only be a follower's unacknowledged copy or a
			// torn roll, and the leader refills it.
			s.close()
			for _, b := range bases[i:] {
				_ = os.Remove(segmentName(dir, b, ".log"))
				_ = os.Remove(segmentName(dir, b, ".index"))
			}
			break
		}
		l.segs = append(l.segs, s)
	}
	l.end = l.segs[len(l.segs)-1].next
	// Entries starting past the recovered end are gone; one starting
	// exactly at the end stays (a leader's epoch before its first append).
	if l.epochs.truncateFromEnd(l.end+1) || epochsAdded {
		if err := l.epochs.save(); err != nil {
			l.closeSegments()
			return nil, err
		}
	}
	return l, nil
}

// mkdirSynced creates dir and its missing parents, syncing the directory
// each new one is in, so that a power loss does not take the partition's
// directory, and with it every record synced inside it, away.
func mkdirSynced(dir string) error {
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range created {
		if err := syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// checkTopicID compares dir's partition.metadata with id, writing it when
// there is none.
func checkTopicID(dir string, id [16]byte) error {
	path := filepath.Join(dir, metadataName)
	want := base64.RawURLEncoding.EncodeToString(id[:])
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return WriteFileAtomic(path, []byte("version: 0\ntopic_id: "+want+"\n"))
	}
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "topic_id: "); ok {
			if strings.TrimSpace(v) != want {
				return fmt.Errorf("%s: %w (%s, want %s)", dir, ErrOtherTopic, strings.TrimSpace(v), want)
			}
			return nil
		}
	}
	return fmt.Errorf("%s: no topic_id line", path)
}

// TopicID reads the topic id a partition directory was created for.
func TopicID(dir string) ([16]byte, error) {
	var id [16]byte
	b, err := os.ReadFile(filepath.Join(dir, metadataName))
	if err != nil {
		return id, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "topic_id: "); ok {
			raw, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(v))
			if err != nil || len(raw) != len(id) {
				return id, fmt.Errorf("%s: topic_id %q is not a topic id", dir, strings.TrimSpace(v))
			}
			copy(id[:], raw)
			return id, nil
		}
	}
	return id, fmt.Errorf("%s: no topic_id line in %s", dir, metadataName)
}

// segmentBases lists the base offsets of dir's .log files, in order, and
// removes an .index left without its .log.
func segmentBases(dir string) ([]int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	logs := map[int64]bool{}
	var bases []int64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok {
			continue
		}
		b, err := strconv.ParseInt(name, 10, 64)
		if err != nil || b < 0 {
			continue
		}
		logs[b] = true
		bases = append(bases, b)
	}
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), ".index"); ok {
			if b, err := strconv.ParseInt(name, 10, 64); err == nil && !logs[b] {
				_ = os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// StartOffset is the log start offset: the first offset held.
func (l *Log) StartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.segs[0].base
}

// EndOffset is the log end offset: the offset the next record gets.
func (l *Log) EndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.end
}

// Size is the bytes of batches held.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// ErrClosed is returned by the methods of a closed log.
var ErrClosed = errors.New("partition log closed")

// AppendAsLeader appends a producer's batches (as ParseBatches returned
// them), giving them offsets from the log end and leader epoch epoch in
// place: the bytes are changed. It returns the first and last offsets
// given.
func (l *Log) AppendAsLeader(batches []Batch, epoch int32) (first, last int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, 0, ErrClosed
	}
	first = l.end
	next := l.end
	for i := range batches {
		b := &batches[i]
		setBaseOffset(b.Bytes, next)
		setLeaderEpoch(b.Bytes, epoch)
		b.BaseOffset, b.LeaderEpoch = next, epoch
		next = b.NextOffset()
	}
	if err := l.appendLocked(batches); err != nil {
		return 0, 0, err
	}
	return first, l.end - 1, nil
}

// AppendAsFollower appends batches fetched from the leader as they are.
// The first must start at the log end and each at the end of the one
// before (INVALID_RECORD otherwise, and nothing is appended). A batch of
// a leader epoch newer than the cache knows starts that epoch.
func (l *Log) AppendAsFollower(batches []Batch) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	next := l.end
	for i := range batches {
		if batches[i].BaseOffset != next {
			return fmt.Errorf("%w: a fetched batch starts at offset %d, the log ends at %d", kerr.InvalidRecord, batches[i].BaseOffset, next)
		}
		next = batches[i].NextOffset()
	}
	return l.appendLocked(batches)
}

func (l *Log) appendLocked(batches []Batch) error {
	epochsChanged := false
	var records int64
	for i := range batches {
		b := &batches[i]
		if b.LeaderEpoch >= 0 && l.epochs.assign(b.LeaderEpoch, b.BaseOffset) {
			epochsChanged = true
		}
		act := l.segs[len(l.segs)-1]
		if act.size > 0 && (act.size+int64(len(b.Bytes)) > l.roll.bytes || l.rollDueLocked(act)) {
			var err error
			if act, err = l.rollLocked(); err != nil {
				return err
			}
		}
		if err := act.append(b.Bytes, b.BaseOffset, b.NextOffset(), l.cfg.IndexIntervalBytes); err != nil {
			return err
		}
		act.noteTimestamp(b.MaxTimestamp)
		l.end = b.NextOffset()
		records += int64(b.LastOffsetDelta) + 1
	}
	if epochsChanged {
		if err := l.epochs.save(); err != nil {
			return err
		}
	}
	l.flushMu.Lock()
	if l.unflushed == 0 {
		l.unflushedAt = time.Now()
	}
	l.unflushed += records
	due := l.cfg.FlushMessages > 0 && l.unflushed >= l.cfg.FlushMessages
	l.flushMu.Unlock()
	if due {
		return l.syncLocked()
	}
	return nil
}

// rollLocked syncs the active segment and starts a new one at the log end.
func (l *Log) rollLocked() (*segment, error) {
	if err := l.segs[len(l.segs)-1].sync(); err != nil {
		return nil, err
	}
	s, err := createSegment(l.dir, l.end)
	if err != nil {
		return nil, err
	}
	l.segs = append(l.segs, s)
	return s, nil
}

// syncLocked syncs the active segment (earlier ones were synced when
// rolled). l.mu is held, for reading at least.
func (l *Log) syncLocked() error {
	if err := l.segs[len(l.segs)-1].sync(); err != nil {
		return err
	}
	l.flushMu.Lock()
	l.unflushed = 0
	l.flushMu.Unlock()
	return nil
}

// Flush syncs what was appended.
func (l *Log) Flush() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	return l.syncLocked()
}

// MaybeFlush syncs the log if its oldest unsynced record is older than
// FlushInterval at now.
func (l *Log) MaybeFlush(now time.Time) error {
	if l.cfg.FlushInterval <= 0 {
		return nil
	}
	l.flushMu.Lock()
	due := l.unflushed > 0 && now.Sub(l.unflushedAt) >= l.cfg.FlushInterval
	l.flushMu.Unlock()
	if !due {
		return nil
	}
	return l.Flush()
}

// Read returns whole batches starting with the one holding offset, from
// one segment, each ending below maxOffset (the high watermark, for a
// consumer), as many as fit in maxBytes but at least one (as Kafka does,
// so that a batch larger than a fetch's limit still gets through). A
// read at the log end (or at maxOffset) returns nothing;
// ErrOffsetOutOfRange outside [StartOffset, EndOffset].
func (l *Log) Read(offset, maxOffset int64, maxBytes int) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, ErrClosed
	}
	if offset < l.segs[0].base || offset > l.end {
		return nil, fmt.Errorf("%w: offset %d, log [%d, %d]", ErrOffsetOutOfRange, offset, l.segs[0].base, l.end)
	}
	maxOffset = min(maxOffset, l.end)
	if offset >= maxOffset {
		return nil, nil
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	for ; i < len(l.segs); i++ {
		s := l.segs[i]
		pos, h, n, err := s.find(offset)
		if err != nil {
			return nil, err
		}
		if pos == s.size {
			continue // offset is this segment's end: the next one has it
		}
		if h.LastOffset() >= maxOffset {
			return nil, nil
		}
		end := pos + int64(n)
		for end < s.size {
			h, n, err := s.header(end)
			if err != nil {
				return nil, err
			}
			if h.LastOffset() >= maxOffset || end+int64(n)-pos > int64(maxBytes) {
				break
			}
			end += int64(n)
		}
		out := make([]byte, end-pos)
		if _, err := s.log.ReadAt(out, pos); err != nil {
			return nil, err
		}
		return out, nil
	}
	return nil, nil
}

// OffsetForTime returns the base offset of the first batch holding a
// record with a timestamp at or after ts (the batch's max timestamp says
// so), or -1 when there is none: ListOffsets by time, at batch
// granularity (there is no time index; the segments' headers are read).
func (l *Log) OffsetForTime(ts int64) (offset int64, timestamp int64, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segs {
		for pos := int64(0); pos < s.size; {
			h, n, err := s.header(pos)
			if err != nil {
				return 0, 0, err
			}
			if h.MaxTimestamp >= ts {
				return h.BaseOffset, h.MaxTimestamp, nil
			}
			pos += int64(n)
		}
	}
	return -1, -1, nil
}

// Truncate removes every batch at and after the one holding offset; the
// log end becomes that batch's base offset (offset itself when offset is
// a batch boundary, as a leader's epoch end offset is). Epoch cache
// entries starting at or past the new end go too.
func (l *Log) Truncate(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if offset >= l.end {
		return nil
	}
	offset = max(offset, l.segs[0].base)
	// Whole segments from the back first, so that a crash leaves a prefix.
	for len(l.segs) > 1 && l.segs[len(l.segs)-1].base >= offset {
		s := l.segs[len(l.segs)-1]
		if err := s.remove(l.dir); err != nil {
			return err
		}
		l.segs = l.segs[:len(l.segs)-1]
		l.end = s.base
	}
	end, err := l.segs[len(l.segs)-1].truncate(offset)
	if err != nil {
		return err
	}
	l.end = end
	if l.epochs.truncateFromEnd(l.end) {
		return l.epochs.save()
	}
	return nil
}

// AssignEpoch notes that leader epoch epoch starts at the log end, as a
// new leader does before its first append, so that OffsetsForLeaderEpoch
// answers for it at once. Older or equal epochs are ignored.
func (l *Log) AssignEpoch(epoch int32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if l.epochs.assign(epoch, l.end) {
		return l.epochs.save()
	}
	return nil
}

// LatestEpoch is the newest leader epoch in the cache, -1 for none.
func (l *Log) LatestEpoch() int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if e, ok := l.epochs.latest(); ok {
		return e.Epoch
	}
	return -1
}

// EndOffsetForEpoch answers OffsetsForLeaderEpoch: the end offset of
// epoch in this log and the epoch it belongs to (see Kafka's
// LeaderEpochFileCache.endOffsetFor); (-1, -1) for an unknown epoch.
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.endOffsetFor(epoch, l.end)
}

// Epochs returns the epoch cache's entries, oldest first.
func (l *Log) Epochs() []EpochEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return append([]EpochEntry(nil), l.epochs.entries...)
}

func (l *Log) closeSegments() {
	for _, s := range l.segs {
		s.close()
	}
}

// Close syncs and closes the log.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	err := l.segs[len(l.segs)-1].sync()
	l.closeSegments()
	l.closed = true
	return err
}

// Delete closes the log and removes its directory.
func (l *Log) Delete() error {
	l.mu.Lock()
	if !l.closed {
		l.closeSegments()
		l.closed = true
	}
	l.mu.Unlock()
	return os.RemoveAll(l.dir)
}
