package raftlog

import (
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// boltPage is the page size of the bolt files (the OS page size bolt
// takes by default).
const boltPage = 4096

// countedLog counts a log store's appends, and a bolt log's syncs and
// writes.
type countedLog struct {
	raft.LogStore
	c    *IOCounters
	bolt *raftboltdb.BoltStore // the log's bolt file, if it is in one
}

func newCountedLog(log raft.LogStore, kind LogStore, bolt *raftboltdb.BoltStore, c *IOCounters) countedLog {
	l := countedLog{LogStore: log, c: c}
	if kind == LogStoreBolt {
		l.bolt = bolt
	}
	return l
}

func (l countedLog) StoreLogs(logs []*raft.Log) error {
	l.c.Appends.Add(1)
	l.c.Entries.Add(int64(len(logs)))
	return l.boltWrite(func() error { return l.LogStore.StoreLogs(logs) })
}

func (l countedLog) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

func (l countedLog) DeleteRange(min, max uint64) error {
	return l.boltWrite(func() error { return l.LogStore.DeleteRange(min, max) })
}

func (l countedLog) boltWrite(write func() error) error {
	if l.bolt == nil {
		return write()
	}
	return boltWrite(l.bolt, l.c, write)
}

// boltWrite runs one write transaction of b and counts its syncs and the
// bytes of the pages it wrote.
func boltWrite(b *raftboltdb.BoltStore, c *IOCounters, write func() error) error {
	before := b.Stats().TxStats.PageAlloc
	err := write()
	c.Syncs.Add(2)
	c.Written.Add(int64(b.Stats().TxStats.PageAlloc-before) + boltPage)
	return err
}

// IsMonotonic passes the store's own answer on to raft.
func (l countedLog) IsMonotonic() bool {
	m, ok := l.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// countedStable counts the syncs and writes of the stable store.
type countedStable struct {
	bolt *raftboltdb.BoltStore
	c    *IOCounters
}

func (s countedStable) Set(k, v []byte) error {
	return boltWrite(s.bolt, s.c, func() error { return s.bolt.Set(k, v) })
}

func (s countedStable) Get(k []byte) ([]byte, error) { return s.bolt.Get(k) }

func (s countedStable) SetUint64(k []byte, v uint64) error {
	return boltWrite(s.bolt, s.c, func() error { return s.bolt.SetUint64(k, v) })
}

func (s countedStable) GetUint64(k []byte) (uint64, error) { return s.bolt.GetUint64(k) }
