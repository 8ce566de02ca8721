package lossyfs

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
)

// Options tune a mount. The zero value is what tests want.
type Options struct {
	// Debug logs every FUSE request and answer (go-fuse's debug output,
	// to the standard logger).
	Debug bool
	// AllowOther lets processes of other users and groups use the mount
	// (FUSE refuses them otherwise, even root under another group id).
	// Without root it needs user_allow_other in /etc/fuse.conf.
	AllowOther bool
}

// FS is a lossy file system over a backing directory, mounted at a mount
// point, or unmounted between a cut and the next Mount. Its methods are
// safe to call from any goroutine, Cut while other processes or
// goroutines use the mount.
type FS struct {
	backing, dir string
	opts         Options

	mu  sync.Mutex
	srv *fuse.Server // nil while unmounted
	fs  *server
}

// Available reports what this host lacks to mount a lossy file system:
// nil, or an error naming it (/dev/fuse, fusermount3, root or a setuid
// fusermount3).
func Available() error {
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("cannot open /dev/fuse: %w", err)
	}
	_ = f.Close()
	bin, err := exec.LookPath("fusermount3")
	if err != nil {
		return fmt.Errorf("fusermount3 (package fuse3) is not on PATH: %w", err)
	}
	if os.Geteuid() == 0 {
		return nil
	}
	if info, err := os.Stat(bin); err != nil || info.Mode()&fs.ModeSetuid == 0 {
		return fmt.Errorf("not root, and %s is not setuid", bin)
	}
	return nil
}

// Mount serves what backing holds at mount point dir (both existing
// directories). Nothing else may touch backing until Unmount.
func Mount(backing, dir string, opts Options) (*FS, error) {
	f := &FS{backing: backing, dir: dir, opts: opts}
	if err := f.Mount(); err != nil {
		return nil, err
	}
	return f, nil
}

// Mount mounts f again after Unmount: the machine coming back, with what
// the backing directory holds.
func (f *FS) Mount() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.srv != nil {
		return fmt.Errorf("lossyfs: %s is mounted already", f.dir)
	}
	m, err := load(f.backing)
	if err != nil {
		return err
	}
	s := newServer(m, f.backing)
	srv, err := fuse.NewServer(s, f.dir, &fuse.MountOptions{
		FsName:             "lossyfs",
		Name:               "lossyfs",
		DirectMount:        true, // as root: no fusermount3 process per mount
		DisableXAttrs:      true, // or the kernel asks for security.capability before every write
		DisableReadDirPlus: true,
		Debug:              f.opts.Debug,
		AllowOther:         f.opts.AllowOther,
	})
	if err != nil {
		return fmt.Errorf("lossyfs: mount %s: %w", f.dir, err)
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		_ = srv.Unmount()
		return fmt.Errorf("lossyfs: mount %s: %w", f.dir, err)
	}
	f.srv, f.fs = srv, s
	return nil
}

// Dir is the mount point.
func (f *FS) Dir() string { return f.dir }

// Backing is the backing directory.
func (f *FS) Backing() string { return f.backing }

// Cut cuts the power: the changes not yet synced are lost as mode says
// (KeepPrefix draws from rng which to keep), the backing directory is
// written with what survived, and from now on every operation on the
// mount fails with EIO. Operations in progress finish first. Once the
// power is cut (by Cut or CutAfter), Cut returns that cut's report and
// error.
func (f *FS) Cut(mode Mode, rng *rand.Rand) (CutReport, error) {
	s, err := f.server()
	if err != nil {
		return CutReport{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cut(mode, rng)
}

// CutAfter arms a power cut that happens right after the n-th step from
// now reaches the file system: a change (a write, a truncate, a creation,
// a removal or a rename) or a sync (fsync or fdatasync of a file or a
// directory). That step succeeds, so its caller sees it done, and
// everything after fails. The returned channel is closed once the power
// is cut, by this or by Cut; Cut then returns the report.
func (f *FS) CutAfter(n int, mode Mode, rng *rand.Rand) (<-chan struct{}, error) {
	s, err := f.server()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.armMode, s.armRng = max(n, 1), mode, rng
	return s.done, nil
}

func (f *FS) server() (*server, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.srv == nil {
		return nil, fmt.Errorf("lossyfs: %s is not mounted", f.dir)
	}
	return f.fs, nil
}

// Unmount unmounts f. Without a cut it is a clean shutdown: every change
// reaches the backing directory. From the first call on the file system
// fails every operation; the call itself fails while files on the mount
// are open (kill the processes using it first), and may be repeated.
func (f *FS) Unmount() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.srv == nil {
		return nil
	}
	s := f.fs
	s.mu.Lock()
	err := s.stop()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	// The file system answers nothing but EIO now. MNT_FORCE aborts its
	// FUSE connection besides unmounting it, so that a copy of the mount
	// in another mount namespace (ip netns exec makes one per process)
	// cannot keep it, and this, waiting.
	switch err := syscall.Unmount(f.dir, syscall.MNT_FORCE); {
	case err == nil:
		f.srv.Wait()
	case errors.Is(err, syscall.EPERM): // not root: fusermount3 does it
		if err := f.srv.Unmount(); err != nil {
			return fmt.Errorf("lossyfs: unmount %s: %w", f.dir, err)
		}
	default:
		return fmt.Errorf("lossyfs: unmount %s (a file on it is still open?): %w", f.dir, err)
	}
	f.srv, f.fs = nil, nil
	return nil
}

// Mounted reports whether f is mounted.
func (f *FS) Mounted() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.srv != nil
}

// Abort aborts the FUSE connection and detaches the mount at once, even
// while files on it are open (their users get ENOTCONN), without writing
// anything to the backing directory: for cleanups that cannot wait, such
// as an interrupted run. Aborting matters: a process that exits with a
// file open on a mount it serves itself would otherwise wait for ever in
// the kernel for the answer to that file's last flush.
func (f *FS) Abort() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.srv == nil {
		return nil
	}
	// On FUSE, MNT_FORCE aborts the connection: what is in flight and
	// what comes after fails with ENOTCONN.
	_ = syscall.Unmount(f.dir, syscall.MNT_FORCE)
	if err := syscall.Unmount(f.dir, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
		if out, err2 := exec.Command("fusermount3", "-u", "-z", f.dir).CombinedOutput(); err2 != nil {
			return fmt.Errorf("lossyfs: unmount %s: %v; fusermount3: %v: %s", f.dir, err, err2, out)
		}
	}
	f.srv, f.fs = nil, nil
	return nil
}

// powerCut reports whether the power of the current mount was cut.
func (f *FS) powerCut() bool {
	s, err := f.server()
	if err != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.powerCut
}

// MountForTest mounts a lossy file system on a new backing directory,
// both under t.TempDir(), and unmounts it when the test ends, failed or
// not. A host that cannot mount FUSE skips the test, or with CI=true fails
// it, naming what is missing.
func MountForTest(t testing.TB) *FS {
	t.Helper()
	testkit.Need(t, "FUSE (/dev/fuse, fusermount3, root)", Available())
	backing, dir := t.TempDir(), t.TempDir()
	f, err := Mount(backing, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Registered after the t.TempDir calls, so it runs before they are
	// removed.
	t.Cleanup(func() {
		cut := f.powerCut()
		err := f.Unmount()
		if err == nil {
			return
		}
		if ferr := f.Abort(); ferr != nil {
			t.Errorf("%v; %v", err, ferr)
			return
		}
		if cut {
			// What failed at the cut may have left files open.
			t.Logf("%v: aborted and detached it", err)
			return
		}
		t.Errorf("%v (aborted and detached it instead: something kept a file on it open)", err)
	})
	return f
}
