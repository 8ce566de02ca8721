package tlsconfig_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

// TestDirPKI: Issue makes a CA and the leaves in a folder, reports each,
// refuses to replace files without Force, signs later leaves with the CA
// it finds, and a NamedLeaf names its node as the identity checks want.
func TestDirPKI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	hosts := []string{"127.0.0.1", "localhost"}
	pki := tlsconfig.DirPKI{Dir: dir, Validity: time.Hour, Leaves: []tlsconfig.NamedLeaf{
		tlsconfig.VoterLeaf(1001, hosts, time.Hour), tlsconfig.BrokerLeaf(2, hosts, time.Hour),
		tlsconfig.NodeLeaf(1002, 3, hosts, time.Hour), tlsconfig.ClientLeaf("admin", time.Hour),
	}}
	var got []string
	report := func(w tlsconfig.Written) {
		got = append(got, filepath.Base(w.Cert)+" "+w.Identity)
		if w.CA != (w.Name == "") || w.Key == "" || w.NotAfter.IsZero() {
			t.Errorf("report %+v", w)
		}
	}
	if err := pki.Issue(report); err != nil {
		t.Fatal(err)
	}
	want := "ca.crt |voter-1001.crt voter 1001|broker-2.crt broker 2|node-1002-3.crt voter 1002 and broker 3|client-admin.crt client User:admin"
	if s := strings.Join(got, "|"); s != want {
		t.Fatalf("reported %s\nwant %s", s, want)
	}
	for name, check := range map[string]tlsconfig.PeerCheck{
		"voter-1001":   tlsconfig.Voters(1001),
		"broker-2":     tlsconfig.Broker(2),
		"node-1002-3":  func(id tlsconfig.Identity) error { return tlsconfig.Broker(3)(id) },
		"client-admin": nil,
	} {
		r, err := tlsconfig.NewReloader(pki.Files(name), tlsconfig.Options{Expect: check})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "client-admin" && r.Identity().Principal() != "User:admin" {
			t.Errorf("client identity %v", r.Identity())
		}
	}

	ca, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	before, _ := os.ReadFile(filepath.Join(dir, "voter-1001.crt"))
	again := tlsconfig.DirPKI{Dir: dir, Validity: time.Hour, Leaves: []tlsconfig.NamedLeaf{tlsconfig.VoterLeaf(1001, hosts, time.Hour)}}
	if err := again.Issue(nil); err == nil || err.Error() != dir+" already holds voter-1001.crt, voter-1001.key; pass --force to replace them" {
		t.Fatalf("without Force: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "voter-1001.crt")); !bytes.Equal(before, after) {
		t.Fatal("a refused Issue replaced voter-1001.crt")
	}
	again.Force = true
	got = nil
	if err := again.Issue(report); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "voter-1001.crt")); bytes.Equal(before, after) {
		t.Fatal("Force did not reissue voter-1001.crt")
	}
	if now, _ := os.ReadFile(filepath.Join(dir, "ca.crt")); !bytes.Equal(ca, now) || len(got) != 2 {
		t.Fatalf("the CA was not reused: reported %v", got)
	}
	if _, err := tlsconfig.NewReloader(pki.Files("voter-1001"), tlsconfig.Options{Expect: tlsconfig.Voters(1001)}); err != nil {
		t.Fatalf("reissued voter-1001 does not chain to the CA: %v", err)
	}
}
