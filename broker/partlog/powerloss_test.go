package partlog

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit/lossyfs"
)

// appendN appends n one-record batches at epoch 1 and returns the values
// acknowledged, by offset.
func appendN(t *testing.T, l *Log, n int) map[int64]string {
	t.Helper()
	want := map[int64]string{}
	for i := 0; i < n; i++ {
		o := l.EndOffset()
		if _, _, err := l.AppendAsLeader(mustParse(t, makeBatch(o, val(o))), 1); err != nil {
			t.Fatal(err)
		}
		want[o] = val(o)
	}
	return want
}

// TestPowerLoss cuts a disk's power under a log. With flush.messages 1
// every acknowledged record survives. With no sync on the append path
// (Kafka's default) the unsynced tail may go, but the log reopens on what
// survived, whole or torn at a page, as a prefix of what was appended:
// every offset it holds reads back its own record.
func TestPowerLoss(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flush int64
		mode  lossyfs.Mode
	}{
		{"flush.messages=1, unsynced dropped", 1, lossyfs.DropUnsynced},
		{"flush.messages=1, torn at a page", 1, lossyfs.KeepPrefix},
		{"no sync, unsynced dropped", 0, lossyfs.DropUnsynced},
		{"no sync, torn at a page", 0, lossyfs.KeepPrefix},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := lossyfs.MountForTest(t)
			cfg := Config{SegmentBytes: 4096, IndexIntervalBytes: 256, FlushMessages: tc.flush}
			l, err := Open(filepath.Join(fs.Dir(), "p-0"), cfg)
			if err != nil {
				t.Fatal(err)
			}
			want := appendN(t, l, 150)
			if _, err := fs.Cut(tc.mode, rand.New(rand.NewPCG(1, 2))); err != nil {
				t.Fatal(err)
			}
			_ = l.Close() // fails: the disk is gone
			l, err = Open(filepath.Join(fs.Backing(), "p-0"), cfg)
			if err != nil {
				t.Fatalf("reopen after the power cut: %v", err)
			}
			defer l.Close()
			end := l.EndOffset()
			if tc.flush == 1 && end != int64(len(want)) {
				t.Fatalf("log ends at %d after the cut, %d records were acknowledged with flush.messages 1", end, len(want))
			}
			for o := int64(0); o < end; o++ {
				b, err := l.Read(o, end, 1)
				if err != nil {
					t.Fatalf("read %d: %v", o, err)
				}
				if got := values(t, b)[o]; got != want[o] {
					t.Fatalf("offset %d holds %q, %q was appended", o, got, want[o])
				}
			}
			t.Logf("%d of %d records survived", end, len(want))
		})
	}
}
