package logstore

import (
	"path/filepath"
	"testing"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit/lossyfs"
)

// TestNewDirectorySurvivesPowerLoss opens a store in a directory it
// creates, on a file system that loses what is not synced when its power
// is cut: the directory's own name must be durable before the first
// append is acknowledged, or the cut takes the directory and every entry
// in it.
func TestNewDirectorySurvivesPowerLoss(t *testing.T) {
	fs := lossyfs.MountForTest(t)
	s, err := Open(filepath.Join(fs.Dir(), "log"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs(batch(1, 3, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Cut(lossyfs.DropUnsynced, nil); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if err := fs.Unmount(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(filepath.Join(fs.Backing(), "log"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if first, last := mustIndexes(t, s); first != 1 || last != 3 {
		t.Fatalf("after the power cut the log holds [%d, %d]; entries 1 to 3 were acknowledged", first, last)
	}
}

func mustIndexes(t *testing.T, s *Store) (first, last uint64) {
	t.Helper()
	first, err := s.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	if last, err = s.LastIndex(); err != nil {
		t.Fatal(err)
	}
	return first, last
}
