package controller

// Scenario tests, in the spirit of etcd-io/raft's interaction tests: a
// script of events is replayed against the real controller over the
// in-memory log, and after each event the runner prints what it caused.
// The printout is compared with the expected block in the script.
//
// Scripts live in testdata/scenarios/*.txt, one subtest per file:
//
//	go test ./controller -run TestScenario/failover
//
// To write the actual output into the scripts instead of comparing (then
// review the diff!):
//
//	go test ./controller -run TestScenario -args -rewrite
//	REWRITE=1 go test ./controller -run TestScenario
//
// # Script format
//
// A script is a sequence of cases. Lines starting with '#' and blank lines
// between cases are comments. A case is one command line, a line holding
// exactly "----", and the expected output, which ends at the next blank
// line or at the end of the file:
//
//	# broker 1 joins
//	register 1 rack=a
//	----
//	@2 RegisterBroker 1 inc=1 rack=a
//	...
//	ok epoch=2 caught-up=true fenced=false
//
// Commands (arguments in brackets are optional):
//
//	register B [rack=R] [restart] [incarnation=N] [no-heartbeat]
//	    BrokerRegistration of broker B (rack defaults to the one B last
//	    registered with). The incarnation id is derived from B and a
//	    per-broker counter that starts at 1; restart bumps the counter (a
//	    new process), incarnation=N sets it. Unless no-heartbeat is given,
//	    a successful registration is followed by a caught-up heartbeat
//	    with the new epoch, which unfences the broker.
//	heartbeat B [offset=N] [shutdown] [fence] [epoch=N|prev]
//	    BrokerHeartbeat. offset is the metadata offset the broker reports
//	    (default: the last log index, i.e. caught up). epoch defaults to
//	    the epoch of the broker's last successful registration; prev is the
//	    one before that.
//	advance D
//	    Moves the controller's clock by the Go duration D. Prints the time
//	    since the script started.
//	expire
//	    CheckSessions: fences every broker whose session ran out.
//	create T [partitions=N] [rf=N] [assign=1,2,3;2,3,1] [config=k=v[,k=v]]
//	    CreateTopics with one topic. Without assign, partitions and rf
//	    default to -1 (the broker defaults); with assign, both default to
//	    -1 as the API requires and the assignment lists partition 0's
//	    replicas first, partitions separated by ';'.
//	alter-isr T/P by=B isr=1,2 [leader-epoch=N] [partition-epoch=N] [broker-epoch=N|prev]
//	    AlterPartition from broker B for one partition. The epochs default
//	    to the partition's current leader and partition epochs and to B's
//	    current broker epoch.
//	lose-leadership
//	    The log refuses every later proposal (raft lost leadership) and
//	    the controller is deactivated, as the node does when raft reports it.
//	depose
//	    The log refuses every later proposal, but the controller is not
//	    told: the next call finds out when its proposal fails.
//	regain
//	    The log accepts proposals again and the controller is activated
//	    anew (a new controller epoch). Waits for activation and for the
//	    work queued behind it.
//	show [T...]
//	    Prints brokers and the partitions of topics T (default all) from
//	    the committed image. Sends nothing.
//
// Commands registered in scenarioCommands by other files are documented
// there (topic deletion, reassignment and elections: scenario_ops_test.go).
//
// # Output
//
// After each command the runner waits until the controller is idle and
// prints, in this order:
//
//  1. The records committed since the previous command, one per line,
//     each prefixed with the raft index of its log entry (a broker's epoch
//     is the index of its registration):
//
//     @5 PartitionChange orders/0 if-pe=1 leader=2 isr=[2,3]
//
//     if-pe is the partition epoch the change was computed from (it applies
//     only if that is still current); fields a change does not set are not
//     printed. ReplicaState and PartitionState list the replicas as
//     partition@broker and the partitions as numbers.
//
//  2. The control requests sent since the previous command, per broker in
//     id order, each broker's in the order sent (LeaderAndIsr, then
//     UpdateMetadata, then StopReplica for each committed batch):
//
//     -> 2 LeaderAndIsr ce=1 orders/0 leader=2 le=2 isr=[2,3] pe=3
//     -> 3 UpdateMetadata ce=1 partitions=[orders/0] brokers=[1,2,3]
//     -> 1 StopReplica ce=1 orders/0 le=1 delete=false
//
//     ce is the controller epoch, le the leader epoch, pe the partition
//     epoch; "new" marks a replica just created. A request for several
//     partitions lists them on indented lines below its first line.
//
//  3. The command's result: "ok ..." or "error NAME" with the Kafka error
//     name (code 6 under its current name, NOT_LEADER_OR_FOLLOWER).
//
// Lines the controller logs at ERROR level during the command follow as
// "log: ..." lines: a correct run has none.
//
// Topic ids are random: everything is printed by topic name. Where the
// controller orders topics by id, the printout orders them by name: the
// partitions of a request, and the records of different topics within a
// run of consecutive records of one type (their order carries no meaning).
// The controller runs in a synctest bubble, whose time moves only when
// every goroutine in it is blocked; the runner never waits on time, so
// the event loop's session-check ticker never fires. The controller's
// clock is a separate one that only "advance" moves: a session that ran
// out is fenced on "expire", and otherwise only counts where a command
// looks at it (a registration refused while the old session is live).
//
// The controller's index 1 is its first ControllerEpoch record, committed
// before the first command; the session timeout is 10s.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// scenarioCommands holds commands that other test files add to the
// scenario language, by name.
var scenarioCommands = map[string]func(s *scenario, a *scenarioArgs) ([]string, error){}

var rewriteScenarios = flag.Bool("rewrite", false, "write the actual output of scenario scripts into testdata/scenarios instead of comparing")

const scenarioSessionTimeout = 10 * time.Second

func TestScenario(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scenario scripts in testdata/scenarios")
	}
	rewrite := *rewriteScenarios || os.Getenv("REWRITE") != ""
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runScenarioFile(t, file, rewrite)
		})
	}
}

// scenarioCase is one command of a script and where its expected output
// sits in the file.
type scenarioCase struct {
	line     int // 1-based line of the command
	cmd      string
	want     []string
	outStart int // index in the file's lines of the first expected line
	outEnd   int // one past the last
	got      []string
}

func parseScenario(path string, data []byte) (lines []string, cases []*scenarioCase, err error) {
	text := strings.TrimRight(string(data), "\n")
	lines = strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if l == "----" {
			return nil, nil, fmt.Errorf("%s:%d: \"----\" without a command", path, i+1)
		}
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "----" {
			return nil, nil, fmt.Errorf("%s:%d: command %q is not followed by a \"----\" line", path, i+1, l)
		}
		c := &scenarioCase{line: i + 1, cmd: l, outStart: i + 2}
		j := i + 2
		for j < len(lines) && strings.TrimSpace(lines[j]) != "" {
			c.want = append(c.want, strings.TrimRight(lines[j], " \t"))
			j++
		}
		c.outEnd = j
		cases = append(cases, c)
		i = j
	}
	return lines, cases, nil
}

func runScenarioFile(t *testing.T, path string, rewrite bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines, cases, err := parseScenario(path, data)
	if err != nil {
		t.Fatal(err)
	}
	logs := &scenarioLogBuffer{}
	synctest.Test(t, func(t *testing.T) {
		s := newScenario(t, logs)
		defer s.close()
		defer func() {
			if t.Failed() {
				t.Logf("controller log:\n%s", logs.all())
			}
		}()
		for _, c := range cases {
			c.got = s.run(c)
			if !rewrite && !slices.Equal(c.got, c.want) {
				t.Errorf("%s:%d: %s\nwant:\n%s\ngot:\n%s", path, c.line, c.cmd, indentLines(c.want), indentLines(c.got))
			}
		}
	})
	if !rewrite || t.Failed() {
		// A script that stopped half-way has no output for its later
		// cases: leave the file alone.
		return
	}
	var out []string
	prev := 0
	for _, c := range cases {
		out = append(out, lines[prev:c.outStart]...)
		out = append(out, c.got...)
		prev = c.outEnd
	}
	out = append(out, lines[prev:]...)
	if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func indentLines(ls []string) string {
	if len(ls) == 0 {
		return "    (nothing)"
	}
	return "    " + strings.Join(ls, "\n    ")
}

// scenarioLogBuffer collects the controller's log: all of it for a failed
// test, and the ERROR lines of each command for its output.
type scenarioLogBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	partial []byte
	errors  []string
}

func (b *scenarioLogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	b.partial = append(b.partial, p...)
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			break
		}
		line := string(b.partial[:i])
		b.partial = b.partial[i+1:]
		if strings.HasPrefix(line, "[ERROR]") {
			b.errors = append(b.errors, line)
		}
	}
	return len(p), nil
}

func (b *scenarioLogBuffer) takeErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.errors
	b.errors = nil
	return out
}

func (b *scenarioLogBuffer) all() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// scenario is one script's world: an FSM, the in-memory log, the recording
// sender, a hand-moved clock and the controller over them, plus what the
// simulated brokers know (their incarnations and epochs).
type scenario struct {
	t      *testing.T
	ctx    context.Context
	fsm    *fsm.FSM
	log    *MemLog
	sender *RecordingSender
	clock  *fakeClock
	start  time.Time
	c      *Controller
	logs   *scenarioLogBuffer

	incarnation map[int32]uint32
	rack        map[int32]string
	epoch       map[int32]int64
	prevEpoch   map[int32]int64
	names       map[rl.TopicID]string

	printedEntries int
	printedSent    map[int32]int

	// history holds the transitions the FSM reported (state-change
	// history); printedHistory how many entries `history` has shown.
	historyMu      sync.Mutex
	history        []fsm.EntryChanges
	printedHistory int
}

func newScenario(t *testing.T, logs *scenarioLogBuffer) *scenario {
	s := &scenario{
		t:           t,
		ctx:         context.Background(),
		sender:      NewRecordingSender(),
		clock:       &fakeClock{now: time.Unix(1_700_000_000, 0)},
		logs:        logs,
		incarnation: map[int32]uint32{},
		rack:        map[int32]string{},
		epoch:       map[int32]int64{},
		prevEpoch:   map[int32]int64{},
		names:       map[rl.TopicID]string{},
		printedSent: map[int32]int{},
	}
	s.start = s.clock.Now()
	logger := hclog.New(&hclog.LoggerOptions{Name: "scenario", Level: hclog.Debug, Output: logs, DisableTime: true})
	s.fsm = fsm.New(fsm.Options{Logger: logger, Halt: func(err error) { t.Errorf("fsm halted: %v", err) },
		OnStateChanges: func(e fsm.EntryChanges) {
			s.historyMu.Lock()
			s.history = append(s.history, e)
			s.historyMu.Unlock()
		}})
	s.log = NewMemLog(s.fsm)
	s.log.Keep = true
	s.c = New(Config{NodeID: 1, FSM: s.fsm, Log: s.log, Sender: s.sender, Clock: s.clock, Logger: logger,
		SessionTimeout: scenarioSessionTimeout})
	s.c.Activate()
	if err := s.c.WaitReady(s.ctx); err != nil {
		t.Fatalf("activation: %v", err)
	}
	synctest.Wait()
	// What activation did is not any command's output.
	s.collect()
	return s
}

func (s *scenario) close() { s.c.Deactivate() }

// run executes one command and returns its printout.
func (s *scenario) run(c *scenarioCase) []string {
	fields := strings.Fields(c.cmd)
	a := newScenarioArgs(fields[1:])
	var result []string
	var err error
	switch fields[0] {
	case "register":
		result, err = s.register(a)
	case "heartbeat":
		result, err = s.heartbeat(a)
	case "advance":
		result, err = s.advance(a)
	case "expire":
		err = a.done()
		if err == nil {
			result = []string{okOrError(s.c.CheckSessions(s.ctx), "ok")}
		}
	case "create":
		result, err = s.create(a)
	case "alter-isr":
		result, err = s.alterISR(a)
	case "lose-leadership":
		if err = a.done(); err == nil {
			s.log.Depose()
			s.c.Deactivate()
			result = []string{"ok"}
		}
	case "depose":
		if err = a.done(); err == nil {
			s.log.Depose()
			result = []string{"ok"}
		}
	case "regain":
		result, err = s.regain(a)
	case "show":
		result = s.show(a.positional)
	default:
		if cmd, ok := scenarioCommands[fields[0]]; ok {
			result, err = cmd(s, a)
		} else {
			err = fmt.Errorf("unknown command %q", fields[0])
		}
	}
	if err != nil {
		s.t.Fatalf("line %d: %s: %v", c.line, c.cmd, err)
	}
	// Every call returns after its round committed and its requests were
	// handed over; waiting for the bubble to go idle also covers work the
	// controller queued for itself (the resumption after activation).
	synctest.Wait()
	out := s.collect()
	out = append(out, result...)
	for _, l := range s.logs.takeErrors() {
		out = append(out, "log: "+s.withNames(strings.TrimPrefix(l, "[ERROR] ")))
	}
	return out
}

// collect prints the entries and requests that are new since last time.
func (s *scenario) collect() []string {
	var out []string
	s.log.mu.Lock()
	entries := s.log.Entries[s.printedEntries:]
	first := s.printedEntries + 1
	s.printedEntries = len(s.log.Entries)
	s.log.mu.Unlock()
	for i, e := range entries {
		batch, err := rl.DecodeBatch(e)
		if err != nil {
			s.t.Fatalf("entry %d: %v", first+i, err)
		}
		batch = expandPartitionChanges(batch)
		// The causes ahead of each event's records are what history
		// prints beside each transition, not records of their own here.
		batch = slices.DeleteFunc(batch, func(r rl.Record) bool { return r.Type() == rl.TypeStateChangeCause })
		for _, r := range s.canonicalOrder(batch) {
			out = append(out, fmt.Sprintf("@%d %s", first+i, s.formatRecord(r)))
		}
	}
	for _, b := range s.sender.Brokers() {
		sent := s.sender.Sent(b)
		for _, r := range sent[s.printedSent[b]:] {
			out = append(out, s.formatRequests(r)...)
		}
		s.printedSent[b] = len(sent)
	}
	return out
}

// expandPartitionChanges prints a PartitionChanges record as the
// PartitionChange records it stands for, so the printout shows the same
// changes however the controller packed them.
func expandPartitionChanges(batch rl.Batch) rl.Batch {
	var out rl.Batch
	for _, r := range batch {
		pcs, ok := r.(*rl.PartitionChanges)
		if !ok {
			out = append(out, r)
			continue
		}
		for _, d := range pcs.Changes {
			out = append(out, &rl.PartitionChange{TopicID: pcs.TopicID, Partition: d.Partition, PartitionEpoch: d.PartitionEpoch,
				Set: d.Set, Leader: d.Leader, ISR: d.ISR, Replicas: d.Replicas, Adding: d.Adding, Removing: d.Removing})
		}
	}
	return out
}

// canonicalOrder returns the records of an entry in log order, except
// that within a run of consecutive records of one type, records of
// different topics are put in topic-name order. The controller orders the
// topics of such a run by topic id, which is random; the order carries no
// meaning, and sorting makes the printout the same every run.
func (s *scenario) canonicalOrder(batch rl.Batch) []rl.Record {
	// Topic records come first in their entry: learn the names before
	// sorting by them.
	for _, r := range batch {
		if t, ok := r.(*rl.Topic); ok {
			s.names[t.TopicID] = t.Name
		}
	}
	out := append([]rl.Record(nil), batch...)
	key := func(r rl.Record) partitionKey {
		switch r := r.(type) {
		case *rl.Partition:
			return partitionKey{s.topicName(r.TopicID, ""), r.Partition}
		case *rl.PartitionChange:
			return partitionKey{s.topicName(r.TopicID, ""), r.Partition}
		case *rl.ReplicaStateChange:
			return partitionKey{name: s.topicName(r.TopicID, "")}
		case *rl.PartitionStateChange:
			return partitionKey{name: s.topicName(r.TopicID, "")}
		case *rl.TopicConfig:
			return partitionKey{name: s.topicName(r.TopicID, "")}
		}
		return partitionKey{}
	}
	for start := 0; start < len(out); {
		end := start + 1
		for end < len(out) && out[end].Type() == out[start].Type() {
			end++
		}
		run := out[start:end]
		sort.SliceStable(run, func(i, j int) bool { return lessKey(key(run[i]), key(run[j])) })
		start = end
	}
	return out
}

// ---- commands

func (s *scenario) incarnationID(b int32, n uint32) rl.IncarnationID {
	var id rl.IncarnationID
	binary.BigEndian.PutUint32(id[0:], uint32(b))
	binary.BigEndian.PutUint32(id[4:], n)
	copy(id[8:], "scenario")
	return id
}

func (s *scenario) incarnationLabel(b int32, id rl.IncarnationID) string {
	for n := uint32(1); n <= s.incarnation[b]+1; n++ {
		if s.incarnationID(b, n) == id {
			return strconv.FormatUint(uint64(n), 10)
		}
	}
	return id.String()
}

func (s *scenario) register(a *scenarioArgs) ([]string, error) {
	id, err := a.broker()
	if err != nil {
		return nil, err
	}
	rack := a.str("rack", s.rack[id])
	s.rack[id] = rack
	n := s.incarnation[id]
	if n == 0 {
		n = 1
	}
	if a.flag("restart") {
		n++
	}
	if v, ok := a.intArg("incarnation"); ok {
		n = uint32(v)
	}
	noHeartbeat := a.flag("no-heartbeat")
	if err := a.done(); err != nil {
		return nil, err
	}
	s.incarnation[id] = n
	e, err := s.c.RegisterBroker(s.ctx, BrokerRegistration{
		BrokerID:      id,
		IncarnationID: s.incarnationID(id, n),
		Rack:          rack,
		Endpoints:     []rl.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: uint16(9000 + id)}},
	})
	if err != nil {
		return []string{"error " + kafkaErrorName(err)}, nil
	}
	if cur, ok := s.epoch[id]; ok && cur != e {
		s.prevEpoch[id] = cur
	}
	s.epoch[id] = e
	res := fmt.Sprintf("ok epoch=%d", e)
	if !noHeartbeat {
		r, err := s.c.Heartbeat(s.ctx, Heartbeat{BrokerID: id, BrokerEpoch: e, MetadataOffset: s.log.Index()})
		if err != nil {
			return []string{res, "heartbeat: error " + kafkaErrorName(err)}, nil
		}
		res += " " + formatHeartbeat(r, false)
	}
	return []string{res}, nil
}

func formatHeartbeat(r HeartbeatResponse, shutdown bool) string {
	s := fmt.Sprintf("caught-up=%v fenced=%v", r.IsCaughtUp, r.IsFenced)
	if shutdown {
		s += fmt.Sprintf(" should-shutdown=%v", r.ShouldShutDown)
	}
	return s
}

// brokerEpoch reads an epoch argument: a number, "prev", or by default the
// broker's current epoch.
func (s *scenario) brokerEpoch(a *scenarioArgs, key string, id int32) (int64, error) {
	v, ok := a.kv[key]
	if !ok {
		return s.epoch[id], nil
	}
	a.used[key] = true
	if v == "prev" {
		e, ok := s.prevEpoch[id]
		if !ok {
			return 0, fmt.Errorf("broker %d has no previous epoch", id)
		}
		return e, nil
	}
	return strconv.ParseInt(v, 10, 64)
}

func (s *scenario) heartbeat(a *scenarioArgs) ([]string, error) {
	id, err := a.broker()
	if err != nil {
		return nil, err
	}
	hb := Heartbeat{BrokerID: id, MetadataOffset: s.log.Index()}
	if hb.BrokerEpoch, err = s.brokerEpoch(a, "epoch", id); err != nil {
		return nil, err
	}
	if v, ok := a.intArg("offset"); ok {
		hb.MetadataOffset = uint64(v)
	}
	hb.WantShutDown = a.flag("shutdown")
	hb.WantFence = a.flag("fence")
	if err := a.done(); err != nil {
		return nil, err
	}
	r, err := s.c.Heartbeat(s.ctx, hb)
	if err != nil {
		return []string{"error " + kafkaErrorName(err)}, nil
	}
	return []string{"ok " + formatHeartbeat(r, hb.WantShutDown)}, nil
}

func (s *scenario) advance(a *scenarioArgs) ([]string, error) {
	if len(a.positional) != 1 {
		return nil, errors.New("advance takes one duration")
	}
	d, err := time.ParseDuration(a.positional[0])
	if err != nil {
		return nil, err
	}
	a.positional = nil
	if err := a.done(); err != nil {
		return nil, err
	}
	s.clock.Advance(d)
	return []string{fmt.Sprintf("t=%s", s.clock.Now().Sub(s.start))}, nil
}

func (s *scenario) create(a *scenarioArgs) ([]string, error) {
	if len(a.positional) != 1 {
		return nil, errors.New("create takes one topic name")
	}
	ct := CreateTopic{Name: a.positional[0], NumPartitions: -1, ReplicationFactor: -1}
	a.positional = nil
	if v, ok := a.intArg("partitions"); ok {
		ct.NumPartitions = int32(v)
	}
	if v, ok := a.intArg("rf"); ok {
		ct.ReplicationFactor = int16(v)
	}
	if v, ok := a.kv["assign"]; ok {
		a.used["assign"] = true
		for _, part := range strings.Split(v, ";") {
			ids, err := parseInts(part)
			if err != nil {
				return nil, err
			}
			ct.Assignment = append(ct.Assignment, ids)
		}
	}
	if v, ok := a.kv["config"]; ok {
		a.used["config"] = true
		for _, kv := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("config %q: want key=value", kv)
			}
			ct.Configs = append(ct.Configs, rl.ConfigEntry{Key: k, Value: val})
		}
	}
	if err := a.done(); err != nil {
		return nil, err
	}
	res := s.c.CreateTopics(s.ctx, []CreateTopic{ct}, false)[0]
	if res.Err != nil {
		return []string{"error " + kafkaErrorName(res.Err)}, nil
	}
	return []string{fmt.Sprintf("ok %s partitions=%d rf=%d", res.Name, res.NumPartitions, res.ReplicationFactor)}, nil
}

func (s *scenario) alterISR(a *scenarioArgs) ([]string, error) {
	if len(a.positional) != 1 {
		return nil, errors.New("alter-isr takes one topic/partition")
	}
	name, part, err := parsePartitionName(a.positional[0])
	if err != nil {
		return nil, err
	}
	a.positional = nil
	v, ok := a.intArg("by")
	if !ok {
		return nil, errors.New("alter-isr needs by=BROKER")
	}
	by := int32(v)
	isrArg, ok := a.kv["isr"]
	if !ok {
		return nil, errors.New("alter-isr needs isr=...")
	}
	a.used["isr"] = true
	isr, err := parseInts(isrArg)
	if err != nil {
		return nil, err
	}
	// An unknown topic goes by name, with a zero topic id.
	item := AlterPartitionItem{Topic: name, Partition: part, NewISR: isr}
	s.fsm.View(func(im *fsm.Image) {
		if t := im.TopicByName(name); t != nil {
			item.TopicID = t.ID
			if p := im.Partition(t.ID, part); p != nil {
				item.LeaderEpoch, item.PartitionEpoch = p.LeaderEpoch, p.PartitionEpoch
			}
		}
	})
	if v, ok := a.intArg("leader-epoch"); ok {
		item.LeaderEpoch = int32(v)
	}
	if v, ok := a.intArg("partition-epoch"); ok {
		item.PartitionEpoch = int32(v)
	}
	be, err := s.brokerEpoch(a, "broker-epoch", by)
	if err != nil {
		return nil, err
	}
	if err := a.done(); err != nil {
		return nil, err
	}
	res, err := s.c.AlterPartition(s.ctx, AlterPartitionRequest{BrokerID: by, BrokerEpoch: be, Partitions: []AlterPartitionItem{item}})
	if err != nil {
		return []string{"error " + kafkaErrorName(err)}, nil
	}
	var out []string
	for _, r := range res {
		ref := fmt.Sprintf("%s/%d", s.topicName(r.TopicID, r.Topic), r.Partition)
		if r.Err != nil {
			out = append(out, fmt.Sprintf("%s error %s", ref, kafkaErrorName(r.Err)))
			continue
		}
		out = append(out, fmt.Sprintf("ok %s leader=%d le=%d isr=%s pe=%d", ref, r.Leader, r.LeaderEpoch, formatInts(r.ISR), r.PartitionEpoch))
	}
	return out, nil
}

func (s *scenario) regain(a *scenarioArgs) ([]string, error) {
	if err := a.done(); err != nil {
		return nil, err
	}
	// A node that lost leadership without noticing is told now, as raft's
	// leadership notification would.
	s.c.Deactivate()
	s.log.Restore()
	s.c.Activate()
	if err := s.c.WaitReady(s.ctx); err != nil {
		return []string{"error " + kafkaErrorName(err)}, nil
	}
	_, epoch := s.c.Active()
	return []string{fmt.Sprintf("ok epoch=%d", epoch)}, nil
}

func (s *scenario) show(topics []string) []string {
	var out []string
	s.fsm.View(func(im *fsm.Image) {
		if len(topics) == 0 {
			epoch, node := im.ControllerEpoch()
			out = append(out, fmt.Sprintf("controller epoch=%d node=%d", epoch, node))
			for _, b := range im.Brokers() {
				out = append(out, fmt.Sprintf("broker %d epoch=%d inc=%s rack=%q fenced=%v shutting-down=%v",
					b.ID, b.Epoch, s.incarnationLabel(b.ID, b.Incarnation), b.Rack, b.Fenced, b.ShuttingDown))
			}
			for _, t := range im.Topics() {
				topics = append(topics, t.Name)
			}
		}
		for _, name := range topics {
			t := im.TopicByName(name)
			if t == nil {
				out = append(out, name+" does not exist")
				continue
			}
			for i := int32(0); i < im.PartitionCount(t.ID); i++ {
				p := im.Partition(t.ID, i)
				if p == nil {
					continue
				}
				var rs []string
				for j, b := range p.Replicas {
					rs = append(rs, fmt.Sprintf("%d:%s", b, strings.TrimSuffix(p.ReplicaStates[j].String(), "Replica")))
				}
				out = append(out, fmt.Sprintf("%s/%d %s leader=%d le=%d isr=%s pe=%d replicas=[%s]",
					name, i, p.State, p.Leader, p.LeaderEpoch, formatInts(p.ISR), p.PartitionEpoch, strings.Join(rs, " ")))
			}
		}
	})
	return out
}

// ---- printing

func okOrError(err error, ok string) string {
	if err != nil {
		return "error " + kafkaErrorName(err)
	}
	return ok
}

// kafkaErrorName names the Kafka error an error carries.
func kafkaErrorName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		if ke.Code == kerr.NotLeaderForPartition.Code {
			return "NOT_LEADER_OR_FOLLOWER"
		}
		if ke.Code == kerr.UnknownServerError.Code {
			return ke.Message + " (" + err.Error() + ")"
		}
		return ke.Message
	}
	return fmt.Sprintf("UNKNOWN_SERVER_ERROR (%v)", err)
}

func (s *scenario) topicName(id rl.TopicID, fallback string) string {
	if n, ok := s.names[id]; ok {
		return n
	}
	var name string
	s.fsm.View(func(im *fsm.Image) {
		if t := im.Topic(id); t != nil {
			name = t.Name
		}
	})
	if name != "" {
		s.names[id] = name
		return name
	}
	if fallback != "" {
		return fallback
	}
	return "topic(" + id.String() + ")"
}

// withNames replaces topic ids in a log line by topic names.
func (s *scenario) withNames(line string) string {
	for id, name := range s.names {
		line = strings.ReplaceAll(line, id.String(), name)
	}
	return line
}

func formatInts[T int32 | int64](xs []T) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatInt(int64(x), 10)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func (s *scenario) formatRecord(r rl.Record) string {
	switch r := r.(type) {
	case *rl.ControllerEpoch:
		return fmt.Sprintf("ControllerEpoch epoch=%d node=%d", r.Epoch, r.NodeID)
	case *rl.RegisterBroker:
		out := fmt.Sprintf("RegisterBroker %d inc=%s", r.BrokerID, s.incarnationLabel(r.BrokerID, r.IncarnationID))
		if r.Rack != "" {
			out += " rack=" + r.Rack
		}
		return out
	case *rl.FenceBroker:
		return fmt.Sprintf("FenceBroker %d epoch=%d", r.BrokerID, r.BrokerEpoch)
	case *rl.UnfenceBroker:
		return fmt.Sprintf("UnfenceBroker %d epoch=%d", r.BrokerID, r.BrokerEpoch)
	case *rl.BrokerShutdown:
		return fmt.Sprintf("BrokerShutdown %d epoch=%d", r.BrokerID, r.BrokerEpoch)
	case *rl.UnregisterBroker:
		return fmt.Sprintf("UnregisterBroker %d epoch=%d", r.BrokerID, r.BrokerEpoch)
	case *rl.Topic:
		s.names[r.TopicID] = r.Name
		out := "Topic " + r.Name
		if len(r.Configs) > 0 {
			var cs []string
			for _, c := range r.Configs {
				cs = append(cs, c.Key+"="+c.Value)
			}
			out += " configs=[" + strings.Join(cs, " ") + "]"
		}
		return out
	case *rl.TopicConfig:
		if r.Delete {
			return fmt.Sprintf("TopicConfig %s delete %s", s.topicName(r.TopicID, ""), r.Key)
		}
		return fmt.Sprintf("TopicConfig %s %s=%s", s.topicName(r.TopicID, ""), r.Key, r.Value)
	case *rl.Partition:
		return fmt.Sprintf("Partition %s/%d replicas=%s", s.topicName(r.TopicID, ""), r.Partition, formatInts(r.Replicas))
	case *rl.PartitionChange:
		out := fmt.Sprintf("PartitionChange %s/%d if-pe=%d", s.topicName(r.TopicID, ""), r.Partition, r.PartitionEpoch)
		if r.Has(rl.ChangeLeader) {
			out += fmt.Sprintf(" leader=%d", r.Leader)
		}
		if r.Has(rl.ChangeISR) {
			out += " isr=" + formatInts(r.ISR)
		}
		if r.Has(rl.ChangeReplicas) {
			out += " replicas=" + formatInts(r.Replicas)
		}
		if r.Has(rl.ChangeReassignment) {
			out += " adding=" + formatInts(r.Adding) + " removing=" + formatInts(r.Removing)
		}
		return out
	case *rl.ReplicaStateChange:
		var rs []string
		for _, ref := range r.Replicas {
			rs = append(rs, fmt.Sprintf("%d@%d", ref.Partition, ref.Broker))
		}
		return fmt.Sprintf("ReplicaState %s %s [%s]", s.topicName(r.TopicID, ""), r.State, strings.Join(rs, " "))
	case *rl.PartitionStateChange:
		var ps []string
		for _, p := range r.Partitions {
			ps = append(ps, strconv.Itoa(int(p)))
		}
		return fmt.Sprintf("PartitionState %s %s [%s]", s.topicName(r.TopicID, ""), r.State, strings.Join(ps, " "))
	case *rl.BeginDeleteTopic:
		return "BeginDeleteTopic " + s.topicName(r.TopicID, "")
	case *rl.RemoveTopic:
		return "RemoveTopic " + s.topicName(r.TopicID, "")
	case *rl.BrokerConfig:
		return formatBrokerConfig(r)
	}
	return fmt.Sprintf("%s %+v", r.Type(), r)
}

// partitionKey orders partitions by topic name, then number.
type partitionKey struct {
	name string
	part int32
}

func lessKey(a, b partitionKey) bool {
	if a.name != b.name {
		return a.name < b.name
	}
	return a.part < b.part
}

func (s *scenario) formatRequests(r Requests) []string {
	var out []string
	emit := func(head string, items []string) {
		switch len(items) {
		case 0:
			out = append(out, head+" (no partitions)")
		case 1:
			out = append(out, head+" "+items[0])
		default:
			out = append(out, head)
			for _, it := range items {
				out = append(out, "     "+it)
			}
		}
	}
	if l := r.LeaderAndIsr; l != nil {
		ps := leaderAndIsrStates(l)
		s.sortStates(ps)
		var items []string
		for _, p := range ps {
			it := fmt.Sprintf("%s/%d leader=%d le=%d isr=%s pe=%d", s.topicName(p.TopicID, p.Topic), p.Partition, p.Leader, p.LeaderEpoch, formatInts(p.ISR), p.PartitionEpoch)
			if len(p.Adding) > 0 || len(p.Removing) > 0 {
				it += " replicas=" + formatInts(p.Replicas) + " adding=" + formatInts(p.Adding) + " removing=" + formatInts(p.Removing)
			}
			if p.IsNew {
				it += " new"
			}
			items = append(items, it)
		}
		emit(fmt.Sprintf("-> %d LeaderAndIsr ce=%d", r.Broker, l.ControllerEpoch), items)
	}
	if u := r.UpdateMetadata; u != nil {
		ps := append([]PartitionState(nil), u.Partitions...)
		s.sortStates(ps)
		var names []string
		for _, p := range ps {
			names = append(names, fmt.Sprintf("%s/%d", s.topicName(p.TopicID, p.Topic), p.Partition))
		}
		var brokers []int32
		for _, b := range u.LiveBrokers {
			brokers = append(brokers, b.ID)
		}
		out = append(out, fmt.Sprintf("-> %d UpdateMetadata ce=%d partitions=[%s] brokers=%s", r.Broker, u.ControllerEpoch, strings.Join(names, " "), formatInts(brokers)))
	}
	if st := r.StopReplica; st != nil {
		ps := append([]StopPartition(nil), st.Partitions...)
		sort.Slice(ps, func(i, j int) bool {
			return lessKey(partitionKey{s.topicName(ps[i].TopicID, ps[i].Topic), ps[i].Partition}, partitionKey{s.topicName(ps[j].TopicID, ps[j].Topic), ps[j].Partition})
		})
		var items []string
		for _, p := range ps {
			items = append(items, fmt.Sprintf("%s/%d le=%d delete=%v", s.topicName(p.TopicID, p.Topic), p.Partition, p.LeaderEpoch, p.Delete))
		}
		emit(fmt.Sprintf("-> %d StopReplica ce=%d", r.Broker, st.ControllerEpoch), items)
	}
	if len(out) == 0 {
		out = append(out, fmt.Sprintf("-> %d (empty request set)", r.Broker))
	}
	return out
}

func (s *scenario) sortStates(ps []PartitionState) {
	sort.Slice(ps, func(i, j int) bool {
		return lessKey(partitionKey{s.topicName(ps[i].TopicID, ps[i].Topic), ps[i].Partition}, partitionKey{s.topicName(ps[j].TopicID, ps[j].Topic), ps[j].Partition})
	})
}

// ---- arguments

// scenarioArgs holds a command's arguments: positional words and key=value
// pairs. done fails on anything the command did not read, so a typo in a
// script is an error rather than a silently ignored option.
type scenarioArgs struct {
	positional []string
	kv         map[string]string
	flags      map[string]bool
	used       map[string]bool
}

func newScenarioArgs(words []string) *scenarioArgs {
	a := &scenarioArgs{kv: map[string]string{}, flags: map[string]bool{}, used: map[string]bool{}}
	for _, w := range words {
		if k, v, ok := strings.Cut(w, "="); ok {
			a.kv[k] = v
		} else {
			a.positional = append(a.positional, w)
		}
	}
	return a
}

// broker takes the first positional argument as a broker id.
func (a *scenarioArgs) broker() (int32, error) {
	if len(a.positional) == 0 {
		return 0, errors.New("missing broker id")
	}
	v, err := strconv.ParseInt(a.positional[0], 10, 32)
	if err != nil {
		return 0, fmt.Errorf("broker id: %v", err)
	}
	a.positional = a.positional[1:]
	return int32(v), nil
}

func (a *scenarioArgs) str(key, def string) string {
	if v, ok := a.kv[key]; ok {
		a.used[key] = true
		return v
	}
	return def
}

func (a *scenarioArgs) intArg(key string) (int64, bool) {
	v, ok := a.kv[key]
	if !ok {
		return 0, false
	}
	a.used[key] = true
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		a.kv[key+" (not a number)"] = v
		return 0, false
	}
	return n, true
}

// flag consumes a bare word.
func (a *scenarioArgs) flag(name string) bool {
	for i, w := range a.positional {
		if w == name {
			a.positional = append(a.positional[:i:i], a.positional[i+1:]...)
			return true
		}
	}
	return false
}

func (a *scenarioArgs) done() error {
	var extra []string
	extra = append(extra, a.positional...)
	for k, v := range a.kv {
		if !a.used[k] {
			extra = append(extra, k+"="+v)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return fmt.Errorf("unexpected arguments %v", extra)
	}
	return nil
}

func parseInts(s string) ([]int32, error) {
	if s == "" {
		return []int32{}, nil
	}
	var out []int32
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", s, err)
		}
		out = append(out, int32(v))
	}
	return out, nil
}

func parsePartitionName(s string) (string, int32, error) {
	i := strings.LastIndexByte(s, '/')
	if i <= 0 {
		return "", 0, fmt.Errorf("%q: want topic/partition", s)
	}
	p, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil {
		return "", 0, fmt.Errorf("%q: %v", s, err)
	}
	return s[:i], int32(p), nil
}
