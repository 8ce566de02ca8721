package logstore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
)

// FuzzOpen hands Open arbitrary bytes as the only segment file. Whatever the
// bytes, Open must not panic; when it accepts them, every entry it reports
// must read back with its own index, and an append must follow.
func FuzzOpen(f *testing.F) {
	var good []byte
	for i := uint64(1); i <= 5; i++ {
		good = appendFrame(good, entry(i, 1), 1)
	}
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add(append(append([]byte(nil), good...), make([]byte, 64)...))
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segmentName(1)), data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir, Options{noSync: true})
		if err != nil {
			var ce *corruptError
			if !errors.As(err, &ce) {
				t.Fatalf("Open failed without a corruption error: %v", err)
			}
			return
		}
		defer s.Close()
		first, _ := s.FirstIndex()
		last, _ := s.LastIndex()
		for i := first; i <= last && last != 0; i++ {
			var l raft.Log
			if err := s.GetLog(i, &l); err != nil || l.Index != i {
				t.Fatalf("GetLog(%d) = index %d, %v", i, l.Index, err)
			}
		}
		if err := s.StoreLogs(batch(last+1, last+2, 9)); err != nil {
			t.Fatalf("append after opening: %v", err)
		}
	})
}
