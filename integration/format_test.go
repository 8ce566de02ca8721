package integration

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/voter/meta"
)

// formatNodes formats each voter's data.dir with `ctrlnode format` as a new
// cluster of them all (settings as threeNodeSettings gives them), and
// returns the cluster id.
func formatNodes(t *testing.T, all [][][2]string) string {
	t.Helper()
	var ids, raft, dirs []string
	for _, s := range all {
		ids, raft, dirs = append(ids, setting(t, s, "node.id")), append(raft, setting(t, s, "raft.listener")), append(dirs, setting(t, s, "data.dir"))
	}
	return formatVoters(t, ids, raft, dirs)
}

// formatVoters formats dirs[i] for voter ids[i] at raft address raft[i],
// with `ctrlnode format`, as a new cluster of them all; it returns the
// cluster id.
func formatVoters(t *testing.T, ids, raft, dirs []string) string {
	t.Helper()
	cluster := meta.NewUUID().String()
	var initial []string
	for i := range ids {
		initial = append(initial, fmt.Sprintf("%s@%s:%s", ids[i], raft[i], meta.NewUUID()))
	}
	for i := range ids {
		r := ctl(t, nil, "format", "--node-id", ids[i], "--data-dir", dirs[i], "--cluster-id", cluster, "--initial-voters", strings.Join(initial, ","))
		if r.code != 0 {
			t.Fatalf("format: %v", r)
		}
	}
	return cluster
}

// TestFormatAndRunRefusals: run refuses a data directory that is not
// formatted, and one formatted for another node or cluster, each with a
// message saying what to do, and writes nothing into it; format refuses a
// directory already formatted unless --ignore-formatted, and a voter list
// that does not name the node; a formatted standalone node starts, reports
// the cluster id of its format in quorum status, records it in its log,
// and restarts on it.
func TestFormatAndRunRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	dir := t.TempDir()
	base := freePortBase(t, 0, 1)
	raft, lis := fmt.Sprintf("127.0.0.1:%d", base), fmt.Sprintf("127.0.0.1:%d", base+1)
	data := filepath.Join(dir, "data")
	runArgs := func(extra ...string) []string {
		return append([]string{"run", "--node-id", "1001", "--data-dir", data, "--raft-listener", raft, "--listener", lis,
			"--voters", "1001@" + raft, "--voter-listeners", "1001@" + lis}, extra...)
	}
	expect := func(r result, code int, want ...string) {
		t.Helper()
		if r.code != code {
			t.Fatalf("exit %d, want %d: %v", r.code, code, r)
		}
		for _, w := range want {
			if !strings.Contains(r.stderr+r.stdout, w) {
				t.Errorf("output lacks %q: %v", w, r)
			}
		}
	}

	// Unformatted: refused, and nothing is written (no raft state made).
	expect(ctl(t, nil, runArgs()...), 1, "data directory "+data+" is not formatted", "run `ctrlnode format` first")
	if has, err := meta.HasRaftState(data); err != nil || has {
		t.Fatalf("a refused start left raft state in %s (%v)", data, err)
	}

	// Format refusals.
	other := meta.NewUUID()
	expect(ctl(t, nil, "format", "--node-id", "1001", "--data-dir", data, "--initial-voters", "1002@"+raft+":"+other.String()),
		2, "initial voters do not include this node")
	expect(ctl(t, nil, "format", "--node-id", "1001", "--data-dir", data, "--cluster-id", "not-a-uuid", "--standalone", "--raft-listener", raft),
		2, "cluster.id (from flag --cluster-id)", "is not a Kafka Uuid")
	expect(ctl(t, nil, "format", "--node-id", "1001", "--data-dir", data, "--standalone", "--initial-voters", "1001@"+raft+":"+other.String()),
		2, "exclusive")

	// Formatted for another node, then for another cluster.
	cluster := meta.NewUUID().String()
	expect(ctl(t, nil, "format", "--node-id", "1002", "--data-dir", data, "--cluster-id", cluster), 0, "node.id         1002")
	expect(ctl(t, nil, runArgs()...), 1, "belongs to node 1002, not to node 1001")
	expect(ctl(t, nil, "format", "--node-id", "1001", "--data-dir", data, "--cluster-id", cluster), 1, "already formatted", "--ignore-formatted")
	expect(ctl(t, nil, "format", "--node-id", "1001", "--data-dir", data, "--ignore-formatted"), 0, "node.id         1002")

	data = filepath.Join(dir, "data2")
	r := ctl(t, nil, "format", "--node-id", "1001", "--data-dir", data, "--cluster-id", cluster, "--standalone", "--raft-listener", raft, "--json")
	expect(r, 0, `"cluster_id": "`+cluster+`"`, `"initial_voters": [`, "1001@"+raft+":")
	expect(ctl(t, nil, runArgs("--cluster-id", meta.NewUUID().String())...), 1, "belongs to cluster "+cluster+", but cluster.id is")
	if has, _ := meta.HasRaftState(data); has {
		t.Fatalf("a refused start left raft state in %s", data)
	}

	// The formatted node runs, as a quorum of one, under the format's
	// cluster id.
	for round := 0; round < 2; round++ {
		p := startProc(t, "node 1001", nil, runArgs()...)
		var st struct {
			ClusterID string `json:"cluster_id"`
			LeaderID  int32  `json:"leader_id"`
		}
		ctlJSON(t, time.Minute, &st, "quorum", "status", "--bootstrap", lis)
		if st.ClusterID != cluster || st.LeaderID != 1001 {
			t.Fatalf("round %d: quorum status says cluster %q, leader %d; want %s, 1001", round, st.ClusterID, st.LeaderID, cluster)
		}
		if err := p.signal(t, syscall.SIGTERM, time.Minute); err != nil {
			t.Fatalf("round %d: SIGTERM: %v\n%s", round, err, p.output())
		}
		if _, _, ok := p.find(regexp.MustCompile(`bootstrapping new cluster`)); ok != (round == 0) {
			t.Fatalf("round %d: bootstrap logged: %v, want %v\n%s", round, ok, round == 0, p.output())
		}
	}

	// The cluster id is in the log, once, as the first activation wrote it.
	r = ctl(t, nil, "log", "dump", "--data-dir", data, "--json", "--no-snapshots")
	if r.code != 0 || strings.Count(r.stdout, `"type":"ClusterID"`) != 1 || !strings.Contains(r.stdout, `"fields":{"ID":"`+cluster+`"}`) {
		t.Fatalf("log dump: want one ClusterID record of %s: %v", cluster, r)
	}
}
