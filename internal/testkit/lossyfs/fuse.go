package lossyfs

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// ttl is how long the kernel may cache names and attributes. Every change
// goes through the kernel, so its cache never disagrees with the file
// system; a cut makes the file system fail, not change.
const ttl = time.Second

// server answers the kernel's FUSE requests from a model. One mutex
// serialises them, and a cut.
type server struct {
	fuse.RawFileSystem // ENOSYS for what is not here

	mu       sync.Mutex
	m        *model
	handles  map[uint64]*handle
	nextFh   uint64
	uid, gid uint32

	backing string
	// The power cut: armed counts the steps (changes and syncs) still to
	// come before an armed one; report and storeErr are its outcome; done
	// is closed then.
	armed    int
	armMode  Mode
	armRng   *rand.Rand
	report   *CutReport
	storeErr error
	done     chan struct{}
	powerCut bool // the end was a power cut, not a clean shutdown
}

// handle is an open file or directory.
type handle struct {
	ino  uint64
	sync bool     // opened with O_SYNC or O_DSYNC
	list []dirent // a directory's entries when it was opened
}

type dirent struct {
	name string
	ino  uint64
	mode uint32
}

func newServer(m *model, backing string) *server {
	s := &server{
		RawFileSystem: fuse.NewDefaultRawFileSystem(),
		m:             m,
		handles:       map[uint64]*handle{},
		uid:           uint32(syscall.Getuid()),
		gid:           uint32(syscall.Getgid()),
		backing:       backing,
		done:          make(chan struct{}),
	}
	m.afterStep = s.afterStep
	return s
}

// cut cuts the power now, or returns the cut that happened; the caller
// holds mu.
func (s *server) cut(mode Mode, rng *rand.Rand) (CutReport, error) {
	if s.report == nil {
		r := s.m.cut(mode, rng)
		s.report, s.powerCut = &r, true
		s.storeErr = s.m.store(s.backing)
		close(s.done)
	}
	return *s.report, s.storeErr
}

// stop ends the file system in a clean shutdown; the caller holds mu.
func (s *server) stop() error {
	if s.report == nil {
		r := s.m.flush()
		s.report = &r
		s.storeErr = s.m.store(s.backing)
		close(s.done)
	}
	return s.storeErr
}

func (s *server) afterStep() {
	if s.armed > 0 {
		if s.armed--; s.armed == 0 {
			_, _ = s.cut(s.armMode, s.armRng)
		}
	}
}

func (s *server) String() string { return "lossyfs" }

// node returns the visible node ino, or EIO once the power is cut.
func (s *server) node(ino uint64) (*node, fuse.Status) {
	if s.m.dead {
		return nil, fuse.EIO
	}
	n := s.m.vis[ino]
	if n == nil {
		return nil, fuse.Status(syscall.ESTALE)
	}
	return n, fuse.OK
}

func (s *server) dir(ino uint64) (*node, fuse.Status) {
	n, st := s.node(ino)
	if st == fuse.OK && !n.isDir() {
		return nil, fuse.ENOTDIR
	}
	return n, st
}

func (s *server) attr(ino uint64, n *node, a *fuse.Attr) {
	*a = fuse.Attr{
		Ino:     ino,
		Size:    uint64(n.data.size),
		Blocks:  uint64(len(n.data.pages)) * (PageSize / 512),
		Mode:    n.mode,
		Nlink:   max(n.nlink, 1),
		Owner:   fuse.Owner{Uid: s.uid, Gid: s.gid},
		Blksize: PageSize,
	}
	a.SetTimes(&n.mtime, &n.mtime, &n.mtime)
}

// entry fills out for node ino, which the kernel now holds one more
// reference to.
func (s *server) entry(ino uint64, out *fuse.EntryOut) {
	n := s.m.vis[ino]
	n.lookups++
	out.NodeId = ino
	out.Generation = 1
	out.SetEntryTimeout(ttl)
	out.SetAttrTimeout(ttl)
	s.attr(ino, n, &out.Attr)
}

func (s *server) open(ino uint64, flags uint32) uint64 {
	s.nextFh++
	s.handles[s.nextFh] = &handle{ino: ino, sync: flags&syscall.O_DSYNC != 0}
	return s.nextFh
}

// truncate records a size change of file ino.
func (s *server) truncate(ino uint64, n *node, size int64) {
	s.m.change(&op{kind: opTruncate, ino: ino, mode: n.mode, size: size})
	n.mtime = time.Now()
}

func (s *server) Lookup(_ <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, st := s.dir(h.NodeId)
	if st != fuse.OK {
		return st
	}
	ino, ok := d.entries[name]
	if !ok {
		return fuse.ENOENT
	}
	s.entry(ino, out)
	return fuse.OK
}

func (s *server) Forget(ino, nlookup uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.m.vis[ino]; n != nil {
		n.lookups -= min(n.lookups, nlookup)
		s.m.forget(ino)
	}
}

func (s *server) GetAttr(_ <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, st := s.node(in.NodeId)
	if st != fuse.OK {
		return st
	}
	s.attr(in.NodeId, n, &out.Attr)
	out.SetTimeout(ttl)
	return fuse.OK
}

func (s *server) SetAttr(_ <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, st := s.node(in.NodeId)
	if st != fuse.OK {
		return st
	}
	if in.Valid&fuse.FATTR_SIZE != 0 {
		if n.isDir() {
			return fuse.Status(syscall.EISDIR)
		}
		s.truncate(in.NodeId, n, int64(in.Size))
	}
	if in.Valid&fuse.FATTR_MODE != 0 {
		n.mode = n.mode&syscall.S_IFMT | in.Mode&0o7777
		if d := s.m.dur[in.NodeId]; d != nil {
			d.mode = n.mode
		}
	}
	switch {
	case in.Valid&fuse.FATTR_MTIME_NOW != 0:
		n.mtime = time.Now()
	case in.Valid&fuse.FATTR_MTIME != 0:
		n.mtime = time.Unix(int64(in.Mtime), int64(in.Mtimensec))
	}
	s.attr(in.NodeId, n, &out.Attr)
	out.SetTimeout(ttl)
	return fuse.OK
}

// create links a new node of mode as name in directory parent.
func (s *server) create(parent uint64, d *node, name string, mode uint32) uint64 {
	ino := s.m.next
	s.m.next++
	s.m.change(&op{kind: opLink, dir: parent, dirMode: d.mode, name: name, child: ino, mode: mode})
	n := s.m.vis[ino]
	n.nlink = 1
	if n.isDir() {
		n.nlink = 2
	}
	d.mtime = time.Now()
	return ino
}

func (s *server) Create(_ <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, st := s.dir(in.NodeId)
	if st != fuse.OK {
		return st
	}
	ino, exists := d.entries[name]
	switch {
	case exists && in.Flags&syscall.O_EXCL != 0:
		return fuse.Status(syscall.EEXIST)
	case exists:
		n := s.m.vis[ino]
		if n.isDir() {
			return fuse.Status(syscall.EISDIR)
		}
		if in.Flags&syscall.O_TRUNC != 0 && n.data.size > 0 {
			s.truncate(ino, n, 0)
		}
	default:
		ino = s.create(in.NodeId, d, name, syscall.S_IFREG|in.Mode&^in.Umask&0o7777)
	}
	s.entry(ino, &out.EntryOut)
	out.Fh = s.open(ino, in.Flags)
	return fuse.OK
}

func (s *server) Mknod(_ <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := in.Mode & syscall.S_IFMT; t != 0 && t != syscall.S_IFREG {
		return fuse.EPERM
	}
	d, st := s.dir(in.NodeId)
	if st != fuse.OK {
		return st
	}
	if _, exists := d.entries[name]; exists {
		return fuse.Status(syscall.EEXIST)
	}
	s.entry(s.create(in.NodeId, d, name, syscall.S_IFREG|in.Mode&^in.Umask&0o7777), out)
	return fuse.OK
}

func (s *server) Mkdir(_ <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, st := s.dir(in.NodeId)
	if st != fuse.OK {
		return st
	}
	if _, exists := d.entries[name]; exists {
		return fuse.Status(syscall.EEXIST)
	}
	s.entry(s.create(in.NodeId, d, name, syscall.S_IFDIR|in.Mode&^in.Umask&0o7777), out)
	return fuse.OK
}

// remove unlinks name from directory parent, refusing directories or
// anything else.
func (s *server) remove(parent uint64, name string, dir bool) fuse.Status {
	d, st := s.dir(parent)
	if st != fuse.OK {
		return st
	}
	ino, ok := d.entries[name]
	if !ok {
		return fuse.ENOENT
	}
	n := s.m.vis[ino]
	switch {
	case dir && !n.isDir():
		return fuse.ENOTDIR
	case dir && len(n.entries) > 0:
		return fuse.Status(syscall.ENOTEMPTY)
	case !dir && n.isDir():
		return fuse.Status(syscall.EISDIR)
	}
	s.m.change(&op{kind: opUnlink, dir: parent, dirMode: d.mode, name: name, child: ino, mode: n.mode})
	s.unlinked(ino, n)
	d.mtime = time.Now()
	return fuse.OK
}

// unlinked drops a name of node ino.
func (s *server) unlinked(ino uint64, n *node) {
	n.nlink--
	if n.isDir() {
		n.nlink = 0
	}
	s.m.forget(ino)
}

func (s *server) Unlink(_ <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remove(h.NodeId, name, false)
}

func (s *server) Rmdir(_ <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remove(h.NodeId, name, true)
}

func (s *server) Rename(_ <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.Flags&^unix.RENAME_NOREPLACE != 0 {
		return fuse.EINVAL // RENAME_EXCHANGE and RENAME_WHITEOUT are not modelled
	}
	src, st := s.dir(in.NodeId)
	if st != fuse.OK {
		return st
	}
	dst, st := s.dir(in.Newdir)
	if st != fuse.OK {
		return st
	}
	ino, ok := src.entries[oldName]
	if !ok {
		return fuse.ENOENT
	}
	n := s.m.vis[ino]
	old, replaces := dst.entries[newName]
	if replaces {
		if old == ino {
			return fuse.OK
		}
		if in.Flags&unix.RENAME_NOREPLACE != 0 {
			return fuse.Status(syscall.EEXIST)
		}
		o := s.m.vis[old]
		switch {
		case n.isDir() && !o.isDir():
			return fuse.ENOTDIR
		case n.isDir() && len(o.entries) > 0:
			return fuse.Status(syscall.ENOTEMPTY)
		case !n.isDir() && o.isDir():
			return fuse.Status(syscall.EISDIR)
		}
	}
	s.m.change(&op{kind: opRename, dir: in.NodeId, dirMode: src.mode, name: oldName,
		dir2: in.Newdir, d2Mode: dst.mode, name2: newName, child: ino, mode: n.mode})
	if replaces {
		s.unlinked(old, s.m.vis[old])
	}
	now := time.Now()
	src.mtime, dst.mtime = now, now
	return fuse.OK
}

func (s *server) Link(<-chan struct{}, *fuse.LinkIn, string, *fuse.EntryOut) fuse.Status {
	return fuse.EPERM // hard links are not modelled
}

func (s *server) Symlink(<-chan struct{}, *fuse.InHeader, string, string, *fuse.EntryOut) fuse.Status {
	return fuse.EPERM // symbolic links are not modelled
}

func (s *server) Access(_ <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, st := s.node(in.NodeId)
	return st
}

func (s *server) Open(_ <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, st := s.node(in.NodeId)
	if st != fuse.OK {
		return st
	}
	if n.isDir() {
		return fuse.Status(syscall.EISDIR)
	}
	if in.Flags&syscall.O_TRUNC != 0 && n.data.size > 0 {
		s.truncate(in.NodeId, n, 0)
	}
	out.Fh = s.open(in.NodeId, in.Flags)
	return fuse.OK
}

func (s *server) Read(_ <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, st := s.node(in.NodeId)
	if st != fuse.OK {
		return nil, st
	}
	buf = buf[:min(len(buf), int(in.Size))]
	k := n.data.readAt(buf, int64(in.Offset))
	return fuse.ReadResultData(buf[:k]), fuse.OK
}

func (s *server) Write(_ <-chan struct{}, in *fuse.WriteIn, b []byte) (uint32, fuse.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, st := s.node(in.NodeId)
	if st != fuse.OK {
		return 0, st
	}
	if n.isDir() {
		return 0, fuse.Status(syscall.EISDIR)
	}
	s.m.change(&op{kind: opWrite, ino: in.NodeId, mode: n.mode, off: int64(in.Offset), b: bytes.Clone(b)})
	n.mtime = time.Now()
	if h := s.handles[in.Fh]; h != nil && h.sync {
		s.m.syncFile(in.NodeId)
	}
	return uint32(len(b)), fuse.OK
}

func (s *server) Flush(_ <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, st := s.node(in.NodeId)
	return st
}

func (s *server) Release(_ <-chan struct{}, in *fuse.ReleaseIn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.handles, in.Fh)
}

func (s *server) Fsync(_ <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, st := s.node(in.NodeId); st != fuse.OK {
		return st
	}
	s.m.syncFile(in.NodeId)
	return fuse.OK
}

func (s *server) FsyncDir(_ <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, st := s.dir(in.NodeId); st != fuse.OK {
		return st
	}
	s.m.syncDir(in.NodeId)
	return fuse.OK
}

func (s *server) OpenDir(_ <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, st := s.dir(in.NodeId)
	if st != fuse.OK {
		return st
	}
	list := []dirent{{".", in.NodeId, syscall.S_IFDIR}, {"..", 0, syscall.S_IFDIR}}
	for name, ino := range d.entries {
		list = append(list, dirent{name, ino, s.m.vis[ino].mode})
	}
	slices.SortFunc(list[2:], func(a, b dirent) int { return strings.Compare(a.name, b.name) })
	out.Fh = s.open(in.NodeId, 0)
	s.handles[out.Fh].list = list
	return fuse.OK
}

func (s *server) ReadDir(_ <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m.dead {
		return fuse.EIO
	}
	h := s.handles[in.Fh]
	if h == nil {
		return fuse.EBADF
	}
	for i := in.Offset; i < uint64(len(h.list)); i++ {
		e := h.list[i]
		if !out.AddDirEntry(fuse.DirEntry{Name: e.name, Ino: e.ino, Mode: e.mode, Off: i + 1}) {
			break
		}
	}
	return fuse.OK
}

func (s *server) ReleaseDir(in *fuse.ReleaseIn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.handles, in.Fh)
}

func (s *server) StatFs(_ <-chan struct{}, in *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m.dead {
		return fuse.EIO
	}
	*out = fuse.StatfsOut{Blocks: 1 << 24, Bfree: 1 << 23, Bavail: 1 << 23, Files: 1 << 20, Ffree: 1 << 19,
		Bsize: PageSize, Frsize: PageSize, NameLen: 255}
	return fuse.OK
}
