package gcpace

import (
	"context"
	"math"
	"runtime/debug"
	"testing"
	"time"
)

// TestLimit: the limit is the base plus the budget per partition, never
// under 1.25 times the live heap and never over the cap.
func TestLimit(t *testing.T) {
	c := Config{PerPartition: 200, Base: 1 << 30, Max: 8 << 30}
	if got := c.Limit(0, 0); got != 1<<30 {
		t.Errorf("no partitions: %d, want the base %d", got, 1<<30)
	}
	if got, want := c.Limit(10_000_000, 0), int64(1<<30+2_000_000_000); got != want {
		t.Errorf("10M partitions: %d, want %d", got, want)
	}
	if got, want := c.Limit(1000, 4<<30), int64(5<<30+256<<20); got != want {
		t.Errorf("live heap of 4 GiB: %d, want %d", got, want)
	}
	if got := c.Limit(100_000_000, 0); got != 8<<30 {
		t.Errorf("100M partitions: %d, want the cap %d", got, 8<<30)
	}
}

// TestTrack: Partitions sums the tracked images until each is untracked.
func TestTrack(t *testing.T) {
	base := Partitions()
	a := Track(func() int { return 1000 })
	b := Track(func() int { return 234 })
	if got := Partitions() - base; got != 1234 {
		t.Errorf("two images: %d partitions, want 1234", got)
	}
	a()
	if got := Partitions() - base; got != 234 {
		t.Errorf("one image left: %d partitions, want 234", got)
	}
	b()
	if got := Partitions() - base; got != 0 {
		t.Errorf("none left: %d partitions, want 0", got)
	}
}

// TestStart: the running pacer sets the process's limit from what is
// tracked, and leaves it alone when GOMEMLIMIT is set.
func TestStart(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	untrack := Track(func() int { return 50_000_000 })
	defer untrack()
	cfg := Config{PerPartition: 300, Base: 1 << 30, Max: math.MaxInt64, Every: time.Millisecond}
	want := cfg.Limit(Partitions(), liveHeap())

	t.Setenv("GOMEMLIMIT", "math.MaxInt64")
	if _, open := <-Start(context.Background(), cfg); open {
		t.Fatal("done channel yielded a value")
	}
	if got := debug.SetMemoryLimit(-1); got != prev {
		t.Fatalf("with GOMEMLIMIT set the limit moved from %d to %d", prev, got)
	}

	t.Setenv("GOMEMLIMIT", "")
	ctx, cancel := context.WithCancel(context.Background())
	done := Start(ctx, cfg)
	deadline := time.Now().Add(time.Minute)
	for debug.SetMemoryLimit(-1) != want {
		if time.Now().After(deadline) {
			t.Fatalf("limit %d, want %d", debug.SetMemoryLimit(-1), want)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}
