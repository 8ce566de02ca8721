package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ctrlquorum/ctrlquorum/ops"
	"github.com/ctrlquorum/ctrlquorum/voter/meta"
)

// membersCluster is `ctrlnode run` nodes whose voter set changes while
// they run: the three voter+broker nodes of threeNodeSettings, and
// voter-only nodes formatted to join. Every process ever started is kept,
// for the leader history.
type membersCluster struct {
	t         *testing.T
	clusterID string
	settings  map[int32][][2]string
	procs     map[int32]*proc
	all       []*proc
	allOf     map[*proc]int32
	voters    []string // the voters and voter.listeners settings of a new node
	listeners []string
	// stopped are nodes under SIGSTOP, left out of the bootstrap list: a
	// client that tries one first waits out its timeout there.
	stopped map[int32]bool
}

func newMembersCluster(t *testing.T) *membersCluster {
	t.Helper()
	for attempt := 1; ; attempt++ {
		if c, ok := tryMembersCluster(t); ok || attempt == 3 {
			if !ok {
				t.Fatal("three layouts in a row had a port taken before their nodes bound it")
			}
			return c
		}
		t.Logf("a port of the layout was taken before its node bound it; laying the cluster out again")
	}
}

func tryMembersCluster(t *testing.T) (*membersCluster, bool) {
	all, nodes, _ := threeNodeSettings(t)
	c := &membersCluster{t: t, settings: map[int32][][2]string{}, procs: map[int32]*proc{}, allOf: map[*proc]int32{}, stopped: map[int32]bool{}}
	for i, n := range nodes {
		c.settings[n.id] = all[i]
		c.voters = append(c.voters, fmt.Sprintf("%d@%s", n.id, setting(t, all[i], "raft.listener")))
		c.listeners = append(c.listeners, fmt.Sprintf("%d@%s", n.id, setting(t, all[i], "listener")))
	}
	p, err := meta.Read(setting(t, all[0], "data.dir"))
	if err != nil {
		t.Fatal(err)
	}
	c.clusterID = p.ClusterID
	for _, n := range nodes {
		c.start(n.id)
	}
	for _, n := range nodes {
		if !c.started(c.procs[n.id]) {
			c.killAll()
			return nil, false
		}
	}
	return c, true
}

// started waits for a node's start banner, and reports false when the
// node exited first because a port it was given was taken meanwhile: the
// ports are free when laid out (freePortBase), not held until the node
// binds them, and other tests on the host bind ports of the same range.
func (c *membersCluster) started(p *proc) bool {
	c.t.Helper()
	banner := regexp.MustCompile(`^ctrlnode run: node \d+`)
	waitFor(c.t, time.Minute, p.name+" to start", func() bool {
		_, _, ok := p.find(banner)
		return ok || p.exited()
	})
	if _, _, ok := p.find(banner); ok {
		return true
	}
	if !strings.Contains(p.output(), "address already in use") {
		c.t.Fatalf("%s exited at start:\n%s", p.name, p.output())
	}
	return false
}

func (c *membersCluster) killAll() {
	for _, p := range c.procs {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

func (c *membersCluster) get(id int32, key string) string { return setting(c.t, c.settings[id], key) }

// start starts node id with its settings as flags.
func (c *membersCluster) start(id int32) *proc {
	c.t.Helper()
	args := []string{"run"}
	for _, kv := range c.settings[id] {
		args = append(args, "--"+strings.ReplaceAll(kv[0], ".", "-"), kv[1])
	}
	p := startProc(c.t, fmt.Sprintf("node %d", id), nil, args...)
	c.procs[id] = p
	c.all = append(c.all, p)
	c.allOf[p] = id
	return p
}

// joiner lays out a voter-only node on free ports, formats its directory
// to join the cluster (no initial voters) and starts it.
func (c *membersCluster) joiner(id int32) *proc {
	c.t.Helper()
	for attempt := 1; ; attempt++ {
		base := freePortBase(c.t, 0, 1, 2)
		addr := func(off int) string { return fmt.Sprintf("127.0.0.1:%d", base+off) }
		c.settings[id] = [][2]string{
			{"node.id", strconv.Itoa(int(id))},
			{"roles", "voter"},
			{"data.dir", filepath.Join(c.t.TempDir(), fmt.Sprintf("node-%d", id))},
			{"raft.listener", addr(1)},
			{"listener", addr(0)},
			{"http.listener", addr(2)},
			{"voters", strings.Join(append(append([]string{}, c.voters...), fmt.Sprintf("%d@%s", id, addr(1))), ",")},
			{"voter.listeners", strings.Join(append(append([]string{}, c.listeners...), fmt.Sprintf("%d@%s", id, addr(0))), ",")},
			{"session.timeout", "2s"},
			{"log.level", "info"},
		}
		c.format(id)
		p := c.start(id)
		if c.started(p) {
			return p
		}
		if attempt == 3 {
			c.t.Fatalf("node %d: three layouts in a row had a port taken before it bound it", id)
		}
	}
}

// format formats node id's data directory to join the cluster.
func (c *membersCluster) format(id int32) {
	c.t.Helper()
	r := ctl(c.t, nil, "format", "--node-id", strconv.Itoa(int(id)), "--data-dir", c.get(id, "data.dir"), "--cluster-id", c.clusterID)
	if r.code != 0 {
		c.t.Fatalf("format node %d: %v", id, r)
	}
}

// directory is node id's directory id, from its meta.properties.
func (c *membersCluster) directory(id int32) string {
	c.t.Helper()
	p, err := meta.Read(c.get(id, "data.dir"))
	if err != nil {
		c.t.Fatal(err)
	}
	return p.DirectoryID.String()
}

// bootstrap lists the Kafka listeners of every node started and not
// stopped.
func (c *membersCluster) bootstrap() string {
	var out []string
	for id := range c.procs {
		if !c.stopped[id] {
			out = append(out, c.get(id, "listener"))
		}
	}
	return strings.Join(out, ",")
}

type describeJSON struct {
	LeaderID    int32 `json:"leader_id"`
	LeaderEpoch int32 `json:"leader_epoch"`
	Voters      []struct {
		ID          int32  `json:"id"`
		DirectoryID string `json:"directory_id"`
		Role        string `json:"role"`
		Lag         int64  `json:"lag"`
		Listener    string `json:"listener"`
	} `json:"voters"`
	Observers []struct {
		ID int32 `json:"id"`
	} `json:"observers"`
}

func (d describeJSON) voterDirs() map[int32]string {
	out := map[int32]string{}
	for _, v := range d.Voters {
		out[v.ID] = v.DirectoryID
	}
	return out
}

func (c *membersCluster) describe() describeJSON {
	c.t.Helper()
	var d describeJSON
	ctlJSON(c.t, time.Minute, &d, "quorum", "describe", "--bootstrap", c.bootstrap())
	return d
}

// change runs a quorum add-voter or remove-voter and returns its result.
func (c *membersCluster) change(args ...string) result {
	c.t.Helper()
	return ctl(c.t, nil, append(append([]string{"quorum"}, args...), "--bootstrap", c.bootstrap())...)
}

func (c *membersCluster) addVoter(id int32, extra ...string) result {
	return c.change(append([]string{"add-voter", "--id", strconv.Itoa(int(id)), "--directory-id", c.directory(id),
		"--raft", c.get(id, "raft.listener"), "--listener", c.get(id, "listener")}, extra...)...)
}

// leaderHistory checks raft's own record of who won which term, from the
// output of every process ever started: never two leaders in one term.
func (c *membersCluster) leaderHistory() map[int]int32 {
	c.t.Helper()
	re := regexp.MustCompile(`raft: election won: .*term=(\d+)`)
	won := map[int]int32{}
	for _, p := range c.all {
		for _, l := range strings.Split(p.output(), "\n") {
			m := re.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			term, _ := strconv.Atoi(m[1])
			id := c.allOf[p]
			if prev, ok := won[term]; ok && prev != id {
				c.t.Errorf("two leaders in term %d: voters %d and %d", term, prev, id)
			}
			won[term] = id
		}
	}
	if len(won) == 0 {
		c.t.Error("no election found in any voter's output")
	}
	return won
}

// adminLoad creates topics one after another from a franz-go client, and
// keeps the names whose creation was acknowledged.
type adminLoad struct {
	mu    sync.Mutex
	acked []string
	calls int
	stop  context.CancelFunc
	done  chan struct{}
}

func (c *membersCluster) startLoad(prefix string) *adminLoad {
	c.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.bootstrap(), ",")...), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		c.t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithCancel(context.Background())
	l := &adminLoad{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		defer cl.Close()
		for i := 0; ctx.Err() == nil; i++ {
			name := fmt.Sprintf("%s-%05d", prefix, i)
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := adm.CreateTopics(cctx, 1, 1, nil, name)
			ccancel()
			l.mu.Lock()
			l.calls++
			if err == nil {
				if r, ok := resp[name]; ok && r.Err == nil {
					l.acked = append(l.acked, name)
				}
			}
			l.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	c.t.Cleanup(func() { l.finish() })
	return l
}

func (l *adminLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// finish stops the load and returns the acknowledged names.
func (l *adminLoad) finish() []string {
	l.stop()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.acked...)
}

// waitAcks waits for n more acknowledged creations than now.
func (c *membersCluster) waitAcks(l *adminLoad, n int) {
	c.t.Helper()
	from := l.count()
	waitFor(c.t, 2*time.Minute, fmt.Sprintf("%d more acknowledged topic creations", n), func() bool { return l.count() >= from+n })
}

// checkAcked checks that every acknowledged topic is in the active
// controller's list.
func (c *membersCluster) checkAcked(acked []string) {
	c.t.Helper()
	var list topicList
	ctlJSON(c.t, time.Minute, &list, "topics", "list", "--bootstrap", c.bootstrap())
	have := map[string]bool{}
	for _, tp := range list.Topics {
		have[tp.Name] = true
	}
	for _, name := range acked {
		if !have[name] {
			c.t.Errorf("acknowledged topic %s is missing", name)
		}
	}
	if len(acked) == 0 {
		c.t.Error("no creation was acknowledged")
	}
}

// TestReplaceVoterAfterLostDisk is the lost disk under a steady load of
// topic creations: the active controller is killed -9, its directory
// wiped and formatted again (a new directory id), and started with the
// same settings. The quorum refuses it as the voter it was, and its log
// says what to do. The old identity is removed and the new one added; it
// catches up and votes. No acknowledged creation is lost, and no term
// ever has two leaders in any voter's log.
func TestReplaceVoterAfterLostDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	c := newMembersCluster(t)
	d := c.describe()
	victim := d.LeaderID
	old := d.voterDirs()[victim]
	if old == "" || old != c.directory(victim) {
		t.Fatalf("voter %d is listed with directory %q, its meta.properties says %s", victim, old, c.directory(victim))
	}
	load := c.startLoad("lost")
	c.waitAcks(load, 10)

	_ = c.procs[victim].cmd.Process.Kill()
	<-c.procs[victim].done
	if err := os.RemoveAll(c.get(victim, "data.dir")); err != nil {
		t.Fatal(err)
	}
	c.format(victim)
	fresh := c.directory(victim)
	if fresh == old {
		t.Fatalf("formatting again kept directory id %s", old)
	}
	p := c.start(victim)
	line := p.waitLine(t, regexp.MustCompile(`.*refused a raft connection meant for another directory.*`), time.Minute)
	for _, want := range []string{"[WARN]", "this_directory=" + fresh, "expected_directory=" + old, "remove-voter"} {
		if !strings.Contains(line[0], want) {
			t.Errorf("the refusal %q lacks %q", line[0], want)
		}
	}
	c.waitAcks(load, 10)
	if got := c.describe().voterDirs()[victim]; got != old {
		t.Fatalf("while refused, voter %d is listed with directory %q, want the old %s", victim, got, old)
	}
	// It took no entry as the voter it replaces.
	var h ops.StateHash
	code, body, err := httpGet("http://" + c.get(victim, "http.listener") + "/state-hash")
	if err != nil || code != 200 || json.Unmarshal([]byte(body), &h) != nil || h.Index != 0 {
		t.Fatalf("the refused node's /state-hash: %d %q %v; want index 0", code, body, err)
	}

	if r := c.change("remove-voter", "--id", strconv.Itoa(int(victim)), "--directory-id", old); r.code != 0 {
		t.Fatalf("remove the old identity: %v", r)
	}
	if r := c.addVoter(victim); r.code != 0 {
		t.Fatalf("add the new identity: %v", r)
	}
	d = c.describe()
	if dirs := d.voterDirs(); len(dirs) != 3 || dirs[victim] != fresh || len(d.Observers) != 0 {
		t.Fatalf("after the replacement: voters %v, observers %v; want three, %d of directory %s", dirs, d.Observers, victim, fresh)
	}
	c.waitAcks(load, 10)
	acked := load.finish()
	c.checkAcked(acked)
	won := c.leaderHistory()
	t.Logf("%d creations acknowledged of %d calls; terms won: %v", len(acked), load.calls, won)
}

// TestGrowAndShrinkVotersUnderLoad: under a steady load of topic
// creations, a node stopped (SIGSTOP) while it is being added fails the
// change cleanly (REQUEST_TIMED_OUT, the quorum stays three voters and no
// observer); resumed, it is added, then a fifth; the active controller's
// voter is removed (it hands leadership over first), then the fourth:
// 3 → 5 → 3. The changes are logged at INFO and counted in the metrics;
// no acknowledged creation is lost and no term has two leaders.
func TestGrowAndShrinkVotersUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	c := newMembersCluster(t)
	c.describe()
	load := c.startLoad("grow")
	c.waitAcks(load, 5)

	j4 := c.joiner(1004)
	j4.waitLine(t, regexp.MustCompile(`waiting to be added`), time.Minute)
	if err := j4.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	c.stopped[1004] = true
	r := c.addVoter(1004, "--timeout", "8s", "--progress", "1s")
	if err := j4.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	delete(c.stopped, 1004)
	if r.code != 1 || !strings.Contains(r.stderr, "REQUEST_TIMED_OUT") {
		t.Fatalf("adding a stopped node: want exit 1 with REQUEST_TIMED_OUT: %v", r)
	}
	if d := c.describe(); len(d.Voters) != 3 || len(d.Observers) != 0 {
		t.Fatalf("after the failed add: voters %v, observers %v", d.voterDirs(), d.Observers)
	}

	if r := c.addVoter(1004); r.code != 0 {
		t.Fatalf("add 1004: %v", r)
	}
	c.joiner(1005)
	if r := c.addVoter(1005); r.code != 0 {
		t.Fatalf("add 1005: %v", r)
	}
	d := c.describe()
	if len(d.Voters) != 5 || len(d.Observers) != 0 {
		t.Fatalf("grown: voters %v, observers %v", d.voterDirs(), d.Observers)
	}
	for _, v := range d.Voters {
		if v.DirectoryID == "" || v.Listener == "" {
			t.Errorf("voter %d is listed without a directory id or listener: %+v", v.ID, v)
		}
	}
	leader := d.LeaderID
	waitFor(t, time.Minute, "the leader's metrics to count five voters", func() bool {
		_, body, err := httpGet("http://" + c.get(leader, "http.listener") + "/metrics")
		v, ok := metricValue(body, "kafka_raft_number_of_voters")
		return err == nil && ok && v == 5
	})
	c.waitAcks(load, 5)

	if r := c.change("remove-voter", "--id", strconv.Itoa(int(leader))); r.code != 0 {
		t.Fatalf("remove the active controller %d: %v", leader, r)
	}
	d = c.describe()
	if _, still := d.voterDirs()[leader]; still || len(d.Voters) != 4 || d.LeaderID == leader {
		t.Fatalf("after removing the active controller %d: leader %d, voters %v", leader, d.LeaderID, d.voterDirs())
	}
	if r := c.change("remove-voter", "--id", "1004", "--directory-id", c.directory(1004)); r.code != 0 {
		t.Fatalf("remove 1004: %v", r)
	}
	if d = c.describe(); len(d.Voters) != 3 {
		t.Fatalf("shrunk: voters %v", d.voterDirs())
	}
	c.waitAcks(load, 5)
	acked := load.finish()
	c.checkAcked(acked)

	logged := map[string]bool{}
	for _, p := range c.all {
		for _, re := range []string{`\[INFO\] .*voter added: .*voter=1004`, `\[INFO\] .*voter added: .*voter=1005`,
			`\[INFO\] .*voter removed: .*voter=1004`, `\[INFO\] .*voter removed: .*voter=` + strconv.Itoa(int(leader))} {
			if _, _, ok := p.find(regexp.MustCompile(re)); ok {
				logged[re] = true
			}
		}
	}
	if len(logged) != 4 {
		t.Errorf("INFO lines of the changes found: %v, want 4", logged)
	}
	won := c.leaderHistory()
	t.Logf("%d creations acknowledged of %d calls; terms won: %v", len(acked), load.calls, won)
}
