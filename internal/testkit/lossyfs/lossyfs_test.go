package lossyfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit/lossyfs"
)

// create makes path on the mount holding b, syncing its data when
// syncData is set. Its directory is not synced.
func create(t *testing.T, path string, b []byte, syncData bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if syncData {
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			t.Fatal(err)
		}
	}
}

// writeAt writes b at off in the existing file path, without a sync.
func writeAt(t *testing.T, path string, b []byte, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func syncPath(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func cut(t *testing.T, f *lossyfs.FS, mode lossyfs.Mode, seed uint64) lossyfs.CutReport {
	t.Helper()
	r, err := f.Cut(mode, rand.New(rand.NewPCG(seed, 0)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tree lists what dir holds: each file's content by relative path,
// directories as "dir/".
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func checkTree(t *testing.T, what, dir string, want map[string]string) {
	t.Helper()
	got := tree(t, dir)
	if len(got) != len(want) {
		t.Fatalf("%s holds %v, want %v", what, short(got), short(want))
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Fatalf("%s holds %v, want %v", what, short(got), short(want))
		}
	}
}

func short(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if len(v) > 24 {
			v = fmt.Sprintf("%q…(%d bytes)", v[:16], len(v))
		}
		out[k] = v
	}
	return out
}

// powerBack unmounts f after its cut and mounts it again, checking the
// mount shows what the backing directory holds.
func powerBack(t *testing.T, f *lossyfs.FS) {
	t.Helper()
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	backing := tree(t, f.Backing())
	if err := f.Mount(); err != nil {
		t.Fatal(err)
	}
	checkTree(t, "the mount after the power came back", f.Dir(), backing)
}

func TestSyncedDataSurvivesCut(t *testing.T) {
	f := lossyfs.MountForTest(t)
	dir := filepath.Join(f.Dir(), "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	syncPath(t, f.Dir())
	create(t, filepath.Join(dir, "a"), []byte("hello"), true)
	syncPath(t, dir)
	// Synced through a descriptor opened with O_SYNC: every write is.
	o, err := os.OpenFile(filepath.Join(dir, "o"), os.O_RDWR|os.O_CREATE|os.O_SYNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	syncPath(t, dir)
	if _, err := o.Write([]byte("sync write")); err != nil {
		t.Fatal(err)
	}
	_ = o.Close()

	// Nothing of what follows is synced.
	writeAt(t, filepath.Join(dir, "a"), []byte(", world"), 5)
	create(t, filepath.Join(dir, "b"), []byte("new"), false)
	checkTree(t, "the mount", f.Dir(), map[string]string{"d/": "", "d/a": "hello, world", "d/b": "new", "d/o": "sync write"})

	r := cut(t, f, lossyfs.DropUnsynced, 1)
	if r.Pending != 3 || r.PendingBytes != 10 || r.LostBytes() != 10 || r.Torn {
		t.Errorf("report %v: want 3 changes (a write, a create, a write) of 10 bytes lost", r)
	}
	checkTree(t, "the backing directory", f.Backing(), map[string]string{"d/": "", "d/a": "hello", "d/o": "sync write"})
	powerBack(t, f)
}

func TestUnsyncedChangesAreLost(t *testing.T) {
	f := lossyfs.MountForTest(t)
	a, b := filepath.Join(f.Dir(), "a"), filepath.Join(f.Dir(), "b")
	create(t, a, bytes.Repeat([]byte("A"), 3*lossyfs.PageSize), true)
	create(t, b, []byte("bbbb"), true)
	syncPath(t, f.Dir())

	writeAt(t, a, []byte("xyz"), lossyfs.PageSize+7)
	if err := os.Truncate(b, 1); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	checkTree(t, "the mount", f.Dir(), map[string]string{"b": "b"})

	cut(t, f, lossyfs.DropUnsynced, 1)
	checkTree(t, "the backing directory", f.Backing(), map[string]string{"a": repeat(3*lossyfs.PageSize, 'A'), "b": "bbbb"})
	powerBack(t, f)
}

func repeat(n int, c byte) string { return string(bytes.Repeat([]byte{c}, n)) }

func TestNewFileNeedsItsDirectorySynced(t *testing.T) {
	f := lossyfs.MountForTest(t)
	// Directory synced, data not: the file is there, empty.
	create(t, filepath.Join(f.Dir(), "name-only"), []byte("lost"), false)
	sub := filepath.Join(f.Dir(), "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	syncPath(t, f.Dir())
	// Data synced, directory not: the file is gone with its data.
	create(t, filepath.Join(f.Dir(), "data-only"), []byte("lost too"), true)
	// Both synced, but in a directory whose own entry is not: it stays
	// out of reach with the directory.
	if err := os.Mkdir(filepath.Join(sub, "deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	create(t, filepath.Join(sub, "deeper", "f"), []byte("orphan"), true)
	syncPath(t, filepath.Join(sub, "deeper"))

	cut(t, f, lossyfs.DropUnsynced, 1)
	checkTree(t, "the backing directory", f.Backing(), map[string]string{"name-only": "", "sub/": ""})
	powerBack(t, f)
}

func TestRenameNeedsDirectorySync(t *testing.T) {
	for _, syncAfter := range []bool{false, true} {
		t.Run(fmt.Sprintf("dir synced after rename=%v", syncAfter), func(t *testing.T) {
			f := lossyfs.MountForTest(t)
			a, tmp := filepath.Join(f.Dir(), "a"), filepath.Join(f.Dir(), "a.tmp")
			create(t, a, []byte("old"), true)
			syncPath(t, f.Dir())
			// The usual atomic replace: write a temporary file, sync it,
			// rename it over the old one.
			create(t, tmp, []byte("new"), true)
			if err := os.Rename(tmp, a); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"a": "old"}
			if syncAfter {
				syncPath(t, f.Dir())
				want = map[string]string{"a": "new"}
			}
			cut(t, f, lossyfs.DropUnsynced, 1)
			checkTree(t, "the backing directory", f.Backing(), want)
			powerBack(t, f)
		})
	}
}

func TestRenameBetweenDirectories(t *testing.T) {
	f := lossyfs.MountForTest(t)
	from, to := filepath.Join(f.Dir(), "from"), filepath.Join(f.Dir(), "to")
	for _, d := range []string{from, to} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	syncPath(t, f.Dir())
	// Created in one directory and moved to the other before either is
	// synced: syncing the destination makes the whole rename durable, and
	// a later sync of the source must not bring back the creation there.
	create(t, filepath.Join(from, "f"), []byte("moved"), true)
	if err := os.Rename(filepath.Join(from, "f"), filepath.Join(to, "f")); err != nil {
		t.Fatal(err)
	}
	syncPath(t, to)
	create(t, filepath.Join(from, "g"), []byte("stays"), true)
	syncPath(t, from)
	cut(t, f, lossyfs.DropUnsynced, 1)
	checkTree(t, "the backing directory", f.Backing(), map[string]string{"from/": "", "from/g": "stays", "to/": "", "to/f": "moved"})
}

// TestKeepPrefixKeepsAPrefix makes a known sequence of unsynced changes
// and checks that each cut kept a prefix of it, writes torn only at page
// boundaries, against a simple model of the sequence.
func TestKeepPrefixKeepsAPrefix(t *testing.T) {
	type change struct {
		off  int64
		b    []byte
		trun int64  // >= 0: a truncate to this size instead of a write
		name string // a new empty file instead
	}
	seq := []change{
		{off: 100, b: bytes.Repeat([]byte("a"), 10000), trun: -1},
		{name: "g"},
		{off: 5000, b: bytes.Repeat([]byte("b"), 6000), trun: -1},
		{trun: 7000},
		{off: 8190, b: []byte("cdefg"), trun: -1},
	}
	// The states a cut may leave, one per number of pieces kept: the
	// file's content and whether g exists.
	type state struct {
		f string
		g bool
	}
	var states []state
	var cur []byte
	g := false
	states = append(states, state{})
	for _, c := range seq {
		switch {
		case c.name != "":
			g = true
			states = append(states, state{string(cur), g})
		case c.trun >= 0:
			cur = append(cur[:min(int64(len(cur)), c.trun)], make([]byte, max(0, c.trun-int64(len(cur))))...)
			states = append(states, state{string(cur), g})
		default:
			for lo := 0; lo < len(c.b); {
				pos := c.off + int64(lo)
				hi := min(len(c.b), lo+lossyfs.PageSize-int(pos%lossyfs.PageSize))
				if end := pos + int64(hi-lo); end > int64(len(cur)) {
					cur = append(cur, make([]byte, end-int64(len(cur)))...)
				}
				copy(cur[pos:], c.b[lo:hi])
				lo = hi
				states = append(states, state{string(cur), g})
			}
		}
	}

	seen := map[int]bool{}
	torn := 0
	for seed := range uint64(12) {
		f := lossyfs.MountForTest(t)
		p := filepath.Join(f.Dir(), "f")
		create(t, p, nil, true)
		syncPath(t, f.Dir())
		for _, c := range seq {
			switch {
			case c.name != "":
				create(t, filepath.Join(f.Dir(), c.name), nil, false)
			case c.trun >= 0:
				if err := os.Truncate(p, c.trun); err != nil {
					t.Fatal(err)
				}
			default:
				writeAt(t, p, c.b, c.off)
			}
		}
		r := cut(t, f, lossyfs.KeepPrefix, seed)
		got := tree(t, f.Backing())
		k := slices.IndexFunc(states, func(s state) bool {
			_, hasG := got["g"]
			return got["f"] == s.f && hasG == s.g
		})
		if k < 0 || len(got) != map[bool]int{false: 1, true: 2}[states[k].g] {
			t.Fatalf("seed %d: the backing directory holds %v, which no prefix of the changes leaves (report %v)", seed, short(got), r)
		}
		// The kernel may split a write at page boundaries into several
		// requests, each a change of its own.
		if r.Pending < len(seq) || r.KeptBytes > r.PendingBytes {
			t.Fatalf("seed %d: report %v", seed, r)
		}
		seen[k] = true
		if r.Torn {
			torn++
		}
		t.Logf("seed %d: kept state %d of %d: %v", seed, k, len(states)-1, r)
	}
	if len(seen) < 4 || torn == 0 {
		t.Errorf("12 cuts left only states %v, %d of them torn: the prefixes are not drawn from the whole sequence", seen, torn)
	}
}

// TestCutWhileWriting cuts the power under goroutines that append and
// sync: each gets EIO from then on, and each file holds at least what was
// synced before the cut and nothing but what was written.
func TestCutWhileWriting(t *testing.T) {
	f := lossyfs.MountForTest(t)
	const writers = 4
	files := make([]*os.File, writers)
	for i := range files {
		var err error
		files[i], err = os.OpenFile(filepath.Join(f.Dir(), fmt.Sprint(i)), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer files[i].Close()
	}
	syncPath(t, f.Dir())
	record := func(w, n int) []byte { return fmt.Appendf(nil, "writer %d record %06d|", w, n) }

	var mu sync.Mutex
	synced := make([]int64, writers) // bytes acknowledged by a sync
	written := make([]int64, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for n := 0; ; n++ {
				rec := record(w, n)
				_, err := files[w].Write(rec)
				if err == nil {
					mu.Lock()
					written[w] += int64(len(rec))
					mu.Unlock()
					if n%3 == 0 {
						err = unix.Fdatasync(int(files[w].Fd()))
					}
				}
				if err != nil {
					errs[w] = err
					return
				}
				if n%3 == 0 {
					mu.Lock()
					synced[w] = written[w]
					mu.Unlock()
				}
			}
		})
	}
	testkit.WaitFor(t, 30*time.Second, "every writer to sync a few records", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !slices.ContainsFunc(synced, func(n int64) bool { return n < 200 })
	})
	r := cut(t, f, lossyfs.KeepPrefix, 7)
	wg.Wait()
	for w, err := range errs {
		if !errors.Is(err, syscall.EIO) {
			t.Errorf("writer %d ended with %v, want EIO", w, err)
		}
	}
	for w := range writers {
		b, err := os.ReadFile(filepath.Join(f.Backing(), fmt.Sprint(w)))
		if err != nil {
			t.Fatal(err)
		}
		var want []byte
		for n := 0; len(want) < len(b); n++ {
			want = append(want, record(w, n)...)
		}
		switch {
		case int64(len(b)) < synced[w]:
			t.Errorf("writer %d: %d bytes survived, %d were synced", w, len(b), synced[w])
		case int64(len(b)) > written[w]:
			t.Errorf("writer %d: %d bytes survived, only %d were written", w, len(b), written[w])
		case !bytes.Equal(b, want[:len(b)]):
			t.Errorf("writer %d: the surviving bytes are not what was written", w)
		}
	}
	t.Logf("%v", r)
}

func TestNothingWorksAfterCut(t *testing.T) {
	f := lossyfs.MountForTest(t)
	p := filepath.Join(f.Dir(), "f")
	create(t, p, []byte("x"), true)
	open, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	cut(t, f, lossyfs.DropUnsynced, 1)

	_, werr := open.WriteAt([]byte("y"), 0)
	serr := open.Sync()
	_, oerr := os.Create(filepath.Join(f.Dir(), "new"))
	derr := os.Mkdir(filepath.Join(f.Dir(), "dir"), 0o755)
	for what, err := range map[string]error{"write": werr, "fsync": serr, "create": oerr, "mkdir": derr} {
		if !errors.Is(err, syscall.EIO) {
			t.Errorf("%s after the cut: %v, want EIO", what, err)
		}
	}
	if again, err := f.Cut(lossyfs.KeepPrefix, rand.New(rand.NewPCG(2, 0))); err != nil || again.Mode != lossyfs.DropUnsynced {
		t.Errorf("a second cut: %v, %v; want the first one's report", again, err)
	}
}

func TestCleanUnmountKeepsEverything(t *testing.T) {
	f := lossyfs.MountForTest(t)
	if err := os.MkdirAll(filepath.Join(f.Dir(), "x", "y"), 0o755); err != nil {
		t.Fatal(err)
	}
	create(t, filepath.Join(f.Dir(), "x", "y", "f"), []byte("never synced"), false)
	create(t, filepath.Join(f.Dir(), "gone"), []byte("removed"), false)
	if err := os.Remove(filepath.Join(f.Dir(), "gone")); err != nil {
		t.Fatal(err)
	}
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	checkTree(t, "the backing directory", f.Backing(), map[string]string{"x/": "", "x/y/": "", "x/y/f": "never synced"})
	if err := f.Mount(); err != nil {
		t.Fatal(err)
	}
	checkTree(t, "the mount", f.Dir(), map[string]string{"x/": "", "x/y/": "", "x/y/f": "never synced"})
}

func TestCutAfterAChange(t *testing.T) {
	f := lossyfs.MountForTest(t)
	p := filepath.Join(f.Dir(), "f")
	create(t, p, nil, true)
	syncPath(t, f.Dir())
	file, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	done, err := f.CutAfter(3, lossyfs.DropUnsynced, nil)
	if err != nil {
		t.Fatal(err)
	}
	write := func(s string) error {
		_, err := file.Write([]byte(s))
		return err
	}
	// Three steps: the third one succeeds, and the power goes right
	// after it; a sync is a step.
	if err := write("one,"); err != nil {
		t.Fatal(err)
	}
	if err := file.Sync(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("the power went after two steps")
	default:
	}
	if err := write("two,"); err != nil {
		t.Fatal(err)
	}
	<-done
	if err := write("three"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a write after the cut: %v, want EIO", err)
	}
	r, err := f.Cut(lossyfs.KeepPrefix, nil)
	if err != nil || r.Mode != lossyfs.DropUnsynced || r.Pending != 1 || r.LostBytes() != 4 {
		t.Fatalf("report %v, %v: want the armed cut, which lost one write of 4 bytes", r, err)
	}
	checkTree(t, "the backing directory", f.Backing(), map[string]string{"f": "one,"})

	// A cut right after a sync: what it synced is kept.
	g := lossyfs.MountForTest(t)
	p = filepath.Join(g.Dir(), "g")
	create(t, p, []byte("synced"), false)
	done, err = g.CutAfter(2, lossyfs.DropUnsynced, nil)
	if err != nil {
		t.Fatal(err)
	}
	syncPath(t, p)
	syncPath(t, g.Dir())
	<-done
	checkTree(t, "the backing directory", g.Backing(), map[string]string{"g": "synced"})
}

// TestAbortWithAFileOpen: Abort lets go of a mount a file is still open
// on, and the file's operations fail instead of waiting.
func TestAbortWithAFileOpen(t *testing.T) {
	f := lossyfs.MountForTest(t)
	p := filepath.Join(f.Dir(), "f")
	create(t, p, []byte("x"), true)
	open, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Unmount(); err == nil {
		t.Fatal("Unmount succeeded with a file open on the mount")
	}
	if err := f.Abort(); err != nil {
		t.Fatal(err)
	}
	if _, err := open.WriteAt([]byte("y"), 0); err == nil {
		t.Error("a write after Abort succeeded")
	}
	_ = open.Close()
	if f.Mounted() {
		t.Error("still mounted after Abort")
	}
}
