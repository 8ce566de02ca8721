package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runNode is how one `ctrlnode run` of a three-node test cluster is
// started: node i is voter 1001+i with broker i+1 in the same process.
type runNode struct {
	id       int32
	listener string
	http     string
	args     []string
	env      []string
}

// threeNodeSettings lays out three voter+broker nodes on free ports and
// returns each node's settings (extra appended to every node's) with its
// runNode, whose args are only "run" yet. Their data directories are
// formatted as a new cluster of the three.
func threeNodeSettings(t *testing.T, extra ...[2]string) ([][][2]string, []runNode, string) {
	t.Helper()
	var offsets []int
	for i := 0; i < 3; i++ {
		offsets = append(offsets, i, 100+i, 200+i, 300+i)
	}
	base := freePortBase(t, offsets...)
	addr := func(off int) string { return fmt.Sprintf("127.0.0.1:%d", base+off) }
	var voters, listeners []string
	for i := 0; i < 3; i++ {
		voters = append(voters, fmt.Sprintf("%d@%s", 1001+i, addr(100+i)))
		listeners = append(listeners, fmt.Sprintf("%d@%s", 1001+i, addr(i)))
	}
	dir := t.TempDir()
	var all [][][2]string
	var nodes []runNode
	for i := 0; i < 3; i++ {
		settings := [][2]string{
			{"node.id", strconv.Itoa(1001 + i)},
			{"roles", "voter,broker"},
			{"broker.id", strconv.Itoa(i + 1)},
			{"data.dir", filepath.Join(dir, fmt.Sprintf("node-%d", 1001+i))},
			{"raft.listener", addr(100 + i)},
			{"listener", addr(i)},
			{"voters", strings.Join(voters, ",")},
			{"voter.listeners", strings.Join(listeners, ",")},
			{"broker.listener", addr(300 + i)},
			{"http.listener", addr(200 + i)},
			{"session.timeout", "2s"},
			{"broker.heartbeat.interval", "300ms"},
			{"log.level", "info"},
		}
		all = append(all, append(settings, extra...))
		nodes = append(nodes, runNode{id: int32(1001 + i), listener: addr(i), http: addr(200 + i), args: []string{"run"}})
	}
	formatNodes(t, all)
	return all, nodes, dir
}

// configFile writes settings as a config file and returns its path.
func configFile(t *testing.T, dir string, id int32, settings [][2]string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "# node %d\n", id)
	for _, kv := range settings {
		fmt.Fprintf(&b, "%s = %s\n", kv[0], kv[1])
	}
	path := filepath.Join(dir, fmt.Sprintf("node-%d.conf", id))
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// threeNodes lays out three voter+broker nodes on free ports. Node 0 is
// configured by a file, node 1 by flags, node 2 by environment variables.
func threeNodes(t *testing.T) []runNode {
	t.Helper()
	all, nodes, dir := threeNodeSettings(t)
	for i := range nodes {
		n := &nodes[i]
		switch i {
		case 0:
			n.args = append(n.args, "--config", configFile(t, dir, n.id, all[i]))
		case 1:
			for _, kv := range all[i] {
				n.args = append(n.args, "--"+strings.ReplaceAll(kv[0], ".", "-"), kv[1])
			}
		case 2:
			n.env = os.Environ()
			for _, kv := range all[i] {
				n.env = append(n.env, "CTRLNODE_"+strings.ToUpper(strings.ReplaceAll(kv[0], ".", "_"))+"="+kv[1])
			}
		}
	}
	return nodes
}

func (n runNode) start(t *testing.T) *proc {
	return startProc(t, fmt.Sprintf("node %d", n.id), n.env, n.args...)
}

func bootstrapOf(nodes []runNode, skip ...int32) string {
	var out []string
	for _, n := range nodes {
		if !slices.Contains(skip, n.id) {
			out = append(out, n.listener)
		}
	}
	return strings.Join(out, ",")
}

// TestRunThreeNodesFailover runs three `ctrlnode run` processes (each a
// voter and a broker). SIGTERM to the active controller: it hands
// leadership to another voter before it exits, and exits 0. Restarted, it
// rejoins. SIGKILL to the new leader: a third voter takes over and the
// admin commands keep working against the survivors, whose state hashes
// agree.
func TestRunThreeNodesFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	nodes := threeNodes(t)
	procs := map[int32]*proc{}
	for _, n := range nodes {
		procs[n.id] = n.start(t)
	}
	nodeByID := func(id int32) runNode {
		for _, n := range nodes {
			if n.id == id {
				return n
			}
		}
		t.Fatalf("no node %d", id)
		return runNode{}
	}

	var q quorumJSON
	ctlJSON(t, time.Minute, &q, "quorum", "status", "--bootstrap", bootstrapOf(nodes))
	leader := q.LeaderID
	if leader < 1001 || leader > 1003 {
		t.Fatalf("quorum leader %d", leader)
	}
	procs[leader].waitLine(t, regexp.MustCompile(`^active controller: this node, controller epoch \d+$`), 30*time.Second)

	var brokers brokersJSON
	waitFor(t, time.Minute, "three active brokers", func() bool {
		ctlJSON(t, 30*time.Second, &brokers, "brokers", "list", "--bootstrap", bootstrapOf(nodes))
		active := 0
		for _, b := range brokers.Brokers {
			if !b.Fenced {
				active++
			}
		}
		return active == 3
	})
	var created itemResults
	ctlJSON(t, 30*time.Second, &created, "topics", "create", "--topic", "before", "--partitions", "3", "--replication-factor", "3", "--bootstrap", bootstrapOf(nodes))

	// SIGTERM: leadership moves before the process exits.
	old := procs[leader]
	if err := old.signal(t, syscall.SIGTERM, time.Minute); err != nil {
		t.Fatalf("node %d exited with %v after SIGTERM, want 0\n%s", leader, err, old.output())
	}
	m, _, ok := old.find(regexp.MustCompile(`^ctrlnode run: leadership handed over to voter (\d+) before stopping$`))
	if !ok {
		t.Fatalf("node %d did not report handing leadership over", leader)
	}
	v, _ := strconv.Atoi(m[1])
	successor := int32(v)
	if successor == leader || procs[successor] == nil {
		t.Fatalf("leadership handed to %d (old leader %d)", successor, leader)
	}
	if _, _, ok := old.find(regexp.MustCompile(`^ctrlnode run: stopped$`)); !ok {
		t.Fatalf("node %d did not report a clean stop", leader)
	}
	procs[successor].waitLine(t, regexp.MustCompile(`^active controller: this node`), 30*time.Second)
	// Its broker went through a controlled shutdown: no longer active.
	ctlJSON(t, 30*time.Second, &brokers, "brokers", "list", "--bootstrap", bootstrapOf(nodes, leader), "--http", nodeByID(successor).http)
	for _, b := range brokers.Brokers {
		if b.ID == leader-1000 && b.State == "active" {
			t.Fatalf("broker %d of the stopped node is still active: %+v", b.ID, brokers)
		}
	}
	ctlJSON(t, 30*time.Second, &q, "quorum", "status", "--bootstrap", bootstrapOf(nodes, leader))
	if q.LeaderID != successor {
		t.Fatalf("after the handover the quorum leader is %d, want %d", q.LeaderID, successor)
	}

	// The stopped node comes back from its data folder and catches up.
	procs[leader] = nodeByID(leader).start(t)
	waitFor(t, time.Minute, fmt.Sprintf("node %d ready again", leader), func() bool {
		code, _, err := httpGet("http://" + nodeByID(leader).http + "/readyz")
		return err == nil && code == 200
	})

	// SIGKILL the new leader: a third voter takes over.
	if err := procs[successor].signal(t, syscall.SIGKILL, 30*time.Second); err == nil {
		t.Fatalf("node %d exited cleanly after SIGKILL", successor)
	}
	survivors := bootstrapOf(nodes, successor)
	waitFor(t, time.Minute, "a new leader among the survivors", func() bool {
		ctlJSON(t, time.Minute, &q, "quorum", "status", "--bootstrap", survivors)
		return q.LeaderID != successor && q.LeaderID >= 1001 && q.LeaderID <= 1003
	})
	var list topicList
	ctlJSON(t, time.Minute, &created, "topics", "create", "--topic", "after", "--partitions", "2", "--replication-factor", "1", "--bootstrap", survivors)
	if created.Results[0].Status != "created" {
		t.Fatalf("create after the kill: %+v", created)
	}
	ctlJSON(t, 30*time.Second, &list, "topics", "list", "--bootstrap", survivors)
	for _, name := range []string{"before", "after"} {
		if _, ok := list.find(name); !ok {
			t.Fatalf("topics list after the kill lacks %s: %+v", name, list)
		}
	}
	var desc topicDescribe
	ctlJSON(t, 30*time.Second, &desc, "topics", "describe", "--topic", "before", "--bootstrap", survivors)
	if len(desc.Topics) != 1 || len(desc.Topics[0].Partitions) != 3 {
		t.Fatalf("describe before: %+v", desc)
	}
	var sh stateHashJSON
	var httpArgs []string
	for _, n := range nodes {
		if n.id != successor {
			httpArgs = append(httpArgs, "--http", n.http)
		}
	}
	ctlJSON(t, time.Minute, &sh, append([]string{"state-hash", "--wait", "10s"}, httpArgs...)...)
	if !sh.Agree || len(sh.Voters) != 2 || sh.Voters[0].Hash != sh.Voters[1].Hash {
		t.Fatalf("state hashes of the survivors: %+v", sh)
	}
	// One survivor stops gracefully while the other still makes a quorum
	// with it; the last one, alone, is left to the cleanup's kill (its
	// broker could not complete a controlled shutdown without a quorum).
	for _, n := range nodes {
		if p := procs[n.id]; n.id != successor && !p.exited() {
			if err := p.signal(t, syscall.SIGTERM, time.Minute); err != nil {
				t.Errorf("node %d exited with %v after SIGTERM", n.id, err)
			}
			break
		}
	}
}
