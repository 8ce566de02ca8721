package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"

	"github.com/ctrlquorum/ctrlquorum/raftlog/logstore"
)

// walFrameHeaderBytes is the size of a frame header in raft-wal's segment
// format (segment/format.go): a type byte, three reserved bytes and a
// length. An all-zero header reads as the end of the frames.
const walFrameHeaderBytes = 8

// openWAL opens the raft-wal log kept in dir, after repairing what a
// crash can leave that raft-wal v0.4.1 does not recover from (see
// repairWAL). Its Close closes the WAL's meta database too.
//
// wrap, when set, wraps raft-wal's file system (BenchmarkStoreAppend tries
// other ways of making and syncing its files).
func openWAL(dir string, segmentBytes int, counters *IOCounters, logger hclog.Logger, wrap ...func(types.VFS) types.VFS) (*wal.WAL, error) {
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("raftlog: create %s: %w", dir, err)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		// The new directory's name is durable only once its parent is.
		if err := logstore.SyncDir(filepath.Dir(dir)); err != nil {
			return nil, err
		}
	}
	if segmentBytes <= 0 {
		segmentBytes = wal.DefaultSegmentSize
	}
	var vfs types.VFS = walfs.New()
	for _, w := range wrap {
		vfs = w(vfs)
	}
	var meta types.MetaStore = &metadb.BoltMetaDB{}
	if counters != nil {
		vfs = walVFS{VFS: vfs, c: counters}
		meta = countingMeta{MetaStore: meta, c: counters}
	}
	filer := &recoveringFiler{Filer: segment.NewFiler(dir, vfs)}
	if err := repairWAL(dir, segmentBytes, filer, logger); err != nil {
		filer.closeTail()
		return nil, fmt.Errorf("raftlog: repair the raft log in %s: %w", dir, err)
	}
	w, err := wal.Open(dir, wal.WithLogger(logger), wal.WithSegmentSize(segmentBytes),
		wal.WithSegmentFiler(filer), wal.WithMetaStore(meta))
	filer.closeTail()
	if err != nil {
		_ = meta.Close()
		return nil, fmt.Errorf("raftlog: open %s: %w", dir, err)
	}
	return w, nil
}

// recoveringFiler hands wal.Open the open tail segment repairWAL already
// recovered, which reads the whole segment, instead of reading it again.
type recoveringFiler struct {
	*segment.Filer
	tail types.SegmentWriter
	info types.SegmentInfo
}

func (f *recoveringFiler) RecoverTail(info types.SegmentInfo) (types.SegmentWriter, error) {
	if t := f.tail; t != nil && info.ID == f.info.ID && info.BaseIndex == f.info.BaseIndex {
		f.tail = nil
		return t, nil
	}
	return f.Filer.RecoverTail(info)
}

func (f *recoveringFiler) closeTail() {
	if f.tail != nil {
		_ = f.tail.Close()
		f.tail = nil
	}
}

// repairWAL brings a raft-wal directory back to a state raft-wal v0.4.1
// opens and appends to, from two it does not:
//
//   - The last segment is sealed in its file but not in the meta
//     database. Sealing writes an index block into the segment with its
//     append's fsync, then records the seal in the meta database: from
//     the background rotation after an append that filled the segment,
//     and in the same step as a tail truncation (DeleteRange up to the
//     last entry, what a follower does with a conflicting suffix). A
//     process killed between the two reopens with a segment whose file
//     says sealed and whose meta entry says open: wal.Open succeeds,
//     reads work, and every StoreLogs fails with "segment is sealed" for
//     ever. The repair completes the rotation the kill interrupted, once
//     it has read every entry back through the index block; an index
//     block that does not read back was never committed (the kill cut
//     the append that carried it), and its frame header is zeroed so that
//     the segment reads as open again.
//   - A segment is sealed in the meta database without an index block
//     (IndexStart 0): raft-wal v0.4.0 sealed the last segment that way on
//     every tail truncation, and after a restart every read of it failed
//     with "sealed segment has no index block" (raft panics at start).
//     The repair writes the index block the seal lacks.
func repairWAL(dir string, segmentBytes int, filer *recoveringFiler, logger hclog.Logger) error {
	if _, err := os.Stat(filepath.Join(dir, metadb.FileName)); errors.Is(err, os.ErrNotExist) {
		return nil // a new WAL
	}
	meta := &metadb.BoltMetaDB{}
	state, err := meta.Load(dir)
	if err != nil {
		_ = meta.Close()
		return err
	}
	changed, err := repairSegments(dir, &state, segmentBytes, filer, logger)
	if err == nil && changed {
		err = meta.CommitState(state)
	}
	return errors.Join(err, meta.Close())
}

func repairSegments(dir string, state *types.PersistentState, segmentBytes int, filer *recoveringFiler, logger hclog.Logger) (bool, error) {
	changed := false
	for i := range state.Segments {
		si := &state.Segments[i]
		if si.SealTime.IsZero() || si.IndexStart != 0 {
			continue
		}
		w, err := filer.RecoverTail(*si)
		if err != nil {
			return false, fmt.Errorf("segment %s: %w", segment.FileName(*si), err)
		}
		start, err := w.ForceSeal()
		_ = w.Close()
		if err != nil {
			return false, fmt.Errorf("segment %s: write its index block: %w", segment.FileName(*si), err)
		}
		logger.Warn("raft log segment was sealed without an index block (raft-wal v0.4.0 after a tail truncation): wrote it",
			"segment", segment.FileName(*si), "index_start", start)
		si.IndexStart = start
		changed = true
	}
	n := len(state.Segments)
	if n == 0 || !state.Segments[n-1].SealTime.IsZero() {
		return changed, nil
	}
	tail := state.Segments[n-1]
	w, err := filer.RecoverTail(tail)
	if errors.Is(err, os.ErrNotExist) {
		return changed, nil // created by wal.Open
	}
	if err != nil {
		return false, fmt.Errorf("segment %s: %w", segment.FileName(tail), err)
	}
	sealed, start, err := w.Sealed()
	last := w.LastIndex()
	if err != nil {
		_ = w.Close()
		return false, err
	}
	if !sealed {
		filer.tail, filer.info = w, tail
		return changed, nil
	}
	ok, err := indexReadsBack(filer.Filer, tail, start, last, w)
	_ = w.Close()
	if err != nil {
		return false, err
	}
	name := segment.FileName(tail)
	if !ok {
		logger.Warn("raft log segment ends in an index block its append did not commit: dropping it", "segment", name, "index_start", start)
		if err := zeroFrameHeader(filepath.Join(dir, name), int64(start)-walFrameHeaderBytes); err != nil {
			return false, err
		}
		w, err := filer.RecoverTail(tail)
		if err != nil {
			return false, fmt.Errorf("segment %s: %w", name, err)
		}
		sealed, _, _ := w.Sealed()
		_ = w.Close()
		if sealed {
			return false, fmt.Errorf("segment %s still reads as sealed", name)
		}
		return changed, nil
	}
	logger.Warn("raft log segment was sealed but the rotation after it did not happen: completing it", "segment", name, "last", last)
	now := time.Now()
	tail.SealTime, tail.IndexStart, tail.MaxIndex = now, start, last
	state.Segments[n-1] = tail
	state.Segments = append(state.Segments, types.SegmentInfo{
		ID: state.NextSegmentID, BaseIndex: last + 1, MinIndex: last + 1,
		Codec: tail.Codec, SizeLimit: uint32(segmentBytes), CreateTime: now,
	})
	state.NextSegmentID++
	return true, nil
}

// indexReadsBack reports whether every entry of the segment reads the same
// through the index block at start as through the frames its recovery
// scanned.
func indexReadsBack(filer *segment.Filer, info types.SegmentInfo, start, last uint64, scanned types.SegmentReader) (bool, error) {
	if last < info.MinIndex {
		return false, nil
	}
	info.SealTime, info.IndexStart, info.MaxIndex = time.Now(), start, last
	r, err := filer.Open(info)
	if err != nil {
		return false, nil
	}
	defer r.Close()
	for i := info.MinIndex; i <= last; i++ {
		want, err := scanned.GetLog(i)
		if err != nil {
			return false, fmt.Errorf("segment %s: read entry %d: %w", segment.FileName(info), i, err)
		}
		got, err := r.GetLog(i)
		same := err == nil && bytes.Equal(got.Bs, want.Bs)
		want.Close()
		if err == nil {
			got.Close()
		}
		if !same {
			return false, nil
		}
	}
	return true, nil
}

func zeroFrameHeader(path string, off int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, walFrameHeaderBytes), off); err != nil {
		return err
	}
	return f.Sync()
}

// countingMeta counts the syncs of raft-wal's meta database, a bolt file:
// two per write transaction (its pages, then its meta page), and as
// written two pages of 4 KiB.
type countingMeta struct {
	types.MetaStore
	c *IOCounters
}

func (m countingMeta) CommitState(s types.PersistentState) error {
	m.c.Syncs.Add(2)
	m.c.Written.Add(2 * boltPage)
	return m.MetaStore.CommitState(s)
}

func (m countingMeta) SetStable(k, v []byte) error {
	m.c.Syncs.Add(2)
	m.c.Written.Add(2 * boltPage)
	return m.MetaStore.SetStable(k, v)
}

// walVFS is raft-wal's file system counting, into c, the syncs of its
// segment files and the bytes written to them: a new file's first Sync
// syncs its directory too (see raft-wal's fs.File), and so does a delete.
type walVFS struct {
	types.VFS
	c *IOCounters
}

func (v walVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return &walFile{WritableFile: f, c: v.c, new: true}, nil
}

func (v walVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return &walFile{WritableFile: f, c: v.c}, nil
}

func (v walVFS) Delete(dir, name string) error {
	v.c.Syncs.Add(1)
	return v.VFS.Delete(dir, name)
}

type walFile struct {
	types.WritableFile
	c   *IOCounters
	new bool // the next Sync syncs the directory too
}

func (f *walFile) WriteAt(p []byte, off int64) (int, error) {
	f.c.Written.Add(int64(len(p)))
	return f.WritableFile.WriteAt(p, off)
}

func (f *walFile) Sync() error {
	f.c.Syncs.Add(1)
	if f.new {
		f.new = false
		f.c.Syncs.Add(1)
	}
	return f.WritableFile.Sync()
}
