package partlog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// small segments and a dense index, so that every test crosses both.
var smallCfg = Config{SegmentBytes: 1500, IndexIntervalBytes: 200}

// fill appends n batches of 1–4 records at epoch and returns the values
// by offset.
func fill(t *testing.T, l *Log, n int, epoch int32, want map[int64]string) {
	t.Helper()
	for i := 0; i < n; i++ {
		next := l.EndOffset()
		k := 1 + i%4
		vals := make([]string, k)
		for j := range vals {
			vals[j] = val(next + int64(j))
			want[next+int64(j)] = vals[j]
		}
		first, last, err := l.AppendAsLeader(mustParse(t, makeBatch(1000+next, vals...)), epoch)
		if err != nil {
			t.Fatal(err)
		}
		if first != next || last != next+int64(k)-1 {
			t.Fatalf("append at %d of %d records got offsets %d..%d", next, k, first, last)
		}
	}
}

// readAll reads the whole log from every offset and checks each read
// starts with the record asked for and agrees with want.
func readAll(t *testing.T, l *Log, want map[int64]string) {
	t.Helper()
	end := l.EndOffset()
	if int64(len(want)) != end-l.StartOffset() {
		t.Fatalf("log [%d, %d) but %d records expected", l.StartOffset(), end, len(want))
	}
	for o := l.StartOffset(); o < end; o++ {
		b, err := l.Read(o, end, 300)
		if err != nil {
			t.Fatalf("read %d: %v", o, err)
		}
		got := values(t, b)
		if got[o] != want[o] {
			t.Fatalf("read %d: got %q, want %q", o, got[o], want[o])
		}
		for k, v := range got {
			if want[k] != v {
				t.Fatalf("read %d: offset %d holds %q, want %q", o, k, v, want[k])
			}
		}
	}
}

func TestAppendReadAcrossSegmentsAndReopen(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, smallCfg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{}
	fill(t, l, 120, 3, want)
	if len(l.segs) < 5 {
		t.Fatalf("only %d segments: the test should cross several", len(l.segs))
	}
	readAll(t, l, want)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, smallCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	readAll(t, l, want)
	if got := l.Epochs(); len(got) != 1 || got[0] != (EpochEntry{3, 0}) {
		t.Fatalf("epochs after reopen: %v", got)
	}
}

func TestReadBounds(t *testing.T) {
	l, err := Open(t.TempDir(), smallCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	want := map[int64]string{}
	fill(t, l, 10, 0, want) // offsets 0..22: batches of 1,2,3,4,1,2,3,4,1,2 records
	// A high watermark inside the log stops the read before batches that
	// reach it.
	b, err := l.Read(0, 3, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got := values(t, b); len(got) != 3 {
		t.Fatalf("read up to 3: %d records", len(got))
	}
	if b, _ := l.Read(3, 3, 1<<20); len(b) != 0 {
		t.Fatal("a read at the high watermark returned data")
	}
	// A limit smaller than one batch still returns that batch.
	b, _ = l.Read(6, 23, 1)
	if got := values(t, b); len(got) != 4 || got[6] != val(6) {
		t.Fatalf("read of one batch under a tiny limit: %v", got)
	}
	if b, err := l.Read(23, 23, 100); err != nil || len(b) != 0 {
		t.Fatalf("read at the end: %d bytes, %v", len(b), err)
	}
	if _, err := l.Read(24, 30, 100); !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Fatalf("read past the end: %v", err)
	}
}

func TestTornTailIsCut(t *testing.T) {
	for _, damage := range []string{"partial batch", "flipped byte", "garbage"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			l, err := Open(dir, smallCfg)
			if err != nil {
				t.Fatal(err)
			}
			want := map[int64]string{}
			fill(t, l, 30, 1, want)
			end := l.EndOffset()
			last := l.segs[len(l.segs)-1]
			path := segmentName(dir, last.base, ".log")
			_ = l.Close()
			f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			extra := makeBatch(5, "torn-a", "torn-b")
			setBaseOffset(extra, end)
			switch damage {
			case "partial batch":
				_, err = f.Write(extra[:len(extra)-3])
			case "flipped byte":
				extra[len(extra)-2] ^= 0xff
				_, err = f.Write(extra)
			case "garbage":
				_, err = f.Write([]byte("not a batch at all, but long enough to look like a header........"))
			}
			if err != nil {
				t.Fatal(err)
			}
			_ = f.Close()
			l, err = Open(dir, smallCfg)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if l.EndOffset() != end {
				t.Fatalf("end after recovery %d, want %d", l.EndOffset(), end)
			}
			readAll(t, l, want)
			fill(t, l, 3, 2, want)
			readAll(t, l, want)
		})
	}
}

func TestTruncate(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, smallCfg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{}
	fill(t, l, 40, 1, want)
	mid := l.EndOffset()
	if err := l.AssignEpoch(2); err != nil {
		t.Fatal(err)
	}
	fill(t, l, 40, 2, want)
	// Truncating inside a batch cuts the whole batch: offset mid+1 is in
	// the first epoch-2 batch (1 record at mid, then 2 at mid+1..mid+2).
	if err := l.Truncate(mid + 2); err != nil {
		t.Fatal(err)
	}
	if got := l.EndOffset(); got != mid+1 {
		t.Fatalf("end after truncating to %d: %d, want %d", mid+2, got, mid+1)
	}
	for o := range want {
		if o > mid {
			delete(want, o)
		}
	}
	readAll(t, l, want)
	if err := l.Truncate(mid); err != nil {
		t.Fatal(err)
	}
	delete(want, mid)
	if got := l.Epochs(); len(got) != 1 || got[0].Epoch != 1 {
		t.Fatalf("epochs after truncating the whole of epoch 2: %v", got)
	}
	fill(t, l, 5, 4, want)
	_ = l.Close()
	l, err = Open(dir, smallCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	readAll(t, l, want)
	if got := l.Epochs(); len(got) != 2 || got[1] != (EpochEntry{4, mid}) {
		t.Fatalf("epochs after reopen: %v", got)
	}
	if err := l.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != 0 || len(l.Epochs()) != 0 || l.Size() != 0 {
		t.Fatalf("after truncating to 0: end %d, epochs %v, %d bytes", l.EndOffset(), l.Epochs(), l.Size())
	}
}

func TestFollowerAppendKeepsOffsetsAndEpochs(t *testing.T) {
	leader, err := Open(t.TempDir(), smallCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Close()
	follower, err := Open(t.TempDir(), smallCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer follower.Close()
	want := map[int64]string{}
	fill(t, leader, 10, 5, want)
	fill(t, leader, 10, 7, want)
	for follower.EndOffset() < leader.EndOffset() {
		b, err := leader.Read(follower.EndOffset(), leader.EndOffset(), 500)
		if err != nil {
			t.Fatal(err)
		}
		if err := follower.AppendAsFollower(mustParse(t, b)); err != nil {
			t.Fatal(err)
		}
	}
	readAll(t, follower, want)
	if g, w := follower.Epochs(), leader.Epochs(); len(g) != 2 || g[0] != w[0] || g[1] != w[1] {
		t.Fatalf("follower epochs %v, leader's %v", g, w)
	}
	// A batch that does not start at the log end is refused.
	b, _ := leader.Read(0, 1, 1)
	if err := follower.AppendAsFollower(mustParse(t, b)); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("appending offset 0 again: %v", err)
	}
}

func TestParseBatchRefusesDamage(t *testing.T) {
	good := makeBatch(1, "a", "b")
	if _, err := ParseBatch(good); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		mut  func([]byte) []byte
		want error
	}{
		"short":    {func(b []byte) []byte { return b[:40] }, kerr.CorruptMessage},
		"crc":      {func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, kerr.CorruptMessage},
		"magic 1":  {func(b []byte) []byte { b[offMagic] = 1; return b }, kerr.UnsupportedForMessageFormat},
		"negative": {func(b []byte) []byte { setBaseOffset(b, -5); return b }, kerr.InvalidRecord},
		"empty":    {func([]byte) []byte { return nil }, kerr.InvalidRecord},
	} {
		b := c.mut(append([]byte(nil), good...))
		if _, err := ParseBatches(b); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

func TestOtherTopicRefused(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Config{TopicID: [16]byte{1}})
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	if id, err := TopicID(dir); err != nil || id != [16]byte{1} {
		t.Fatalf("TopicID: %v, %v", id, err)
	}
	if _, err := Open(dir, Config{TopicID: [16]byte{2}}); !errors.Is(err, ErrOtherTopic) {
		t.Fatalf("open for another topic id: %v", err)
	}
	if err := l.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("directory after Delete: %v", err)
	}
}

func TestFlushPolicy(t *testing.T) {
	l, err := Open(t.TempDir(), Config{FlushMessages: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	want := map[int64]string{}
	fill(t, l, 2, 0, want) // 1 + 2 records
	if l.unflushed != 3 {
		t.Fatalf("unflushed %d after 3 records", l.unflushed)
	}
	fill(t, l, 2, 0, want) // 3 more: 6 ≥ 5
	if l.unflushed != 0 {
		t.Fatalf("unflushed %d after passing flush.messages", l.unflushed)
	}
}

func TestOffsetForTime(t *testing.T) {
	l, err := Open(t.TempDir(), smallCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fill(t, l, 10, 0, map[int64]string{}) // batch at offset o has timestamps 1000+o...
	if o, _, _ := l.OffsetForTime(1006); o != 6 {
		t.Fatalf("offset for time 1006: %d, want 6 (the batch 6..9)", o)
	}
	if o, _, _ := l.OffsetForTime(1 << 50); o != -1 {
		t.Fatalf("offset for a time after every record: %d", o)
	}
	if _, err := os.Stat(filepath.Join(l.Dir(), metadataName)); err != nil {
		t.Fatal(err)
	}
}
