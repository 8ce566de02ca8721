package partlog

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"testing"
)

// fixCRCs rewrites the CRC of each batch b seems to hold, as long as the
// length fields lead from one to the next.
func fixCRCs(b []byte) {
	for len(b) >= HeaderBytes {
		n, ok := batchSize(b)
		if !ok || n > len(b) {
			return
		}
		binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:n], crc32c))
		b = b[n:]
	}
}

// FuzzSegmentReader opens a log whose only segment and index hold any
// bytes: Open never panics, recovers to a log every offset of which
// reads back, and what is appended after is read back as appended.
func FuzzSegmentReader(f *testing.F) {
	good := makeBatch(7, "a", "bb", "ccc")
	second := makeBatch(9, "d")
	setBaseOffset(second, 3)
	f.Add(append(append([]byte(nil), good...), second...), []byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(good[:30], []byte{})
	f.Add([]byte{}, []byte{1, 2, 3})
	torn := append(append([]byte(nil), good...), second[:20]...)
	f.Add(torn, []byte{0, 0, 0, 3, 0, 0, 0, 90})
	f.Add(append(append([]byte(nil), good...), second...), []byte{1})
	f.Fuzz(func(t *testing.T, logBytes, indexBytes []byte) {
		if len(indexBytes) > 0 && indexBytes[0]&1 == 1 {
			fixCRCs(logBytes) // so that the header fields are explored too
		}
		dir := t.TempDir()
		if err := os.WriteFile(segmentName(dir, 0, ".log"), logBytes, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(segmentName(dir, 0, ".index"), indexBytes, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := Config{IndexIntervalBytes: 16, SegmentBytes: 4096}
		l, err := Open(dir, cfg)
		if err != nil {
			t.Fatalf("open: %v", err) // recovery cuts what it cannot read
		}
		end := l.EndOffset()
		// Batch by batch: a recovered batch may claim a huge offset range.
		for o := l.StartOffset(); o < end; {
			b, err := l.Read(o, end, 64)
			if err != nil {
				t.Fatalf("read %d of [0, %d): %v", o, end, err)
			}
			bs, err := ParseBatches(b)
			if err != nil || bs[0].BaseOffset != o {
				t.Fatalf("read %d: %v, %+v", o, err, bs)
			}
			o = bs[len(bs)-1].NextOffset()
		}
		vals := []string{string(logBytes[:min(len(logBytes), 9)]), "x"}
		first, _, err := l.AppendAsLeader(mustParse(t, makeBatch(1, vals...)), 1)
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Close()
		if l, err = Open(dir, cfg); err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		b, err := l.Read(first, first+2, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		got := values(t, b)
		if got[first] != vals[0] || got[first+1] != vals[1] || l.EndOffset() != first+2 {
			t.Fatalf("appended %q at %d, read back %v, end %d", vals, first, got, l.EndOffset())
		}
	})
}
