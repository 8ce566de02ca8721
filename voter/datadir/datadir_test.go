package datadir_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/raftlog/logstore"
	"github.com/ctrlquorum/ctrlquorum/voter/datadir"
	"github.com/ctrlquorum/ctrlquorum/voter/datadir/datadirtest"
)

// TestReadEveryStore writes a sample directory with each log store and
// reads it back offline: every entry decodes, the snapshot checks out,
// Verify finds nothing, and Replay arrives at the voter's own state hash.
func TestReadEveryStore(t *testing.T) {
	for _, store := range []rl.LogStore{rl.LogStoreSegments, rl.LogStoreWAL, rl.LogStoreBolt} {
		t.Run(string(store), func(t *testing.T) {
			dir := t.TempDir()
			s, err := datadirtest.Write(dir, store)
			if err != nil {
				t.Fatal(err)
			}
			types := map[rl.RecordType]bool{}
			var configs, last uint64
			got, err := datadir.Entries(dir, func(e datadir.Entry) error {
				if e.Err != nil {
					t.Errorf("index %d: %v", e.Index, e.Err)
				}
				if e.Index != last+1 && last != 0 {
					t.Errorf("index %d follows %d", e.Index, last)
				}
				last = e.Index
				if e.Type == raft.LogConfiguration && len(e.Servers) == 1 {
					configs++
				}
				for _, r := range e.Records {
					types[r.Type()] = true
				}
				return nil
			})
			if err != nil || got != store {
				t.Fatalf("Entries: store %q, %v; want %q", got, err, store)
			}
			if last != s.LastIndex || configs != 1 || len(types) < 16 {
				t.Fatalf("read up to %d with %d configurations and %d record types; the voter applied up to %d", last, configs, len(types), s.LastIndex)
			}
			snaps, err := datadir.Snapshots(dir)
			if err != nil || len(snaps) != 1 || snaps[0].Err != nil || snaps[0].Index != s.Snapshot || snaps[0].Topics != 1 || snaps[0].Brokers != 3 {
				t.Fatalf("snapshots: %+v, %v; want one at %d with 1 topic and 3 brokers", snaps, err, s.Snapshot)
			}
			r, err := datadir.Verify(dir, nil)
			if err != nil || r.Failed() || len(r.Problems) != 0 || r.Store != string(store) || r.Last != s.LastIndex {
				t.Fatalf("Verify: %+v, %v", r, err)
			}
			f, err := datadir.Replay(dir)
			if err != nil {
				t.Fatal(err)
			}
			if h, idx := f.StateHash(); h != s.Hash || idx != s.LastIndex {
				t.Fatalf("replayed to %s at %d; the voter had %s at %d", h, idx, s.Hash, s.LastIndex)
			}
		})
	}
}

// TestVerifyFindsDamage damages a sample directory's segments and its
// snapshot: Verify names the index of a damaged entry, tells a torn tail
// (which a start drops) from damage inside the log, and names a snapshot
// whose state does not match its checksum.
func TestVerifyFindsDamage(t *testing.T) {
	dir := t.TempDir()
	s, err := datadirtest.Write(dir, rl.LogStoreSegments)
	if err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, rl.LogDir, "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("segments: %v", segs)
	}
	// Find the frame of the entry five from the end through a scan.
	var offsets []int64
	var off int64
	if err := logstore.Scan(filepath.Join(dir, rl.LogDir), func(l *raft.Log) error {
		offsets = append(offsets, off)
		off += int64(8 + 37 + len(l.Data) + len(l.Extensions))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	damage := func(at int64) {
		t.Helper()
		b := append([]byte(nil), orig...)
		b[at] ^= 0xff
		if err := os.WriteFile(segs[0], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	victim := s.LastIndex - 4
	damage(offsets[len(offsets)-5] + 20)
	r, err := datadir.Verify(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Failed() || len(r.Problems) != 1 || r.Problems[0].Index != victim || r.Problems[0].Warning {
		t.Fatalf("damage inside the log at index %d: %+v", victim, r.Problems)
	}
	var de *logstore.DamageError
	if !errors.As(r.Problems[0].Err, &de) || !strings.Contains(r.Problems[0].String(), "index "+strconv.FormatUint(victim, 10)) {
		t.Fatalf("problem %q does not name index %d", r.Problems[0], victim)
	}
	if _, err := datadir.Replay(dir); err == nil {
		t.Fatal("Replay of a damaged log succeeded")
	}

	// The last frame damaged: a torn tail, a warning only.
	damage(offsets[len(offsets)-1] + 20)
	if r, err = datadir.Verify(dir, nil); err != nil || r.Failed() || len(r.Problems) != 1 || !r.Problems[0].Warning || r.Problems[0].Index != s.LastIndex {
		t.Fatalf("torn tail: %+v, %v", r.Problems, err)
	}

	// A snapshot that does not match its checksum.
	if err := os.WriteFile(segs[0], orig, 0o600); err != nil {
		t.Fatal(err)
	}
	states, _ := filepath.Glob(filepath.Join(dir, datadir.SnapshotsDir, "*", "state.bin"))
	if len(states) != 1 {
		t.Fatalf("snapshots: %v", states)
	}
	st, _ := os.ReadFile(states[0])
	st[len(st)/2] ^= 1
	if err := os.WriteFile(states[0], st, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err = datadir.Verify(dir, nil)
	if err != nil || !r.Failed() || len(r.Problems) != 1 || r.Problems[0].Snapshot == "" || !strings.Contains(r.Problems[0].String(), "CRC-64") {
		t.Fatalf("damaged snapshot: %+v, %v", r.Problems, err)
	}
}
