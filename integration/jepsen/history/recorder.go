package history

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Recorder collects the ops of a run from concurrent clients. Every
// invoked op is kept: one that is never completed is reported as Unknown.
// Times come from one monotonic clock, so a wall-clock step during the run
// does not reorder them.
type Recorder struct {
	base time.Time

	mu      sync.Mutex
	next    int64
	ops     []*Op // by id - 1
	sink    io.Writer
	sinkErr error
}

// NewRecorder starts a recorder. When sink is not nil every op is written
// to it as a JSON line the moment it completes, so the history survives a
// harness that dies mid-run; ops still open then are missing from the
// sink but are in Ops.
func NewRecorder(sink io.Writer) *Recorder {
	return &Recorder{base: time.Now(), sink: sink}
}

// Now is the recorder's clock.
func (r *Recorder) Now() time.Time { return r.base.Add(time.Since(r.base)) }

// Pending is an invoked op waiting for its outcome. Exactly one of OK,
// Fail, Refuse, Unknown or Finish completes it; later calls are ignored.
type Pending struct {
	r    *Recorder
	op   *Op
	done bool // guarded by r.mu
}

// Invoke records the start of a call and returns the handle to complete it.
func (r *Recorder) Invoke(client int, kind Kind, topic string, args Args) *Pending {
	now := r.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	op := &Op{ID: r.next, Client: client, Kind: kind, Topic: topic, Args: args, Invoke: now, Outcome: Unknown}
	r.ops = append(r.ops, op)
	return &Pending{r: r, op: op}
}

// ID is the op's id.
func (p *Pending) ID() int64 { return p.op.ID }

// SetNode records the address the call went to.
func (p *Pending) SetNode(addr string) {
	p.r.mu.Lock()
	p.op.Node = addr
	p.r.mu.Unlock()
}

// SetWrites records how many times the client wrote the request.
func (p *Pending) SetWrites(n int) {
	if n <= 1 {
		return
	}
	p.r.mu.Lock()
	p.op.Writes = n
	p.r.mu.Unlock()
}

// OK completes the op as a success.
func (p *Pending) OK(res *Result) { p.complete(OK, 0, "", res, false) }

// Fail completes the op with the cluster's error code.
func (p *Pending) Fail(code int16, msg string) { p.complete(Fail, code, msg, nil, false) }

// Refuse completes the op with the cluster's error code and marks it
// refused before anything was proposed (Op.Refused): it took no effect.
func (p *Pending) Refuse(code int16, msg string) { p.complete(Fail, code, msg, nil, true) }

// Unknown completes the op with no answer: it may or may not have taken
// effect.
func (p *Pending) Unknown(err error) {
	msg := "no answer"
	if err != nil {
		msg = err.Error()
	}
	p.complete(Unknown, 0, msg, nil, false)
}

// Finish completes the op from a call's error: nil is OK with res, a Kafka
// error is Fail with its code, anything else (a timeout, a lost
// connection) is Unknown.
func (p *Pending) Finish(res *Result, err error) {
	outcome, code := Classify(err)
	switch outcome {
	case OK:
		p.OK(res)
	case Fail:
		p.Fail(code, err.Error())
	default:
		p.Unknown(err)
	}
}

func (p *Pending) complete(outcome Outcome, code int16, msg string, res *Result, refused bool) {
	now := p.r.Now()
	r := p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.done {
		return
	}
	p.done = true
	p.op.Outcome, p.op.Code, p.op.Error, p.op.Result, p.op.Refused = outcome, code, msg, res, refused
	if outcome != Unknown {
		p.op.Complete = now
	}
	if r.sink != nil && r.sinkErr == nil {
		r.sinkErr = writeLine(r.sink, *p.op)
	}
}

// Ops returns every op invoked so far, by id. Ops still waiting for an
// answer are returned as Unknown.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Op, len(r.ops))
	for i, op := range r.ops {
		out[i] = *op
		if out[i].Outcome == Unknown && out[i].Error == "" {
			out[i].Error = "still open when the history was taken"
		}
	}
	return out
}

// SinkErr is the first error writing to the sink, if any.
func (r *Recorder) SinkErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sinkErr
}

// Classify tells how a call that returned err ended: nil is OK; a Kafka
// error is Fail with its code; anything else — a deadline, a closed or
// reset connection, an error of unknown kind — is Unknown, because the
// request may have reached the cluster before the answer was lost.
func Classify(err error) (Outcome, int16) {
	if err == nil {
		return OK, 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) && ke.Code != 0 {
		return Fail, ke.Code
	}
	return Unknown, 0
}

// Lost reports whether err says the connection or the deadline was lost
// (as opposed to some error of the harness itself). Classify treats both
// as Unknown; Lost is for messages.
func Lost(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.As(err, &ne)
}

// SortOps orders ops by invoke time, then id.
func SortOps(ops []Op) {
	sort.SliceStable(ops, func(i, j int) bool {
		if !ops[i].Invoke.Equal(ops[j].Invoke) {
			return ops[i].Invoke.Before(ops[j].Invoke)
		}
		return ops[i].ID < ops[j].ID
	})
}
