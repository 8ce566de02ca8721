package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRefusesBadConfig starts `ctrlnode run` with bad flags, bad
// config files and bad environment variables: each is refused at start
// with exit code 2 and a message naming the setting and where it came
// from, and nothing is written to the data folder.
func TestRunRefusesBadConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	good := []string{
		"--node-id", "1001", "--data-dir", data, "--raft-listener", "127.0.0.1:19801", "--listener", "127.0.0.1:19802",
		"--voters", "1001@127.0.0.1:19801", "--voter-listeners", "1001@127.0.0.1:19802",
	}
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	typo := file("typo.conf", "# a comment\nnode.idd = 1001\n")
	badDur := file("dur.conf", "node.id = 1001\n\nsession.timeout = soon\n")
	notKV := file("kv.conf", "node.id 1001\n")
	fileTimeout := file("timeout.conf", "session.timeout = from-file\n")
	env := func(kv ...string) []string { return append(os.Environ(), kv...) }
	run := func(extra ...string) []string { return append(append([]string{"run"}, good...), extra...) }

	cases := []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"nothing", nil, []string{"run"}, []string{"node.id: required"}},
		{"unknown flag", nil, []string{"run", "--node-idd", "1"}, []string{"flag provided but not defined: -node-idd"}},
		{"stray argument", nil, append([]string{"run", "extra"}, good...), []string{`unexpected argument "extra"`}},
		{"missing file", nil, []string{"run", "--config", filepath.Join(dir, "nope.conf")}, []string{"config file", "nope.conf", "no such file"}},
		{"unknown key in file", nil, []string{"run", "--config", typo}, []string{"typo.conf line 2", `unknown setting "node.idd"`, `did you mean "node.id"`}},
		{"bad duration in file", nil, append([]string{"run", "--config", badDur}, good[2:]...), []string{"session.timeout (from " + badDur + " line 3)", "not a duration"}},
		{"line not key=value", nil, []string{"run", "--config", notKV}, []string{"kv.conf line 1", "not key = value"}},
		{"env beats file", env("CTRLNODE_SESSION_TIMEOUT=from-env"), append([]string{"run", "--config", fileTimeout}, good...), []string{"session.timeout (from env CTRLNODE_SESSION_TIMEOUT)"}},
		{"flag beats env", env("CTRLNODE_SESSION_TIMEOUT=from-env"), append(append([]string{"run", "--config", fileTimeout}, good...), "--session-timeout", "from-flag"), []string{"session.timeout (from flag --session-timeout)", `"from-flag"`}},
		{"bad node id in env", env("CTRLNODE_NODE_ID=abc"), []string{"run"}, []string{"node.id (from env CTRLNODE_NODE_ID)", `"abc" is not a non-negative integer`}},
		{"unknown env setting", env("CTRLNODE_NODEID=1"), []string{"run"}, []string{"unknown setting CTRLNODE_NODEID"}},
		{"unknown role", nil, run("--roles", "voter,leader"), []string{"roles (from flag --roles)", `unknown role "leader"`}},
		{"voters without self", nil, run("--voters", "1002@127.0.0.1:19801", "--voter-listeners", "1002@127.0.0.1:19802"), []string{"voters (from flag --voters)", "does not list this node (1001)"}},
		{"voter without listener", nil, run("--voter-listeners", "1002@127.0.0.1:19802"), []string{"voter.listeners (from flag --voter-listeners)", "no entry for voter 1001"}},
		{"raft address not host:port", nil, run("--raft-listener", "nonsense"), []string{"raft.listener (from flag --raft-listener)", `"nonsense" is not host:port`}},
		{"raft address not the listed one", nil, run("--raft-listener", "127.0.0.1:19899"), []string{"voters (from flag --voters), entry 1", "lists this node at 127.0.0.1:19801"}},
		{"broker id is a voter id", nil, run("--roles", "voter,broker", "--broker-id", "1001", "--broker-listener", "127.0.0.1:0"), []string{"broker.id (from flag --broker-id)", "also a voter id"}},
		{"both roles without broker id", nil, run("--roles", "voter,broker", "--broker-listener", "127.0.0.1:0"), []string{"broker.id: required when a node has both roles"}},
		{"tls partial", nil, run("--tls-cert-file", "/etc/cert.pem"), []string{"tls.ca.file: required with the other tls.*.file settings"}},
		{"tls files missing", nil, run("--tls-ca-file", filepath.Join(dir, "ca.crt"), "--tls-cert-file", filepath.Join(dir, "n.crt"), "--tls-key-file", filepath.Join(dir, "n.key")), []string{"tls.cert.file (from flag --tls-cert-file)", "no such file"}},
		{"bad log level", nil, run("--log-level", "loud"), []string{"log.level (from flag --log-level)", `"loud"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ctl(t, tc.env, tc.args...)
			if r.code != 2 {
				t.Fatalf("exit code %d, want 2\n%v", r.code, r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Fatalf("the data folder was created (stat: %v)", err)
			}
		})
	}
}

// TestCommandLineMistakes: bad usage of dev and of the admin commands
// exits 2 with a message, an unreachable cluster exits 3, and every
// command and subcommand answers --help with its usage and exit 0.
func TestCommandLineMistakes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	data := filepath.Join(t.TempDir(), "dev-data")
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{}, 2, "usage: ctrlnode <command>"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"dev", "--data", data, "--host", "10.1.2.3"}, 2, "not a loopback address"},
		{[]string{"dev", "--data", data, "--port", "70000"}, 2, "--port 70000"},
		{[]string{"dev", "--data", data, "--session-timeout", "1ms"}, 2, "below 100ms"},
		{[]string{"dev", "--data", data, "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"topics"}, 2, "usage: ctrlnode topics <subcommand>"},
		{[]string{"topics", "frobnicate"}, 2, `unknown subcommand "frobnicate"`},
		{[]string{"topics", "create"}, 2, "--topic is required"},
		{[]string{"topics", "create", "--topic", "a", "--partitions", "0"}, 2, "--partitions 0"},
		{[]string{"topics", "create", "--topic", "a", "--replica-assignment", "1:x"}, 2, `"x" is not a broker id`},
		{[]string{"topics", "alter-config", "--topic", "a"}, 2, "nothing to change"},
		{[]string{"elect", "--type", "dirty", "--all"}, 2, `--type "dirty"`},
		{[]string{"elect", "--all", "--topic", "a"}, 2, "exactly one of --all, --topic, --partitions"},
		{[]string{"elect", "--partitions", "a-0"}, 2, `"a-0" is not topic:partition`},
		{[]string{"reassign", "execute"}, 2, "--plan is required"},
		{[]string{"reassign", "verify", "--plan", filepath.Join(t.TempDir(), "none.json")}, 2, "no such file"},
		{[]string{"reassign", "generate"}, 2, "--remove-broker is required"},
		{[]string{"topics", "list", "--bootstrap", "nonsense"}, 2, `--bootstrap "nonsense" is not host:port`},
		{[]string{"topics", "list", "--bootstrap-controller", "nonsense"}, 2, `--bootstrap-controller "nonsense" is not host:port`},
		{[]string{"topics", "list", "--bootstrap", "127.0.0.1:1", "--bootstrap-controller", "127.0.0.1:2"}, 2, "not both"},
		{[]string{"topics", "list", "--bootstrap-controller", "127.0.0.1:1", "--timeout", "1s"}, 3, "cannot reach the cluster"},
		{[]string{"topics", "list", "--bootstrap", "127.0.0.1:1", "--timeout", "1s"}, 3, "cannot reach the cluster"},
		{[]string{"quorum", "status", "--bootstrap", "127.0.0.1:1", "--timeout", "1s"}, 3, "cannot reach the cluster"},
		{[]string{"quorum", "add-voter", "--directory-id", "Xl9rEOEoRkSAi3lxfHTvIQ", "--raft", "h:1", "--listener", "h:2"}, 2, "--id is required"},
		{[]string{"quorum", "add-voter", "--id", "1004", "--directory-id", "nope", "--raft", "h:1", "--listener", "h:2"}, 2, "--directory-id"},
		{[]string{"quorum", "add-voter", "--id", "1004", "--directory-id", "Xl9rEOEoRkSAi3lxfHTvIQ", "--listener", "h:2"}, 2, `--raft "" is not host:port`},
		{[]string{"quorum", "remove-voter"}, 2, "--id is required"},
		{[]string{"state-hash", "--http", "127.0.0.1:1", "--wait", "0s"}, 3, "no voter could be read"},
		{[]string{"state-hash", "--bootstrap", "127.0.0.1:1", "--wait", "0s"}, 2, "give them with --http"},
	}
	for _, tc := range cases {
		r := ctl(t, nil, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, tc.want) {
			t.Errorf("ctrlnode %s: want exit %d and %q\n%v", strings.Join(tc.args, " "), tc.code, tc.want, r)
		}
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("a refused dev wrote its data folder (stat: %v)", err)
	}

	helps := [][]string{
		{"--help"}, {"help", "topics"}, {"dev", "--help"}, {"run", "--help"}, {"bench", "--help"},
		{"topics", "--help"}, {"elect", "--help"}, {"reassign", "--help"}, {"brokers", "--help"},
		{"quorum", "--help"}, {"state-hash", "--help"},
	}
	for _, sub := range []string{"create", "list", "describe", "delete", "add-partitions", "alter-config"} {
		helps = append(helps, []string{"topics", sub, "--help"})
	}
	for _, sub := range []string{"execute", "list", "cancel", "verify", "generate"} {
		helps = append(helps, []string{"reassign", sub, "--help"})
	}
	helps = append(helps, []string{"brokers", "list", "--help"}, []string{"quorum", "status", "--help"}, []string{"quorum", "replication", "--help"},
		[]string{"quorum", "describe", "--help"}, []string{"quorum", "add-voter", "--help"}, []string{"quorum", "remove-voter", "--help"},
		[]string{"format", "--help"}, []string{"format", "random-uuid", "--help"},
		[]string{"log", "--help"}, []string{"log", "dump", "--help"}, []string{"log", "verify", "--help"})
	for _, h := range helps {
		r := ctl(t, nil, h...)
		if r.code != 0 || !strings.Contains(r.stdout, "usage: ctrlnode") {
			t.Errorf("ctrlnode %s: want exit 0 and a usage on stdout\n%v", strings.Join(h, " "), r)
		}
	}
}
