package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// The tests here hold a round's entry uncommitted and check what the
// loop does meanwhile: it computes the events that arrive over the
// round in flight, answers none of them before the round below has
// committed and their own has, and when the round below fails or the log
// holds something else, computes nothing over a state the log never had.

// heldLog is a MemLog whose entries, while holding, wait unapplied until
// the test commits or fails them, one at a time.
type heldLog struct {
	*MemLog
	mu      sync.Mutex
	holding bool
	held    chan *heldEntry
	// open lists the entries proposed and not yet committed or failed.
	open []*heldEntry
}

type heldEntry struct {
	data []byte
	done chan struct{}
	f    raft.ApplyFuture
}

// settle commits or fails e once.
func (l *heldLog) settle(e *heldEntry, commit bool) {
	l.mu.Lock()
	i := slices.Index(l.open, e)
	if i < 0 {
		l.mu.Unlock()
		return
	}
	l.open = slices.Delete(l.open, i, i+1)
	l.mu.Unlock()
	if commit {
		e.f = l.MemLog.Apply(e.data, 0)
	} else {
		e.f = &memFuture{err: raft.ErrLeadershipLost}
	}
	close(e.done)
}

func (e *heldEntry) Error() error          { <-e.done; return e.f.Error() }
func (e *heldEntry) Index() uint64         { <-e.done; return e.f.Index() }
func (e *heldEntry) Response() interface{} { <-e.done; return e.f.Response() }

func (l *heldLog) Apply(data []byte, timeout time.Duration) raft.ApplyFuture {
	l.mu.Lock()
	holding := l.holding
	e := &heldEntry{data: data, done: make(chan struct{})}
	if holding {
		l.open = append(l.open, e)
	}
	l.mu.Unlock()
	if !holding {
		return l.MemLog.Apply(data, timeout)
	}
	l.held <- e
	return e
}

func (l *heldLog) hold() { l.mu.Lock(); l.holding = true; l.mu.Unlock() }

// next waits for the next entry proposed while holding.
func (l *heldLog) next(t *testing.T) *heldEntry {
	t.Helper()
	select {
	case e := <-l.held:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no entry was proposed")
		return nil
	}
}

func (l *heldLog) commit(e *heldEntry) { l.settle(e, true) }
func (l *heldLog) fail(e *heldEntry)   { l.settle(e, false) }

// release stops holding and fails every entry still open, so that a test
// that stopped half way does not leave the loop waiting.
func (l *heldLog) release() {
	l.mu.Lock()
	l.holding = false
	open := slices.Clone(l.open)
	l.mu.Unlock()
	for _, e := range open {
		l.fail(e)
	}
}

// nothingProposed checks that no entry waits to be committed.
func (l *heldLog) nothingProposed(t *testing.T) {
	t.Helper()
	select {
	case e := <-l.held:
		t.Fatalf("an entry of %d bytes was proposed", len(e.data))
	default:
	}
}

type pipelineEnv struct {
	t      *testing.T
	ctx    context.Context
	fsm    *fsm.FSM
	log    *heldLog
	sender *RecordingSender
	c      *Controller
	epochs map[int32]int64
	// computed receives, per compute, whether it ran over a round still
	// committing, once for each event computed.
	computed chan bool
}

func newPipelineEnv(t *testing.T, configure func(*Config)) *pipelineEnv {
	e := &pipelineEnv{t: t, ctx: context.Background(), computed: make(chan bool, 64), sender: NewRecordingSender(), epochs: map[int32]int64{}}
	e.fsm = fsm.New(fsm.Options{Halt: func(err error) { t.Errorf("fsm halted: %v", err) }})
	e.log = &heldLog{MemLog: NewMemLog(e.fsm), held: make(chan *heldEntry, 16)}
	cfg := Config{NodeID: 1, FSM: e.fsm, Log: e.log, Sender: e.sender, SessionTimeout: time.Hour,
		Clock: &fakeClock{now: time.Unix(1_700_000_000, 0)}}
	if configure != nil {
		configure(&cfg)
	}
	e.c = New(cfg)
	// The loop's own events (activation, the resumption queued once the
	// controller is ready, ticks on a real-time ticker, broker responses)
	// can be computed at any point of a test: only the events the test's
	// callers submitted are counted.
	e.c.computed = func(events []*event, over bool) {
		for _, ev := range events {
			if ev.fromCaller {
				e.computed <- over
			}
		}
	}
	e.c.Activate()
	if err := e.c.WaitReady(e.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.c.Deactivate)
	t.Cleanup(e.log.release)
	for id := int32(1); id <= 3; id++ {
		ep, err := e.c.RegisterBroker(e.ctx, BrokerRegistration{BrokerID: id, IncarnationID: rl.IncarnationID{byte(id), 1},
			Endpoints: []rl.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: uint16(9000 + id)}}})
		if err != nil {
			t.Fatal(err)
		}
		e.epochs[id] = ep
		if _, err := e.c.Heartbeat(e.ctx, Heartbeat{BrokerID: id, BrokerEpoch: ep, MetadataOffset: e.log.Index()}); err != nil {
			t.Fatal(err)
		}
	}
	for len(e.computed) > 0 {
		<-e.computed
	}
	return e
}

// create starts creating a one-partition topic and returns where its
// outcome will arrive.
func (e *pipelineEnv) create(name string) <-chan error {
	out := make(chan error, 1)
	go func() {
		res := e.c.CreateTopics(e.ctx, []CreateTopic{{Name: name, NumPartitions: 1, ReplicationFactor: 3}}, false)
		out <- res[0].Err
	}()
	return out
}

// holdFirstRound starts holding the log's entries, creates topic name
// alone in a round, and returns where its outcome will arrive and the
// round's entry, held.
func (e *pipelineEnv) holdFirstRound(name string) (<-chan error, *heldEntry) {
	e.t.Helper()
	e.log.hold()
	out := e.create(name)
	e.awaitComputed(1, false)
	return out, e.log.next(e.t)
}

// awaitComputed waits until n events have been computed and checks
// whether they ran over a round in flight.
func (e *pipelineEnv) awaitComputed(n int, over bool) {
	e.t.Helper()
	for range n {
		select {
		case got := <-e.computed:
			if got != over {
				e.t.Fatalf("an event computed with a round in flight = %v, want %v", got, over)
			}
		case <-time.After(10 * time.Second):
			e.t.Fatal("events were not computed")
		}
	}
}

// unanswered checks that no answer comes: it gives one that was sent
// too early the time to make its way through the caller's goroutine.
func unanswered(t *testing.T, what string, chs ...<-chan error) {
	t.Helper()
	grace := time.After(50 * time.Millisecond)
	for _, ch := range chs {
		select {
		case err := <-ch:
			t.Fatalf("%s: answered (%v) before the round below it committed", what, err)
		case <-grace:
			return
		}
	}
}

func outcome(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
		return nil
	}
}

func (e *pipelineEnv) topicExists(name string) bool {
	var ok bool
	e.fsm.View(func(im *fsm.Image) { ok = im.TopicByName(name) != nil })
	return ok
}

func TestNextRoundComputedWhileOneCommits(t *testing.T) {
	e := newPipelineEnv(t, nil)
	first, r1 := e.holdFirstRound("a")

	// While the first round commits, a duplicate of its topic and a new
	// one are computed over it: the duplicate is refused because of a
	// creation that has not committed yet.
	dup, second := e.create("a"), e.create("b")
	e.awaitComputed(2, true)
	e.log.nothingProposed(t)
	unanswered(t, "computed over the round in flight", first, dup, second)

	e.log.commit(r1)
	if err := outcome(t, first); err != nil {
		t.Fatalf("first creation: %v", err)
	}
	// The second round goes out once the first has committed, and its
	// callers, the refused one included, wait for its commit.
	r2 := e.log.next(t)
	unanswered(t, "in a round not yet committed", dup, second)
	e.log.commit(r2)
	if err := outcome(t, dup); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("duplicate: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	if err := outcome(t, second); err != nil {
		t.Fatalf("second creation: %v", err)
	}
	if !e.topicExists("a") || !e.topicExists("b") {
		t.Fatal("a created topic is missing")
	}
}

func TestRoundOverAFailedOneIsNeverProposed(t *testing.T) {
	e := newPipelineEnv(t, nil)
	first, r1 := e.holdFirstRound("a")
	dup, second := e.create("a"), e.create("b")
	e.awaitComputed(2, true)

	e.log.fail(r1)
	// The first creation went to raft, which lost the leadership with it
	// in flight: the next leader may still commit it, so its caller is
	// told the outcome is unknown. The two computed over it never went
	// out: NOT_CONTROLLER, nothing happened.
	if err := outcome(t, first); !errors.Is(err, kerr.RequestTimedOut) {
		t.Fatalf("first: %v, want REQUEST_TIMED_OUT", err)
	}
	for name, ch := range map[string]<-chan error{"duplicate": dup, "second": second} {
		if err := outcome(t, ch); !errors.Is(err, ErrNotController) {
			t.Fatalf("%s: %v, want NOT_CONTROLLER", name, err)
		}
	}
	e.log.nothingProposed(t)
	if e.topicExists("a") || e.topicExists("b") {
		t.Fatal("a topic exists although nothing committed")
	}
}

func TestRoundOverAnotherIsComputedAgainWhenTheLogHoldsMore(t *testing.T) {
	e := newPipelineEnv(t, nil)
	first, r1 := e.holdFirstRound("a")
	second := e.create("b")
	e.awaitComputed(1, true)

	// Someone else's entry lands before the first round's: the second
	// round was computed over a state the log never had ("b" free).
	id := rl.TopicID{0xb}
	foreign, err := rl.EncodeBatch([]rl.Record{&rl.Topic{TopicID: id, Name: "b"},
		&rl.Partition{TopicID: id, Partition: 0, Replicas: []int32{1, 2, 3}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.log.MemLog.Apply(foreign, 0).Error(); err != nil {
		t.Fatal(err)
	}
	e.log.commit(r1)
	if err := outcome(t, first); err != nil {
		t.Fatalf("first creation: %v", err)
	}
	e.awaitComputed(1, false) // computed again, over the image
	if err := outcome(t, second); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("second creation: %v, want TOPIC_ALREADY_EXISTS (the topic another entry created)", err)
	}
	e.log.nothingProposed(t)
}

// TestQueueHoldsCallersWhileTheNextRoundIsFull: while a round commits,
// the loop takes only what the next round can hold; the rest stays in
// the queue, which fills and holds its callers back. Nothing is lost.
func TestQueueHoldsCallersWhileTheNextRoundIsFull(t *testing.T) {
	e := newPipelineEnv(t, func(c *Config) { c.MaxEventsPerRound, c.QueueSize = 2, 4 })
	first, held := e.holdFirstRound("t-00")
	outs := []<-chan error{first}
	for i := 1; i <= 20; i++ {
		outs = append(outs, e.create(fmt.Sprintf("t-%02d", i)))
	}
	queued := func() (int, int) {
		e.c.mu.Lock()
		defer e.c.mu.Unlock()
		return len(e.c.active.events), cap(e.c.active.events)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if n, c := queued(); n == c {
			break
		}
		if time.Now().After(deadline) {
			n, c := queued()
			t.Fatalf("the queue holds %d of %d events while a round commits: the loop took the rest", n, c)
		}
	}
	results := make(chan error, len(outs))
	for _, ch := range outs {
		go func() { results <- <-ch }()
	}
	e.log.commit(held)
	for answered := 0; answered < len(outs); {
		select {
		case err := <-results:
			if err != nil {
				t.Fatal(err)
			}
			answered++
		case h := <-e.log.held:
			e.log.commit(h)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d creations answered", answered, len(outs))
		}
	}
	for i := 0; i <= 20; i++ {
		if !e.topicExists(fmt.Sprintf("t-%02d", i)) {
			t.Fatalf("t-%02d was acknowledged but is not in the image", i)
		}
	}
}

// TestCatchUpPlannedAgainWhenItsRoundIsComputedAgain: a broker's first
// heartbeat after a failover plans its catch-up; computed over a round in
// flight and then computed again (the log held another entry), it still
// plans it.
func TestCatchUpPlannedAgainWhenItsRoundIsComputedAgain(t *testing.T) {
	e := newPipelineEnv(t, nil)
	if err := outcome(t, e.create("early")); err != nil {
		t.Fatal(err)
	}
	mark := e.log.Index()
	if err := outcome(t, e.create("late")); err != nil {
		t.Fatal(err)
	}
	e.c.Deactivate()
	e.c.Activate()
	if err := e.c.WaitReady(e.ctx); err != nil {
		t.Fatal(err)
	}
	// The resumption is queued once the controller is ready; a session
	// check queued behind it returns once the resumption's round has
	// committed, so the held round below is the test's own.
	if err := e.c.CheckSessions(e.ctx); err != nil {
		t.Fatal(err)
	}
	for len(e.computed) > 0 {
		<-e.computed
	}
	e.sender.Reset()

	first, r1 := e.holdFirstRound("a")
	hb := make(chan error, 1)
	go func() {
		_, err := e.c.Heartbeat(e.ctx, Heartbeat{BrokerID: 2, BrokerEpoch: e.epochs[2], MetadataOffset: mark})
		hb <- err
	}()
	e.awaitComputed(1, true)
	foreign, err := rl.EncodeBatch([]rl.Record{&rl.Topic{TopicID: rl.TopicID{0xf}, Name: "foreign"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.log.MemLog.Apply(foreign, 0).Error(); err != nil {
		t.Fatal(err)
	}
	e.log.commit(r1)
	if err := outcome(t, first); err != nil {
		t.Fatal(err)
	}
	e.awaitComputed(1, false) // the heartbeat, computed again over the image
	if err := outcome(t, hb); err != nil {
		t.Fatal(err)
	}
	caughtUp := false
	for _, r := range e.sender.Sent(2) {
		if r.UpdateMetadata != nil {
			for _, p := range r.UpdateMetadata.Partitions {
				caughtUp = caughtUp || p.Topic == "late"
			}
		}
	}
	if !caughtUp {
		t.Fatalf("broker 2, behind since before \"late\", got no catch-up: %+v", e.sender.Sent(2))
	}
}
