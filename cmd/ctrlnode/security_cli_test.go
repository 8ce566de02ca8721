package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig/tlstest"
)

// runCLI runs a ctrlnode command line and returns its exit code and
// output.
func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func writeSecret(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// An address nothing listens on: usage errors must come before any
// connection, so none of these tests reaches it.
const nowhere = "127.0.0.1:1"

func TestSecurityCommandUsageErrors(t *testing.T) {
	t.Setenv(envSASLPassword, "")
	t.Setenv(envSCRAMPassword, "")
	pw := writeSecret(t, "s3cret\nignored second line\n")
	empty := writeSecret(t, "\n")
	b := []string{"--bootstrap", nowhere, "--timeout", "1s"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"acl add bad operation", []string{"acl", "add", "--principal", "User:alice", "--topic", "t", "--operation", "reed"}, `--operation "reed"`},
		{"acl add any is a filter", []string{"acl", "add", "--principal", "User:alice", "--topic", "t", "--operation", "any"}, `--operation "any"`},
		{"acl add no principal", []string{"acl", "add", "--topic", "t", "--operation", "read"}, "--principal is required"},
		{"acl add bad principal", []string{"acl", "add", "--principal", "alice", "--topic", "t", "--operation", "read"}, `--principal "alice" is not Type:name`},
		{"acl add no operation", []string{"acl", "add", "--principal", "User:alice", "--topic", "t"}, "--operation is required"},
		{"acl add no resource", []string{"acl", "add", "--principal", "User:alice", "--operation", "read"}, "--topic, --group or --cluster is required"},
		{"acl add two resources", []string{"acl", "add", "--principal", "User:alice", "--topic", "t", "--cluster", "--operation", "read"}, "one of --topic, --group and --cluster"},
		{"acl add prefixed cluster", []string{"acl", "add", "--principal", "User:alice", "--cluster", "--prefixed", "--operation", "alter"}, "--prefixed does not go with --cluster"},
		{"acl list two patterns", []string{"acl", "list", "--topic", "t", "--prefixed", "--match"}, "at most one of --prefixed, --literal and --match"},
		{"acl list match without name", []string{"acl", "list", "--match"}, "--match needs"},
		{"acl list bad permission", []string{"acl", "list", "--permission", "maybe"}, `--permission "maybe"`},
		{"acl remove no filter", []string{"acl", "remove"}, "or --all to remove every rule"},
		{"acl remove all with filter", []string{"acl", "remove", "--all", "--principal", "User:alice"}, "--all removes every rule"},
		{"sasl mechanism without user", []string{"acl", "list", "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-password-file", pw}, "--sasl-user is required with --sasl-mechanism"},
		{"sasl mechanism without password", []string{"acl", "list", "--sasl-mechanism", "scram-sha-256", "--sasl-user", "admin"}, "--sasl-password-file (or $CTRLNODE_SASL_PASSWORD) is required"},
		{"sasl user without mechanism", []string{"topics", "list", "--sasl-user", "admin"}, "--sasl-user needs --sasl-mechanism"},
		{"sasl password without mechanism", []string{"scram", "list", "--sasl-password-file", pw}, "--sasl-password-file needs --sasl-mechanism"},
		{"sasl unknown mechanism", []string{"brokers", "list", "--sasl-mechanism", "GSSAPI", "--sasl-user", "a", "--sasl-password-file", pw}, `--sasl-mechanism "GSSAPI"`},
		{"sasl plain without tls", []string{"acl", "list", "--sasl-mechanism", "plain", "--sasl-user", "a", "--sasl-password-file", pw}, "PLAIN needs --tls-ca"},
		{"sasl password file missing", []string{"acl", "list", "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "a", "--sasl-password-file", filepath.Join(t.TempDir(), "none")}, "--sasl-password-file:"},
		{"sasl password file empty", []string{"acl", "list", "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "a", "--sasl-password-file", empty}, "the first line (the password) is empty"},
		{"tls cert without key", []string{"acl", "list", "--tls-ca", pw, "--tls-cert", pw}, "--tls-key is required with --tls-cert"},
		{"tls ca not pem", []string{"acl", "list", "--tls-ca", pw}, "holds no PEM certificate"},
		{"scram set no user", []string{"scram", "set", "--password-file", pw}, "--user is required"},
		{"scram set no password", []string{"scram", "set", "--user", "alice"}, "--password-file (or $CTRLNODE_SCRAM_PASSWORD) is required"},
		{"scram set empty password", []string{"scram", "set", "--user", "alice", "--password-file", empty}, "is empty"},
		{"scram set bad mechanism", []string{"scram", "set", "--user", "alice", "--mechanism", "SCRAM-SHA-1", "--password-file", pw}, `--mechanism "SCRAM-SHA-1"`},
		{"scram set iterations", []string{"scram", "set", "--user", "alice", "--iterations", "1000", "--password-file", pw}, "--iterations 1000"},
		{"scram delete no mechanism", []string{"scram", "delete", "--user", "alice"}, "--mechanism is required"},
		{"scram delete no user", []string{"scram", "delete", "--mechanism", "SCRAM-SHA-256"}, "--user is required"},
		{"acl unknown subcommand", []string{"acl", "grant"}, `unknown subcommand "grant"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(append(tc.args, b...)...)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Fatalf("stderr does not name %q:\n%s", tc.want, stderr)
			}
		})
	}
}

func TestSecurityCommandsHelp(t *testing.T) {
	for _, args := range [][]string{
		{"acl", "--help"}, {"acl", "add", "--help"}, {"acl", "list", "--help"}, {"acl", "remove", "--help"},
		{"scram", "--help"}, {"scram", "set", "--help"}, {"scram", "list", "--help"}, {"scram", "delete", "--help"},
	} {
		code, stdout, stderr := runCLI(args...)
		if code != exitOK || stderr != "" || !strings.Contains(stdout, "usage: ctrlnode "+args[0]) {
			t.Errorf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
		}
		if len(args) == 3 && !strings.Contains(stdout, "-sasl-mechanism") {
			t.Errorf("%v: no --sasl-mechanism in the help", args)
		}
	}
}

func TestParseOperationNames(t *testing.T) {
	for in, want := range map[string]raftlog.AclOperation{
		"create": raftlog.OpCreate, "DESCRIBE": raftlog.OpDescribe, "cluster-action": raftlog.OpClusterAction,
		"ClusterAction": raftlog.OpClusterAction, "describe-configs": raftlog.OpDescribeConfigs,
		"alter_configs": raftlog.OpAlterConfigs, "all": raftlog.OpAll, "Idempotent-Write": raftlog.OpIdempotentWrite,
	} {
		got, err := parseOperation(in, false)
		if err != nil || got != want {
			t.Errorf("parseOperation(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseOperation("any", false); err == nil {
		t.Error("any accepted for a rule")
	}
	if op, err := parseOperation("any", true); err != nil || op != raftlog.OpAny {
		t.Errorf("any as a filter: %v %v", op, err)
	}
}

func TestParseACLAddRules(t *testing.T) {
	res := resourceFlags{topic: "alice-", prefixed: true}
	rules, err := parseACLAdd([]string{"User:alice", "User:bob"}, nil, []string{"create", "describe", "Create"}, &res, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 4 {
		t.Fatalf("%d rules, want 2 principals x 2 operations: %v", len(rules), rules)
	}
	for _, r := range rules {
		if r.Host != "*" || r.ResourceType != raftlog.ResourceTopic || r.ResourceName != "alice-" ||
			r.PatternType != raftlog.PatternPrefixed || r.Permission != raftlog.PermissionAllow {
			t.Errorf("rule %v", r)
		}
	}
	res = resourceFlags{cluster: true}
	rules, err = parseACLAdd([]string{"User:ops"}, []string{"10.0.0.1"}, []string{"alter"}, &res, true)
	if err != nil || len(rules) != 1 {
		t.Fatal(rules, err)
	}
	if r := rules[0]; r.ResourceType != raftlog.ResourceCluster || r.ResourceName != raftlog.ClusterResourceName ||
		r.PatternType != raftlog.PatternLiteral || r.Permission != raftlog.PermissionDeny || r.Host != "10.0.0.1" {
		t.Errorf("cluster deny rule %v", r)
	}
}

func TestACLFilterDefaults(t *testing.T) {
	ff := aclFilterFlags{principal: "User:alice"}
	f, err := parseACLRemove(&ff, false)
	if err != nil {
		t.Fatal(err)
	}
	if f.resourceType != 1 || f.name != nil || f.pattern != 1 || f.operation != 1 || f.permission != 1 ||
		f.principal == nil || *f.principal != "User:alice" || f.host != nil {
		t.Errorf("filter %+v: want every rule of User:alice", f)
	}
	f, err = parseACLRemove(&aclFilterFlags{}, true)
	if err != nil || f.principal != nil || f.name != nil || f.resourceType != 1 {
		t.Errorf("--all: %+v %v", f, err)
	}
}

func newTestCLI(args ...string) (*cli, int, bool) {
	c := newCLI("test", "", "", io.Discard, io.Discard)
	code, done := c.parse(args)
	return c, code, done
}

func TestSASLMechanismFromFlags(t *testing.T) {
	t.Setenv(envSASLPassword, "from-env")
	c, code, done := newTestCLI("--sasl-mechanism", "scram-sha-512", "--sasl-user", "admin")
	if done {
		t.Fatalf("parse: exit %d", code)
	}
	if c.saslMech == nil || c.saslMech.Name() != "SCRAM-SHA-512" {
		t.Fatalf("mechanism %v", c.saslMech)
	}
	// The file wins over the environment, and only its first line counts.
	pw := writeSecret(t, "from-file\r\nsecond\n")
	if p, err := passwordFromFileOrEnv("--sasl-password-file", pw, envSASLPassword); err != nil || p != "from-file" {
		t.Fatalf("password %q %v", p, err)
	}
	if p, err := passwordFromFileOrEnv("--sasl-password-file", "", envSASLPassword); err != nil || p != "from-env" {
		t.Fatalf("password from the environment %q %v", p, err)
	}
	c, _, done = newTestCLI("--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "admin", "--sasl-password-file", pw)
	if done || c.saslMech.Name() != "SCRAM-SHA-256" {
		t.Fatalf("SCRAM-SHA-256: %v", c.saslMech)
	}
	c, _, done = newTestCLI()
	if done || c.saslMech != nil {
		t.Fatal("a mechanism without --sasl-mechanism")
	}
}

// TestTLSCAOnly: --tls-ca alone verifies the server and presents no
// certificate, so PLAIN may be used over it.
func TestTLSCAOnly(t *testing.T) {
	pki := tlstest.NewPKI(t, "test-ca")
	srvFiles := pki.Issue("server")
	cert, err := tls.LoadX509KeyPair(srvFiles.Cert, srvFiles.Key)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 1)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequestClientCert})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		tc := conn.(*tls.Conn)
		if tc.Handshake() == nil {
			got <- len(tc.ConnectionState().PeerCertificates)
		}
	}()

	c, code, done := newTestCLI("--tls-ca", pki.CAFile, "--sasl-mechanism", "PLAIN", "--sasl-user", "a",
		"--sasl-password-file", writeSecret(t, "pw\n"))
	if done {
		t.Fatalf("parse: exit %d", code)
	}
	if c.saslMech == nil || c.saslMech.Name() != "PLAIN" {
		t.Fatalf("mechanism %v", c.saslMech)
	}
	dial, err := c.tlsDialer()
	if err != nil || dial == nil {
		t.Fatal(dial, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := dial(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	select {
	case n := <-got:
		if n != 0 {
			t.Fatalf("the client presented %d certificates", n)
		}
	case <-ctx.Done():
		t.Fatal("no handshake")
	}

	// A server whose certificate the CA did not sign is refused.
	other := tlstest.NewPKI(t, "other-ca")
	c, _, done = newTestCLI("--tls-ca", other.CAFile)
	if done {
		t.Fatal("parse")
	}
	dial, _ = c.tlsDialer()
	ln2, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln2.Close()
	go func() {
		if conn, err := ln2.Accept(); err == nil {
			_ = conn.(*tls.Conn).Handshake()
			_ = conn.Close()
		}
	}()
	if conn, err := dial(ctx, "tcp", ln2.Addr().String()); err == nil {
		_ = conn.Close()
		t.Fatal("a server of another CA was accepted")
	}
}
