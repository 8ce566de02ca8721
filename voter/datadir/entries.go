package datadir

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Entry is one raft log entry, decoded.
type Entry struct {
	Index, Term uint64
	Type        raft.LogType
	AppendedAt  time.Time // zero when the store does not keep it
	Bytes       int       // the entry's data
	// Records is a command entry's batch of records.
	Records []raftlog.Record
	// Servers is a configuration entry's servers.
	Servers []raft.Server
	// Err is why the entry's data does not decode; a voter applying the
	// entry would halt on it.
	Err error
}

// Entries calls fn with each entry of dir's raft log, decoded, and returns
// the store that holds the log. Damage in the store itself ends the walk
// with an error after the entries before it (see raftlog.ReadLog); an
// entry whose data does not decode is passed to fn with Err set.
func Entries(dir string, fn func(Entry) error) (raftlog.LogStore, error) {
	return raftlog.ReadLog(dir, func(l *raft.Log) error {
		return fn(decodeEntry(l))
	})
}

func decodeEntry(l *raft.Log) Entry {
	e := Entry{Index: l.Index, Term: l.Term, Type: l.Type, AppendedAt: l.AppendedAt, Bytes: len(l.Data)}
	switch l.Type {
	case raft.LogCommand:
		b, err := raftlog.DecodeBatch(l.Data)
		e.Records, e.Err = b, err
	case raft.LogConfiguration:
		e.Servers, e.Err = decodeConfiguration(l.Data)
	}
	return e
}

// decodeConfiguration is raft.DecodeConfiguration, which panics on bad
// data, with the panic made an error.
func decodeConfiguration(data []byte) (servers []raft.Server, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("configuration: %v", r)
		}
	}()
	if len(data) == 0 {
		return nil, errors.New("configuration: no data")
	}
	return raft.DecodeConfiguration(data).Servers, nil
}

// raftReadLog is raftlog.ReadLog, undecoded.
var raftReadLog = raftlog.ReadLog
