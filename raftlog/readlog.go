package raftlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/ctrlquorum/ctrlquorum/raftlog/logstore"
)

// ReadLog reads the raft log of the data directory dir offline, calling fn
// with each entry in index order, and returns the store that holds it (""
// when there is no log). It changes nothing in dir: the segments are read
// as logstore.Scan reads them, raft.db is opened read-only, and raft-wal,
// which cannot open read-only, is read from a copy of wal/ in a temporary
// directory (which it may repair as a start would). The store is the one
// OpenStores would find (a raft.db with entries, else log/, else wal/).
// Damage in the segments comes back as a *logstore.DamageError after the
// entries before it; a directory in use by a running voter is refused
// rather than waited for where its store holds a lock (bolt). The entry
// passed to fn is reused: fn must copy what it keeps.
func ReadLog(dir string, fn func(*raft.Log) error) (LogStore, error) {
	if _, err := os.Stat(dir); err != nil {
		return "", err
	}
	bolt := filepath.Join(dir, BoltFile)
	if ok, err := exists(bolt); err != nil {
		return "", err
	} else if ok {
		db, err := raftboltdb.New(raftboltdb.Options{Path: bolt, BoltOptions: &bbolt.Options{ReadOnly: true, Timeout: 2 * time.Second}})
		if errors.Is(err, bbolt.ErrTimeout) {
			return "", fmt.Errorf("raftlog: %s is locked: stop the voter using %s first", bolt, dir)
		}
		if err != nil {
			return "", fmt.Errorf("raftlog: open %s read-only: %w", bolt, err)
		}
		last, err := db.LastIndex()
		if err == nil && last != 0 {
			err = readEach(db, fn)
			return LogStoreBolt, errors.Join(err, db.Close())
		}
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil && !errors.Is(err, bbolt.ErrBucketNotFound) {
			return "", fmt.Errorf("raftlog: read %s: %w", bolt, err)
		}
	}
	if ok, err := exists(storePath(dir, LogStoreSegments)); err != nil {
		return "", err
	} else if ok {
		return LogStoreSegments, logstore.Scan(storePath(dir, LogStoreSegments), fn)
	}
	if ok, err := exists(storePath(dir, LogStoreWAL)); err != nil {
		return "", err
	} else if ok {
		tmp, err := os.MkdirTemp("", "ctrlquorum-wal-copy-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(tmp)
		if err := os.CopyFS(tmp, os.DirFS(storePath(dir, LogStoreWAL))); err != nil {
			return "", fmt.Errorf("raftlog: copy %s: %w", storePath(dir, LogStoreWAL), err)
		}
		w, err := openWAL(tmp, 0, nil, hclog.NewNullLogger())
		if err != nil {
			return LogStoreWAL, err
		}
		return LogStoreWAL, errors.Join(readEach(w, fn), w.Close())
	}
	return "", nil
}

// readEach calls fn with each entry of s from its first to its last.
func readEach(s raft.LogStore, fn func(*raft.Log) error) error {
	first, err := s.FirstIndex()
	if err != nil {
		return err
	}
	last, err := s.LastIndex()
	if err != nil || last == 0 {
		return err
	}
	var l raft.Log
	for i := first; i <= last; i++ {
		if err := s.GetLog(i, &l); err != nil {
			return fmt.Errorf("index %d: %w", i, err)
		}
		if err := fn(&l); err != nil {
			return err
		}
	}
	return nil
}
