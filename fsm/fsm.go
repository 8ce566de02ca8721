package fsm

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// ErrHalted is returned for every entry offered after the FSM halted.
var ErrHalted = errors.New("fsm halted after an entry it could not apply")

// Rejection is one record of an entry that was not applied.
type Rejection struct {
	Record int
	Type   rl.RecordType
	Err    error
}

// ApplyResult is what Apply returns for a command entry: the index it was
// applied at and the records that were rejected (nil when all applied).
type ApplyResult struct {
	Index    uint64
	Rejected []Rejection
}

// Err returns the first rejection as an error, or nil.
func (r *ApplyResult) Err() error {
	if r == nil || len(r.Rejected) == 0 {
		return nil
	}
	rj := r.Rejected[0]
	return fmt.Errorf("record %d (%s) rejected at index %d: %w", rj.Record, rj.Type, r.Index, rj.Err)
}

// CommitListener is told about every applied command entry, under no lock,
// in log order. It must not block for long: it runs on raft's apply path.
type CommitListener func(index uint64, batch rl.Batch, result *ApplyResult)

// Options configure an FSM.
type Options struct {
	Logger hclog.Logger
	// Halt is called once, with the error, when an entry cannot be decoded
	// or is of a kind this binary does not know. It should stop the node.
	// The default logs the error and exits the process: a voter that skips
	// an entry its peers apply would diverge from them.
	Halt func(err error)
	// OnCommit, if set, is called after each applied command entry.
	OnCommit CommitListener
	// OnStateChanges, if set, is told the transitions of each applied
	// entry (the state-change history). Reading the state each record
	// changes from costs apply time: nodes that keep no history leave it
	// nil.
	OnStateChanges StateChangeListener
	// OnRestore, if set, is called after a snapshot replaced the image,
	// with the snapshot's index: the history before it is not replayed.
	OnRestore func(index uint64)
}

// FSM is the raft.BatchingFSM of a controller voter.
type FSM struct {
	mu       sync.RWMutex
	img      *Image
	log      hclog.Logger
	halt     func(error)
	halted   error
	onCommit CommitListener
	// changes records transitions for onChanges; nil keeps no history.
	changes   *changeRecorder
	onChanges StateChangeListener
	onRestore func(uint64)
	// sec is img's Security, published for readers that must not wait
	// for the lock: the listener checks it on every request.
	sec atomic.Pointer[Security]
	// applied wakes WaitApplied's callers when the applied index moves.
	applied appliedSignal
}

var _ raft.BatchingFSM = (*FSM)(nil)

// New returns an FSM with an empty image.
func New(opts Options) *FSM {
	f := &FSM{img: newImage(), log: opts.Logger, halt: opts.Halt, onCommit: opts.OnCommit,
		onChanges: opts.OnStateChanges, onRestore: opts.OnRestore}
	if f.onChanges != nil {
		f.changes = &changeRecorder{}
	}
	f.sec.Store(f.img.sec)
	if f.log == nil {
		f.log = hclog.NewNullLogger()
	}
	if f.halt == nil {
		f.halt = func(err error) {
			f.log.Error("stopping the node: the log holds an entry this voter cannot apply", "error", err)
			os.Exit(70)
		}
	}
	return f
}

// Security returns the committed credentials and rules without taking the
// image's lock (a Security never changes once installed).
func (f *FSM) Security() *Security { return f.sec.Load() }

// SetCommitListener replaces the commit listener.
func (f *FSM) SetCommitListener(l CommitListener) {
	f.mu.Lock()
	f.onCommit = l
	f.mu.Unlock()
}

// View calls fn with the image under a read lock. fn must not keep the
// *Image, *Topic or *Broker pointers after it returns (partition slices it
// may keep: they are immutable).
func (f *FSM) View(fn func(*Image)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.img)
}

// AppliedIndex returns the index of the last applied entry.
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.img.appliedIndex
}

// Halted returns the error that halted the FSM, or nil.
func (f *FSM) Halted() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.halted
}

// Apply implements raft.FSM.
func (f *FSM) Apply(l *raft.Log) interface{} {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

type committed struct {
	index  uint64
	batch  rl.Batch
	result *ApplyResult
}

// ApplyBatch implements raft.BatchingFSM: all entries are applied under one
// write lock, so readers see each raft batch at once.
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	var done []committed
	var changed []EntryChanges
	var haltErr error
	f.mu.Lock()
	for i, l := range logs {
		if f.halted != nil {
			out[i] = f.halted
			continue
		}
		if l.Type != raft.LogCommand {
			f.img.appliedIndex = l.Index
			continue
		}
		batch, err := rl.DecodeBatch(l.Data)
		if err != nil {
			haltErr = fmt.Errorf("%w: log index %d: %v", ErrHalted, l.Index, describeDecodeError(err))
			f.halted = haltErr
			out[i] = haltErr
			continue
		}
		var epoch, node int32
		if f.changes != nil {
			f.changes.im = f.img
			epoch, node = f.img.ControllerEpoch()
		}
		res := f.img.applyBatch(l.Index, batch, f.changes)
		if f.changes != nil {
			if ch := f.changes.take(); len(ch) > 0 {
				changed = append(changed, EntryChanges{Index: l.Index, Term: l.Term, AppendedAt: l.AppendedAt,
					ControllerEpoch: epoch, ControllerNode: node, Changes: ch})
			}
		}
		for _, rj := range res.Rejected {
			f.log.Warn("record rejected", "index", l.Index, "record", rj.Record, "type", rj.Type.String(), "reason", rj.Err)
		}
		out[i] = res
		if f.onCommit != nil {
			done = append(done, committed{l.Index, batch, res})
		}
	}
	listener := f.onCommit
	f.sec.Store(f.img.sec)
	f.applied.moved()
	f.mu.Unlock()
	if haltErr != nil {
		f.log.Error("cannot apply log entry", "error", haltErr)
		f.halt(haltErr)
	}
	for _, c := range done {
		listener(c.index, c.batch, c.result)
	}
	for _, c := range changed {
		f.onChanges(c)
	}
	return out
}

func describeDecodeError(err error) string {
	var de *rl.DecodeError
	if errors.As(err, &de) && de.Record >= 0 {
		return fmt.Sprintf("record %d of type %s (version %d): %v", de.Record, de.Type, de.Version, de.Err)
	}
	return err.Error()
}

// applyBatch applies a decoded entry. Each record is applied or rejected as
// a whole, in order.
//
// With a recorder, the transitions of the records that applied are
// recorded too.
func (im *Image) applyBatch(idx uint64, batch rl.Batch, rec *changeRecorder) *ApplyResult {
	res := &ApplyResult{Index: idx}
	for i, r := range batch {
		if rec != nil {
			rec.before(r)
		}
		err := applyRecord(im, idx, r)
		if rec != nil {
			rec.after(err == nil)
		}
		if err != nil {
			res.Rejected = append(res.Rejected, Rejection{Record: i, Type: r.Type(), Err: err})
		}
	}
	im.trimGrown()
	im.appliedIndex = idx
	return res
}
