package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
)

// TestKcatSASLLogin: kcat (librdkafka) logs in to `ctrlnode dev --sasl`
// with the printed admin password, with SCRAM-SHA-512 and with
// SCRAM-SHA-256, and lists the cluster's metadata; a wrong password is
// refused. librdkafka uses SaslHandshake only where ApiVersions offers
// its v0, and sends its client nonce twice in its final SCRAM message,
// which Kafka accepts.
func TestKcatSASLLogin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	_, err := exec.LookPath("kcat")
	testkit.Need(t, "kcat", err)
	base := freePortBase(t, devPorts...)
	boot := fmt.Sprintf("127.0.0.1:%d", base)
	data := t.TempDir()
	dev := startProc(t, "dev --sasl", nil, "dev", "--sasl", "--data", data, "--port", strconv.Itoa(base),
		"--log-level", "warn", "--session-timeout", "2s")
	m := dev.waitLine(t, regexp.MustCompile(`^SASL: .* password is in (\S+)$`), time.Minute)
	dev.waitLine(t, activeRE, time.Minute)
	raw, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatal(err)
	}
	pass := strings.TrimSpace(string(raw))

	kcat := func(mech, pass string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "kcat", "-L", "-b", boot, "-m", "5",
			"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms="+mech,
			"-X", "sasl.username=admin", "-X", "sasl.password="+pass).CombinedOutput()
		return string(out), err
	}
	// The admin credentials are written once the first voter is active:
	// a login may be refused until they are.
	for _, mech := range []string{"SCRAM-SHA-512", "SCRAM-SHA-256"} {
		var out string
		waitFor(t, time.Minute, "kcat -L to log in with "+mech, func() bool {
			var err error
			out, err = kcat(mech, pass)
			return err == nil
		})
		if !strings.Contains(out, fmt.Sprintf("(from broker 1001: sasl_plaintext://%s/1001)", boot)) || !strings.Contains(out, "(controller)") {
			t.Fatalf("kcat -L with %s printed:\n%s", mech, out)
		}
	}
	for _, mech := range []string{"SCRAM-SHA-512", "SCRAM-SHA-256"} {
		out, err := kcat(mech, pass+"x")
		if err == nil || !strings.Contains(out, "SASL authentication error") {
			t.Fatalf("kcat -L with a wrong password and %s: %v\n%s", mech, err, out)
		}
	}
	if err := dev.signal(t, syscall.SIGINT, 30*time.Second); err != nil {
		t.Fatalf("dev exited with %v", err)
	}
}
