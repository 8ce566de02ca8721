package main

import (
	"strings"
	"testing"

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
	build := func(extra map[string]string) (nodeConfig, error) {
		flags := map[string]string{}
		for k, val := range base {
			flags[k] = val
		}
		for k, val := range extra {
			flags[k] = val
		}
		ns, err := resolveSettings(nil, nil, flags)
		if err != nil {
			t.Fatal(err)
		}
		return buildNodeConfig(ns)
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
