package logstore

import (
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// BenchmarkAppend measures what a voter's log write costs: three stores
// (a leader and two followers' worth, on the one disk) each append b.N
// batches of 27 entries of 700 bytes, about one CreateTopics round, at the
// same time. It reports the wall time of one append and the CPU time the
// process spent per append, against bolt (raft-boltdb, as the log was kept
// before) on the same load.
//
//	go test -run '^$' -bench Append -benchtime 2000x ./raftlog/logstore
func BenchmarkAppend(b *testing.B) {
	open := map[string]func(b *testing.B, dir string) raft.LogStore{
		"segments": func(b *testing.B, dir string) raft.LogStore {
			s, err := Open(dir, Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		},
		"bolt": func(b *testing.B, dir string) raft.LogStore {
			s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
	for _, name := range []string{"segments", "bolt"} {
		b.Run(name, func(b *testing.B) {
			const stores, perBatch = 3, 27
			data := make([]byte, 700)
			var wg sync.WaitGroup
			logs := make([]raft.LogStore, stores)
			for i := range logs {
				logs[i] = open[name](b, b.TempDir())
			}
			b.ResetTimer()
			cpu0, start := processCPU(), time.Now()
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
			elapsed, cpu := time.Since(start), processCPU()-cpu0
			b.StopTimer()
			appends := float64(b.N * stores)
			b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N), "us/append")
			b.ReportMetric(float64(cpu.Microseconds())/appends, "cpu-us/append")
			b.Logf("%s: %d appends of %d entries in each of %d stores: %v per append, %v of CPU per append",
				name, b.N, perBatch, stores, elapsed/time.Duration(b.N), fmt.Sprint(cpu/time.Duration(appends)))
		})
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
