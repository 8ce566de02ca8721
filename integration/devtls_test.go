package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestDevTLS runs `ctrlnode dev --tls`: it makes its certificates in
// <data>/tls, prints where the admin client's are, and the admin commands
// work with them (--tls-ca/--tls-cert/--tls-key); without them the
// listener answers nothing. A restart reuses the certificates.
func TestDevTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	base := freePortBase(t, devPorts...)
	boot := fmt.Sprintf("127.0.0.1:%d", base)
	data := t.TempDir()
	tlsDir := filepath.Join(data, "tls")
	devArgs := []string{"dev", "--tls", "--data", data, "--port", strconv.Itoa(base), "--log-level", "warn", "--session-timeout", "2s"}

	dev := startProc(t, "dev --tls", nil, devArgs...)
	m := dev.waitLine(t, regexp.MustCompile(`^TLS: .* the admin client certificate (\S+) \(key (\S+)\)$`), time.Minute)
	if want := filepath.Join(tlsDir, "client-admin.crt"); m[1] != want {
		t.Fatalf("dev names the client certificate %s, want %s", m[1], want)
	}
	dev.waitLine(t, regexp.MustCompile(`^  ctrlnode topics create .*--tls-cert `), time.Second)
	dev.waitLine(t, activeRE, time.Minute)
	for _, f := range []string{"ca.crt", "voter-1001.crt", "broker-3.key", "client-admin.key"} {
		if _, err := os.Stat(filepath.Join(tlsDir, f)); err != nil {
			t.Fatal(err)
		}
	}
	b := []string{"--bootstrap", boot, "--timeout", "10s",
		"--tls-ca", filepath.Join(tlsDir, "ca.crt"), "--tls-cert", filepath.Join(tlsDir, "client-admin.crt"), "--tls-key", filepath.Join(tlsDir, "client-admin.key")}

	var created itemResults
	ctlJSON(t, time.Minute, &created, append([]string{"topics", "create", "--topic", "secure", "--partitions", "3", "--replication-factor", "3"}, b...)...)
	if len(created.Results) != 1 || created.Results[0].Status != "created" {
		t.Fatalf("topics create over TLS: %+v", created)
	}
	var list topicList
	ctlJSON(t, 30*time.Second, &list, append([]string{"topics", "list"}, b...)...)
	if n, ok := list.find("secure"); !ok || n != 3 {
		t.Fatalf("topics list over TLS: %+v", list)
	}
	// The partitions get leaders: the controller reached the brokers over TLS.
	var desc topicDescribe
	waitFor(t, 30*time.Second, "leaders for every partition of secure", func() bool {
		ctlJSON(t, 30*time.Second, &desc, append([]string{"topics", "describe", "--topic", "secure"}, b...)...)
		if len(desc.Topics) != 1 || len(desc.Topics[0].Partitions) != 3 {
			return false
		}
		for _, p := range desc.Topics[0].Partitions {
			if p.Leader < 0 || len(p.ISR) != 3 {
				return false
			}
		}
		return true
	})
	if r := ctl(t, nil, "topics", "list", "--bootstrap", boot, "--timeout", "3s"); r.code == 0 {
		t.Fatalf("a plain-TCP admin command succeeded against a TLS cluster: %v", r)
	}
	if r := ctl(t, nil, "topics", "list", "--bootstrap", boot, "--tls-ca", filepath.Join(tlsDir, "ca.crt")); r.code != 2 {
		t.Fatalf("--tls-ca alone: want exit 2, got %v", r)
	}
	if err := dev.signal(t, syscall.SIGINT, 30*time.Second); err != nil {
		t.Fatalf("dev exited with %v", err)
	}

	again := startProc(t, "dev --tls again", nil, devArgs...)
	again.waitLine(t, activeRE, time.Minute)
	ctlJSON(t, 30*time.Second, &list, append([]string{"topics", "list"}, b...)...)
	if _, ok := list.find("secure"); !ok {
		t.Fatalf("topics list after restart: %+v", list)
	}
	if err := again.signal(t, syscall.SIGINT, 30*time.Second); err != nil {
		t.Fatalf("dev exited with %v", err)
	}
}
