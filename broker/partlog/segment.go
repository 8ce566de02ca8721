package partlog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// segment is one .log file and its .index.
type segment struct {
	base int64
	log  *os.File
	idxf *os.File
	size int64 // bytes of whole batches in the .log file
	idx  []indexEntry
	// sinceIndex counts the bytes appended since the last index entry.
	sinceIndex int64
	// next is the offset after the segment's last batch (base when empty).
	next int64
	// firstTS is the max timestamp of the segment's first batch and maxTS
	// the largest of all its batches' (-1 when empty): what segment.ms
	// and retention.ms go by, as Kafka's do.
	firstTS, maxTS int64
}

func segmentName(dir string, base int64, ext string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, ext))
}

// createSegment creates an empty segment's files.
func createSegment(dir string, base int64) (*segment, error) {
	lf, err := os.OpenFile(segmentName(dir, base, ".log"), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	xf, err := os.OpenFile(segmentName(dir, base, ".index"), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		_ = lf.Close()
		return nil, err
	}
	if err := syncDir(dir); err != nil {
		_ = lf.Close()
		_ = xf.Close()
		return nil, err
	}
	return &segment{base: base, log: lf, idxf: xf, next: base, firstTS: -1, maxTS: -1}, nil
}

// openSegment opens an existing segment. With recover, the .log is
// scanned, cut at the first bad batch and its index rebuilt (onBatch sees
// each good batch's header); without, the index is trusted if it is
// sound, and the scan only finds the segment's end.
func openSegment(dir string, base int64, recover bool, interval int64, onBatch func(*Batch)) (*segment, error) {
	lf, err := os.OpenFile(segmentName(dir, base, ".log"), os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	xf, err := os.OpenFile(segmentName(dir, base, ".index"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		_ = lf.Close()
		return nil, err
	}
	s := &segment{base: base, log: lf, idxf: xf, next: base, firstTS: -1, maxTS: -1}
	if err := s.load(recover, interval, onBatch); err != nil {
		s.close()
		return nil, fmt.Errorf("segment %d: %w", base, err)
	}
	return s, nil
}

func (s *segment) load(recover bool, interval int64, onBatch func(*Batch)) error {
	st, err := s.log.Stat()
	if err != nil {
		return err
	}
	fileSize := st.Size()
	var idx []indexEntry
	var since int64
	valid, next, err := scanBatches(s.log, fileSize, s.base, recover, func(b *Batch, pos int64) {
		if since >= interval {
			idx = append(idx, indexEntry{rel: uint32(b.BaseOffset - s.base), pos: uint32(pos)})
			since = 0
		}
		since += int64(len(b.Bytes))
		s.noteTimestamp(b.MaxTimestamp)
		if onBatch != nil {
			onBatch(b)
		}
	})
	if err != nil {
		return err
	}
	s.size, s.next, s.sinceIndex = valid, next, since
	if valid < fileSize {
		if err := s.log.Truncate(valid); err != nil {
			return err
		}
	}
	if !recover {
		if b, err := io.ReadAll(io.NewSectionReader(s.idxf, 0, 1<<40)); err == nil {
			if old, ok := decodeIndex(b, s.size); ok {
				s.idx = old
				return nil
			}
		}
	}
	s.idx = idx
	return s.writeIndex()
}

// writeIndex replaces the .index file's content with s.idx.
func (s *segment) writeIndex() error {
	b := make([]byte, 0, len(s.idx)*indexEntryBytes)
	for _, e := range s.idx {
		b = appendEntry(b, e)
	}
	if err := s.idxf.Truncate(0); err != nil {
		return err
	}
	_, err := s.idxf.WriteAt(b, 0)
	return err
}

// scanBatches reads the batches of a .log file in order from position 0.
// It stops at the first batch that is torn, damaged (with check, the CRC
// too) or does not start at the offset after the previous one, and
// returns the byte position and the offset where the good part ends.
func scanBatches(f *os.File, size, base int64, check bool, each func(b *Batch, pos int64)) (int64, int64, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 1<<16)
	var pos int64
	next := base
	head := make([]byte, HeaderBytes)
	var buf []byte
	for pos+HeaderBytes <= size {
		if _, err := io.ReadFull(r, head); err != nil {
			return 0, 0, err
		}
		n, ok := batchSize(head)
		if !ok || pos+int64(n) > size {
			break
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		copy(buf, head)
		if _, err := io.ReadFull(r, buf[HeaderBytes:]); err != nil {
			return 0, 0, err
		}
		var b Batch
		if check {
			var err error
			if b, err = ParseBatch(buf); err != nil {
				break
			}
		} else {
			b = headerOnly(buf)
		}
		if b.BaseOffset != next || b.LastOffsetDelta < 0 {
			break
		}
		each(&b, pos)
		pos += int64(n)
		next = b.NextOffset()
	}
	return pos, next, nil
}

// headerOnly reads the offsets and timestamps of a batch without checking
// it; b holds at least a header.
func headerOnly(b []byte) Batch {
	return Batch{
		BaseOffset:      int64(binary.BigEndian.Uint64(b[offBaseOffset:])),
		LeaderEpoch:     int32(binary.BigEndian.Uint32(b[offLeaderEpoch:])),
		LastOffsetDelta: int32(binary.BigEndian.Uint32(b[23:])),
		FirstTimestamp:  int64(binary.BigEndian.Uint64(b[27:])),
		MaxTimestamp:    int64(binary.BigEndian.Uint64(b[35:])),
		NumRecords:      int32(binary.BigEndian.Uint32(b[57:])),
		Bytes:           b,
	}
}

// noteTimestamp takes a batch's max timestamp into the segment's.
func (s *segment) noteTimestamp(ts int64) {
	if s.firstTS < 0 {
		s.firstTS = ts
	}
	s.maxTS = max(s.maxTS, ts)
}

// append writes one batch at the segment's end and indexes it every
// interval bytes.
func (s *segment) append(b []byte, base, next int64, interval int64) error {
	if _, err := s.log.WriteAt(b, s.size); err != nil {
		return err
	}
	if s.sinceIndex >= interval {
		e := indexEntry{rel: uint32(base - s.base), pos: uint32(s.size)}
		if _, err := s.idxf.WriteAt(appendEntry(nil, e), int64(len(s.idx))*indexEntryBytes); err != nil {
			return err
		}
		s.idx = append(s.idx, e)
		s.sinceIndex = 0
	}
	s.sinceIndex += int64(len(b))
	s.size += int64(len(b))
	s.next = next
	return nil
}

// header reads the header of the batch at pos and its size.
func (s *segment) header(pos int64) (Batch, int, error) {
	var h [HeaderBytes]byte
	if _, err := s.log.ReadAt(h[:], pos); err != nil {
		return Batch{}, 0, err
	}
	n, ok := batchSize(h[:])
	if !ok {
		return Batch{}, 0, fmt.Errorf("damaged batch length at position %d", pos)
	}
	b := headerOnly(h[:])
	b.Bytes = nil
	return b, n, nil
}

// find returns the position, header and size of the first batch whose
// last offset is at least offset, or pos == s.size when there is none.
func (s *segment) find(offset int64) (int64, Batch, int, error) {
	pos := int64(0)
	if offset > s.base {
		pos = int64(lookup(s.idx, uint32(min(offset-s.base, 1<<32-1))))
	}
	for pos < s.size {
		h, n, err := s.header(pos)
		if err != nil {
			return 0, Batch{}, 0, err
		}
		if h.LastOffset() >= offset {
			return pos, h, n, nil
		}
		pos += int64(n)
	}
	return s.size, Batch{}, 0, nil
}

// truncate cuts the segment before the batch holding offset (or the
// first batch after it) and returns the segment's new end offset.
func (s *segment) truncate(offset int64) (int64, error) {
	pos, h, _, err := s.find(offset)
	if err != nil {
		return 0, err
	}
	if pos == s.size {
		return s.next, nil
	}
	if err := s.log.Truncate(pos); err != nil {
		return 0, err
	}
	s.size, s.next = pos, h.BaseOffset
	if s.size == 0 {
		// Otherwise the timestamps stay: a later deletion by time, not an
		// early one.
		s.firstTS, s.maxTS = -1, -1
	}
	k := len(s.idx)
	for k > 0 && int64(s.idx[k-1].pos) >= pos {
		k--
	}
	if k != len(s.idx) {
		s.idx = s.idx[:k]
		if err := s.idxf.Truncate(int64(k) * indexEntryBytes); err != nil {
			return 0, err
		}
	}
	// Index entries every interval from the last one kept: the bytes
	// after it are what is now unindexed.
	s.sinceIndex = pos
	if k > 0 {
		s.sinceIndex = pos - int64(s.idx[k-1].pos)
	}
	return s.next, nil
}

func (s *segment) sync() error {
	if err := s.log.Sync(); err != nil {
		return err
	}
	return s.idxf.Sync()
}

func (s *segment) close() {
	_ = s.log.Close()
	_ = s.idxf.Close()
}

// remove closes and deletes the segment's files, the .log first: a crash
// between the two leaves an index without its log, which Open deletes.
func (s *segment) remove(dir string) error {
	s.close()
	if err := os.Remove(segmentName(dir, s.base, ".log")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Remove(segmentName(dir, s.base, ".index")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
