package raftlog

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit/lossyfs"
	"github.com/ctrlquorum/ctrlquorum/raftlog/logstore"
)

// These tests cut the power of a file system that loses what is not
// synced (lossyfs) under what OpenStores creates. TestVoterPowerLoss in
// package voter does it to whole voters.

// TestCreatedDataDirSurvivesPowerLoss: a data directory OpenStores
// creates, with its parents, and what bolt and raft create in it, keep
// their names through a power cut once syncCreated returned (bolt syncs
// raft.db's data, never the directory it is in).
func TestCreatedDataDirSurvivesPowerLoss(t *testing.T) {
	fs := lossyfs.MountForTest(t)
	dir := filepath.Join(fs.Dir(), "data", "voter-1")
	missing := outermostMissing(dir)
	if want := filepath.Join(fs.Dir(), "data"); missing != want {
		t.Fatalf("outermostMissing(%s) = %q, want %q", dir, missing, want)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if got := outermostMissing(dir); got != "" {
		t.Fatalf("outermostMissing of an existing directory = %q", got)
	}
	f, err := os.Create(filepath.Join(dir, BoltFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("term 7"); err == nil {
		err = f.Sync()
	}
	_ = f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "snapshots"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syncCreated(dir, missing); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Cut(lossyfs.DropUnsynced, nil); err != nil {
		t.Fatal(err)
	}
	back := filepath.Join(fs.Backing(), "data", "voter-1")
	if b, err := os.ReadFile(filepath.Join(back, BoltFile)); err != nil || string(b) != "term 7" {
		t.Fatalf("after the power cut %s holds %q (%v), want the synced %q", BoltFile, b, err, "term 7")
	}
	if info, err := os.Stat(filepath.Join(back, "snapshots")); err != nil || !info.IsDir() {
		t.Fatalf("after the power cut snapshots/ is gone: %v", err)
	}
}

// TestSnapshotSurvivesPowerLoss: a snapshot whose sink closed without an
// error is there after a power cut. Raft's file snapshot store alone
// leaves the snapshot's directory unsynced, and the cut empties it.
func TestSnapshotSurvivesPowerLoss(t *testing.T) {
	fs := lossyfs.MountForTest(t)
	files, err := raft.NewFileSnapshotStoreWithLogger(fs.Dir(), snapshotsRetained, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := logstore.SyncDir(fs.Dir()); err != nil { // as OpenStores does
		t.Fatal(err)
	}
	store := syncedSnapshots{FileSnapshotStore: files, dir: filepath.Join(fs.Dir(), "snapshots")}
	sink, err := store.Create(1, 42, 3, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte("image at 42")); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	// Raft closes the sink again after the FSM's Persist closed it.
	if err := sink.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	if _, err := fs.Cut(lossyfs.DropUnsynced, nil); err != nil {
		t.Fatal(err)
	}
	if err := fs.Unmount(); err != nil {
		t.Fatal(err)
	}

	after, err := raft.NewFileSnapshotStoreWithLogger(fs.Backing(), snapshotsRetained, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	list, err := after.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Index != 42 {
		t.Fatalf("after the power cut the snapshot store lists %+v, want the snapshot at index 42", list)
	}
	_, rc, err := after.Open(list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, err := io.ReadAll(rc); err != nil || string(b) != "image at 42" {
		t.Fatalf("the snapshot holds %q (%v)", b, err)
	}
}

// TestSnapshotCutWhileWritten cuts the power right after each change and
// sync a snapshot makes, from its creation to its sink's Close, with
// several outcomes of the cut each: what survives must be a snapshot store
// raft can start from, one whose every listed snapshot opens and reads
// whole (raft refuses to start when it lists snapshots and can open none
// of them).
func TestSnapshotCutWhileWritten(t *testing.T) {
	image := []byte("image at 42")
	write := func(fs *lossyfs.FS) error {
		files, err := raft.NewFileSnapshotStoreWithLogger(fs.Dir(), snapshotsRetained, hclog.NewNullLogger())
		if err != nil {
			return err
		}
		if err := logstore.SyncDir(fs.Dir()); err != nil {
			return err
		}
		store := syncedSnapshots{FileSnapshotStore: files, dir: filepath.Join(fs.Dir(), "snapshots")}
		sink, err := store.Create(1, 42, 3, raft.Configuration{}, 1, nil)
		if err != nil {
			return err
		}
		if _, err := sink.Write(image); err != nil {
			_ = sink.Cancel()
			return err
		}
		return sink.Close()
	}
	for k := 1; ; k++ {
		cuts := 0
		for _, mode := range []lossyfs.Mode{lossyfs.DropUnsynced, lossyfs.KeepPrefix} {
			for seed := range uint64(8) {
				if mode == lossyfs.DropUnsynced && seed > 0 {
					continue
				}
				name := fmt.Sprintf("after change %d, %v, seed %d", k, mode, seed)
				fs := lossyfs.MountForTest(t)
				done, err := fs.CutAfter(k, mode, rand.New(rand.NewPCG(seed, uint64(k))))
				if err != nil {
					t.Fatal(err)
				}
				closed := write(fs) == nil
				select {
				case <-done:
					cuts++
				default:
					// The snapshot made fewer than k steps: every cut
					// point is covered.
					if cuts == 0 {
						if k < 4 {
							t.Fatalf("a snapshot made only %d changes", k-1)
						}
						t.Logf("a snapshot makes %d changes and syncs; the power was cut after each", k-1)
						return
					}
					continue
				}
				// The backing directory holds what survived; the mount
				// stays until the test ends, since raft's sink can leave
				// a file open on it when the cut fails its Close.
				after, err := raft.NewFileSnapshotStoreWithLogger(fs.Backing(), snapshotsRetained, hclog.NewNullLogger())
				if err != nil {
					t.Fatal(err)
				}
				list, err := after.List()
				if err != nil {
					t.Fatal(err)
				}
				if closed && len(list) == 0 {
					t.Fatalf("%s: Close returned nil, and the snapshot is gone", name)
				}
				for _, meta := range list {
					_, rc, err := after.Open(meta.ID)
					if err != nil {
						t.Fatalf("%s: snapshot %s is listed and does not open: %v", name, meta.ID, err)
					}
					b, err := io.ReadAll(rc)
					_ = rc.Close()
					if err != nil || string(b) != string(image) {
						t.Fatalf("%s: snapshot %s holds %q (%v)", name, meta.ID, b, err)
					}
				}
			}
		}
	}
}
