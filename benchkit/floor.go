package benchkit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// An event's floor is what its records cost with nothing of the
// controller around them, measured in the same run as the event:
//
//   - apply: the event's log entries, read back from the active voter's
//     log, decoded and applied on one image restored from a snapshot
//     taken just before the event (no raft, no controller);
//   - commit: the same entry bytes proposed at once, as the controller
//     proposes a round's entries, to a second three-voter raft cluster
//     whose FSM does nothing, until all have committed.
//
// The event cannot take less than the two one after the other on the
// leader (its answer waits for the leader's own apply), so the report
// gives the event's ratio to their sum.

// imageSnapshot is a voter's image as a snapshot in memory.
type imageSnapshot struct {
	data  []byte
	write time.Duration // Snapshot and Persist into memory
}

// memSink is a raft.SnapshotSink that keeps what it is given.
type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "bench" }
func (*memSink) Cancel() error { return nil }
func (*memSink) Close() error  { return nil }

// snapshotImage writes node's image to memory, timing it.
func snapshotImage(n *controller.Node) (imageSnapshot, error) {
	start := time.Now()
	snap, err := n.FSM.Snapshot()
	if err != nil {
		return imageSnapshot{}, err
	}
	defer snap.Release()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		return imageSnapshot{}, err
	}
	return imageSnapshot{data: sink.Bytes(), write: time.Since(start)}, nil
}

// restore builds a fresh FSM from s, timing it.
func (s imageSnapshot) restore() (*fsm.FSM, time.Duration, error) {
	var halted error
	f := fsm.New(fsm.Options{Halt: func(err error) { halted = err }})
	start := time.Now()
	if err := f.Restore(io.NopCloser(bytes.NewReader(s.data))); err != nil {
		return nil, 0, err
	}
	took := time.Since(start)
	if halted != nil {
		return nil, 0, halted
	}
	return f, took, nil
}

// eventFloor is the floor of one event, and whether replaying it gave the
// image the active voter had after it.
type eventFloor struct {
	apply, commit time.Duration
	entries       int
	bytes         int
	// hashChecked: the active voter's hash after the event was known;
	// sameHash: the replayed image had it.
	hashChecked, sameHash bool
}

func (f eventFloor) total() time.Duration { return f.apply + f.commit }

// commandEntries reads the command entries from..to of n's log.
func commandEntries(n *controller.Node, from, to uint64) ([]*raft.Log, error) {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		l := new(raft.Log)
		if err := n.Voter.LogStore().GetLog(i, l); err != nil {
			return nil, fmt.Errorf("log entry %d: %w", i, err)
		}
		if l.Type == raft.LogCommand {
			out = append(out, l)
		}
	}
	return out, nil
}

// measureFloor replays on a copy of the image in snap the entries that
// followed it up to first-1 (untimed), then times the apply of the
// event's entries first..last; it then commits the same entry bytes on
// floorRaft. want is the active voter's state hash taken after the
// event, which the replayed image must have once it has applied as far.
func measureFloor(ctx context.Context, n *controller.Node, snap imageSnapshot, first, last uint64, want indexedHash, floorRaft *storeCluster) (eventFloor, error) {
	var ef eventFloor
	g, _, err := snap.restore()
	if err != nil {
		return ef, fmt.Errorf("floor: restore: %w", err)
	}
	if first <= g.AppliedIndex() || last < first {
		return ef, fmt.Errorf("floor: the event's entries %d..%d do not follow the snapshot at %d", first, last, g.AppliedIndex())
	}
	if g.AppliedIndex()+1 < first {
		pre, err := commandEntries(n, g.AppliedIndex()+1, first-1)
		if err != nil {
			return ef, err
		}
		if err := applyAll(g, pre); err != nil {
			return ef, err
		}
	}
	logs, err := commandEntries(n, first, last)
	if err != nil {
		return ef, err
	}
	ef.entries = len(logs)
	for _, l := range logs {
		ef.bytes += len(l.Data)
	}
	runtime.GC() // the floor is the work alone, not a collection left by the restore
	start := time.Now()
	if err := applyAll(g, logs); err != nil {
		return ef, err
	}
	ef.apply = time.Since(start)
	if want.index >= last {
		// Entries after the event, up to where the voter's hash was
		// taken, then the two images must hash alike.
		if want.index > last {
			post, err := commandEntries(n, last+1, want.index)
			if err != nil {
				return ef, err
			}
			if err := applyAll(g, post); err != nil {
				return ef, err
			}
		}
		got, _ := g.StateHash()
		ef.hashChecked, ef.sameHash = true, got == want.hash
	}
	g = nil
	runtime.GC()

	ld, err := floorRaft.leader(ctx)
	if err != nil {
		return ef, err
	}
	futures := make([]raft.ApplyFuture, len(logs))
	start = time.Now()
	for i, l := range logs {
		futures[i] = ld.Apply(l.Data, time.Minute)
	}
	for _, f := range futures {
		if err := f.Error(); err != nil {
			return ef, fmt.Errorf("floor: raft commit: %w", err)
		}
	}
	ef.commit = time.Since(start)
	return ef, nil
}

// applyAll applies logs to g in one batch and fails on any record it
// refused: the entries applied on the voters.
func applyAll(g *fsm.FSM, logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	for i, res := range g.ApplyBatch(logs) {
		switch r := res.(type) {
		case *fsm.ApplyResult:
			if err := r.Err(); err != nil {
				return fmt.Errorf("floor: entry %d: %w", logs[i].Index, err)
			}
		case error:
			return fmt.Errorf("floor: entry %d: %w", logs[i].Index, r)
		}
	}
	return nil
}

// indexedHash is a voter's state hash and the index it was taken at.
type indexedHash struct {
	hash  fsm.StateHash
	index uint64
}

// stateHash returns n's state hash now.
func stateHash(n *controller.Node) indexedHash {
	h, at := n.FSM.StateHash()
	return indexedHash{hash: h, index: at}
}

// fencesBroker reports whether one of the log entries from..to of n
// holds a FenceBroker record for broker id.
func fencesBroker(n *controller.Node, from, to uint64, id int32) (bool, error) {
	logs, err := commandEntries(n, from, to)
	if err != nil {
		return false, err
	}
	for _, l := range logs {
		batch, err := rl.DecodeBatch(l.Data)
		if err != nil {
			return false, fmt.Errorf("log entry %d: %w", l.Index, err)
		}
		for _, r := range batch {
			if f, ok := r.(*rl.FenceBroker); ok && f.BrokerID == id {
				return true, nil
			}
		}
	}
	return false, nil
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// loadAverage is the machine's one-minute load average (0 where
// /proc/loadavg cannot be read): the machine is shared, and every figure
// is reported beside it.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
