package integration

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestDevSASL runs `ctrlnode dev --sasl`: the admin user's password file
// is made and printed, the admin commands work with the printed login,
// the simulated brokers log in too (partitions get leaders), and a
// command without a login gets nothing.
func TestDevSASL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	base := freePortBase(t, devPorts...)
	boot := fmt.Sprintf("127.0.0.1:%d", base)
	data := t.TempDir()
	dev := startProc(t, "dev --sasl", nil, "dev", "--sasl", "--data", data, "--port", strconv.Itoa(base),
		"--log-level", "warn", "--session-timeout", "2s")
	m := dev.waitLine(t, regexp.MustCompile(`^SASL: .* password is in (\S+)$`), time.Minute)
	if want, _ := filepath.Abs(filepath.Join(data, "sasl-admin.password")); m[1] != want {
		t.Fatalf("dev names the password file %s, want %s", m[1], want)
	}
	dev.waitLine(t, activeRE, time.Minute)
	login := []string{"--bootstrap", boot, "--timeout", "20s",
		"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "admin", "--sasl-password-file", m[1]}

	var created itemResults
	ctlJSON(t, time.Minute, &created, append([]string{"topics", "create", "--topic", "logged-in", "--partitions", "3", "--replication-factor", "3"}, login...)...)
	if len(created.Results) != 1 || created.Results[0].Status != "created" {
		t.Fatalf("topics create with SASL: %+v", created)
	}
	var desc topicDescribe
	waitFor(t, 30*time.Second, "leaders for every partition of logged-in", func() bool {
		ctlJSON(t, 30*time.Second, &desc, append([]string{"topics", "describe", "--topic", "logged-in"}, login...)...)
		if len(desc.Topics) != 1 || len(desc.Topics[0].Partitions) != 3 {
			return false
		}
		for _, p := range desc.Topics[0].Partitions {
			if p.Leader < 0 {
				return false
			}
		}
		return true
	})
	if r := ctl(t, nil, "topics", "list", "--bootstrap", boot, "--timeout", "3s"); r.code == 0 {
		t.Fatalf("an admin command without a login succeeded against a SASL cluster: %v", r)
	}
	if err := dev.signal(t, syscall.SIGINT, 30*time.Second); err != nil {
		t.Fatalf("dev exited with %v", err)
	}
}
