package partlog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fillAt appends n one-record batches with the timestamps ts(i), as the
// leader of epoch 1, in a log whose segments hold about two batches.
func fillAt(t *testing.T, l *Log, n int, ts func(i int) int64) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, _, err := l.AppendAsLeader(mustParse(t, makeBatch(ts(i), val(int64(i)))), 1); err != nil {
			t.Fatal(err)
		}
	}
}

func segmentFiles(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// Retention by time deletes whole closed segments whose newest record is
// older than retention.ms, only below the high watermark, never the
// active segment; the start offset moves, reads below it are out of
// range, and a reopened log starts there too.
func TestDeleteRetainedByTime(t *testing.T) {
	dir := t.TempDir()
	one := int64(len(makeBatch(0, val(0))))
	l, err := Open(dir, Config{SegmentBytes: 2 * one})
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_000_000_000)
	// Offsets 0-5 an hour old, 6-9 fresh: segments [0,2) [2,4) [4,6) [6,8) [8,10).
	fillAt(t, l, 10, func(i int) int64 {
		if i < 6 {
			return now.Add(-time.Hour).UnixMilli()
		}
		return now.UnixMilli()
	})
	if n := segmentFiles(t, dir); n != 5 {
		t.Fatalf("%d segments, want 5", n)
	}
	r := Retention{Ms: time.Minute.Milliseconds(), Bytes: -1}
	// Below a high watermark of 3 only [0,2) may go.
	if n, start, err := l.DeleteRetained(r, 3, now); err != nil || n != 1 || start != 2 {
		t.Fatalf("with high watermark 3: deleted %d, start %d, %v; want 1 segment, start 2", n, start, err)
	}
	if n, start, err := l.DeleteRetained(r, 10, now); err != nil || n != 2 || start != 6 {
		t.Fatalf("deleted %d, start %d, %v; want 2 more segments, start 6", n, start, err)
	}
	if l.StartOffset() != 6 || segmentFiles(t, dir) != 2 {
		t.Fatalf("start %d with %d segment files, want 6 and 2", l.StartOffset(), segmentFiles(t, dir))
	}
	if _, err := l.Read(5, 10, 1<<20); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the start: %v, want out of range", err)
	}
	if got := values(t, mustRead(t, l, 6)); got[6] != val(6) {
		t.Fatalf("read at the new start: %v", got)
	}
	if e := l.Epochs(); len(e) != 1 || e[0].StartOffset != 6 {
		t.Fatalf("epoch cache %v, want epoch 1 from 6", e)
	}
	// Everything expired: the active segment stays.
	if n, _, err := l.DeleteRetained(Retention{Ms: 0, Bytes: -1}, 10, now.Add(time.Hour)); err != nil || n != 1 || l.StartOffset() != 8 {
		t.Fatalf("all expired: deleted %d, start %d, %v; want the closed one, start 8", n, l.StartOffset(), err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, Config{SegmentBytes: 2 * one})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.StartOffset() != 8 || l.EndOffset() != 10 {
		t.Fatalf("reopened: [%d, %d), want [8, 10)", l.StartOffset(), l.EndOffset())
	}
}

// Retention by size keeps at least retention.bytes: a segment goes only
// if what is left without it still holds that much.
func TestDeleteRetainedBySize(t *testing.T) {
	dir := t.TempDir()
	one := int64(len(makeBatch(0, val(0))))
	l, err := Open(dir, Config{SegmentBytes: 2 * one})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fillAt(t, l, 9, func(int) int64 { return time.Now().UnixMilli() })
	// 9 batches: four full segments and one with one batch. Keep 3.5 batches' worth.
	n, start, err := l.DeleteRetained(Retention{Ms: -1, Bytes: 3*one + one/2}, 9, time.Now())
	if err != nil || n != 2 || start != 4 {
		t.Fatalf("deleted %d, start %d, %v; want 2 segments, start 4 (5 batches left)", n, start, err)
	}
	if l.Size() < 3*one+one/2 {
		t.Fatalf("size %d after deletion, below retention.bytes", l.Size())
	}
	if n, _, _ := l.DeleteRetained(Retention{Ms: -1, Bytes: -1}, 9, time.Now()); n != 0 {
		t.Fatalf("no limits deleted %d segments", n)
	}
}

// A follower's log start follows its leader's a whole segment at a
// time, never past its own closed segments.
func TestDeleteBefore(t *testing.T) {
	dir := t.TempDir()
	one := int64(len(makeBatch(0, val(0))))
	l, err := Open(dir, Config{SegmentBytes: 2 * one})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fillAt(t, l, 7, func(int) int64 { return 0 }) // [0,2) [2,4) [4,6) [6,7)
	if n, start, err := l.DeleteBefore(3); err != nil || n != 1 || start != 2 {
		t.Fatalf("before 3: deleted %d, start %d, %v; want 1, 2", n, start, err)
	}
	if n, start, err := l.DeleteBefore(100); err != nil || n != 2 || start != 6 || l.EndOffset() != 7 {
		t.Fatalf("before 100: deleted %d, start %d, end %d, %v; want 2, 6, end 7 (the active segment stays)", n, start, l.EndOffset(), err)
	}
}

// segment.ms rolls the active segment once its first record is that old,
// and SetRoll changes the size limit of an open log.
func TestSegmentRollByTimeAndSetRoll(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Config{SegmentMs: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	old := time.Now().Add(-time.Hour).UnixMilli()
	fillAt(t, l, 2, func(int) int64 { return old })
	if n := segmentFiles(t, dir); n != 2 {
		t.Fatalf("%d segments after a batch appended to an hour-old segment, want 2", n)
	}
	l.SetRoll(1, 0)
	fillAt(t, l, 2, func(int) int64 { return time.Now().UnixMilli() })
	if n := segmentFiles(t, dir); n != 4 {
		t.Fatalf("%d segments with segment.bytes 1, want one per batch: 4", n)
	}
}

// A follower whose log ends before its leader's start empties it and
// starts at the leader's start.
func TestTruncateFullyAndStartAt(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	fillAt(t, l, 3, func(int) int64 { return 0 })
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 100 || l.EndOffset() != 100 || len(l.Epochs()) != 0 {
		t.Fatalf("after: [%d, %d) epochs %v, want [100, 100) and none", l.StartOffset(), l.EndOffset(), l.Epochs())
	}
	b := mustParse(t, makeBatch(0, "x"))
	b[0].BaseOffset = 100
	setBaseOffset(b[0].Bytes, 100)
	if err := l.AppendAsFollower(b); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(segmentName(dir, 0, ".log")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the old segment is still there: %v", err)
	}
	l, err = Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.StartOffset() != 100 || l.EndOffset() != 101 {
		t.Fatalf("reopened: [%d, %d), want [100, 101)", l.StartOffset(), l.EndOffset())
	}
}

func mustRead(t *testing.T, l *Log, offset int64) []byte {
	t.Helper()
	b, err := l.Read(offset, l.EndOffset(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
