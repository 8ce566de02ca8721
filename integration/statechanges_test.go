package integration

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/fsm/statelog"
	"github.com/ctrlquorum/ctrlquorum/ops"
)

// TestLastReplicaFailureSameWhereverTheControllerRuns is the case the
// design starts from (docs/statemachines.md): brokers A, B, C; a topic
// with one partition on A and B; stop A, then B. In ZooKeeper-era Kafka
// the outcome depended on where the controller ran: beside the brokers
// (on C) the partition ended leaderless, inside B it kept leader B,
// because the controller that had to mark B's replica offline died with
// B. Here it is run twice with three real voters: once with the voters
// beside the brokers, once with the active controller in B's process.
// Both runs end in the same state, every voter prints the same history,
// and the two runs' histories hold the same transitions in the same
// order, for the same events; only the deciding controller, and how it
// learned that B had failed, differ.
func TestLastReplicaFailureSameWhereverTheControllerRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	t.Parallel()
	beside := runLastReplicaCase(t, false)
	embedded := runLastReplicaCase(t, true)
	if !samePartition(beside.final, embedded.final) {
		t.Fatalf("final states differ:\nbeside:   %+v\nembedded: %+v", beside.final, embedded.final)
	}
	if beside.final.Leader != -1 || beside.final.State != "OfflinePartition" {
		t.Fatalf("final state %+v: want an offline partition without a leader", beside.final)
	}
	if !slices.Equal(beside.transitions, embedded.transitions) {
		t.Fatalf("the runs' histories differ:\nbeside:\n%s\nembedded:\n%s",
			strings.Join(beside.transitions, "\n"), strings.Join(embedded.transitions, "\n"))
	}
	if slices.Equal(beside.deciders, embedded.deciders) && len(beside.deciders) == 1 {
		t.Logf("both runs decided on controller %v", beside.deciders)
	}
	t.Logf("history of t (the same in both runs):\n%s", strings.Join(beside.transitions, "\n"))
}

type lastReplicaOutcome struct {
	final       ops.Partition
	transitions []string // each transition's cause and text, in log order
	deciders    []int32  // the controller nodes that wrote them, in order of first appearance
}

// runLastReplicaCase runs the case on a fresh cluster: three voters
// (1001-1003) and brokers A=1, B=2, C=3, each broker in a process of its
// own, except that with embedded broker B runs inside voter 1002's
// process, which is made the active controller first.
func runLastReplicaCase(t *testing.T, embedded bool) lastReplicaOutcome {
	t.Helper()
	base := freePortBase(t, 0, 1, 2, 100, 101, 102, 200, 201, 202, 300, 301, 302)
	addr := func(off int) string { return fmt.Sprintf("127.0.0.1:%d", base+off) }
	dir := t.TempDir()
	var voters, listeners []string
	for i := 0; i < 3; i++ {
		voters = append(voters, fmt.Sprintf("%d@%s", 1001+i, addr(100+i)))
		listeners = append(listeners, fmt.Sprintf("%d@%s", 1001+i, addr(i)))
	}
	bootstrap := strings.Join([]string{addr(0), addr(1), addr(2)}, ",")
	common := []string{"--session-timeout", "2s", "--broker-heartbeat-interval", "300ms", "--log-level", "info",
		"--voters", strings.Join(voters, ","), "--voter-listeners", strings.Join(listeners, ",")}
	voterArgs := func(i int, roles string) []string {
		args := append([]string{"run", "--node-id", strconv.Itoa(1001 + i), "--roles", roles,
			"--data-dir", filepath.Join(dir, fmt.Sprintf("voter-%d", 1001+i)),
			"--raft-listener", addr(100 + i), "--listener", addr(i), "--http-listener", addr(200 + i)}, common...)
		if roles != "voter" {
			args = append(args, "--broker-id", "2", "--broker-listener", addr(301))
		}
		return args
	}
	brokerArgs := func(id int) []string {
		return append([]string{"run", "--node-id", strconv.Itoa(id), "--roles", "broker", "--broker-id", strconv.Itoa(id),
			"--broker-listener", addr(300 + id - 1), "--broker-controllers", bootstrap}, common...)
	}

	var ids, rafts, dirs []string
	for i := 0; i < 3; i++ {
		ids, rafts, dirs = append(ids, strconv.Itoa(1001+i)), append(rafts, addr(100+i)), append(dirs, filepath.Join(dir, fmt.Sprintf("voter-%d", 1001+i)))
	}
	formatVoters(t, ids, rafts, dirs)
	procs := map[string]*proc{}
	start := func(name string, args []string) { procs[name] = startProc(t, name, nil, args...) }
	t.Cleanup(func() {
		for _, p := range procs {
			if !p.exited() {
				_ = p.signal(t, syscall.SIGKILL, 10*time.Second)
			}
		}
	})
	for i := 0; i < 3; i++ {
		roles := "voter"
		if embedded && i == 1 {
			roles = "voter,broker"
		}
		start(fmt.Sprintf("voter %d", 1001+i), voterArgs(i, roles))
	}
	start("broker A", brokerArgs(1))
	if !embedded {
		start("broker B", brokerArgs(2))
	}
	start("broker C", brokerArgs(3))
	httpOf := map[int32]string{1001: addr(200), 1002: addr(201), 1003: addr(202)}
	waitFor(t, 60*time.Second, "three unfenced brokers", func() bool {
		var b ops.Brokers
		if !getJSON(httpOf[1001], "/brokers", &b) {
			return false
		}
		n := 0
		for _, br := range b.Brokers {
			if !br.Fenced {
				n++
			}
		}
		return n == 3
	})

	if embedded {
		// Make voter 1002, the process of broker B, the active controller:
		// a voter stopped with SIGTERM hands leadership to another one.
		waitFor(t, 120*time.Second, "voter 1002 to be the active controller", func() bool {
			leader := activeVoter(t, bootstrap)
			if leader == 1002 || leader < 0 {
				return leader == 1002
			}
			name := fmt.Sprintf("voter %d", leader)
			if err := procs[name].signal(t, syscall.SIGTERM, 30*time.Second); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			start(name, voterArgs(int(leader-1001), "voter"))
			return false
		})
	}

	if r := ctl(t, nil, "topics", "create", "--bootstrap", bootstrap, "--topic", "t", "--replica-assignment", "1:2"); r.code != 0 {
		t.Fatalf("create: %s", r)
	}
	partition := func() (ops.Partition, bool) {
		for _, id := range []int32{1001, 1003, 1002} {
			var ps ops.Partitions
			if getJSON(httpOf[id], "/partitions?topic=t", &ps) && len(ps.Partitions) == 1 {
				return ps.Partitions[0], true
			}
		}
		return ops.Partition{}, false
	}
	waitFor(t, 30*time.Second, "t-0 online with ISR [1,2]", func() bool {
		p, ok := partition()
		return ok && p.State == "OnlinePartition" && slices.Equal(p.ISR, []int32{1, 2})
	})

	// A follower of voter 1003's history sees each transition as it
	// commits.
	follow := startProc(t, "state-changes --follow", nil, "state-changes", "--http", httpOf[1003], "--topic", "t", "--follow")
	defer func() {
		if !follow.exited() {
			_ = follow.signal(t, syscall.SIGINT, 10*time.Second)
		}
	}()
	follow.waitLine(t, regexp.MustCompile(`replica t-0 on broker 2: NewReplica -> OnlineReplica`), 30*time.Second)

	// Stop A, then B, each with SIGKILL.
	_ = procs["broker A"].signal(t, syscall.SIGKILL, 10*time.Second) // exits "signal: killed"
	waitFor(t, 30*time.Second, "t-0 led by B alone", func() bool {
		p, ok := partition()
		return ok && p.Leader == 2 && slices.Equal(p.ISR, []int32{2})
	})
	b := "broker B"
	if embedded {
		b = "voter 1002"
	}
	_ = procs[b].signal(t, syscall.SIGKILL, 10*time.Second)
	var final ops.Partition
	waitFor(t, 60*time.Second, "t-0 without a leader", func() bool {
		p, ok := partition()
		final = p
		return ok && p.Leader == -1
	})
	if embedded {
		// Voter 1002 comes back as a voter alone (broker B stays down), so
		// that all three voters can be asked for the history.
		start("voter 1002", voterArgs(1, "voter"))
	}

	// Every voter's history of t, once they have all applied the same
	// log: identical.
	var histories map[int32][]statelog.Line
	waitFor(t, 60*time.Second, "the three voters' histories of t to agree", func() bool {
		histories = map[int32][]statelog.Line{}
		for id, h := range httpOf {
			lines, ok := stateChanges(h, "t")
			if !ok {
				return false
			}
			histories[id] = lines
		}
		return sameLines(histories[1001], histories[1002]) && sameLines(histories[1001], histories[1003])
	})
	// The CLI prints the same from each voter.
	var printed []string
	for _, id := range []int32{1001, 1002, 1003} {
		r := ctl(t, nil, "state-changes", "--http", httpOf[id], "--topic", "t")
		if r.code != 0 {
			t.Fatalf("state-changes from %d: %s", id, r)
		}
		printed = append(printed, r.stdout)
	}
	if printed[0] != printed[1] || printed[0] != printed[2] {
		t.Fatalf("ctrlnode state-changes differs between voters:\n%s\n---\n%s\n---\n%s", printed[0], printed[1], printed[2])
	}
	// The follower printed A's replica going offline; how long after the
	// leader appended it is reported, not asserted (the machine's load
	// decides it).
	offline := regexp.MustCompile(`^(\d+)  term \d+  (\S+)  .*replica t-0 on broker 1: OnlineReplica -> OfflineReplica`)
	follow.waitLine(t, offline, 30*time.Second)
	m, seen, _ := follow.find(offline)
	if at, err := time.Parse(time.RFC3339Nano, m[2]); err == nil {
		t.Logf("state-changes --follow printed index %s %v after the leader appended it", m[1], seen.Sub(at))
	}
	if len(histories[1001]) == 0 || !slices.ContainsFunc(histories[1001], func(l statelog.Line) bool {
		return l.Text() == "replica t-0 on broker 2: OnlineReplica -> OfflineReplica"
	}) {
		t.Fatalf("the history lacks B's replica going offline: %v", histories[1001])
	}
	out := lastReplicaOutcome{final: final}
	for _, l := range histories[1001] {
		out.transitions = append(out.transitions, "["+causeEvent(l.Cause)+"] "+l.Text())
		if !slices.Contains(out.deciders, l.ControllerNode) {
			out.deciders = append(out.deciders, l.ControllerNode)
		}
	}
	if embedded && !slices.Contains(out.deciders, 1002) {
		t.Fatalf("controller 1002 decided none of %v", out.deciders)
	}
	return out
}

// causeEvent is a transition's cause without how the controller learned
// of it: "broker 2 fenced" of "broker 2 fenced: session expired". That
// differs between the runs as the deciding controller does: beside the
// brokers, the controller finds B's listener refusing connections at
// once; inside B's process it dies with B, and the next one fences B when
// its session expires.
func causeEvent(cause string) string {
	event, _, _ := strings.Cut(cause, ": ")
	return event
}

// activeVoter returns the raft leader quorum status names, -1 for none.
func activeVoter(t *testing.T, bootstrap string) int32 {
	r := ctl(t, nil, "quorum", "status", "--bootstrap", bootstrap, "--json", "--timeout", "5s")
	if r.code != 0 {
		return -1
	}
	var st struct {
		LeaderID int32 `json:"leader_id"`
	}
	if json.Unmarshal([]byte(r.stdout), &st) != nil {
		return -1
	}
	return st.LeaderID
}

func getJSON(addr, path string, v any) bool {
	code, body, err := httpGet("http://" + addr + path)
	return err == nil && code == 200 && json.Unmarshal([]byte(body), v) == nil
}

// stateChanges reads a voter's history of a topic.
func stateChanges(addr, topic string) ([]statelog.Line, bool) {
	code, body, err := httpGet("http://" + addr + "/state-changes?topic=" + topic)
	if err != nil || code != 200 {
		return nil, false
	}
	var out []statelog.Line
	for _, raw := range strings.Split(strings.TrimSpace(body), "\n") {
		if raw == "" {
			continue
		}
		var l statelog.Line
		if json.Unmarshal([]byte(raw), &l) != nil {
			return nil, false
		}
		out = append(out, l)
	}
	return out, true
}

func sameLines(a, b []statelog.Line) bool {
	return slices.EqualFunc(a, b, func(x, y statelog.Line) bool { return x.String() == y.String() })
}

func samePartition(a, b ops.Partition) bool {
	return a.State == b.State && a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch && slices.Equal(a.ISR, b.ISR) &&
		slices.Equal(a.Replicas, b.Replicas)
}
