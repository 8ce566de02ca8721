package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// The tests here stop the active controller after every possible number
// of log entries of a flow (its events split into small entries, so one
// event spans several), and check that a new activation finishes the work
// from whatever prefix of the log committed: a deletion or reassignment
// survives a failover at every step, mid-event included.

// pcEnv is a controller over a prefixLog, in a synctest bubble, with
// brokers that confirm deletions at once.
type pcEnv struct {
	t      *testing.T
	ctx    context.Context
	fsm    *fsm.FSM
	log    *prefixLog
	resp   *deleteResponder
	c      *Controller
	logs   *scenarioLogBuffer
	epochs map[int32]int64
	// regains counts the activations after the first.
	regains int
}

func newPCEnv(t *testing.T, maxRecords int) *pcEnv {
	e := &pcEnv{t: t, ctx: context.Background(), logs: &scenarioLogBuffer{}, epochs: map[int32]int64{}}
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: e.logs, DisableTime: true})
	e.fsm = fsm.New(fsm.Options{Logger: logger, Halt: func(err error) { t.Errorf("fsm halted: %v", err) }})
	e.log = &prefixLog{MemLog: NewMemLog(e.fsm)}
	e.resp = newDeleteResponder(nil)
	e.c = New(Config{NodeID: 1, FSM: e.fsm, Log: e.log, Sender: e.resp, Logger: logger,
		Clock: &fakeClock{now: time.Unix(1_700_000_000, 0)}, SessionTimeout: time.Hour, MaxRecordsPerEntry: maxRecords})
	e.resp.c.Store(e.c)
	e.c.Activate()
	if err := e.c.WaitReady(e.ctx); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	return e
}

func (e *pcEnv) close() { e.c.Deactivate() }

// regain makes the controller active again with the log accepting
// everything, as a new leader would be, and lets it resume.
func (e *pcEnv) regain() {
	e.t.Helper()
	e.c.Deactivate()
	e.log.arm(-1)
	e.c.Activate()
	if err := e.c.WaitReady(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.regains++
	synctest.Wait()
}

// do runs fn; when it fails with NOT_CONTROLLER (the log was cut) or
// times out (its event was queued as the controller stopped, and waits
// for the next one), the controller is made active again and fn runs once
// more, as a client retries against the new controller. Time is the
// bubble's: a timeout only fires once everything else is blocked.
func (e *pcEnv) do(fn func() error) {
	e.t.Helper()
	try := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		e.ctx = ctx
		err := fn()
		synctest.Wait()
		return err
	}
	err := try()
	// A client tries again after NOT_CONTROLLER and after an outcome it
	// cannot know: a timeout, or a change cut short by the cut log.
	if errors.Is(err, ErrNotController) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kerr.RequestTimedOut) {
		e.regain()
		err = try()
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// settle makes the controller active again if the log was cut while no
// call was waiting (work the controller queued for itself).
func (e *pcEnv) settle() {
	synctest.Wait()
	if ok, _ := e.c.Active(); !ok {
		e.regain()
	}
}

func (e *pcEnv) register(id int32) {
	e.do(func() error {
		ep, err := e.c.RegisterBroker(e.ctx, BrokerRegistration{BrokerID: id, IncarnationID: rl.IncarnationID{byte(id), 9}})
		if err != nil {
			return err
		}
		e.epochs[id] = ep
		return nil
	})
	e.heartbeat(id, false)
}

func (e *pcEnv) heartbeat(id int32, fence bool) {
	e.do(func() error {
		_, err := e.c.Heartbeat(e.ctx, Heartbeat{BrokerID: id, BrokerEpoch: e.epochs[id], MetadataOffset: e.log.Index(), WantFence: fence})
		return err
	})
}

func (e *pcEnv) noLoggedErrors() {
	if errs := e.logs.takeErrors(); len(errs) > 0 {
		e.t.Fatalf("controller logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// checkInvariants checks what must hold of any image: the ISR within the
// replicas, a leader in the ISR, replica states from the seven.
func checkInvariants(t *testing.T, im *fsm.Image) {
	t.Helper()
	for _, tp := range im.Topics() {
		im.EachPartition(tp.ID, func(i int32, p *fsm.Partition) bool {
			for _, b := range p.ISR {
				if slices.Index(p.Replicas, b) < 0 {
					t.Fatalf("%s-%d: ISR %v outside replicas %v", tp.Name, i, p.ISR, p.Replicas)
				}
			}
			if p.Leader != rl.NoLeader && !p.InISR(p.Leader) {
				t.Fatalf("%s-%d: leader %d not in ISR %v", tp.Name, i, p.Leader, p.ISR)
			}
			for _, s := range p.ReplicaStates {
				if !s.Valid() {
					t.Fatalf("%s-%d: replica state %v", tp.Name, i, s)
				}
			}
			return true
		})
	}
}

// deletionFlow deletes six topics (three partitions, three replicas each)
// with broker 4 fenced, then brings broker 4 back. cut >= 0 stops the
// controller after that many entries. It returns how many entries the
// flow took.
func deletionFlow(t *testing.T, cut int) int {
	var entries int
	synctest.Test(t, func(t *testing.T) {
		e := newPCEnv(t, 6)
		defer e.close()
		for b := int32(1); b <= 4; b++ {
			e.register(b)
		}
		var req []DeleteTopic
		for i := 0; i < 6; i++ {
			name := fmt.Sprintf("t%d", i)
			var assign [][]int32
			for p := 0; p < 3; p++ {
				first := int32((i+p)%4) + 1
				assign = append(assign, []int32{first, first%4 + 1, (first+1)%4 + 1})
			}
			e.do(func() error {
				return e.c.CreateTopics(e.ctx, []CreateTopic{{Name: name, NumPartitions: -1, ReplicationFactor: -1, Assignment: assign}}, false)[0].Err
			})
			req = append(req, DeleteTopic{Name: name})
		}
		e.heartbeat(4, true)
		start := e.log.Index()
		e.log.arm(cut)
		e.do(func() error {
			var err error
			for _, r := range e.c.DeleteTopics(e.ctx, req) {
				if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) && err == nil {
					err = r.Err
				}
			}
			return err
		})
		e.settle()
		e.heartbeat(4, false)
		e.settle()
		entries = int(e.log.Index() - start)
		if cut >= 0 && cut < entries && e.regains == 0 {
			t.Fatalf("cut after %d of %d entries but the controller never had to be replaced", cut, entries)
		}
		e.fsm.View(func(im *fsm.Image) {
			checkInvariants(t, im)
			if im.NumTopics() != 0 || im.NumPartitions() != 0 {
				_, text := imageDigest(im)
				t.Fatalf("cut=%d: %d topics and %d partitions left:\n%s", cut, im.NumTopics(), im.NumPartitions(), text)
			}
		})
		e.noLoggedErrors()
	})
	return entries
}

func TestDeletionSurvivesFailoverAtEveryEntry(t *testing.T) {
	total := deletionFlow(t, -1)
	if total < 5 {
		t.Fatalf("the flow took only %d entries: nothing to cut", total)
	}
	for cut := 0; cut < total; cut++ {
		t.Run(fmt.Sprintf("cut=%d", cut), func(t *testing.T) { deletionFlow(t, cut) })
	}
}

// reassignTargets are the targets of reassignmentFlow, from replicas
// 1,2,3: a move, a move of the leader, a shrink, and a move off two.
var reassignTargets = [][]int32{{2, 3, 4}, {4, 1, 2}, {1, 2}, {3, 4}}

// reassignmentFlow reassigns 16 partitions (replicas 1,2,3) in one
// request, has the leaders add the new replicas to their ISRs until no
// reassignment is in progress, and checks every partition ends on its
// target. cut >= 0 stops the controller after that many entries.
func reassignmentFlow(t *testing.T, cut int) int {
	var entries int
	synctest.Test(t, func(t *testing.T) {
		e := newPCEnv(t, 5)
		defer e.close()
		for b := int32(1); b <= 4; b++ {
			e.register(b)
		}
		var reqs []Reassign
		for i := 0; i < 4; i++ {
			name := fmt.Sprintf("r%d", i)
			e.do(func() error {
				return e.c.CreateTopics(e.ctx, []CreateTopic{{Name: name, NumPartitions: -1, ReplicationFactor: -1,
					Assignment: [][]int32{{1, 2, 3}, {1, 2, 3}, {1, 2, 3}, {1, 2, 3}}}}, false)[0].Err
			})
			for p := int32(0); p < 4; p++ {
				reqs = append(reqs, Reassign{Topic: name, Partition: p, Replicas: reassignTargets[(i+int(p))%4]})
			}
		}
		start := e.log.Index()
		e.log.arm(cut)
		e.do(func() error {
			var err error
			for _, r := range e.c.AlterPartitionReassignments(e.ctx, reqs) {
				if r.Err != nil && err == nil {
					err = r.Err
				}
			}
			return err
		})
		e.settle()
		for round := 0; ; round++ {
			var pending []ReassignmentStatus
			e.fsm.View(func(im *fsm.Image) { pending = ListReassignments(im, nil) })
			if len(pending) == 0 {
				break
			}
			if round == 5 {
				t.Fatalf("cut=%d: reassignments still in progress: %+v", cut, pending)
			}
			for _, st := range pending {
				e.do(func() error { return e.joinISR(st.Topic, st.Partition) })
			}
			e.settle()
		}
		e.settle()
		entries = int(e.log.Index() - start)
		if cut >= 0 && cut < entries && e.regains == 0 {
			t.Fatalf("cut after %d of %d entries but the controller never had to be replaced", cut, entries)
		}
		e.fsm.View(func(im *fsm.Image) {
			checkInvariants(t, im)
			for _, r := range reqs {
				tp := im.TopicByName(r.Topic)
				p := im.Partition(tp.ID, r.Partition)
				ok := slices.Equal(p.Replicas, r.Replicas) && slices.Index(r.Replicas, p.Leader) >= 0 && p.State == rl.OnlinePartition && len(tp.Reassignments) == 0
				for _, s := range p.ReplicaStates {
					ok = ok && s == rl.OnlineReplica
				}
				if !ok {
					_, text := imageDigest(im)
					t.Fatalf("cut=%d: %s-%d did not end on %v:\n%s", cut, r.Topic, r.Partition, r.Replicas, text)
				}
			}
		})
		e.noLoggedErrors()
	})
	return entries
}

// joinISR has the partition's leader add every replica being added to
// its ISR.
func (e *pcEnv) joinISR(topic string, part int32) error {
	var req AlterPartitionRequest
	e.fsm.View(func(im *fsm.Image) {
		tp := im.TopicByName(topic)
		p := im.Partition(tp.ID, part)
		isr := slices.Clone(p.ISR)
		for _, b := range tp.Reassignments[part].Adding {
			if !slices.Contains(isr, b) {
				isr = append(isr, b)
			}
		}
		req = AlterPartitionRequest{BrokerID: p.Leader, BrokerEpoch: e.epochs[p.Leader], Partitions: []AlterPartitionItem{{
			TopicID: tp.ID, Partition: part, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: isr}}}
	})
	res, err := e.c.AlterPartition(e.ctx, req)
	if err != nil {
		return err
	}
	return res[0].Err
}

func TestReassignmentSurvivesFailoverAtEveryEntry(t *testing.T) {
	total := reassignmentFlow(t, -1)
	if total < 5 {
		t.Fatalf("the flow took only %d entries: nothing to cut", total)
	}
	for cut := 0; cut < total; cut++ {
		t.Run(fmt.Sprintf("cut=%d", cut), func(t *testing.T) { reassignmentFlow(t, cut) })
	}
}
