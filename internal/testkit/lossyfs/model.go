package lossyfs

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// PageSize is the unit in which KeepPrefix tears a write.
const PageSize = 4096

type page = [PageSize]byte

// data is a file's bytes in pages; a nil page holds zeros. Every byte at
// or past size is zero, so growing a file needs no clearing.
type data struct {
	pages []*page
	size  int64
}

func (d *data) readAt(b []byte, off int64) int {
	if off >= d.size {
		return 0
	}
	n := int(min(int64(len(b)), d.size-off))
	for done := 0; done < n; {
		pos := off + int64(done)
		pi, po := pos/PageSize, int(pos%PageSize)
		chunk := min(n-done, PageSize-po)
		if pi < int64(len(d.pages)) && d.pages[pi] != nil {
			copy(b[done:done+chunk], d.pages[pi][po:])
		} else {
			clear(b[done : done+chunk])
		}
		done += chunk
	}
	return n
}

func (d *data) writeAt(b []byte, off int64) {
	end := off + int64(len(b))
	if need := int((end + PageSize - 1) / PageSize); need > len(d.pages) {
		d.pages = append(d.pages, make([]*page, need-len(d.pages))...)
	}
	for done := 0; done < len(b); {
		pos := off + int64(done)
		pi, po := pos/PageSize, int(pos%PageSize)
		chunk := min(len(b)-done, PageSize-po)
		src := b[done : done+chunk]
		done += chunk
		p := d.pages[pi]
		zero := allZero(src)
		if p == nil {
			if zero {
				continue
			}
			p = new(page)
			d.pages[pi] = p
		}
		copy(p[po:], src)
		if zero && allZero(p[:]) {
			d.pages[pi] = nil
		}
	}
	d.size = max(d.size, end)
}

func (d *data) truncate(size int64) {
	if size < d.size {
		keep := int((size + PageSize - 1) / PageSize)
		if keep < len(d.pages) {
			clear(d.pages[keep:])
			d.pages = d.pages[:keep]
		}
		if po := int(size % PageSize); po != 0 && keep > 0 && keep <= len(d.pages) && d.pages[keep-1] != nil {
			clear(d.pages[keep-1][po:])
		}
	}
	d.size = size
}

func (d *data) clone() data {
	c := data{pages: make([]*page, len(d.pages)), size: d.size}
	for i, p := range d.pages {
		if p != nil {
			cp := *p
			c.pages[i] = &cp
		}
	}
	return c
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// node is a file or a directory, in the visible or in the durable state.
type node struct {
	mode    uint32 // type and permission bits
	data    data
	entries map[string]uint64 // directories: name -> inode number
	mtime   time.Time

	// Visible state only: names linking the node, and the kernel's
	// references to it (lookups not yet forgotten). A node with neither
	// is gone.
	nlink   uint32
	lookups uint64
}

func (n *node) isDir() bool { return n.mode&syscall.S_IFMT == syscall.S_IFDIR }

func newNode(mode uint32) *node {
	n := &node{mode: mode, mtime: time.Now()}
	if n.isDir() {
		n.entries = map[string]uint64{}
	}
	return n
}

// tree is a state of the file system: its nodes by inode number, the root
// being rootIno.
type tree map[uint64]*node

const rootIno = 1

// get returns node ino, creating it with mode if the state has none yet
// (the durable state learns of a node from the first change of it that is
// synced, which need not be its creation).
func (t tree) get(ino uint64, mode uint32) *node {
	n := t[ino]
	if n == nil {
		n = newNode(mode)
		t[ino] = n
	}
	return n
}

type opKind uint8

const (
	opWrite opKind = iota
	opTruncate
	opLink   // a new entry name -> child in dir
	opUnlink // the entry name -> child removed from dir
	opRename // the entry name -> child moved from dir to dir2/name2
)

// op is one pending change. It names every node it touches with its mode,
// so applying it to the durable state can create what is missing there.
type op struct {
	kind opKind
	ino  uint64 // the file written or truncated
	mode uint32 // the mode of ino, or of child
	off  int64
	b    []byte
	size int64

	dir, dir2       uint64
	dirMode, d2Mode uint32
	name, name2     string
	child           uint64
}

func (o *op) isData() bool { return o.kind == opWrite || o.kind == opTruncate }

// apply makes o happen in t; for a write, only its bytes [lo, hi).
func (t tree) apply(o *op, lo, hi int) {
	switch o.kind {
	case opWrite:
		t.get(o.ino, o.mode).data.writeAt(o.b[lo:hi], o.off+int64(lo))
	case opTruncate:
		t.get(o.ino, o.mode).data.truncate(o.size)
	case opLink:
		t.get(o.child, o.mode)
		t.get(o.dir, o.dirMode).entries[o.name] = o.child
	case opUnlink:
		d := t.get(o.dir, o.dirMode)
		if d.entries[o.name] == o.child {
			delete(d.entries, o.name)
		}
	case opRename:
		src := t.get(o.dir, o.dirMode)
		if src.entries[o.name] == o.child {
			delete(src.entries, o.name)
		}
		t.get(o.child, o.mode)
		t.get(o.dir2, o.d2Mode).entries[o.name2] = o.child
	}
}

// model is the file system without FUSE: the visible state, the durable
// state and the queue of changes between them. The caller serialises
// access.
type model struct {
	vis, dur tree
	next     uint64
	pending  []*op
	dead     bool

	syncs   int // fsyncs of files and directories
	changes int // changes made, synced or not

	afterStep func() // called after each change is recorded and after each sync
}

// load reads dir into a model whose two states are both what dir holds.
func load(dir string) (*model, error) {
	m := &model{dur: tree{}, next: rootIno + 1}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("lossyfs: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("lossyfs: %s is not a directory", dir)
	}
	root := newNode(syscall.S_IFDIR | uint32(info.Mode().Perm()))
	m.dur[rootIno] = root
	if err := m.loadDir(dir, root); err != nil {
		return nil, err
	}
	m.vis = make(tree, len(m.dur))
	for ino, n := range m.dur {
		c := *n
		c.data = n.data.clone()
		if n.isDir() {
			c.entries = maps.Clone(n.entries)
			c.nlink = 2
		} else {
			c.nlink = 1
		}
		m.vis[ino] = &c
	}
	return m, nil
}

func (m *model) loadDir(path string, dir *node) error {
	list, err := os.ReadDir(path)
	if err != nil {
		return fmt.Errorf("lossyfs: %w", err)
	}
	for _, e := range list {
		p := filepath.Join(path, e.Name())
		info, err := e.Info()
		if err != nil {
			return fmt.Errorf("lossyfs: %w", err)
		}
		ino := m.next
		m.next++
		switch {
		case info.IsDir():
			n := newNode(syscall.S_IFDIR | uint32(info.Mode().Perm()))
			n.mtime = info.ModTime()
			m.dur[ino] = n
			if err := m.loadDir(p, n); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			n := newNode(syscall.S_IFREG | uint32(info.Mode().Perm()))
			n.mtime = info.ModTime()
			if err := loadFile(p, &n.data); err != nil {
				return err
			}
			m.dur[ino] = n
		default:
			return fmt.Errorf("lossyfs: %s is a %v; only regular files and directories are kept", p, info.Mode().Type())
		}
		dir.entries[e.Name()] = ino
	}
	return nil
}

func loadFile(path string, d *data) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("lossyfs: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 64*PageSize)
	var off int64
	for {
		n, err := f.ReadAt(buf, off)
		d.writeAt(buf[:n], off)
		off += int64(n)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("lossyfs: %w", err)
		}
	}
}

// change records o as pending and applies it to the visible state.
func (m *model) change(o *op) {
	m.vis.apply(o, 0, len(o.b))
	m.pending = append(m.pending, o)
	m.changes++
	m.step()
}

func (m *model) step() {
	if m.afterStep != nil {
		m.afterStep()
	}
}

// syncWhere makes durable, in their order, the pending changes that match.
func (m *model) syncWhere(match func(*op) bool) {
	if m.dead {
		return // the power is off
	}
	m.syncs++
	kept := m.pending[:0]
	for _, o := range m.pending {
		if match(o) {
			m.dur.apply(o, 0, len(o.b))
		} else {
			kept = append(kept, o)
		}
	}
	clear(m.pending[len(kept):])
	m.pending = kept
	m.collect()
}

func (m *model) syncFile(ino uint64) {
	m.syncWhere(func(o *op) bool { return o.isData() && o.ino == ino })
	m.step()
}

// syncDir makes the entries of directory ino durable. A pending rename
// between it and another directory ties the two: the other's pending
// entries are made durable too, so that an earlier change there cannot
// land after the rename.
func (m *model) syncDir(ino uint64) {
	dirs := map[uint64]bool{ino: true}
	for grew := true; grew; {
		grew = false
		for _, o := range m.pending {
			if o.kind == opRename && dirs[o.dir] != dirs[o.dir2] {
				dirs[o.dir], dirs[o.dir2], grew = true, true, true
			}
		}
	}
	m.syncWhere(func(o *op) bool {
		switch o.kind {
		case opLink, opUnlink:
			return dirs[o.dir]
		case opRename:
			return dirs[o.dir] || dirs[o.dir2]
		}
		return false
	})
	m.step()
}

// forget drops a visible node that nothing refers to any more.
func (m *model) forget(ino uint64) {
	if n := m.vis[ino]; n != nil && ino != rootIno && n.nlink == 0 && n.lookups == 0 {
		delete(m.vis, ino)
	}
}

// collect drops durable nodes that cannot come back: unreachable in the
// durable state, gone from the visible one, named by no pending change.
func (m *model) collect() {
	live := map[uint64]bool{}
	var walk func(uint64)
	walk = func(ino uint64) {
		if live[ino] {
			return
		}
		live[ino] = true
		if n := m.dur[ino]; n != nil {
			for _, c := range n.entries {
				walk(c)
			}
		}
	}
	walk(rootIno)
	for _, o := range m.pending {
		live[o.ino], live[o.child], live[o.dir], live[o.dir2] = true, true, true, true
	}
	for ino := range m.dur {
		if !live[ino] && m.vis[ino] == nil {
			delete(m.dur, ino)
		}
	}
}

// Mode is what a power cut does to the changes not yet synced.
type Mode int

const (
	// DropUnsynced loses every change not yet synced.
	DropUnsynced Mode = iota
	// KeepPrefix keeps a prefix of them, in the order they were made,
	// the last write kept possibly torn at a page boundary.
	KeepPrefix
)

func (m Mode) String() string {
	switch m {
	case DropUnsynced:
		return "drop-unsynced"
	case KeepPrefix:
		return "keep-prefix"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// CutReport says what a power cut lost.
type CutReport struct {
	Mode Mode
	// Pending is how many changes had not been synced, PendingBytes the
	// bytes their writes held.
	Pending      int
	PendingBytes int64
	// Kept is how many of them survived whole (KeepPrefix), KeptBytes
	// the bytes of writes that survived, whole or torn.
	Kept      int
	KeptBytes int64
	// Torn is set when the last change kept is a write kept only in part,
	// up to a page boundary.
	Torn bool
	// Syncs and Changes count the file system's fsyncs and changes since
	// it was mounted.
	Syncs, Changes int
	// At is when the power went (a clean Unmount: when it stopped).
	At time.Time
}

// LostBytes is how many written bytes the cut lost.
func (r CutReport) LostBytes() int64 { return r.PendingBytes - r.KeptBytes }

func (r CutReport) String() string {
	torn := ""
	if r.Torn {
		torn = ", the last one torn"
	}
	return fmt.Sprintf("%s: %d changes (%d bytes written) not synced, %d kept (%d bytes)%s; %d changes and %d syncs since mount",
		r.Mode, r.Pending, r.PendingBytes, r.Kept, r.KeptBytes, torn, r.Changes, r.Syncs)
}

// piece is the part of a pending change that a cut keeps or loses whole:
// the change itself, or for a write its bytes on one page.
type piece struct {
	op     *op
	lo, hi int
}

// pieces splits the pending changes at the page boundaries of the writes.
func (m *model) pieces() []piece {
	var out []piece
	for _, o := range m.pending {
		if o.kind != opWrite || len(o.b) == 0 {
			out = append(out, piece{op: o})
			continue
		}
		for lo := 0; lo < len(o.b); {
			pos := o.off + int64(lo)
			hi := min(len(o.b), lo+PageSize-int(pos%PageSize))
			out = append(out, piece{op: o, lo: lo, hi: hi})
			lo = hi
		}
	}
	return out
}

// cut applies the power cut to the durable state and marks the model dead.
func (m *model) cut(mode Mode, rng *rand.Rand) CutReport {
	r := CutReport{Mode: mode, Pending: len(m.pending), Syncs: m.syncs, Changes: m.changes, At: time.Now()}
	for _, o := range m.pending {
		r.PendingBytes += int64(len(o.b))
	}
	m.dead = true
	if mode != KeepPrefix {
		m.pending = nil
		return r
	}
	all := m.pieces()
	keep := all[:rng.IntN(len(all)+1)]
	for i, p := range keep {
		m.dur.apply(p.op, p.lo, p.hi)
		r.KeptBytes += int64(p.hi - p.lo)
		if i == len(keep)-1 || keep[i+1].op != p.op {
			r.Kept++
		}
	}
	if n := len(keep); n > 0 && n < len(all) && all[n].op == keep[n-1].op {
		r.Kept--
		r.Torn = true
	}
	m.pending = nil
	return r
}

// flush makes every pending change durable and stops the model: what a
// clean shutdown does.
func (m *model) flush() CutReport {
	m.syncWhere(func(*op) bool { return true })
	m.dead = true
	return CutReport{Mode: DropUnsynced, Syncs: m.syncs, Changes: m.changes, At: time.Now()}
}

// store writes the durable state into dir, replacing what dir holds.
func (m *model) store(dir string) error {
	list, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("lossyfs: %w", err)
	}
	for _, e := range list {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("lossyfs: %w", err)
		}
	}
	return m.storeDir(dir, m.dur[rootIno], map[uint64]bool{rootIno: true})
}

func (m *model) storeDir(path string, dir *node, seen map[uint64]bool) error {
	names := make([]string, 0, len(dir.entries))
	for name := range dir.entries {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		ino := dir.entries[name]
		n := m.dur[ino]
		p := filepath.Join(path, name)
		if n == nil || seen[ino] {
			return fmt.Errorf("lossyfs: durable state is inconsistent at %s (inode %d)", p, ino)
		}
		seen[ino] = true
		if n.isDir() {
			if err := os.Mkdir(p, os.FileMode(n.mode&0o777)); err != nil {
				return fmt.Errorf("lossyfs: %w", err)
			}
			if err := m.storeDir(p, n, seen); err != nil {
				return err
			}
			continue
		}
		if err := storeFile(p, n); err != nil {
			return err
		}
	}
	return os.Chtimes(path, time.Time{}, dir.mtime)
}

func storeFile(path string, n *node) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, os.FileMode(n.mode&0o777))
	if err != nil {
		return fmt.Errorf("lossyfs: %w", err)
	}
	for i, p := range n.data.pages {
		if p == nil {
			continue
		}
		off := int64(i) * PageSize
		b := p[:min(PageSize, n.data.size-off)]
		if _, err := f.WriteAt(b, off); err != nil {
			_ = f.Close()
			return fmt.Errorf("lossyfs: %w", err)
		}
	}
	if err := f.Truncate(n.data.size); err != nil {
		_ = f.Close()
		return fmt.Errorf("lossyfs: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("lossyfs: %w", err)
	}
	return os.Chtimes(path, time.Time{}, n.mtime)
}
