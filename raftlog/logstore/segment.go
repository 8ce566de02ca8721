package logstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

const segmentSuffix = ".seg"

// segment is one file of the log. Its name is the index of its first entry;
// offsets[i] is where the frame of entry first+i starts, and size is where
// the last valid frame ends (the next append goes there).
//
// The file runs on past size in zeros up to written (see zeroAhead), so
// the file is usually longer than its frames.
type segment struct {
	path    string
	f       *os.File
	first   uint64
	offsets []int64
	size    int64
	written int64
	noSync  bool
	syncs   *atomic.Int64 // counts syncs when set (Options.Syncs)
}

func segmentName(first uint64) string {
	return fmt.Sprintf("%020d%s", first, segmentSuffix)
}

// parseSegmentName returns the first index a segment file name carries, or
// ok=false for a file that is not a segment.
func parseSegmentName(name string) (first uint64, ok bool) {
	base, found := strings.CutSuffix(name, segmentSuffix)
	if !found || len(base) != 20 {
		return 0, false
	}
	first, err := strconv.ParseUint(base, 10, 64)
	return first, err == nil
}

// entries is how many entries the segment holds.
func (s *segment) entries() uint64 { return uint64(len(s.offsets)) }

// last is the index of the segment's last entry; only meaningful when it
// holds at least one.
func (s *segment) last() uint64 { return s.first + s.entries() - 1 }

// frameBounds returns where entry idx's frame starts and ends in the file.
func (s *segment) frameBounds(idx uint64) (start, end int64) {
	i := idx - s.first
	start = s.offsets[i]
	end = s.size
	if i+1 < s.entries() {
		end = s.offsets[i+1]
	}
	return start, end
}

func createSegment(dir string, first uint64, noSync bool, syncs *atomic.Int64) (*segment, error) {
	path := filepath.Join(dir, segmentName(first))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("logstore: create segment: %w", err)
	}
	if !noSync {
		count(syncs)
		if err := SyncDir(dir); err != nil {
			_ = f.Close()
			return nil, err
		}
	}
	return &segment{path: path, f: f, first: first, noSync: noSync, syncs: syncs}, nil
}

// zeroChunk is how far past its frames an append extends the file with
// zeros.
const zeroChunk = 256 << 10

var zeros [zeroChunk]byte

// zeroAhead returns buf, the frames of an append, followed by zeros up to
// the next zeroChunk boundary when the frames would reach past what the
// file already holds.
//
// Overwriting bytes a file already holds changes neither its size nor its
// block map, so the append's fdatasync writes the data alone. An append that
// grows the file also commits the file system's journal, and on this
// project's reference machine that costs 40% more time and CPU per sync
// (space reserved with fallocate but never written behaves like growth).
// Growing the file a chunk at a time with the append that needs the room
// pays that once per chunk.
func (s *segment) zeroAhead(buf []byte) []byte {
	end := s.size + int64(len(buf))
	if end <= s.written {
		return buf
	}
	pad := zeroChunk - end%zeroChunk
	return append(buf, zeros[:pad]...)
}

// seal gives back the zeros past the last frame of a segment that takes no
// more appends.
func (s *segment) seal() error {
	s.written = s.size
	return s.truncate(s.size)
}

// cut drops everything in the file from size on and makes that durable.
func (s *segment) cut(size int64) error {
	if err := s.truncate(size); err != nil {
		return err
	}
	s.size, s.written = size, size
	return nil
}

func (s *segment) truncate(size int64) error {
	if err := s.f.Truncate(size); err != nil {
		return fmt.Errorf("logstore: truncate %s: %w", s.path, err)
	}
	if err := s.sync(); err != nil {
		return fmt.Errorf("logstore: sync %s: %w", s.path, err)
	}
	return nil
}

// tailDamage describes bytes at the end of the last segment that do not form
// whole valid frames: what a crash leaves when it stops an append before its
// fdatasync returned. Such an append was never acknowledged, so dropping it
// loses nothing anyone was told is stored.
type tailDamage struct {
	offset int64 // where the damage starts
	bytes  int64 // how many bytes are dropped
	reason error
}

// corruptError is damage that a crashed append cannot explain: a bad frame
// followed by frames of a later append, a frame with the wrong index, a
// damaged segment that is not the last. Opening stops on it rather than
// guess which entries are real.
type corruptError struct {
	path   string
	offset int64
	err    error
}

func (e *corruptError) Error() string {
	return fmt.Sprintf("logstore: %s is damaged at offset %d: %v; the entries from there on cannot be trusted. "+
		"If the other voters are healthy, move this voter's data directory aside and let it rejoin from their snapshot",
		e.path, e.offset, e.err)
}

func (e *corruptError) Unwrap() error { return e.err }

// scan reads the segment's frames from the start, checking each checksum and
// that indexes follow the file name. It fills offsets and size with the valid
// prefix. Zeros after the last frame are room made ahead, not damage.
//
// Anything else that is not a valid frame is damage. A crash can only damage
// the last append, the one whose fdatasync had not returned, and of that
// append the disk may have kept any pages in any order: a lost page can sit
// between kept ones. So damage is reported as tailDamage (the caller decides
// whether a tail may be dropped) unless a valid frame of a later append
// follows it, which proves it lies in data that was synced: that is a
// corruptError.
func (s *segment) scan() (*tailDamage, error) {
	info, err := s.f.Stat()
	if err != nil {
		return nil, fmt.Errorf("logstore: stat %s: %w", s.path, err)
	}
	fileSize := info.Size()
	s.written = fileSize
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, 0, fileSize), 1<<20)
	var frame []byte
	var off int64
	damaged := func(reason error) (*tailDamage, error) {
		rest := make([]byte, fileSize-off)
		if _, err := s.f.ReadAt(rest, off); err != nil {
			return nil, fmt.Errorf("logstore: read %s: %w", s.path, err)
		}
		if !slices.ContainsFunc(rest, func(b byte) bool { return b != 0 }) {
			return nil, nil // the end of the frames, in room made ahead
		}
		if later := laterAppend(rest, s.first+s.entries()); later >= 0 {
			return nil, &corruptError{path: s.path, offset: off,
				err: fmt.Errorf("%v, and a later append's frame follows at offset %d", reason, off+later)}
		}
		return &tailDamage{offset: off, bytes: fileSize - off, reason: reason}, nil
	}
	for off < fileSize {
		remaining := fileSize - off
		if remaining < frameHeaderSize {
			return damaged(errors.New("partial frame header"))
		}
		var header [frameHeaderSize]byte
		if _, err := io.ReadFull(r, header[:]); err != nil {
			return nil, fmt.Errorf("logstore: read %s: %w", s.path, err)
		}
		if header == [frameHeaderSize]byte{} {
			return damaged(errors.New("an empty frame header followed by data"))
		}
		bodyLen, err := frameBodyLen(header[:])
		if err != nil {
			return damaged(err)
		}
		if int64(frameHeaderSize+bodyLen) > remaining {
			return damaged(fmt.Errorf("frame of %d bytes, %d left in the file", frameHeaderSize+bodyLen, remaining))
		}
		if cap(frame) < frameHeaderSize+bodyLen {
			frame = make([]byte, frameHeaderSize+bodyLen)
		}
		frame = frame[:frameHeaderSize+bodyLen]
		copy(frame, header[:])
		if _, err := io.ReadFull(r, frame[frameHeaderSize:]); err != nil {
			return nil, fmt.Errorf("logstore: read %s: %w", s.path, err)
		}
		if err := checkFrame(frame); err != nil {
			return damaged(err)
		}
		if err := checkLayout(frame); err != nil {
			return nil, &corruptError{path: s.path, offset: off, err: err}
		}
		if want := s.first + s.entries(); frameIndex(frame) != want {
			return nil, &corruptError{path: s.path, offset: off,
				err: fmt.Errorf("frame holds index %d, expected %d", frameIndex(frame), want)}
		}
		s.offsets = append(s.offsets, off)
		off += int64(len(frame))
		s.size = off
	}
	return nil, nil
}

// laterAppend looks in rest, the bytes from damage where the entry next
// expected is next, for a valid frame written by a later append than the
// one that holds the damage: one whose append began after next. It returns
// that frame's offset in rest, or -1. Frames are found by trying every
// offset, so a frame torn at its start does not hide the ones after it; a
// checksum must match before a frame counts.
func laterAppend(rest []byte, next uint64) int64 {
	const minFrame = frameHeaderSize + bodyFixedSize
	for p := 1; p+minFrame <= len(rest); p++ {
		n := binary.LittleEndian.Uint32(rest[p+4:])
		if n < bodyFixedSize || uint64(p)+frameHeaderSize+uint64(n) > uint64(len(rest)) {
			continue
		}
		f := rest[p : p+frameHeaderSize+int(n)]
		if frameIndex(f) < next || frameAppendFirst(f) <= next || checkFrame(f) != nil {
			continue
		}
		return int64(p)
	}
	return -1
}

// remove closes and deletes the segment file. The caller syncs the
// directory.
func (s *segment) remove() error {
	_ = s.f.Close()
	if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("logstore: remove %s: %w", s.path, err)
	}
	return nil
}

// sync makes the file's data durable.
func (s *segment) sync() error {
	if s.noSync {
		return nil
	}
	count(s.syncs)
	for {
		err := unix.Fdatasync(int(s.f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

func count(c *atomic.Int64) {
	if c != nil {
		c.Add(1)
	}
}

// SyncDir makes file creations, removals and renames in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("logstore: open dir for sync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("logstore: sync dir %s: %w", dir, err)
	}
	return nil
}
