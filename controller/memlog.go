package controller

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/fsm"
)

// MemLog is a Log that applies entries straight to an FSM in the calling
// goroutine, with indexes counting up from 1. It has no raft, no disk and
// no network: it is for tests of controller logic and for benchmarks that
// measure the controller alone. Depose makes every later Apply fail as a
// deposed raft leader's would.
type MemLog struct {
	mu      sync.Mutex
	fsm     *fsm.FSM
	index   uint64
	deposed bool
	// Entries keeps every applied entry's data when Keep is set.
	Keep    bool
	Entries [][]byte
}

// NewMemLog returns a MemLog over f, continuing from f's applied index.
func NewMemLog(f *fsm.FSM) *MemLog { return &MemLog{fsm: f, index: f.AppliedIndex()} }

// Apply implements Log.
func (m *MemLog) Apply(data []byte, _ time.Duration) raft.ApplyFuture {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.deposed {
		return &memFuture{err: raft.ErrNotLeader}
	}
	m.index++
	if m.Keep {
		m.Entries = append(m.Entries, data)
	}
	resp := m.fsm.Apply(&raft.Log{Index: m.index, Term: 1, Type: raft.LogCommand, Data: data})
	return &memFuture{index: m.index, resp: resp}
}

// Barrier implements Log.
func (m *MemLog) Barrier(time.Duration) raft.Future {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.deposed {
		return &memFuture{err: raft.ErrNotLeader}
	}
	return &memFuture{}
}

// Depose makes later calls fail with raft.ErrNotLeader; Restore undoes it.
func (m *MemLog) Depose()  { m.mu.Lock(); m.deposed = true; m.mu.Unlock() }
func (m *MemLog) Restore() { m.mu.Lock(); m.deposed = false; m.mu.Unlock() }

// Index returns the last index applied.
func (m *MemLog) Index() uint64 { m.mu.Lock(); defer m.mu.Unlock(); return m.index }

type memFuture struct {
	err   error
	index uint64
	resp  interface{}
}

func (f *memFuture) Error() error          { return f.err }
func (f *memFuture) Index() uint64         { return f.index }
func (f *memFuture) Response() interface{} { return f.resp }
