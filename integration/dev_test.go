package integration

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var activeRE = regexp.MustCompile(`^active controller: voter (\d+), controller epoch (\d+)$`)

// devPorts are the port offsets `ctrlnode dev --port` uses.
var devPorts = []int{0, 1, 2, 100, 101, 102, 200, 201, 202, 300, 301, 302}

type topicList struct {
	Topics []struct {
		Name              string `json:"name"`
		ID                string `json:"id"`
		Partitions        int    `json:"partitions"`
		ReplicationFactor int    `json:"replication_factor"`
	} `json:"topics"`
}

func (l topicList) find(name string) (int, bool) {
	for _, t := range l.Topics {
		if t.Name == name {
			return t.Partitions, true
		}
	}
	return 0, false
}

type topicDescribe struct {
	Topics []struct {
		Name       string `json:"name"`
		Partitions []struct {
			Partition     int32   `json:"partition"`
			Leader        int32   `json:"leader"`
			Replicas      []int32 `json:"replicas"`
			ISR           []int32 `json:"isr"`
			State         string  `json:"state"`
			ReplicaStates []struct {
				Broker int32  `json:"broker"`
				State  string `json:"state"`
			} `json:"replica_states"`
		} `json:"partitions"`
		Configs map[string]string `json:"configs"`
		Error   string            `json:"error"`
	} `json:"topics"`
}

type itemResults struct {
	Results []struct {
		Topic  string `json:"topic"`
		ID     string `json:"id"`
		Status string `json:"status"`
		Error  string `json:"error"`
	} `json:"results"`
}

type quorumJSON struct {
	LeaderID      int32   `json:"leader_id"`
	LeaderEpoch   int32   `json:"leader_epoch"`
	HighWatermark int64   `json:"high_watermark"`
	CurrentVoters []int32 `json:"current_voters"`
	Voters        []struct {
		ID     int32  `json:"id"`
		Status string `json:"status"`
		Lag    int64  `json:"lag"`
	} `json:"voters"`
}

type brokersJSON struct {
	Brokers []struct {
		ID     int32  `json:"id"`
		State  string `json:"state"`
		Fenced bool   `json:"fenced"`
		Epoch  int64  `json:"epoch"`
	} `json:"brokers"`
}

type stateHashJSON struct {
	Agree  bool `json:"agree"`
	Voters []struct {
		Node  int32  `json:"node"`
		Index uint64 `json:"index"`
		Hash  string `json:"hash"`
	} `json:"voters"`
}

// metricValue returns the value of an unlabelled metric in a Prometheus
// text exposition.
func metricValue(body, name string) (float64, bool) {
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// TestDevAdminCommandsAndRestart runs `ctrlnode dev`, drives every admin
// command against it as a user would and parses their --json, reads the
// HTTP endpoints, stops it with Ctrl-C and starts it again on the same
// data folder: the topics and their configs are still there and the
// controller epoch moved on.
func TestDevAdminCommandsAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	base := freePortBase(t, devPorts...)
	boot := fmt.Sprintf("127.0.0.1:%d", base)
	var httpArgs []string
	var httpAddrs []string
	for i := 0; i < 3; i++ {
		a := fmt.Sprintf("127.0.0.1:%d", base+200+i)
		httpAddrs = append(httpAddrs, a)
		httpArgs = append(httpArgs, "--http", a)
	}
	b := []string{"--bootstrap-controller", boot}
	data := t.TempDir()
	devArgs := []string{"dev", "--data", data, "--port", strconv.Itoa(base), "--log-level", "warn", "--session-timeout", "2s"}

	dev := startProc(t, "dev", nil, devArgs...)
	m := dev.waitLine(t, regexp.MustCompile(`^bootstrap: (\S+)$`), time.Minute)
	if m[1] != boot {
		t.Fatalf("dev prints bootstrap %s, want %s", m[1], boot)
	}
	dev.waitLine(t, regexp.MustCompile(`^  ctrlnode topics create .*--topic demo`), time.Second)
	m = dev.waitLine(t, activeRE, time.Minute)
	epoch1, _ := strconv.Atoi(m[2])

	// The three brokers register and are unfenced.
	var brokers brokersJSON
	waitFor(t, time.Minute, "three active brokers", func() bool {
		ctlJSON(t, 30*time.Second, &brokers, append(append([]string{"brokers", "list"}, b...), httpArgs...)...)
		active := 0
		for _, br := range brokers.Brokers {
			if br.State == "active" && !br.Fenced && br.Epoch > 0 {
				active++
			}
		}
		return active == 3
	})

	var created itemResults
	ctlJSON(t, 30*time.Second, &created, append([]string{"topics", "create", "--topic", "orders", "--partitions", "6", "--replication-factor", "3", "--config", "retention.ms=1000"}, b...)...)
	if len(created.Results) != 1 || created.Results[0].Status != "created" || created.Results[0].ID == "" {
		t.Fatalf("topics create: %+v", created)
	}
	ctlJSON(t, 30*time.Second, &created, append([]string{"topics", "create", "--topic", "scratch", "--replica-assignment", "1:2"}, b...)...)

	// Creating it again is refused with exit code 1 and the Kafka error.
	if r := ctl(t, nil, append([]string{"topics", "create", "--topic", "orders"}, b...)...); r.code != 1 || !strings.Contains(r.stdout, "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("second create of orders: want exit 1 with TOPIC_ALREADY_EXISTS, got %v", r)
	}

	var list topicList
	ctlJSON(t, 30*time.Second, &list, append([]string{"topics", "list"}, b...)...)
	if n, ok := list.find("orders"); !ok || n != 6 {
		t.Fatalf("topics list: orders has %d partitions (listed %v): %+v", n, ok, list)
	}
	if _, ok := list.find("scratch"); !ok {
		t.Fatalf("topics list: no scratch: %+v", list)
	}

	// Every partition gets a leader among the brokers and a full ISR,
	// and the controller's states say so: the partition online, each
	// replica online.
	var desc topicDescribe
	waitFor(t, 30*time.Second, "orders led with full ISRs, OnlinePartition, replicas OnlineReplica", func() bool {
		ctlJSON(t, 30*time.Second, &desc, append(append([]string{"topics", "describe", "--topic", "orders"}, b...), httpArgs...)...)
		if len(desc.Topics) != 1 || len(desc.Topics[0].Partitions) != 6 {
			return false
		}
		for _, p := range desc.Topics[0].Partitions {
			if p.Leader < 1 || p.Leader > 3 || len(p.ISR) != 3 || p.Replicas[0] != p.Leader {
				return false
			}
			var states []string
			for i, r := range p.ReplicaStates {
				if r.Broker != p.Replicas[i] {
					return false
				}
				states = append(states, r.State)
			}
			if p.State != "OnlinePartition" || !slices.Equal(states, []string{"OnlineReplica", "OnlineReplica", "OnlineReplica"}) {
				return false
			}
		}
		return true
	})
	if desc.Topics[0].Configs["retention.ms"] != "1000" {
		t.Fatalf("orders configs = %v, want retention.ms=1000", desc.Topics[0].Configs)
	}

	var res itemResults
	ctlJSON(t, 30*time.Second, &res, append([]string{"topics", "alter-config", "--topic", "orders", "--set", "min.insync.replicas=2", "--delete", "retention.ms"}, b...)...)
	ctlJSON(t, 30*time.Second, &res, append([]string{"topics", "add-partitions", "--topic", "orders", "--partitions", "8"}, b...)...)
	ctlJSON(t, 30*time.Second, &desc, append([]string{"topics", "describe", "--topic", "orders"}, b...)...)
	if got := desc.Topics[0]; len(got.Partitions) != 8 || got.Configs["min.insync.replicas"] != "2" || got.Configs["retention.ms"] != "" {
		t.Fatalf("after add-partitions and alter-config: %d partitions, configs %v", len(got.Partitions), got.Configs)
	}

	var elect struct {
		Results []struct {
			Status string `json:"status"`
		} `json:"results"`
	}
	ctlJSON(t, 30*time.Second, &elect, append([]string{"elect", "--type", "preferred", "--topic", "orders"}, b...)...)
	if len(elect.Results) != 8 {
		t.Fatalf("elect --topic orders: %d results, want 8: %+v", len(elect.Results), elect)
	}

	// Reassignment: a plan that drains broker 1 of the two-replica topic,
	// executed, verified, listed, cancelled.
	planPath := filepath.Join(t.TempDir(), "plan.json")
	var gen struct {
		Plan struct {
			Version    int `json:"version"`
			Partitions []struct {
				Topic     string  `json:"topic"`
				Partition int32   `json:"partition"`
				Replicas  []int32 `json:"replicas"`
			} `json:"partitions"`
		} `json:"plan"`
		Moves []struct {
			Current  []int32 `json:"current"`
			Proposed []int32 `json:"proposed"`
		} `json:"moves"`
	}
	ctlJSON(t, 30*time.Second, &gen, append([]string{"reassign", "generate", "--remove-broker", "1", "--topic", "scratch", "--output", planPath}, b...)...)
	var before topicDescribe
	ctlJSON(t, 30*time.Second, &before, append([]string{"topics", "describe", "--topic", "scratch"}, b...)...)
	if got := before.Topics[0].Partitions[0].Replicas; !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("scratch created with --replica-assignment 1:2 has replicas %v", got)
	}
	if len(gen.Plan.Partitions) != 1 || gen.Plan.Version != 1 || len(gen.Moves) != 1 {
		t.Fatalf("reassign generate for scratch: %+v", gen)
	}
	{
		if slices.Contains(gen.Plan.Partitions[0].Replicas, 1) {
			t.Fatalf("the drain plan keeps broker 1: %+v", gen.Plan)
		}
		var exec struct {
			Results []struct {
				Status string `json:"status"`
			} `json:"results"`
			Previous struct {
				Partitions []struct {
					Replicas []int32 `json:"replicas"`
				} `json:"partitions"`
			} `json:"previous"`
		}
		ctlJSON(t, 30*time.Second, &exec, append([]string{"reassign", "execute", "--plan", planPath}, b...)...)
		if len(exec.Results) != 1 || exec.Results[0].Status != "started" || !slices.Equal(exec.Previous.Partitions[0].Replicas, before.Topics[0].Partitions[0].Replicas) {
			t.Fatalf("reassign execute: %+v", exec)
		}
		// The empty partition's new replica catches up at once: the
		// reassignment completes (verify exits 4 while it moves, 0 after).
		waitFor(t, 30*time.Second, "reassign verify to report complete", func() bool {
			r := ctl(t, nil, append([]string{"reassign", "verify", "--plan", planPath, "--json"}, b...)...)
			if r.code != 0 && r.code != 4 {
				t.Fatalf("reassign verify: want exit 0 or 4\n%v", r)
			}
			return r.code == 0
		})
		ctlJSON(t, 30*time.Second, &before, append([]string{"topics", "describe", "--topic", "scratch"}, b...)...)
		if got := before.Topics[0].Partitions[0].Replicas; !slices.Equal(got, gen.Plan.Partitions[0].Replicas) {
			t.Fatalf("after the reassignment scratch-0 has replicas %v, the plan %v", got, gen.Plan.Partitions[0].Replicas)
		}
		var rl struct {
			Reassignments []any `json:"reassignments"`
		}
		ctlJSON(t, 30*time.Second, &rl, append([]string{"reassign", "list"}, b...)...)
		if len(rl.Reassignments) != 0 {
			t.Fatalf("reassign list after completion: %+v", rl)
		}
		var cancelled itemResults
		ctlJSON(t, 30*time.Second, &cancelled, append([]string{"reassign", "cancel", "--all"}, b...)...)
		if len(cancelled.Results) != 0 {
			t.Fatalf("reassign cancel --all with none in progress: %+v", cancelled)
		}
	}

	ctlJSON(t, 30*time.Second, &res, append([]string{"topics", "delete", "--topic", "scratch"}, b...)...)
	waitFor(t, 30*time.Second, "scratch gone from topics list", func() bool {
		ctlJSON(t, 30*time.Second, &list, append([]string{"topics", "list"}, b...)...)
		_, ok := list.find("scratch")
		return !ok
	})

	var q quorumJSON
	ctlJSON(t, 30*time.Second, &q, append([]string{"quorum", "status"}, b...)...)
	if q.LeaderID < 1001 || q.LeaderID > 1003 || !slices.Equal(q.CurrentVoters, []int32{1001, 1002, 1003}) || q.HighWatermark <= 0 || len(q.Voters) != 3 {
		t.Fatalf("quorum status: %+v", q)
	}

	var sh stateHashJSON
	ctlJSON(t, 30*time.Second, &sh, append([]string{"state-hash"}, httpArgs...)...)
	if !sh.Agree || len(sh.Voters) != 3 || sh.Voters[0].Hash == "" || sh.Voters[0].Hash != sh.Voters[2].Hash {
		t.Fatalf("state-hash: %+v", sh)
	}

	// Metrics: exactly one voter is the active controller, and it sees
	// the three brokers and the topic's partitions.
	waitFor(t, 30*time.Second, "metrics of one active controller", func() bool {
		active, brokersSeen, parts := 0.0, 0.0, 0.0
		for _, a := range httpAddrs {
			code, body, err := httpGet("http://" + a + "/metrics")
			if err != nil || code != 200 {
				return false
			}
			v, ok := metricValue(body, "kafka_controller_active_controller_count")
			if !ok {
				t.Fatalf("no kafka_controller_active_controller_count in /metrics of %s", a)
			}
			active += v
			bv, _ := metricValue(body, "kafka_controller_active_broker_count")
			brokersSeen += bv
			pv, _ := metricValue(body, "kafka_controller_global_partition_count")
			parts += pv
		}
		return active == 1 && brokersSeen == 3 && parts == 8
	})
	for _, a := range httpAddrs {
		if code, body, err := httpGet("http://" + a + "/readyz"); err != nil || code != 200 {
			t.Fatalf("/readyz of %s: %d %s %v", a, code, body, err)
		}
	}

	if err := dev.signal(t, syscall.SIGINT, 30*time.Second); err != nil {
		t.Fatalf("dev exited with %v after Ctrl-C", err)
	}
	if _, _, ok := dev.find(regexp.MustCompile(`^stopped$`)); !ok {
		t.Fatal("dev did not print stopped")
	}

	again := startProc(t, "dev (restarted)", nil, devArgs...)
	m = again.waitLine(t, activeRE, time.Minute)
	if epoch2, _ := strconv.Atoi(m[2]); epoch2 <= epoch1 {
		t.Fatalf("controller epoch after restart = %d, first run had %d: state was not kept", epoch2, epoch1)
	}
	ctlJSON(t, 30*time.Second, &list, append([]string{"topics", "list"}, b...)...)
	if n, ok := list.find("orders"); !ok || n != 8 {
		t.Fatalf("after restart: orders has %d partitions (listed %v)", n, ok)
	}
	if _, ok := list.find("scratch"); ok {
		t.Fatal("after restart: the deleted topic scratch is back")
	}
	ctlJSON(t, 30*time.Second, &desc, append([]string{"topics", "describe", "--topic", "orders"}, b...)...)
	if desc.Topics[0].Configs["min.insync.replicas"] != "2" {
		t.Fatalf("after restart: orders configs = %v", desc.Topics[0].Configs)
	}
	if err := again.signal(t, syscall.SIGINT, 30*time.Second); err != nil {
		t.Fatalf("restarted dev exited with %v", err)
	}
}
