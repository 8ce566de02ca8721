package datadir

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	"github.com/ctrlquorum/ctrlquorum/raftlog/logstore"
	"github.com/ctrlquorum/ctrlquorum/voter/meta"
)

// Problem is one thing Verify found wrong with a data directory.
type Problem struct {
	// Index is the log index the problem is at (0: none, as for a
	// snapshot or meta.properties).
	Index uint64
	// Snapshot names the snapshot the problem is in, if it is in one.
	Snapshot string
	Err      error
	// Warning marks what a voter recovers from by itself on start: the
	// torn tail of an append a crash interrupted, never acknowledged.
	Warning bool
}

func (p Problem) String() string {
	switch {
	case p.Snapshot != "":
		return p.Err.Error()
	case p.Index != 0:
		return fmt.Sprintf("index %d: %v", p.Index, p.Err)
	}
	return p.Err.Error()
}

// Report is what Verify read.
type Report struct {
	Store       string // the log store that holds the log ("" when none)
	First, Last uint64 // the log's first and last index (0 when empty)
	Entries     int
	Records     int
	Snapshots   int
	Problems    []Problem
}

// Failed reports whether a problem other than a warning was found.
func (r *Report) Failed() bool {
	for _, p := range r.Problems {
		if !p.Warning {
			return true
		}
	}
	return false
}

// Verify checks a data directory: meta.properties when there is one,
// every log entry (the store's checksum, as ReadLog checks it, index and
// term order, and that its data decodes), every snapshot (raft's checksum
// and the image decoding), and that the log follows on from the newest
// usable snapshot with no gap. progress, when set, is called every 10,000
// entries with the last index read.
func Verify(dir string, progress func(index uint64)) (*Report, error) {
	r := &Report{}
	if _, err := meta.Read(dir); err != nil && !errors.Is(err, meta.ErrUnformatted) {
		r.Problems = append(r.Problems, Problem{Err: err})
	}
	snaps, err := Snapshots(dir)
	if err != nil {
		return nil, err
	}
	r.Snapshots = len(snaps)
	var base uint64 // the newest usable snapshot's index
	for _, s := range snaps {
		if s.Err != nil {
			r.Problems = append(r.Problems, Problem{Snapshot: s.ID, Err: s.Err})
			continue
		}
		base = max(base, s.Index)
	}
	var prev raft.Log
	store, err := Entries(dir, func(e Entry) error {
		if r.Entries > 0 && (e.Index != prev.Index+1 || e.Term < prev.Term) {
			r.Problems = append(r.Problems, Problem{Index: e.Index, Err: fmt.Errorf("follows index %d of term %d, with term %d", prev.Index, prev.Term, e.Term)})
		}
		if r.Entries == 0 {
			r.First = e.Index
		}
		r.Entries++
		r.Last = e.Index
		prev.Index, prev.Term = e.Index, e.Term
		r.Records += len(e.Records)
		if e.Err != nil {
			r.Problems = append(r.Problems, Problem{Index: e.Index, Err: fmt.Errorf("%s does not decode: %w", e.Type, e.Err)})
		}
		if progress != nil && r.Entries%10000 == 0 {
			progress(e.Index)
		}
		return nil
	})
	r.Store = string(store)
	var damage *logstore.DamageError
	switch {
	case errors.As(err, &damage):
		r.Problems = append(r.Problems, Problem{Index: damage.Index, Err: damage, Warning: damage.Torn})
	case err != nil:
		r.Problems = append(r.Problems, Problem{Index: r.Last + 1, Err: err})
	}
	if r.Entries > 0 && r.First > base+1 {
		r.Problems = append(r.Problems, Problem{Index: base + 1,
			Err: fmt.Errorf("entries %d to %d are in neither the log (which starts at %d) nor a usable snapshot (newest at %d)", base+1, r.First-1, r.First, base)})
	}
	return r, nil
}

// Replay builds the image dir holds, as a voter starting on it would: the
// newest snapshot that reads, then every log entry after it. Entries past
// what was committed are applied too (an offline reader cannot know the
// commit index); on a cleanly stopped voter there are none that matter.
// A record that does not decode halts the FSM as on a voter: Replay
// returns that error.
func Replay(dir string) (*fsm.FSM, error) {
	snaps, err := Snapshots(dir)
	if err != nil {
		return nil, err
	}
	f := fsm.New(fsm.Options{})
	for _, s := range snaps {
		if s.Err != nil {
			continue
		}
		if _, g := readSnapshot(snapshotPath(dir, s.ID), s.ID); g != nil {
			f = g
			break
		}
	}
	from := f.AppliedIndex()
	_, err = raftReadLog(dir, func(l *raft.Log) error {
		if l.Index <= from {
			return nil
		}
		if res, ok := f.Apply(l).(error); ok && res != nil && f.Halted() != nil {
			return res
		}
		return nil
	})
	if err != nil {
		return f, err
	}
	return f, f.Halted()
}
