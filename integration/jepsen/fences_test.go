package jepsen

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/check"
	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/nemesis"
)

// The RefusalFences check (check/fences.go) reads what the processes
// logged: the active controller's fences, with their cause, broker and
// epoch, and each broker agent's registrations.

var (
	logTime         = regexp.MustCompile(`^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z)\s`)
	refusedFenceLog = regexp.MustCompile(`broker (\d+) fenced(?: after its controlled shutdown)?: its listener .*\bepoch=(\d+)`)
	sessionFenceLog = regexp.MustCompile(`broker session expired: fencing: .*\bbroker=(\d+) epoch=(\d+)`)
	registeredLog   = regexp.MustCompile(`ctrlnode\.broker: registered: .*\bbroker_epoch=(\d+)`)
)

// checkRefusalFences runs check.RefusalFences over the logs of a run's
// processes (in logDir, as procs writes them), its fault events, and what
// happened before until (the processes are stopped after it).
func checkRefusalFences(logDir string, specs []nodeSpec, faults []history.FaultEvent, until time.Time, session time.Duration) check.Result {
	var fences []check.Fence
	var regs []check.Registration
	for _, s := range specs {
		eachLogLine(logDir, s.name, func(at time.Time, line string) {
			if at.After(until) {
				return
			}
			if s.voter != 0 {
				if m := refusedFenceLog.FindStringSubmatch(line); m != nil {
					fences = append(fences, check.Fence{Broker: atoi32(m[1]), Epoch: atoi64(m[2]), Time: at, Refused: true})
				} else if m := sessionFenceLog.FindStringSubmatch(line); m != nil {
					fences = append(fences, check.Fence{Broker: atoi32(m[1]), Epoch: atoi64(m[2]), Time: at})
				}
			}
			if m := registeredLog.FindStringSubmatch(line); m != nil && s.broker != 0 {
				regs = append(regs, check.Registration{Broker: s.broker, Epoch: atoi64(m[1]), Time: at})
			}
		})
	}
	return check.RefusalFences(fences, regs, brokerKills(specs, faults), session)
}

// brokerKills lists the faults that killed a broker's process: a broker
// crash (its nodes are broker ids) or a kill, power loss or replacement
// of a voter's process (its nodes are hosts), which runs that host's
// broker too.
func brokerKills(specs []nodeSpec, faults []history.FaultEvent) []check.BrokerKill {
	healed := map[int]time.Time{}
	for _, e := range faults {
		if e.Phase == history.Heal {
			healed[e.Fault] = e.Time
		}
	}
	var out []check.BrokerKill
	for _, e := range faults {
		if e.Phase != history.Start || e.Error != "" {
			continue
		}
		switch nemesis.Kind(e.Kind) {
		case nemesis.BrokerCrash:
			for _, b := range e.Nodes {
				out = append(out, check.BrokerKill{Broker: int32(b), Kind: e.Kind, Time: e.Time, Healed: healed[e.Fault]})
			}
		case nemesis.Kill, nemesis.PowerLoss, nemesis.ReplaceVoter:
			for _, h := range e.Nodes {
				for _, s := range specs {
					if s.host == h && s.voter != 0 && s.broker != 0 {
						out = append(out, check.BrokerKill{Broker: s.broker, Kind: e.Kind, Time: e.Time, Healed: healed[e.Fault]})
					}
				}
			}
		}
	}
	return out
}

// eachLogLine calls fn with each timestamped line of a process's log.
func eachLogLine(logDir, name string, fn func(time.Time, string)) {
	f, err := os.Open(filepath.Join(logDir, name+".log"))
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		m := logTime.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		fn(at, line)
	}
}

func atoi32(s string) int32 { v, _ := strconv.ParseInt(s, 10, 32); return int32(v) }
func atoi64(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }

// TestCheckRefusalFencesFromLogs: the fences and registrations are read
// from the processes' logs as they print them, and a refusal fence of a
// broker whose process was never killed is a violation.
func TestCheckRefusalFencesFromLogs(t *testing.T) {
	dir := t.TempDir()
	specs := []nodeSpec{{name: "voter-1001", host: 1, voter: 1001, broker: 1}, {name: "broker-4", host: 1, broker: 4}, {name: "broker-5", host: 2, broker: 5}}
	write := func(name string, lines ...string) {
		if err := os.WriteFile(filepath.Join(dir, name+".log"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("broker-4", "=== start 1 at 2030-01-01T00:00:00Z: ctrlnode run",
		"2030-01-01T00:00:01.000Z [INFO]  ctrlnode.broker: registered: broker=4 broker_epoch=11")
	write("broker-5", "2030-01-01T00:00:01.000Z [INFO]  ctrlnode.broker: registered: broker=5 broker_epoch=12")
	write("voter-1001",
		"2030-01-01T00:00:01.000Z [INFO]  ctrlnode.broker: registered: broker=1 broker_epoch=9",
		"2030-01-01T00:00:10.150Z [INFO]  ctrlnode.controller: broker 4 fenced: its listener 127.0.0.1:19392 refused a connection after its connection reset: node=1001 broker=4 epoch=11",
		"2030-01-01T00:00:12.000Z [WARN]  ctrlnode.controller: broker session expired: fencing: node=1001 broker=5 epoch=12",
		"2030-01-01T00:00:30.000Z [INFO]  ctrlnode.controller: broker 5 fenced: its listener 127.0.0.2:19392 refused a connection after its connection reset: node=1001 broker=5 epoch=12")
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	faults := []history.FaultEvent{
		{Fault: 1, Kind: "broker-crash", Phase: history.Start, Time: t0.Add(10 * time.Second), Nodes: []int{4}},
		{Fault: 1, Kind: "broker-crash", Phase: history.Heal, Time: t0.Add(15 * time.Second), Nodes: []int{4}},
	}
	r := checkRefusalFences(dir, specs, faults, t0.Add(20*time.Second), time.Second)
	if !r.Valid || !strings.Contains(r.Checked, "1 fences for a refused listener, 1 broker crashes") || !strings.Contains(strings.Join(r.Notes, ""), "median 150ms") {
		t.Fatalf("before the end: %s", r)
	}
	r = checkRefusalFences(dir, specs, faults, t0.Add(time.Minute), time.Second)
	if r.Valid || len(r.Violations) != 1 || r.Violations[0].Brokers[0] != 5 {
		t.Fatalf("with broker 5's fence: %s", r)
	}
}
