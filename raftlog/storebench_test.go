package raftlog

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/hashicorp/raft-wal/types"
	"golang.org/x/sys/unix"

	"github.com/ctrlquorum/ctrlquorum/raftlog/logstore"
)

// BenchmarkStoreAppend measures the log stores without raft: three stores
// (a leader's and two followers' worth, on the one disk) each append b.N
// batches of 27 entries of 700 bytes at the same time, about one
// CreateTopics round. The raft-wal variants try its file handling: as it
// comes (fallocate'd segments, fsync), with fdatasync, with segments
// extended by zeros written ahead instead of fallocate, and both.
//
//	go test -run '^$' -bench StoreAppend -benchtime 2000x -count 3 ./raftlog
func BenchmarkStoreAppend(b *testing.B) {
	type opener func(b *testing.B, dir string, c *IOCounters) raft.LogStore
	walWith := func(t walTuning) opener {
		return func(b *testing.B, dir string, c *IOCounters) raft.LogStore {
			w, err := openWAL(filepath.Join(dir, WALDir), 0, c, hclog.NewNullLogger(), func(v types.VFS) types.VFS { return tunedVFS{VFS: v, t: t} })
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = w.Close() })
			return w
		}
	}
	variants := []struct {
		name string
		open opener
	}{
		{"segments", func(b *testing.B, dir string, c *IOCounters) raft.LogStore {
			s, err := logstore.Open(filepath.Join(dir, LogDir), logstore.Options{Syncs: &c.Syncs, Written: &c.Written})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{"wal", walWith(walTuning{})},
		{"wal-fdatasync", walWith(walTuning{fdatasync: true})},
		{"wal-zeroahead", walWith(walTuning{zeroAhead: true})},
		{"wal-fdatasync-zeroahead", walWith(walTuning{fdatasync: true, zeroAhead: true})},
		{"bolt", func(b *testing.B, dir string, c *IOCounters) raft.LogStore {
			s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, BoltFile)})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return newCountedLog(s, LogStoreBolt, s, c)
		}},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			const stores, perBatch = 3, 27
			data := make([]byte, 700)
			var c IOCounters
			logs := make([]raft.LogStore, stores)
			for i := range logs {
				logs[i] = v.open(b, b.TempDir(), &c)
			}
			var wg sync.WaitGroup
			b.ResetTimer()
			cpu0, syncs0, written0, start := benchCPU(), c.Syncs.Load(), c.Written.Load(), time.Now()
			for _, s := range logs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					batch := make([]*raft.Log, perBatch)
					for n := range b.N {
						for i := range batch {
							batch[i] = &raft.Log{Index: uint64(n*perBatch + i + 1), Term: 1, Type: raft.LogCommand, Data: data}
						}
						if err := s.StoreLogs(batch); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed, cpu := time.Since(start), benchCPU()-cpu0
			b.StopTimer()
			appends := float64(b.N * stores)
			b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N), "us/append")
			b.ReportMetric(float64(cpu.Microseconds())/appends, "cpu-us/append")
			b.ReportMetric(float64(c.Syncs.Load()-syncs0)/appends, "syncs/append")
			b.ReportMetric(float64(c.Written.Load()-written0)/appends, "written-B/append")
		})
	}
}

func benchCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// walTuning changes how raft-wal's segment files are made and synced.
type walTuning struct {
	// fdatasync in place of fsync: raft-wal's File.Sync is os.File.Sync.
	fdatasync bool
	// zeroAhead in place of fallocate: a new segment file starts empty and
	// each write that reaches past its zeros extends it with zeros to the
	// next walZeroChunk boundary, in the same write.
	zeroAhead bool
}

const walZeroChunk = 256 << 10

var walZeros [walZeroChunk]byte

// tunedVFS is raft-wal's file system with a tuning.
type tunedVFS struct {
	types.VFS
	t walTuning
}

func (v tunedVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	if v.t.zeroAhead {
		size = 0
	}
	f, err := v.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return &tunedFile{WritableFile: f, t: v.t, newIn: dir}, nil
}

func (v tunedVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(filepath.Join(dir, name))
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return &tunedFile{WritableFile: f, t: v.t, zeroed: st.Size()}, nil
}

type tunedFile struct {
	types.WritableFile
	t      walTuning
	newIn  string // a new file's directory, synced with its first Sync
	zeroed int64  // the file holds bytes up to here
	buf    []byte
}

func (f *tunedFile) WriteAt(p []byte, off int64) (int, error) {
	end := off + int64(len(p))
	if !f.t.zeroAhead || end <= f.zeroed {
		return f.WritableFile.WriteAt(p, off)
	}
	pad := walZeroChunk - end%walZeroChunk
	f.buf = append(append(f.buf[:0], p...), walZeros[:pad]...)
	n, err := f.WritableFile.WriteAt(f.buf, off)
	n = min(n, len(p))
	if err == nil {
		f.zeroed = max(f.zeroed, end+pad)
	}
	if cap(f.buf) > 4<<20 {
		f.buf = nil
	}
	return n, err
}

func (f *tunedFile) Sync() error {
	dir := f.newIn
	f.newIn = ""
	fd, ok := f.WritableFile.(interface{ Fd() uintptr })
	if !f.t.fdatasync || !ok {
		return f.WritableFile.Sync() // syncs a new file's directory too
	}
	for {
		err := unix.Fdatasync(int(fd.Fd()))
		if err == unix.EINTR {
			continue
		}
		if err == nil && dir != "" {
			err = logstore.SyncDir(dir)
		}
		return err
	}
}
