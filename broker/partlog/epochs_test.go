package partlog

import (
	"os"
	"path/filepath"
	"testing"
)

func TestEpochCacheEndOffsets(t *testing.T) {
	c := &epochCache{}
	for _, e := range []EpochEntry{{2, 0}, {4, 10}, {7, 25}} {
		if !c.assign(e.Epoch, e.StartOffset) {
			t.Fatalf("assign %v refused", e)
		}
	}
	if c.assign(6, 30) || c.assign(7, 30) {
		t.Fatal("an epoch not newer than the latest was assigned")
	}
	for _, tc := range []struct {
		ask       int32
		epoch     int32
		endOffset int64
	}{
		{7, 7, 40}, // the latest: the log end
		{4, 4, 25}, // ends where 7 starts
		{5, 4, 25}, // unknown, between: the largest below, ending where the next starts
		{2, 2, 10},
		{1, 1, 0}, // older than all: the first start offset
		{8, -1, -1},
		{-1, -1, -1},
	} {
		e, o := c.endOffsetFor(tc.ask, 40)
		if e != tc.epoch || o != tc.endOffset {
			t.Errorf("endOffsetFor(%d) = (%d, %d), want (%d, %d)", tc.ask, e, o, tc.epoch, tc.endOffset)
		}
	}
	c.truncateFromEnd(25)
	if l, _ := c.latest(); l.Epoch != 4 {
		t.Fatalf("latest after truncating at 25: %v", l)
	}
	if e, o := c.endOffsetFor(4, 22); e != 4 || o != 22 {
		t.Fatalf("epoch 4 after truncation: (%d, %d)", e, o)
	}
}

func TestEpochCheckpointRoundTripAndDamage(t *testing.T) {
	dir := t.TempDir()
	c, err := loadEpochs(dir)
	if err != nil {
		t.Fatal(err)
	}
	c.assign(1, 0)
	c.assign(3, 17)
	if err := c.save(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, epochCheckpointName))
	if string(b) != "0\n2\n1 0\n3 17\n" {
		t.Fatalf("checkpoint text %q", b)
	}
	d, err := loadEpochs(dir)
	if err != nil || len(d.entries) != 2 || d.entries[1] != (EpochEntry{3, 17}) {
		t.Fatalf("reloaded %v, %v", d.entries, err)
	}
	for _, bad := range []string{"1\n0\n", "0\n2\n1 0\n", "0\n2\n3 0\n1 5\n", "0\n1\nx y\n", "0\n1\n1 0\n2 2\n"} {
		if _, err := parseEpochCheckpoint([]byte(bad)); err == nil {
			t.Errorf("checkpoint %q accepted", bad)
		}
	}
}
