// Package gcpace sets the Go runtime's soft memory limit from the size of
// the metadata images the process holds.
//
// With the default GOGC of 100 the collector lets the heap grow to twice
// what was live after the last collection before it runs again. For a
// small image that is nothing; for an image of ten million partitions
// held by three voters in one process (dev mode, the benchmarks) it is
// gigabytes of garbage on top of gigabytes of image, and the process
// outgrew a 24 GiB machine during one broker event. The pacer sets a soft
// limit (runtime/debug.SetMemoryLimit) of a base plus a budget per
// partition held, never below 1.25 times the live heap (a limit under the
// live heap would have the collector run without end) and never above
// nine tenths of the machine's memory; below the limit GOGC paces the
// collector as usual, so small images are not touched.
//
// A GOMEMLIMIT in the environment wins: the pacer then does nothing.
package gcpace

import (
	"bufio"
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Config tunes the pacer. Zero values take the defaults.
type Config struct {
	// PerPartition is the limit's budget per partition held. Default
	// 240 B: an image costs about 120 B of heap per partition, and
	// what a voter keeps beside it (log cache, controller state) about
	// as much again.
	PerPartition int64
	// Base is the limit with no partitions. Default 1 GiB.
	Base int64
	// Max caps the limit. Default nine tenths of the machine's memory
	// (MemTotal of /proc/meminfo); no cap where that cannot be read.
	Max int64
	// Every is how often the pacer looks at the images. Default 2 s.
	Every  time.Duration
	Logger hclog.Logger
}

func (c *Config) defaults() {
	if c.PerPartition <= 0 {
		c.PerPartition = 240
	}
	if c.Base <= 0 {
		c.Base = 1 << 30
	}
	if c.Max <= 0 {
		c.Max = machineMemory() / 10 * 9
	}
	if c.Every <= 0 {
		c.Every = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
}

// Limit is the soft memory limit for images of partitions partitions in
// all, with live bytes of heap live after the last collection.
func (c Config) Limit(partitions int, live int64) int64 {
	c.defaults()
	limit := c.Base + int64(partitions)*c.PerPartition
	limit = max(limit, live/4*5+256<<20)
	if c.Max > 0 {
		limit = min(limit, c.Max)
	}
	return limit
}

var (
	mu      sync.Mutex
	sources = map[*source]struct{}{}
)

type source struct{ partitions func() int }

// Track registers an image whose size (partitions) the limit is made
// from, until the returned function is called. Without a running pacer
// (Start) it changes nothing.
func Track(partitions func() int) (untrack func()) {
	s := &source{partitions: partitions}
	mu.Lock()
	sources[s] = struct{}{}
	mu.Unlock()
	return func() {
		mu.Lock()
		delete(sources, s)
		mu.Unlock()
	}
}

// Partitions is the partitions of every tracked image.
func Partitions() int {
	mu.Lock()
	list := make([]*source, 0, len(sources))
	for s := range sources {
		list = append(list, s)
	}
	mu.Unlock()
	n := 0
	for _, s := range list {
		n += s.partitions()
	}
	return n
}

// Start runs the pacer until ctx is done, unless GOMEMLIMIT is set; the
// channel it returns is closed once the pacer has stopped.
func Start(ctx context.Context, cfg Config) <-chan struct{} {
	cfg.defaults()
	done := make(chan struct{})
	if os.Getenv("GOMEMLIMIT") != "" {
		cfg.Logger.Debug("GOMEMLIMIT is set: the memory limit is left to it")
		close(done)
		return done
	}
	go func() {
		defer close(done)
		t := time.NewTicker(cfg.Every)
		defer t.Stop()
		var set int64
		for {
			n := Partitions()
			limit := cfg.Limit(n, liveHeap())
			// Small moves are not worth a log line or a new goal.
			if set == 0 || limit > set+set/20 || limit < set-set/20 {
				debug.SetMemoryLimit(limit)
				if n > 0 {
					cfg.Logger.Info("memory limit set from the images' size", "partitions", n, "limit_mib", limit>>20)
				}
				set = limit
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return done
}

// liveHeap is the heap that was live after the last collection.
func liveHeap() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// machineMemory is MemTotal of /proc/meminfo in bytes, or 0.
func machineMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
