package datadir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/fsm"
)

// SnapshotsDir is where raft's file snapshot store keeps snapshots in a
// data directory: one folder per snapshot, each with meta.json and
// state.bin.
const SnapshotsDir = "snapshots"

// Snapshot is one snapshot of a data directory, checked and decoded.
type Snapshot struct {
	ID          string
	Index, Term uint64
	Size        int64
	Servers     []raft.Server // the configuration at ConfigIndex
	ConfigIndex uint64
	// What the image holds, and its state hash (fsm.FSM.StateHash).
	Hash                        fsm.StateHash
	Brokers, Topics, Partitions int
	// Err is why the snapshot cannot be used: unreadable metadata, a
	// state.bin that does not match its checksum, or one that does not
	// decode. The fields above it are filled as far as they were read.
	Err error
}

// fileSnapshotMeta is raft's meta.json (raft.fileSnapshotMeta).
type fileSnapshotMeta struct {
	raft.SnapshotMeta
	CRC []byte
}

// Snapshots reads every complete snapshot of dir (a folder with the
// suffix .tmp is one raft did not finish and is left out), newest first as
// raft orders them (term, index, id).
func Snapshots(dir string) ([]Snapshot, error) {
	root := filepath.Join(dir, SnapshotsDir)
	ents, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Snapshot
	for _, e := range ents {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		s, _ := readSnapshot(filepath.Join(root, e.Name()), e.Name())
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Term != b.Term {
			return a.Term > b.Term
		}
		if a.Index != b.Index {
			return a.Index > b.Index
		}
		return a.ID > b.ID
	})
	return out, nil
}

// readSnapshot checks and decodes one snapshot folder; the FSM holds its
// image when Err is nil.
func readSnapshot(path, id string) (Snapshot, *fsm.FSM) {
	s := Snapshot{ID: id}
	fail := func(format string, a ...any) (Snapshot, *fsm.FSM) {
		s.Err = fmt.Errorf("snapshot %s: "+format, append([]any{id}, a...)...)
		return s, nil
	}
	raw, err := os.ReadFile(filepath.Join(path, "meta.json"))
	if err != nil {
		return fail("%v", err)
	}
	var m fileSnapshotMeta
	if err := json.Unmarshal(raw, &m); err != nil {
		return fail("meta.json: %v", err)
	}
	s.Index, s.Term, s.Size, s.ConfigIndex, s.Servers = m.Index, m.Term, m.Size, m.ConfigurationIndex, m.Configuration.Servers
	state, err := os.ReadFile(filepath.Join(path, "state.bin"))
	if err != nil {
		return fail("%v", err)
	}
	if int64(len(state)) != m.Size {
		return fail("state.bin holds %d bytes, meta.json says %d", len(state), m.Size)
	}
	h := crc64.New(crc64.MakeTable(crc64.ECMA))
	h.Write(state)
	if sum := h.Sum(nil); !bytes.Equal(sum, m.CRC) {
		return fail("state.bin's CRC-64 is %x, meta.json says %x", sum, m.CRC)
	}
	f := fsm.New(fsm.Options{})
	if err := f.Restore(io.NopCloser(bytes.NewReader(state))); err != nil {
		return fail("state.bin: %v", err)
	}
	s.Hash, _ = f.StateHash()
	f.View(func(im *fsm.Image) {
		s.Brokers, s.Topics, s.Partitions = len(im.Brokers()), im.NumTopics(), im.NumPartitions()
	})
	return s, f
}

func snapshotPath(dir, id string) string { return filepath.Join(dir, SnapshotsDir, id) }
