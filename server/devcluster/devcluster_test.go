package devcluster

import (
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

func TestLayout(t *testing.T) {
	l := Layout{Host: "127.0.0.2", Port: 20000}
	if got := []string{l.Listener(0), l.Raft(1), l.HTTP(2), l.Broker(2)}; got[0] != "127.0.0.2:20000" || got[1] != "127.0.0.2:20101" ||
		got[2] != "127.0.0.2:20202" || got[3] != "127.0.0.2:20302" {
		t.Fatalf("addresses %v", got)
	}
	if 20000+PortSpan != 20302 {
		t.Fatalf("PortSpan %d does not reach the last broker", PortSpan)
	}
	v := l.Voters()
	if len(v) != 3 || v[0].ID != 1001 || v[2].ID != 1003 || v[2].Raft != "127.0.0.2:20102" || v[2].Listener != "127.0.0.2:20002" {
		t.Fatalf("voters %+v", v)
	}
}

// TestLoadCerts: the first load makes every node's certificate, valid
// for the cluster's host too; a later one loads them without writing.
func TestLoadCerts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	var wrote []string
	report := func(w tlsconfig.Written) { wrote = append(wrote, filepath.Base(w.Cert)) }
	c, err := LoadCerts(dir, "127.0.0.2", hclog.NewNullLogger(), report)
	if err != nil {
		t.Fatal(err)
	}
	if len(wrote) != 8 || wrote[0] != "ca.crt" || wrote[7] != "client-admin.crt" {
		t.Fatalf("wrote %v", wrote)
	}
	if c.voter(1003).Identity().Voter != 1003 || c.broker(2).Identity().Broker != 2 || c.Client.Cert != filepath.Join(dir, "client-admin.crt") {
		t.Fatalf("certs %+v", c)
	}
	if hosts := c.voter(1001).Leaf().IPAddresses; len(hosts) != 2 || hosts[0].String() != "127.0.0.2" {
		t.Fatalf("voter 1001 is valid for %v", hosts)
	}
	wrote = nil
	if _, err := LoadCerts(dir, "127.0.0.2", hclog.NewNullLogger(), report); err != nil || len(wrote) != 0 {
		t.Fatalf("second load: %v, wrote %v", err, wrote)
	}
	var nilCerts *Certs
	if nilCerts.voter(1001) != nil || nilCerts.broker(1) != nil {
		t.Fatal("no certificates without TLS")
	}
}
