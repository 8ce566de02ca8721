package history

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestRecorderKeepsEveryOp(t *testing.T) {
	var sink bytes.Buffer
	r := NewRecorder(&syncWriter{w: &sink})
	var wg sync.WaitGroup
	const clients, each = 4, 24
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				topic := fmt.Sprintf("t%d", i%3)
				p := r.Invoke(c, Create, topic, Args{Partitions: 3, ReplicationFactor: 2})
				switch i % 4 {
				case 0:
					p.Finish(&Result{TopicID: "id"}, nil)
				case 1:
					p.Finish(nil, fmt.Errorf("create %s: %w", topic, kerr.TopicAlreadyExists))
				case 2:
					p.Finish(nil, context.DeadlineExceeded)
				case 3:
					// never answered: the client stopped
				}
				p.OK(nil) // a second completion is ignored unless it is the first
			}
		}()
	}
	wg.Wait()
	ops := r.Ops()
	if len(ops) != clients*each {
		t.Fatalf("%d ops recorded, want %d", len(ops), clients*each)
	}
	count := map[Outcome]int{}
	for i, op := range ops {
		if op.ID != int64(i+1) {
			t.Fatalf("op %d has id %d", i, op.ID)
		}
		count[op.Outcome]++
		switch op.Outcome {
		case OK:
			if op.Complete.Before(op.Invoke) {
				t.Errorf("%s completes before it was invoked", op)
			}
		case Fail:
			if op.Code != kerr.TopicAlreadyExists.Code || op.ErrorName() != "TOPIC_ALREADY_EXISTS" {
				t.Errorf("fail op %s: code %d", op, op.Code)
			}
		case Unknown:
			if !op.Complete.IsZero() || op.Error == "" {
				t.Errorf("unknown op %s: complete %v error %q", op, op.Complete, op.Error)
			}
		}
	}
	// The extra p.OK(nil) turned each never-answered op into a success.
	if count[OK] != clients*each/2 || count[Fail] != clients*each/4 || count[Unknown] != clients*each/4 {
		t.Fatalf("outcomes = %v", count)
	}
	// The sink got every completed op as a line.
	lines, err := ReadJSONL[Op](bytes.NewReader(sink.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != clients*each {
		t.Fatalf("sink has %d ops, want %d", len(lines), clients*each)
	}
	if r.SinkErr() != nil {
		t.Fatal(r.SinkErr())
	}
}

func TestRecorderReportsOpenOpsAsUnknown(t *testing.T) {
	r := NewRecorder(nil)
	done := r.Invoke(0, Delete, "a", Args{})
	done.OK(nil)
	r.Invoke(1, Describe, "a", Args{}) // still waiting
	ops := r.Ops()
	if len(ops) != 2 || ops[0].Outcome != OK || ops[1].Outcome != Unknown || !strings.Contains(ops[1].Error, "still open") {
		t.Fatalf("ops = %v", ops)
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err     error
		outcome Outcome
		code    int16
	}{
		{nil, OK, 0},
		{kerr.NotController, Fail, kerr.NotController.Code},
		{fmt.Errorf("wrapped: %w", kerr.UnknownTopicOrPartition), Fail, kerr.UnknownTopicOrPartition.Code},
		{context.DeadlineExceeded, Unknown, 0},
		{io.EOF, Unknown, 0},
		{errors.New("something odd"), Unknown, 0},
	} {
		o, code := Classify(c.err)
		if o != c.outcome || code != c.code {
			t.Errorf("Classify(%v) = %s %d, want %s %d", c.err, o, code, c.outcome, c.code)
		}
	}
	if !Lost(fmt.Errorf("x: %w", io.ErrUnexpectedEOF)) || Lost(kerr.NotController) {
		t.Error("Lost misjudged")
	}
	if CodeOf("STALE_CONTROLLER_EPOCH") != kerr.StaleControllerEpoch.Code || CodeOf("NO_SUCH_THING") != 0 {
		t.Error("CodeOf misjudged")
	}
}

func TestJSONLRoundTrip(t *testing.T) {
	base := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)
	leader := int32(2)
	ops := []Op{
		{ID: 1, Client: 0, Kind: Create, Topic: "a", Args: Args{Partitions: 3, ReplicationFactor: 2}, Invoke: base, Complete: base.Add(time.Millisecond), Outcome: OK, Result: &Result{TopicID: "00ff"}},
		{ID: 2, Client: 1, Kind: Elect, Topic: "a", Args: Args{Partition: 1, Election: "preferred"}, Invoke: base, Complete: base.Add(time.Second), Outcome: OK, Result: &Result{Leader: &leader}},
		{ID: 3, Client: 2, Kind: Delete, Topic: "a", Invoke: base, Outcome: Unknown, Error: "i/o timeout"},
		{ID: 4, Client: 2, Kind: List, Invoke: base, Complete: base, Outcome: OK, Result: &Result{Topics: []TopicInfo{{Name: "a", TopicID: "00ff", Partitions: 3}}}},
	}
	obs := []Observation{{Broker: 3, Incarnation: "x", Seq: 9, Time: base, Request: LeaderAndIsr, ControllerEpoch: 4, Topic: "a", Partition: 0, Leader: 3, LeaderEpoch: 2, PartitionEpoch: 5, ISR: []int32{3, 1}, Accepted: false, ErrorCode: kerr.StaleControllerEpoch.Code}}
	faults := []FaultEvent{{Fault: 1, Kind: "kill", Phase: Start, Time: base, Nodes: []int{2}, Detail: "kill -9"}}
	dir := t.TempDir()
	if err := WriteFile(filepath.Join(dir, "ops.jsonl"), ops); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "obs.jsonl"), obs); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "faults.jsonl"), faults); err != nil {
		t.Fatal(err)
	}
	gotOps, err := ReadFile[Op](filepath.Join(dir, "ops.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	gotObs, err := ReadFile[Observation](filepath.Join(dir, "obs.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	gotFaults, err := ReadFile[FaultEvent](filepath.Join(dir, "faults.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotOps, ops) || len(gotOps) != 4 || !gotOps[0].Invoke.Equal(base) || *gotOps[1].Result.Leader != 2 || !gotOps[2].Complete.IsZero() {
		t.Fatalf("ops: got\n%v\nwant\n%v", gotOps, ops)
	}
	if !reflect.DeepEqual(gotObs, obs) || gotObs[0].ISR[1] != 1 {
		t.Fatalf("observations: got %v want %v", gotObs, obs)
	}
	if !reflect.DeepEqual(gotFaults, faults) {
		t.Fatalf("faults: got %v want %v", gotFaults, faults)
	}
	// Unknown ops have no complete field at all.
	b, _ := os.ReadFile(filepath.Join(dir, "ops.jsonl"))
	third := strings.Split(string(b), "\n")[2]
	if strings.Contains(third, "complete") || !strings.Contains(third, `"outcome":"unknown"`) {
		t.Errorf("unknown op line = %s", third)
	}
}

func TestReadJSONLRejectsACutLine(t *testing.T) {
	in := `{"id":1,"kind":"create","outcome":"ok"}` + "\n\n" + `{"id":2,"kind":"del`
	ops, err := ReadJSONL[Op](strings.NewReader(in))
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("err = %v", err)
	}
	if len(ops) != 1 {
		t.Fatalf("ops before the cut line = %v", ops)
	}
}

func TestStrings(t *testing.T) {
	base := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	op := Op{ID: 7, Client: 2, Kind: Reassign, Topic: "t", Args: Args{Partition: 1, Replicas: []int32{1, 2}}, Invoke: base, Complete: base.Add(12 * time.Millisecond), Outcome: Fail, Code: kerr.NoReassignmentInProgress.Code}
	if got, want := op.String(), "#7 c2 reassign t-1 to [1 2] → fail NO_REASSIGNMENT_IN_PROGRESS [03:04:05.000 +12ms]"; got != want {
		t.Errorf("op = %q, want %q", got, want)
	}
	o := Observation{Broker: 3, Seq: 4, Time: base, Request: LeaderAndIsr, ControllerEpoch: 2, Topic: "t", Partition: 0, Leader: 3, LeaderEpoch: 5, PartitionEpoch: 6, ISR: []int32{3}, ErrorCode: kerr.StaleControllerEpoch.Code}
	if got, want := o.String(), "broker 3 #4 LeaderAndIsr ce=2 t-0 leader=3 le=5 pe=6 isr=[3]: refused STALE_CONTROLLER_EPOCH [03:04:05.000]"; got != want {
		t.Errorf("observation = %q, want %q", got, want)
	}
}

// TestRefusedAndPartitions: a refusal before any proposal and a describe's
// partitions are recorded, written and read back, and shown.
func TestRefusedAndPartitions(t *testing.T) {
	var sink bytes.Buffer
	r := NewRecorder(&syncWriter{w: &sink})
	p := r.Invoke(0, Reassign, "t", Args{Partition: 1, Replicas: []int32{4}})
	p.Refuse(kerr.NotController.Code, "NOT_CONTROLLER: node 1002 is a standby voter")
	p.OK(nil) // ignored
	d := r.Invoke(1, Describe, "t", Args{})
	d.OK(&Result{TopicID: "00ff", Partitions: 2, Parts: []PartitionInfo{
		{Partition: 0, Leader: 4, LeaderEpoch: 3, Replicas: []int32{4, 1}},
		{Partition: 1, Leader: -1, LeaderEpoch: 5, Replicas: []int32{2}},
	}})
	f := r.Invoke(2, Create, "t", Args{Partitions: 1})
	f.Fail(kerr.TopicAlreadyExists.Code, "TOPIC_ALREADY_EXISTS")
	ops := r.Ops()
	if !ops[0].Refused || ops[0].Outcome != Fail || ops[2].Refused {
		t.Fatalf("ops = %v", ops)
	}
	back, err := ReadJSONL[Op](bytes.NewReader(sink.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range back {
		back[i].Invoke, back[i].Complete = ops[i].Invoke, ops[i].Complete // monotonic readings differ
	}
	if !reflect.DeepEqual(back, ops) {
		t.Fatalf("read back\n%v\nwant\n%v", back, ops)
	}
	if s := ops[0].String(); !strings.Contains(s, "fail NOT_CONTROLLER (refused before any proposal)") {
		t.Errorf("refused op = %q", s)
	}
	if s := ops[1].String(); !strings.Contains(s, "id=00ff p=2 0:L4@3[4 1] 1:L-1@5[2]") {
		t.Errorf("describe = %q", s)
	}
}
