package raftlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/ctrlquorum/ctrlquorum/raftlog/logstore"
)

// moveBatch is how many entries one append of the move writes.
const moveBatch = 1024

// moveLogOutOfBolt moves the raft log of a data directory written when the
// log lived in raft.db into LogDir.
//
// Whenever bolt holds log entries, they are the log: raft is started only
// after they are gone from bolt, so a LogDir found next to them either holds
// the same entries (a move interrupted after its rename) or older ones (the
// directory was run by a build that kept the log in bolt since). Either
// way the entries are copied again and replace LogDir. Every step can be
// interrupted:
//
//  1. the entries are copied into LogDir.moving, which a later attempt
//     throws away and starts again;
//  2. an existing LogDir is renamed to LogDir.replaced, and LogDir.moving
//     to LogDir;
//  3. the entries are deleted from bolt, which commits the move, and
//     LogDir.replaced is removed.
func moveLogOutOfBolt(dir string, bolt *raftboltdb.BoltStore, logger hclog.Logger) error {
	first, err := bolt.FirstIndex()
	if err != nil {
		return fmt.Errorf("raftlog: read %s: %w", BoltFile, err)
	}
	last, err := bolt.LastIndex()
	if err != nil {
		return fmt.Errorf("raftlog: read %s: %w", BoltFile, err)
	}
	logDir := filepath.Join(dir, LogDir)
	replaced := logDir + ".replaced"
	if last == 0 {
		return removeDir(replaced)
	}
	logger.Info("moving the raft log out of the bolt file into its own files", "from", BoltFile, "to", LogDir, "first", first, "last", last)
	if err := copyBoltLog(bolt, first, last, logDir, logger); err != nil {
		return err
	}
	if err := bolt.DeleteRange(first, last); err != nil {
		return fmt.Errorf("raftlog: drop the moved log from %s: %w", BoltFile, err)
	}
	logger.Info("raft log moved; the bolt file now holds only the term and vote", "entries", last-first+1)
	return removeDir(replaced)
}

func removeDir(path string) error {
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("raftlog: %w", err)
	}
	return nil
}

func copyBoltLog(bolt *raftboltdb.BoltStore, first, last uint64, logDir string, logger hclog.Logger) error {
	tmp := logDir + ".moving"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("raftlog: clear an earlier attempt at moving the log: %w", err)
	}
	dst, err := logstore.Open(tmp, logstore.Options{Logger: logger})
	if err != nil {
		return fmt.Errorf("raftlog: %w", err)
	}
	batch := make([]*raft.Log, 0, moveBatch)
	flush := func() error {
		if err := dst.StoreLogs(batch); err != nil {
			return fmt.Errorf("raftlog: copy the log: %w", err)
		}
		batch = batch[:0]
		return nil
	}
	for i := first; i <= last; i++ {
		l := new(raft.Log)
		err := bolt.GetLog(i, l)
		if errors.Is(err, raft.ErrLogNotFound) {
			// Bolt allowed gaps: raft left the entries from before an
			// installed snapshot behind the gap. Only those after the
			// last gap belong to the log; the ones before are covered by
			// the snapshot.
			batch = batch[:0]
			if err := dst.DeleteRange(0, i); err != nil {
				_ = dst.Close()
				return fmt.Errorf("raftlog: copy the log: %w", err)
			}
			continue
		}
		if err != nil {
			_ = dst.Close()
			return fmt.Errorf("raftlog: read entry %d from %s: %w", i, BoltFile, err)
		}
		if batch = append(batch, l); len(batch) == moveBatch {
			if err := flush(); err != nil {
				_ = dst.Close()
				return err
			}
		}
	}
	if len(batch) > 0 {
		if err := flush(); err != nil {
			_ = dst.Close()
			return err
		}
	}
	if err := dst.Close(); err != nil {
		return fmt.Errorf("raftlog: %w", err)
	}
	replaced := logDir + ".replaced"
	if err := os.RemoveAll(replaced); err != nil {
		return fmt.Errorf("raftlog: %w", err)
	}
	if err := os.Rename(logDir, replaced); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("raftlog: set the old log directory aside: %w", err)
	}
	if err := os.Rename(tmp, logDir); err != nil {
		return fmt.Errorf("raftlog: %w", err)
	}
	return logstore.SyncDir(filepath.Dir(logDir))
}
