package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// previousRelease is the last commit before feature levels: its build
// writes level 1 records only and knows nothing of metadata.version.
const previousRelease = "293de9c"

var (
	prevOnce sync.Once
	prevBin  string
	prevErr  error
)

// previousBuild builds ctrlnode at previousRelease in a git worktree of
// this repository made for it and removed once built, and keeps the
// binary in the temporary directory for later runs (the commit never
// changes, nor does its build). A missing git, commit or toolchain fails
// the test.
func previousBuild(t *testing.T) string {
	t.Helper()
	prevOnce.Do(func() {
		run := func(dir string, name string, args ...string) error {
			cmd := exec.Command(name, args...)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
			}
			return nil
		}
		prevBin = filepath.Join(os.TempDir(), "ctrlnode-"+previousRelease, "ctrlnode")
		if _, err := os.Stat(prevBin); err == nil {
			return
		}
		top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
		if err != nil {
			prevErr = fmt.Errorf("git rev-parse --show-toplevel: %v", err)
			return
		}
		root := strings.TrimSpace(string(top))
		tmp, err := os.MkdirTemp("", "ctrlnode-"+previousRelease+"-build-")
		if err != nil {
			prevErr = err
			return
		}
		defer os.RemoveAll(tmp)
		src := filepath.Join(tmp, "src")
		if prevErr = run(root, "git", "worktree", "add", "--detach", src, previousRelease); prevErr != nil {
			return
		}
		defer func() { _ = run(root, "git", "worktree", "remove", "--force", src) }()
		built := filepath.Join(tmp, "ctrlnode")
		if prevErr = run(src, "go", "build", "-o", built, "./cmd/ctrlnode"); prevErr != nil {
			return
		}
		// Into place with a rename, so that a run never finds half a binary.
		if prevErr = os.MkdirAll(filepath.Dir(prevBin), 0o755); prevErr != nil {
			return
		}
		prevErr = os.Rename(built, prevBin)
	})
	if prevErr != nil {
		t.Fatalf("build ctrlnode at %s: %v", previousRelease, prevErr)
	}
	return prevBin
}

// cliTopicLoad creates topics one after another with ctrlnode topics
// create, through the active controller, until stopped, and keeps the
// names of those whose creation was acknowledged.
type cliTopicLoad struct {
	bootstrap string
	stopc     chan struct{}
	done      chan struct{}
	mu        sync.Mutex
	acked     []string
	tried     int
}

func startCLITopicLoad(t *testing.T, bootstrap string) *cliTopicLoad {
	bin := ctrlnode(t)
	l := &cliTopicLoad{bootstrap: bootstrap, stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for i := 0; ; i++ {
			select {
			case <-l.stopc:
				return
			default:
			}
			name := fmt.Sprintf("load-%d", i)
			cmd := exec.Command(bin, "topics", "create", "--topic", name, "--partitions", "1", "--replication-factor", "1",
				"--bootstrap", l.bootstrap, "--timeout", "10s", "--json")
			var out bytes.Buffer
			cmd.Stdout = &out
			err := cmd.Run()
			var res itemResults
			ok := err == nil && json.Unmarshal(out.Bytes(), &res) == nil && len(res.Results) == 1 && res.Results[0].Status == "created"
			l.mu.Lock()
			l.tried++
			if ok {
				l.acked = append(l.acked, name)
			}
			l.mu.Unlock()
		}
	}()
	t.Cleanup(l.stop)
	return l
}

func (l *cliTopicLoad) stop() {
	select {
	case <-l.stopc:
	default:
		close(l.stopc)
	}
	<-l.done
}

func (l *cliTopicLoad) acknowledged() (acked []string, tried int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.acked...), l.tried
}

type featuresJSON []struct {
	Feature      string `json:"feature"`
	SupportedMax int16  `json:"supported_max"`
	Finalized    int16  `json:"finalized"`
}

func (f featuresJSON) finalized(t *testing.T) int16 {
	t.Helper()
	for _, r := range f {
		if r.Feature == "metadata.version" {
			return r.Finalized
		}
	}
	t.Fatalf("no metadata.version in %+v", f)
	return 0
}

var haltLine = regexp.MustCompile(`cannot apply log entry|stopping the node`)

// TestRollingUpgrade runs three voter+broker nodes of the previous
// release under a steady load of topic creations, replaces them one at a
// time with this build on the same data directories (which it adopts:
// they have no meta.properties), and raises
// metadata.version from 1 to 2. Raising it while a voter of the previous
// release is still in the quorum is refused, naming that voter. No voter
// halts, every acknowledged topic exists at the end, and the voters'
// state hashes agree.
func TestRollingUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs two builds of the binary")
	}
	t.Parallel()
	prev, cur := previousBuild(t), ctrlnode(t)
	all, nodes, dir := threeNodeSettings(t)
	for i := range nodes {
		nodes[i].args = append(nodes[i].args, "--config", configFile(t, dir, nodes[i].id, all[i]))
		// The previous release neither writes nor reads meta.properties:
		// its directories have none, and this build adopts them.
		if err := os.Remove(filepath.Join(setting(t, all[i], "data.dir"), "meta.properties")); err != nil {
			t.Fatal(err)
		}
	}
	bootstrap := bootstrapOf(nodes)
	procs := map[int32]*proc{}
	var stopped []*proc // every process that ran, for the halt check
	launch := func(n runNode, bin, build string) {
		p := startBinary(t, bin, fmt.Sprintf("node %d (%s)", n.id, build), n.env, n.args...)
		procs[n.id] = p
		stopped = append(stopped, p)
	}
	ready := func(n runNode) {
		waitFor(t, time.Minute, procs[n.id].name+" ready", func() bool {
			code, _, err := httpGet("http://" + n.http + "/readyz")
			return err == nil && code == 200
		})
	}
	start := func(n runNode, bin, build string) {
		launch(n, bin, build)
		ready(n)
	}
	stop := func(id int32) {
		if err := procs[id].signal(t, syscall.SIGTERM, time.Minute); err != nil {
			t.Fatalf("%s exited with %v after SIGTERM, want 0", procs[id].name, err)
		}
	}
	leader := func() int32 {
		var q quorumJSON
		ctlJSON(t, time.Minute, &q, "quorum", "status", "--bootstrap", bootstrap)
		return q.LeaderID
	}
	for _, n := range nodes {
		launch(n, prev, previousRelease)
	}
	for _, n := range nodes {
		ready(n)
	}
	var brokers brokersJSON
	waitFor(t, time.Minute, "three active brokers", func() bool {
		ctlJSON(t, 30*time.Second, &brokers, "brokers", "list", "--bootstrap", bootstrap)
		active := 0
		for _, b := range brokers.Brokers {
			// A voter of the previous release lists the voters too.
			if b.ID >= 1 && b.ID <= 3 && !b.Fenced {
				active++
			}
		}
		return active == 3
	})
	load := startCLITopicLoad(t, bootstrap)
	began := time.Now()

	// The leader first, then the others; the last one waits for the
	// refused upgrade below.
	first := leader()
	order := []int32{first}
	for _, n := range nodes {
		if n.id != first {
			order = append(order, n.id)
		}
	}
	byID := map[int32]runNode{}
	for _, n := range nodes {
		byID[n.id] = n
	}
	for _, id := range order[:2] {
		stop(id)
		start(byID[id], cur, "this build")
	}

	// The reverse order: the level raised while a voter of the previous
	// release is in the quorum. The active controller must be of this
	// build to decide (the previous one does not serve UpdateFeatures):
	// if the old node leads, it is restarted, handing leadership over.
	last := order[2]
	if leader() == last {
		stop(last)
		start(byID[last], prev, previousRelease)
		waitFor(t, time.Minute, "a leader of this build", func() bool { l := leader(); return l != last && l > 0 })
	}
	var f featuresJSON
	ctlJSON(t, time.Minute, &f, "features", "describe", "--bootstrap", bootstrap)
	if got := f.finalized(t); got != 1 {
		t.Fatalf("a cluster of the previous release upgraded to this build is at metadata.version %d, want 1", got)
	}
	refused := ctl(t, nil, "features", "upgrade", "--metadata", "2", "--bootstrap", bootstrap)
	want := fmt.Sprintf("voter %d supports metadata.version 1 to 1", last)
	if refused.code != 1 || !strings.Contains(refused.stderr, want) {
		t.Fatalf("upgrade with voter %d of the previous release: want exit 1 saying %q, got %s", last, want, refused)
	}

	stop(last)
	start(byID[last], cur, "this build")
	var up []struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	ctlJSON(t, time.Minute, &up, "features", "upgrade", "--metadata", "2", "--bootstrap", bootstrap)
	if len(up) != 1 || up[0].Status != "upgraded" {
		t.Fatalf("upgrade: %+v", up)
	}
	ctlJSON(t, time.Minute, &f, "features", "describe", "--bootstrap", bootstrap)
	if got := f.finalized(t); got != 2 {
		t.Fatalf("after the upgrade metadata.version is %d, want 2", got)
	}
	for _, n := range nodes {
		waitFor(t, time.Minute, fmt.Sprintf("node %d's metrics at metadata.version 2", n.id), func() bool {
			code, body, err := httpGet("http://" + n.http + "/metrics")
			v, ok := metricValue(body, "kafka_server_metadata_loader_current_metadata_version")
			return err == nil && code == 200 && ok && v == 2
		})
	}
	down := ctl(t, nil, "features", "downgrade", "--metadata", "1", "--bootstrap", bootstrap)
	if down.code != 1 || !strings.Contains(down.stderr, "refusing to downgrade from 2") {
		t.Fatalf("downgrade to 1: want exit 1 refusing it, got %s", down)
	}
	// The load runs on at the new level a little, then stops.
	acked, _ := load.acknowledged()
	waitFor(t, time.Minute, "topics created after the upgrade", func() bool {
		now, _ := load.acknowledged()
		return len(now) >= len(acked)+3
	})
	load.stop()
	acked, tried := load.acknowledged()
	t.Logf("rolling upgrade took %v; %d of %d topic creations acknowledged", time.Since(began).Round(time.Second), len(acked), tried)

	var list topicList
	ctlJSON(t, time.Minute, &list, "topics", "list", "--bootstrap", bootstrap)
	for _, name := range acked {
		if _, ok := list.find(name); !ok {
			t.Errorf("acknowledged topic %s is missing", name)
		}
	}
	var sh stateHashJSON
	var httpArgs []string
	for _, n := range nodes {
		httpArgs = append(httpArgs, "--http", n.http)
	}
	ctlJSON(t, time.Minute, &sh, append([]string{"state-hash", "--wait", "10s"}, httpArgs...)...)
	if !sh.Agree || len(sh.Voters) != 3 {
		t.Fatalf("state hashes: %+v", sh)
	}
	for _, p := range stopped {
		if m, _, ok := p.find(haltLine); ok {
			t.Errorf("%s halted: %s", p.name, m[0])
		}
	}
	adopted := regexp.MustCompile(`adopted a data directory written by a release without meta.properties`)
	for _, n := range nodes {
		if _, err := os.Stat(filepath.Join(setting(t, all[n.id-1001], "data.dir"), "meta.properties")); err != nil {
			t.Errorf("node %d's directory was not adopted: %v", n.id, err)
		}
		said := false
		for _, p := range stopped {
			if _, _, ok := p.find(adopted); ok && p.name == fmt.Sprintf("node %d (this build)", n.id) {
				said = true
			}
		}
		if !said {
			t.Errorf("node %d of this build did not say it adopted its directory", n.id)
		}
	}
	for _, n := range nodes {
		if procs[n.id].exited() {
			t.Errorf("%s exited: %v", procs[n.id].name, procs[n.id].err)
		}
	}
}
