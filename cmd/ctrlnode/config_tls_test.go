package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrlquorum/ctrlquorum/server"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig/tlstest"
)

// TestConfigTLSFiles: the tls.*.file settings are all three or none, and
// the certificate must name the node.
func TestConfigTLSFiles(t *testing.T) {
	pki := tlstest.NewPKI(t, "config test CA")
	v := pki.Voter(1001)
	other := pki.Voter(1002)
	base := map[string]string{
		"node.id": "1001", "data.dir": t.TempDir(), "raft.listener": "127.0.0.1:19801", "listener": "127.0.0.1:19802",
		"voters": "1001@127.0.0.1:19801", "voter.listeners": "1001@127.0.0.1:19802",
	}
	build := func(extra map[string]string) (server.NodeConfig, error) {
		flags := map[string]string{}
		for k, val := range base {
			flags[k] = val
		}
		for k, val := range extra {
			flags[k] = val
		}
		ns, err := server.ResolveSettings(nil, nil, flags)
		if err != nil {
			t.Fatal(err)
		}
		return server.BuildNodeConfig(ns)
	}
	if nc, err := build(nil); err != nil || nc.TLS != nil {
		t.Fatalf("no TLS settings: %v (TLS %v)", err, nc.TLS)
	}
	if _, err := build(map[string]string{"tls.cert.file": v.Cert, "tls.key.file": v.Key}); err == nil ||
		!strings.HasPrefix(err.Error(), "tls.ca.file: required") {
		t.Fatalf("without tls.ca.file: %v", err)
	}
	nc, err := build(map[string]string{"tls.ca.file": v.CA, "tls.cert.file": v.Cert, "tls.key.file": v.Key})
	if err != nil || nc.TLS == nil || nc.TLS.Identity().Voter != 1001 {
		t.Fatalf("voter 1001's files: %v", err)
	}
	if _, err := build(map[string]string{"tls.ca.file": v.CA, "tls.cert.file": other.Cert, "tls.key.file": other.Key}); err == nil ||
		!strings.Contains(err.Error(), "tls.cert.file (from flag --tls-cert-file)") || !strings.Contains(err.Error(), "voter 1002") {
		t.Fatalf("voter 1002's certificate on node 1001: %v", err)
	}
}

// TestConfigPerListenerTLSFiles: each listener's own tls files replace
// the node-wide ones for it, are all three or none, need the role that
// runs the listener and must name what that listener needs; a node is all
// TLS or all plain TCP, and node-wide files no listener uses are refused.
func TestConfigPerListenerTLSFiles(t *testing.T) {
	pki := tlstest.NewPKI(t, "config test CA")
	v1001, v1002, b1 := pki.Voter(1001), pki.Voter(1002), pki.Broker(1)
	lis := pki.Issue("listener-1001", tlsconfig.VoterURI(1001))
	set := func(prefix string, f tlsconfig.Files) map[string]string {
		return map[string]string{prefix + "ca.file": f.CA, prefix + "cert.file": f.Cert, prefix + "key.file": f.Key}
	}
	merge := func(ms ...map[string]string) map[string]string {
		out := map[string]string{}
		for _, m := range ms {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	voter := map[string]string{"roles": "voter", "broker.id": ""}

	// raft on the node-wide files, both Kafka listeners on their own.
	_, nc, err := buildFrom(t, "", nil, merge(set("tls.", v1001), set("listener.tls.", lis), set("broker.listener.tls.", b1)))
	if err != nil {
		t.Fatal(err)
	}
	if nc.TLS == nil || nc.RaftTLS != nil || nc.ListenerTLS == nil || nc.BrokerListenerTLS == nil {
		t.Fatalf("TLS %v, RaftTLS %v, ListenerTLS %v, BrokerListenerTLS %v", nc.TLS, nc.RaftTLS, nc.ListenerTLS, nc.BrokerListenerTLS)
	}
	if got := nc.ListenerTLS.Leaf().Subject.CommonName; got != "listener-1001" {
		t.Fatalf("the listener's certificate is %q", got)
	}
	var sets []string
	for _, s := range nc.TLSSets() {
		sets = append(sets, s.Label+"="+filepath.Base(s.Files.Cert))
	}
	if got := strings.Join(sets, " "); got != "raft=voter-1001.crt listener=listener-1001.crt broker=broker-1.crt" {
		t.Fatalf("tlsSets: %s", got)
	}

	// Every group alone, each from a file, the environment and a flag.
	for _, g := range server.TLSListeners() {
		f := v1001
		if !g.Voter {
			f = b1
		}
		var file strings.Builder
		var env []string
		for _, k := range []string{"ca.file", "cert.file", "key.file"} {
			fmt.Fprintf(&file, "%s = /from/file\n", g.Prefix+k)
			env = append(env, server.EnvName(g.Prefix+k)+"=/from/env")
		}
		// The file and the environment name files that do not exist; the
		// flags win over both.
		ns, nc, err := buildFrom(t, file.String(), env, merge(set("tls.", pki.Issue("both", tlsconfig.VoterURI(1001), tlsconfig.BrokerURI(1))), set(g.Prefix, f)))
		if err != nil {
			t.Fatalf("%s*.file: %v", g.Prefix, err)
		}
		if src := ns[g.Prefix+"cert.file"].Source; src != "flag --"+server.FlagName(g.Prefix+"cert.file") {
			t.Errorf("%scert.file from %s", g.Prefix, src)
		}
		if r := g.Certs(&nc.Config); r == nil || r.Files() != f {
			t.Errorf("%s*.file: %v", g.Prefix, r)
		}
		_, _, err = buildFrom(t, file.String(), env, set("tls.", v1001))
		if err == nil || !strings.HasPrefix(err.Error(), g.Prefix+"cert.file (from env "+server.EnvName(g.Prefix+"cert.file")+"): ") {
			t.Errorf("%s*.file from the environment over the file: %v", g.Prefix, err)
		}
		_, _, err = buildFrom(t, file.String(), nil, set("tls.", v1001))
		if err == nil || !strings.HasPrefix(err.Error(), g.Prefix+"cert.file (from n.conf line 2): ") || !strings.Contains(err.Error(), "/from/file") {
			t.Errorf("%s*.file from the file: %v", g.Prefix, err)
		}
	}

	for _, tc := range []struct {
		name  string
		flags map[string]string
		want  string
	}{
		{"partial group", map[string]string{"listener.tls.cert.file": lis.Cert, "listener.tls.ca.file": lis.CA},
			"listener.tls.key.file: required with the other listener.tls.*.file settings (set all three, or none to use the tls.*.file ones)"},
		{"raft alone on TLS", merge(voter, set("raft.tls.", v1001)),
			"raft.tls.cert.file (from flag --raft-tls-cert-file): raft would run TLS but the Kafka listener plain TCP, and a node's listeners are all TLS or all plain TCP: set listener.tls.*.file too"},
		{"broker listener alone on TLS", set("broker.listener.tls.", b1),
			"broker.listener.tls.cert.file (from flag --broker-listener-tls-cert-file): the broker agent's listener would run TLS but raft plain TCP"},
		{"broker files on a voter", merge(voter, set("tls.", v1001), set("broker.listener.tls.", b1)),
			"broker.listener.tls.cert.file (from flag --broker-listener-tls-cert-file): set, but this node has no broker role"},
		{"voter files on a broker", merge(map[string]string{"roles": "broker", "node.id": "1", "broker.id": ""}, set("tls.", b1), set("listener.tls.", v1001)),
			"listener.tls.cert.file (from flag --listener-tls-cert-file): set, but this node has no voter role"},
		{"node-wide files unused", merge(set("tls.", v1001), set("raft.tls.", v1001), set("listener.tls.", lis), set("broker.listener.tls.", b1)),
			"tls.cert.file (from flag --tls-cert-file): unused: every listener of this node has files of its own (raft.tls.*.file, listener.tls.*.file, broker.listener.tls.*.file)"},
		{"listener naming another voter", merge(voter, set("tls.", v1001), set("listener.tls.", v1002)),
			"listener.tls.cert.file (from flag --listener-tls-cert-file): tls: certificate " + v1002.Cert + " is not this node's"},
		{"broker listener naming a voter", merge(set("tls.", v1001), set("broker.listener.tls.", v1001)),
			"broker.listener.tls.cert.file (from flag --broker-listener-tls-cert-file): tls: certificate " + v1001.Cert + " is not this node's"},
		{"node-wide left to the agent naming no broker", merge(set("tls.", v1001), set("raft.tls.", v1001), set("listener.tls.", lis)),
			"tls.cert.file (from flag --tls-cert-file): tls: certificate " + v1001.Cert + " is not this node's"},
		{"missing file", merge(voter, set("tls.", v1001), map[string]string{"raft.tls.ca.file": v1001.CA, "raft.tls.cert.file": "/nonexistent.crt", "raft.tls.key.file": v1001.Key}),
			"raft.tls.cert.file (from flag --raft-tls-cert-file): tls: certificate /nonexistent.crt"},
	} {
		_, _, err := buildFrom(t, "", nil, tc.flags)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: err = %v\nwant %q", tc.name, err, tc.want)
		}
	}

	// The node-wide files left to raft and the listener need not name the
	// broker; PLAIN logins count listener TLS as TLS.
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := buildFrom(t, "", nil, merge(set("tls.", v1001), set("broker.listener.tls.", b1),
		map[string]string{"sasl.enabled.mechanisms": "PLAIN", "sasl.user": "admin", "sasl.password.file": pw, "sasl.mechanism": "PLAIN"})); err != nil {
		t.Fatalf("voter files node-wide, broker files for the agent, PLAIN login: %v", err)
	}
}
