package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// saslRunNodes lays out three voter+broker `ctrlnode run` nodes whose
// listeners require SCRAM, with User:admin a super user created at
// bootstrap from adminPassFile. Each node is configured by a file.
func saslRunNodes(t *testing.T, adminPassFile string) []runNode {
	t.Helper()
	all, nodes, dir := threeNodeSettings(t,
		[2]string{"sasl.enabled.mechanisms", "SCRAM-SHA-512,SCRAM-SHA-256"},
		[2]string{"super.users", "User:admin"},
		[2]string{"sasl.bootstrap.user", "admin"},
		[2]string{"sasl.bootstrap.password.file", adminPassFile},
	)
	for i := range nodes {
		nodes[i].args = append(nodes[i].args, "--config", configFile(t, dir, nodes[i].id, all[i]))
	}
	return nodes
}

// envWith is the test's environment without any CTRLNODE_*PASSWORD
// variable, plus extra.
func envWith(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "CTRLNODE_") && strings.HasSuffix(k, "_PASSWORD") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

type aclListJSON struct {
	ACLs []struct {
		Principal    string `json:"principal"`
		Host         string `json:"host"`
		Permission   string `json:"permission"`
		Operation    string `json:"operation"`
		ResourceType string `json:"resource_type"`
		Pattern      string `json:"pattern"`
		Name         string `json:"name"`
	} `json:"acls"`
}

type aclRemoveJSON struct {
	Removed []struct {
		Principal string `json:"principal"`
		Operation string `json:"operation"`
		Name      string `json:"name"`
	} `json:"removed"`
}

type scramListJSON struct {
	Credentials []struct {
		User       string `json:"user"`
		Mechanism  string `json:"mechanism"`
		Iterations int32  `json:"iterations"`
	} `json:"credentials"`
}

// TestSecurityCommandsAgainstSASLCluster runs three `ctrlnode run` voters
// that require SCRAM. As the bootstrap admin: `scram set` creates alice
// and `acl add` lets her create and describe topics starting with
// "alice-". As alice, creating alice-1 succeeds and bob-1 fails with
// TOPIC_AUTHORIZATION_FAILED; a wrong password fails with
// SASL_AUTHENTICATION_FAILED; `acl remove` takes her rules away.
func TestSecurityCommandsAgainstSASLCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const adminPass, alicePass = "admin-Secret-1", "alice-Secret-2"
	nodes := saslRunNodes(t, write("admin.password", adminPass+"\n"))
	for _, n := range nodes {
		n.start(t)
	}
	boot := []string{"--bootstrap", bootstrapOf(nodes), "--timeout", "20s"}
	admin := envWith("CTRLNODE_SASL_PASSWORD=" + adminPass)
	asAdmin := append([]string{"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "admin"}, boot...)
	alice := envWith("CTRLNODE_SASL_PASSWORD=" + alicePass)
	asAlice := append([]string{"--sasl-mechanism", "scram-sha-512", "--sasl-user", "alice"}, boot...)

	// run runs a command to completion; runJSON also decodes its --json
	// output, retrying until it exits 0.
	run := func(env []string, args ...string) result {
		t.Helper()
		return ctl(t, env, args...)
	}
	runJSON := func(timeout time.Duration, v any, env []string, args ...string) {
		t.Helper()
		var last result
		waitFor(t, timeout, "ctrlnode "+strings.Join(args, " "), func() bool {
			last = run(env, append(args, "--json")...)
			return last.code == 0
		})
		if err := json.Unmarshal([]byte(last.stdout), v); err != nil {
			t.Fatalf("ctrlnode %v: %v\n%s", args, err, last)
		}
	}

	// The cluster is up once the admin's login works and the three
	// brokers (which log in as admin too) are registered and unfenced.
	waitFor(t, 2*time.Minute, "three active brokers, seen by the admin", func() bool {
		var b brokersJSON
		r := run(admin, append([]string{"brokers", "list", "--json"}, asAdmin...)...)
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &b) != nil {
			return false
		}
		active := 0
		for _, x := range b.Brokers {
			if !x.Fenced {
				active++
			}
		}
		return active == 3
	})

	// Without a login the listener answers nothing.
	if r := run(envWith(), "acl", "list", "--bootstrap", bootstrapOf(nodes), "--timeout", "3s"); r.code != 3 ||
		!strings.Contains(r.stderr, "--sasl-mechanism") {
		t.Fatalf("acl list without a login: want exit 3 and a hint to log in\n%s", r)
	}

	// The admin creates alice.
	var set struct {
		Results []struct {
			User, Mechanism, Status, Error string
		} `json:"results"`
	}
	runJSON(30*time.Second, &set, admin, append([]string{"scram", "set", "--user", "alice", "--password-file",
		write("alice.password", alicePass+"\n")}, asAdmin...)...)
	if len(set.Results) != 1 || set.Results[0].Status != "set" || set.Results[0].Mechanism != "SCRAM-SHA-512" {
		t.Fatalf("scram set: %+v", set)
	}
	var creds scramListJSON
	runJSON(30*time.Second, &creds, admin, append([]string{"scram", "list"}, asAdmin...)...)
	found := false
	for _, c := range creds.Credentials {
		if c.User == "alice" && c.Mechanism == "SCRAM-SHA-512" && c.Iterations == 8192 {
			found = true
		}
	}
	if !found {
		t.Fatalf("scram list does not show alice's SCRAM-SHA-512 credential with 8192 iterations: %+v", creds)
	}

	// alice may create and describe topics starting with "alice-".
	r := run(admin, append([]string{"acl", "add", "--principal", "User:alice", "--topic", "alice-", "--prefixed",
		"--operation", "create", "--operation", "Describe"}, asAdmin...)...)
	if r.code != 0 || strings.Count(r.stdout, "created") != 2 {
		t.Fatalf("acl add:\n%s", r)
	}
	var acls aclListJSON
	runJSON(30*time.Second, &acls, admin, append([]string{"acl", "list"}, asAdmin...)...)
	ops := map[string]bool{}
	for _, a := range acls.ACLs {
		if a.Principal == "User:alice" && a.Host == "*" && a.Permission == "Allow" && a.ResourceType == "Topic" &&
			a.Pattern == "Prefixed" && a.Name == "alice-" {
			ops[a.Operation] = true
		}
	}
	if len(acls.ACLs) != 2 || !ops["Create"] || !ops["Describe"] {
		t.Fatalf("acl list: %+v", acls)
	}

	// As alice. The rule may reach the voter that answers a moment after
	// the active controller committed it: retry while refused.
	var created itemResults
	runJSON(30*time.Second, &created, alice, append([]string{"topics", "create", "--topic", "alice-1",
		"--partitions", "1", "--replication-factor", "3", "--if-not-exists"}, asAlice...)...)
	if len(created.Results) != 1 || created.Results[0].Error != "" {
		t.Fatalf("alice creates alice-1: %+v", created)
	}
	r = run(alice, append([]string{"topics", "create", "--topic", "bob-1", "--partitions", "1", "--replication-factor", "3"}, asAlice...)...)
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("alice creates bob-1: want exit 1 with TOPIC_AUTHORIZATION_FAILED\n%s", r)
	}
	// alice may not manage the rules.
	r = run(alice, append([]string{"acl", "list"}, asAlice...)...)
	if r.code != 1 || !strings.Contains(r.stderr, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("alice lists the rules: want exit 1 with CLUSTER_AUTHORIZATION_FAILED\n%s", r)
	}

	// A wrong password, through the Kafka client and through the
	// commands that talk to the active controller directly.
	wrong := envWith("CTRLNODE_SASL_PASSWORD=not-alices-password")
	for _, args := range [][]string{
		{"topics", "create", "--topic", "alice-2"},
		{"scram", "list"},
	} {
		start := time.Now()
		r = run(wrong, append(args, asAlice...)...)
		if r.code != 1 || !strings.Contains(r.stderr, "SASL_AUTHENTICATION_FAILED") {
			t.Fatalf("%v with a wrong password: want exit 1 with SASL_AUTHENTICATION_FAILED\n%s", args, r)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("%v with a wrong password took %v: a refused login should not be retried", args, d)
		}
	}

	// Removing alice's rules.
	var removed aclRemoveJSON
	runJSON(30*time.Second, &removed, admin, append([]string{"acl", "remove", "--principal", "User:alice"}, asAdmin...)...)
	if len(removed.Removed) != 2 {
		t.Fatalf("acl remove: %+v", removed)
	}
	runJSON(30*time.Second, &acls, admin, append([]string{"acl", "list", "--principal", "User:alice"}, asAdmin...)...)
	if len(acls.ACLs) != 0 {
		t.Fatalf("alice's rules after acl remove: %+v", acls)
	}
	waitFor(t, 30*time.Second, "alice refused alice-3 once her rules are gone", func() bool {
		r = run(alice, append([]string{"topics", "create", "--topic", "alice-3", "--partitions", "1", "--replication-factor", "3"}, asAlice...)...)
		return r.code == 1 && strings.Contains(r.stdout+r.stderr, "TOPIC_AUTHORIZATION_FAILED")
	})

	// Deleting her credential: she can no longer log in.
	r = run(admin, append([]string{"scram", "delete", "--user", "alice", "--mechanism", "SCRAM-SHA-512"}, asAdmin...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "deleted") {
		t.Fatalf("scram delete:\n%s", r)
	}
	waitFor(t, 30*time.Second, "alice's login refused after scram delete", func() bool {
		r = run(alice, append([]string{"scram", "list"}, asAlice...)...)
		return r.code == 1 && strings.Contains(r.stderr, "SASL_AUTHENTICATION_FAILED")
	})
	r = run(admin, append([]string{"scram", "list", "--user", "alice"}, asAdmin...)...)
	if r.code != 1 || !strings.Contains(r.stderr, "RESOURCE_NOT_FOUND") {
		t.Fatalf("scram list --user alice after delete: want exit 1 with RESOURCE_NOT_FOUND\n%s", r)
	}
}
