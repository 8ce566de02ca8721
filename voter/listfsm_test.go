package voter_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// listFSM is the smallest useful replicated state: the ordered list of
// command payloads it has applied. Two voters agree iff their lists (and so
// their hashes) are equal. It records every Restore so tests can tell a
// snapshot install from a log replay.
//
// A payload that is already in the list is not appended again. That makes
// re-proposing an entry whose outcome was lost with a leader change safe,
// and it is deterministic because it depends only on the replicated state.
type listFSM struct {
	mu       sync.Mutex
	entries  [][]byte
	position map[string]int // payload -> 1-based position in entries
	restores []int          // number of entries each Restore loaded
}

var _ raft.BatchingFSM = (*listFSM)(nil)

func newListFSM(string) raft.FSM { return &listFSM{position: map[string]int{}} }

func (f *listFSM) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch returns, for each command, its position in the list: a value
// the leader's ApplyFuture exposes, so tests can check that the response
// really came from this FSM.
func (f *listFSM) ApplyBatch(logs []*raft.Log) []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]any, len(logs))
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		if pos, dup := f.position[string(l.Data)]; dup {
			out[i] = pos
			continue
		}
		f.entries = append(f.entries, bytes.Clone(l.Data))
		f.position[string(l.Data)] = len(f.entries)
		out[i] = len(f.entries)
	}
	return out
}

func (f *listFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// Entries are never mutated after append, so sharing them is safe.
	return listSnapshot(append([][]byte(nil), f.entries...)), nil
}

func (f *listFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var n uint32
	if err := binary.Read(rc, binary.BigEndian, &n); err != nil {
		return fmt.Errorf("read count: %w", err)
	}
	entries := make([][]byte, 0, n)
	position := make(map[string]int, n)
	for range n {
		var size uint32
		if err := binary.Read(rc, binary.BigEndian, &size); err != nil {
			return fmt.Errorf("read size: %w", err)
		}
		b := make([]byte, size)
		if _, err := io.ReadFull(rc, b); err != nil {
			return fmt.Errorf("read entry: %w", err)
		}
		entries = append(entries, b)
		position[string(b)] = len(entries)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries = entries
	f.position = position
	f.restores = append(f.restores, len(entries))
	return nil
}

// Len is the number of applied commands.
func (f *listFSM) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.entries)
}

// Hash covers every entry and its boundaries, in order.
func (f *listFSM) Hash() [32]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := sha256.New()
	for _, e := range f.entries {
		_ = binary.Write(h, binary.BigEndian, uint32(len(e)))
		h.Write(e)
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// Entries returns a copy of the applied payloads as strings.
func (f *listFSM) Entries() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.entries))
	for i, e := range f.entries {
		out[i] = string(e)
	}
	return out
}

// Restores returns how many entries each Restore call loaded.
func (f *listFSM) Restores() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.restores...)
}

type listSnapshot [][]byte

func (s listSnapshot) Persist(sink raft.SnapshotSink) error {
	var buf bytes.Buffer
	_ = binary.Write(&buf, binary.BigEndian, uint32(len(s)))
	for _, e := range s {
		_ = binary.Write(&buf, binary.BigEndian, uint32(len(e)))
		buf.Write(e)
	}
	if _, err := sink.Write(buf.Bytes()); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (listSnapshot) Release() {}
