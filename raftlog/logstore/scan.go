package logstore

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/hashicorp/raft"
)

// DamageError is damage Scan found in a log: where it is, the index of the
// entry expected there, and whether Open would drop it as the torn tail of
// an append a crash interrupted (Torn) or refuse the log.
type DamageError struct {
	Path   string
	Offset int64
	Index  uint64 // the entry expected at Offset
	Torn   bool
	Reason error
}

func (e *DamageError) Error() string {
	if e.Torn {
		return fmt.Sprintf("%s at offset %d (index %d on): the torn tail of an append a crash interrupted, never acknowledged; the next start drops it: %v",
			e.Path, e.Offset, e.Index, e.Reason)
	}
	return fmt.Sprintf("%s is damaged at offset %d (index %d on): %v", e.Path, e.Offset, e.Index, e.Reason)
}

func (e *DamageError) Unwrap() error { return e.Reason }

// Scan reads the log kept in dir as Open checks it, but without changing
// anything and without its lock, so that a tool may read a directory whose
// voter is stopped (or, at its own risk, running). It calls fn with every
// entry in index order; the entry's Data aliases a buffer fn must not
// keep. It stops at the first damage and returns it as a *DamageError, or
// at fn's first error.
func Scan(dir string, fn func(*raft.Log) error) error {
	names, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("logstore: list %s: %w", dir, err)
	}
	var segs []*segment
	defer func() {
		for _, s := range segs {
			_ = s.f.Close()
		}
	}()
	for _, e := range names {
		first, ok := parseSegmentName(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("logstore: open %s: %w", path, err)
		}
		segs = append(segs, &segment{path: path, f: f, first: first, noSync: true})
	}
	slices.SortFunc(segs, func(a, b *segment) int { return cmp.Compare(a.first, b.first) })
	var l raft.Log
	for i, seg := range segs {
		damage, err := seg.scan()
		if ce, ok := err.(*corruptError); ok {
			return &DamageError{Path: ce.path, Offset: ce.offset, Index: seg.first + seg.entries(), Reason: ce.err}
		}
		if err != nil {
			return err
		}
		if i > 0 {
			prev := segs[i-1]
			if prev.entries() == 0 || seg.first != prev.last()+1 {
				return &DamageError{Path: seg.path, Index: seg.first,
					Reason: fmt.Errorf("segment starts at index %d but the one before it ends at %d", seg.first, prev.first+prev.entries()-1)}
			}
		}
		for k := range seg.offsets {
			start, end := seg.frameBounds(seg.first + uint64(k))
			frame := make([]byte, end-start)
			if _, err := seg.f.ReadAt(frame, start); err != nil {
				return fmt.Errorf("logstore: read %s: %w", seg.path, err)
			}
			if err := decodeFrame(frame, &l); err != nil {
				return &DamageError{Path: seg.path, Offset: start, Index: seg.first + uint64(k), Reason: err}
			}
			if err := fn(&l); err != nil {
				return err
			}
		}
		if damage != nil {
			d := &DamageError{Path: seg.path, Offset: damage.offset, Index: seg.first + seg.entries(), Torn: i == len(segs)-1, Reason: damage.reason}
			return d
		}
	}
	return nil
}
