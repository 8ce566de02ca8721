package logstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// entry builds the deterministic entry the tests store at index in term:
// its data names both, so a read can tell which write it came from.
func entry(index, term uint64) *raft.Log {
	l := &raft.Log{
		Index:      index,
		Term:       term,
		Type:       raft.LogCommand,
		Data:       []byte(fmt.Sprintf("entry %d of term %d", index, term)),
		AppendedAt: time.Unix(1700000000, int64(index)),
	}
	if index%7 == 0 {
		l.Extensions = []byte{0xE, byte(index)}
	}
	if index%11 == 0 {
		l.Type = raft.LogConfiguration
	}
	return l
}

func batch(from, to, term uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, entry(i, term))
	}
	return out
}

func open(t *testing.T, dir string, segBytes int64) *Store {
	t.Helper()
	s, err := Open(dir, Options{SegmentBytes: segBytes})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openFilled opens a store in dir and appends entries 1..last of term 1 in
// batches of per.
func openFilled(t *testing.T, dir string, segBytes int64, last, per uint64) *Store {
	t.Helper()
	s := open(t, dir, segBytes)
	for i := uint64(1); i <= last; i += per {
		store(t, s, batch(i, i+per-1, 1))
	}
	return s
}

func store(t *testing.T, s *Store, logs []*raft.Log) {
	t.Helper()
	if err := s.StoreLogs(logs); err != nil {
		t.Fatalf("StoreLogs [%d, %d]: %v", logs[0].Index, logs[len(logs)-1].Index, err)
	}
}

// checkRange asserts the store holds exactly [first, last] and that every
// entry reads back as entry(i, termOf(i)).
func checkRange(t *testing.T, s *Store, first, last uint64, termOf func(uint64) uint64) {
	t.Helper()
	gotFirst, err1 := s.FirstIndex()
	gotLast, err2 := s.LastIndex()
	if err1 != nil || err2 != nil || gotFirst != first || gotLast != last {
		t.Fatalf("range [%d, %d] (%v, %v), want [%d, %d]", gotFirst, gotLast, err1, err2, first, last)
	}
	for i := first; i <= last && last != 0; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		want := entry(i, termOf(i))
		if l.Index != want.Index || l.Term != want.Term || l.Type != want.Type ||
			!bytes.Equal(l.Data, want.Data) || !bytes.Equal(l.Extensions, want.Extensions) ||
			!l.AppendedAt.Equal(want.AppendedAt) {
			t.Fatalf("GetLog(%d) = %+v, want %+v", i, l, *want)
		}
	}
	for _, i := range []uint64{first - 1, last + 1} {
		if i == 0 || (i >= first && i <= last) {
			continue
		}
		var l raft.Log
		if err := s.GetLog(i, &l); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("GetLog(%d) outside the range: %v, want ErrLogNotFound", i, err)
		}
	}
}

func term1(uint64) uint64 { return 1 }

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"+segmentSuffix))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	return names
}

func TestAppendReadReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 0)
	checkRange(t, s, 0, 0, term1)
	store(t, s, batch(1, 1, 1))
	store(t, s, batch(2, 40, 1))
	if err := s.StoreLog(entry(41, 1)); err != nil {
		t.Fatal(err)
	}
	checkRange(t, s, 1, 41, term1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LastIndex(); !errors.Is(err, ErrClosed) {
		t.Fatalf("LastIndex after Close: %v, want ErrClosed", err)
	}
	s = open(t, dir, 0)
	checkRange(t, s, 1, 41, term1)
	store(t, s, batch(42, 50, 2))
	checkRange(t, s, 1, 50, func(i uint64) uint64 { return map[bool]uint64{true: 1, false: 2}[i <= 41] })
}

func TestGapsAndMiddleDeletesAreRefusedAndChangeNothing(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 0)
	store(t, s, batch(1, 10, 1))
	for name, logs := range map[string][]*raft.Log{
		"overlap":             batch(10, 11, 1),
		"gap inside a batch":  {entry(11, 1), entry(13, 1)},
		"index 0 into a full": {entry(0, 1)},
	} {
		if err := s.StoreLogs(logs); err == nil {
			t.Fatalf("%s: StoreLogs accepted it", name)
		}
	}
	if err := s.DeleteRange(4, 6); err == nil || !strings.Contains(err.Error(), "middle") {
		t.Fatalf("middle delete: %v", err)
	}
	checkRange(t, s, 1, 10, term1)
	_ = s.Close()
	s = open(t, dir, 0)
	checkRange(t, s, 1, 10, term1)
}

func TestRollCompactAndReopen(t *testing.T) {
	dir := t.TempDir()
	s := openFilled(t, dir, 4<<10, 1000, 25)
	files := segmentFiles(t, dir)
	if len(files) < 5 {
		t.Fatalf("%d segment files for 1000 entries at 4 KiB each, want several", len(files))
	}
	checkRange(t, s, 1, 1000, term1)
	// Full segments hold exactly their frames; the active one runs on in
	// zeros to a chunk boundary.
	for i, seg := range s.segs {
		info, err := os.Stat(seg.path)
		if err != nil {
			t.Fatal(err)
		}
		if active := i == len(s.segs)-1; active && (info.Size() < seg.size || info.Size()%zeroChunk != 0) || !active && info.Size() != seg.size {
			t.Fatalf("segment %d of %d: file of %d bytes, frames end at %d", i+1, len(s.segs), info.Size(), seg.size)
		}
	}

	if err := s.DeleteRange(1, 600); err != nil {
		t.Fatal(err)
	}
	checkRange(t, s, 601, 1000, term1)
	left := segmentFiles(t, dir)
	if len(left) >= len(files) {
		t.Fatalf("compaction kept all %d files", len(left))
	}
	firstKept, _ := parseSegmentName(filepath.Base(left[0]))
	if firstKept > 601 {
		t.Fatalf("compaction removed the segment holding 601 (first file starts at %d)", firstKept)
	}

	// After a restart the entries that shared a segment with 601 are back:
	// compaction frees whole files only.
	_ = s.Close()
	s = open(t, dir, 4<<10)
	checkRange(t, s, firstKept, 1000, term1)
	store(t, s, batch(1001, 1010, 1))
	checkRange(t, s, firstKept, 1010, term1)
}

func TestTailDeleteAcrossSegmentsThenNewTerm(t *testing.T) {
	dir := t.TempDir()
	s := openFilled(t, dir, 4<<10, 400, 20)
	before := len(segmentFiles(t, dir))
	if err := s.DeleteRange(150, 400); err != nil {
		t.Fatal(err)
	}
	if after := len(segmentFiles(t, dir)); after >= before {
		t.Fatalf("tail delete over several segments left %d of %d files", after, before)
	}
	checkRange(t, s, 1, 149, term1)
	store(t, s, batch(150, 170, 2))
	termOf := func(i uint64) uint64 {
		if i < 150 {
			return 1
		}
		return 2
	}
	checkRange(t, s, 1, 170, termOf)
	_ = s.Close()
	s = open(t, dir, 4<<10)
	checkRange(t, s, 1, 170, termOf)
}

func TestDeleteAllThenStartAnywhere(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 4<<10)
	store(t, s, batch(1, 300, 1))
	if err := s.DeleteRange(0, 1<<62); err != nil {
		t.Fatal(err)
	}
	checkRange(t, s, 0, 0, term1)
	if n := len(segmentFiles(t, dir)); n != 0 {
		t.Fatalf("%d segment files after deleting everything", n)
	}
	store(t, s, batch(5001, 5010, 3))
	_ = s.Close()
	s = open(t, dir, 4<<10)
	checkRange(t, s, 5001, 5010, func(uint64) uint64 { return 3 })
	if !s.IsMonotonic() {
		t.Fatal("store must report itself monotonic")
	}
}

// Raft appends past a gap only after a snapshot that covers it (a crash
// between installing a snapshot and clearing the log leaves such a log):
// the append replaces the log.
func TestAppendPastAGapReplacesTheLog(t *testing.T) {
	dir := t.TempDir()
	s := openFilled(t, dir, 2<<10, 200, 10)
	store(t, s, batch(900, 905, 2))
	term2 := func(uint64) uint64 { return 2 }
	checkRange(t, s, 900, 905, term2)
	if n := len(segmentFiles(t, dir)); n != 1 {
		t.Fatalf("%d segment files after the log was replaced, want 1", n)
	}
	_ = s.Close()
	s = open(t, dir, 2<<10)
	checkRange(t, s, 900, 905, term2)
}

// A delete that fails part way leaves this process's view of the files
// unknown: every call then returns the error, none reads a segment that is
// gone, and a reopen serves what the files hold.
func TestFailedDeleteStopsReadsToo(t *testing.T) {
	dir := t.TempDir()
	syncErr := errors.New("injected: directory sync failed")
	s, err := Open(dir, Options{SegmentBytes: 2 << 10, dirSync: func(string) error { return syncErr }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := uint64(1); i <= 300; i += 10 {
		store(t, s, batch(i, i+9, 1))
	}
	if err := s.DeleteRange(150, 300); !errors.Is(err, syncErr) {
		t.Fatalf("DeleteRange: %v, want the injected error", err)
	}
	var l raft.Log
	if err := s.GetLog(300, &l); !errors.Is(err, syncErr) {
		t.Fatalf("GetLog after the failed delete: %v", err)
	}
	if _, err := s.LastIndex(); !errors.Is(err, syncErr) {
		t.Fatalf("LastIndex after the failed delete: %v", err)
	}
	if err := s.StoreLogs(batch(150, 151, 2)); !errors.Is(err, syncErr) {
		t.Fatalf("StoreLogs after the failed delete: %v", err)
	}
	_ = s.Close()
	s = open(t, dir, 2<<10)
	last, _ := s.LastIndex()
	if last < 149 || last > 300 {
		t.Fatalf("reopened log ends at %d, want the kept prefix or all of it", last)
	}
	checkRange(t, s, 1, last, term1)
}

func TestSecondOpenOfADirectoryIsRefused(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 0)
	if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Open: %v, want an in-use error", err)
	}
	_ = s.Close()
	s2 := open(t, dir, 0)
	_ = s2.Close()
}

// framesSize is how many bytes the frames of entries from..to of term 1
// take.
func framesSize(from, to uint64) int64 {
	var n int64
	for i := from; i <= to; i++ {
		n += int64(frameSize(entry(i, 1)))
	}
	return n
}

// lastSegment returns the path of the newest segment file and where its
// frames end (the file itself runs on in zeros).
func lastSegment(t *testing.T, dir string) (string, int64) {
	t.Helper()
	s, err := Open(dir, Options{SegmentBytes: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.segs) == 0 {
		t.Fatal("no segment files")
	}
	seg := s.segs[len(s.segs)-1]
	return seg.path, seg.size
}

func TestCrashDamageAtTheEndIsDropped(t *testing.T) {
	lastFrame := int64(frameSize(entry(20, 1)))
	// Each damage comes twice: in a file that ends with its frames, and in
	// one that runs on in zeros past them.
	cases := []struct {
		name   string
		damage func(t *testing.T, path string, end int64)
		last   uint64
	}{
		{"frame cut short", func(t *testing.T, path string, end int64) {
			truncateFile(t, path, end-lastFrame/2)
		}, 19},
		{"frame cut short in the zeros past the frames", func(t *testing.T, path string, end int64) {
			writeAt(t, path, end-lastFrame/2, make([]byte, lastFrame/2))
		}, 19},
		{"header cut short", func(t *testing.T, path string, end int64) {
			truncateFile(t, path, end-lastFrame+5)
		}, 19},
		{"header torn in the zeros past the frames", func(t *testing.T, path string, end int64) {
			writeAt(t, path, end-lastFrame+5, make([]byte, lastFrame-5))
		}, 19},
		{"zeros after the last frame", func(t *testing.T, path string, end int64) {
			truncateFile(t, path, end)
			appendBytes(t, path, make([]byte, 8192))
		}, 20},
		{"partial header after the last frame", func(t *testing.T, path string, end int64) {
			truncateFile(t, path, end)
			appendBytes(t, path, []byte{1, 2, 3})
		}, 20},
		{"partial header in the zeros past the frames", func(t *testing.T, path string, end int64) {
			writeAt(t, path, end, []byte{1, 2, 3})
		}, 20},
		{"last frame's data never written", func(t *testing.T, path string, end int64) {
			writeAt(t, path, end-4, []byte{0, 0, 0, 0})
		}, 19},
		{"frame announcing more than the file holds", func(t *testing.T, path string, end int64) {
			truncateFile(t, path, end)
			appendBytes(t, path, appendFrame(nil, entry(21, 1), 21)[:30])
		}, 20},
		{"frame torn in the zeros past the frames", func(t *testing.T, path string, end int64) {
			writeAt(t, path, end, appendFrame(nil, entry(21, 1), 21)[:30])
		}, 20},
		// The disk kept some pages of the last append and lost others.
		{"a page of the last append lost, later ones kept", func(t *testing.T, path string, end int64) {
			second := end - framesSize(11, 20)
			writeAt(t, path, second, make([]byte, framesSize(11, 15)))
		}, 10},
		{"the last append's first frame torn, its others kept", func(t *testing.T, path string, end int64) {
			second := end - framesSize(11, 20)
			writeAt(t, path, second+frameHeaderSize+3, []byte{0xFF, 0xFF})
		}, 10},
		{"bytes of a lost append after zeros", func(t *testing.T, path string, end int64) {
			writeAt(t, path, end+100, []byte{7})
		}, 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, 0)
			store(t, s, batch(1, 10, 1))
			store(t, s, batch(11, 20, 1))
			_ = s.Close()
			path, end := lastSegment(t, dir)
			tc.damage(t, path, end)

			s = open(t, dir, 0)
			checkRange(t, s, 1, tc.last, term1)
			store(t, s, batch(tc.last+1, 30, 2))
			_ = s.Close()
			s = open(t, dir, 0)
			checkRange(t, s, 1, 30, func(i uint64) uint64 {
				if i <= tc.last {
					return 1
				}
				return 2
			})
		})
	}
}

func TestDamageACrashCannotExplainStopsOpen(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		// In the last segment, damage to its first append with a later
		// append after it: the damage lies in synced data.
		{"bad frame followed by a later append", func(t *testing.T, dir string) {
			path, _ := lastSegment(t, dir)
			writeAt(t, path, frameHeaderSize+2, []byte{0xFF})
		}},
		{"empty header followed by a later append", func(t *testing.T, dir string) {
			path, _ := lastSegment(t, dir)
			writeAt(t, path, 0, make([]byte, frameHeaderSize))
		}},
		{"length past the end of the file followed by a later append", func(t *testing.T, dir string) {
			path, _ := lastSegment(t, dir)
			writeAt(t, path, 4, []byte{0, 0, 0, 0x20})
		}},
		{"impossible length followed by a later append", func(t *testing.T, dir string) {
			path, _ := lastSegment(t, dir)
			writeAt(t, path, 4, []byte{1, 0, 0, 0})
		}},
		{"damaged older segment", func(t *testing.T, dir string) {
			path := segmentFiles(t, dir)[0]
			info, _ := os.Stat(path)
			truncateFile(t, path, info.Size()-3)
		}},
		{"frame with another index", func(t *testing.T, dir string) {
			path, end := lastSegment(t, dir)
			writeAt(t, path, end, appendFrame(nil, entry(99999, 1), 99999))
		}},
		{"segment that does not follow the one before", func(t *testing.T, dir string) {
			path, _ := lastSegment(t, dir)
			if err := os.Rename(path, filepath.Join(dir, segmentName(100000))); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openFilled(t, dir, 4<<10, 200, 10)
			_ = s.Close()
			if path, _ := lastSegment(t, dir); !strings.HasSuffix(path, segmentName(181)) {
				t.Fatalf("the last segment is %s; the cases need it to hold two appends, 181..200", filepath.Base(path))
			}
			before := snapshotDir(t, dir)
			tc.damage(t, dir)
			damaged := snapshotDir(t, dir)

			_, err := Open(dir, Options{SegmentBytes: 2 << 10})
			var ce *corruptError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "offset") {
				t.Fatalf("Open: %v, want a corruption error naming the file and offset", err)
			}
			if after := snapshotDir(t, dir); after != damaged {
				t.Fatalf("a refused Open changed the files (before damage: %d bytes)", len(before))
			}
		})
	}
}

func TestReadersRunAlongsideAppendsAndDeletes(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 8<<10)
	store(t, s, batch(1, 50, 1))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 8)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for n := uint64(0); ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				first, _ := s.FirstIndex()
				last, _ := s.LastIndex()
				if last < first {
					continue
				}
				idx := first + (n*7919+uint64(r))%(last-first+1)
				var l raft.Log
				err := s.GetLog(idx, &l)
				if errors.Is(err, raft.ErrLogNotFound) {
					continue // compacted between the reads
				}
				if err != nil || l.Index != idx || !bytes.Equal(l.Data, entry(idx, 1).Data) {
					errs <- fmt.Errorf("GetLog(%d) = %d %q, %v", idx, l.Index, l.Data, err)
					return
				}
			}
		}(r)
	}
	for i := uint64(51); i <= 3000; i += 10 {
		if err := s.StoreLogs(batch(i, i+9, 1)); err != nil {
			t.Fatal(err)
		}
		if i%500 == 1 {
			if err := s.DeleteRange(0, i-100); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

func truncateFile(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// snapshotDir summarises the segment files (names, sizes, contents) so a
// test can tell whether anything changed them.
func snapshotDir(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	for _, p := range segmentFiles(t, dir) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %d %x\n", filepath.Base(p), len(data), data)
	}
	return b.String()
}

func TestTailDeleteFromTheStartOfASegment(t *testing.T) {
	dir := t.TempDir()
	s := openFilled(t, dir, 2<<10, 200, 10)
	files := segmentFiles(t, dir)
	boundary, _ := parseSegmentName(filepath.Base(files[len(files)/2]))
	if err := s.DeleteRange(boundary, 200); err != nil {
		t.Fatal(err)
	}
	checkRange(t, s, 1, boundary-1, term1)
	if got := len(segmentFiles(t, dir)); got != len(files)/2 {
		t.Fatalf("%d files after cutting at the start of file %d of %d", got, len(files)/2, len(files))
	}
	store(t, s, batch(boundary, boundary+5, 2))
	_ = s.Close()
	s = open(t, dir, 2<<10)
	checkRange(t, s, 1, boundary+5, func(i uint64) uint64 {
		if i < boundary {
			return 1
		}
		return 2
	})
}
