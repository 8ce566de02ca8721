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
	t.Parallel()
	_, err := exec.LookPath("kcat")
	testkit.Need(t, "kcat", err)
	base := freePortBase(t, devPorts...)
	boot := fmt.Sprintf("127.0.0.1:%d", base)
	data := t.TempDir()
	dev, _, pass := startDevSASL(t, data, base)

	kcat := func(mech, pass string) (string, error) { return kcatSASL(boot, mech, pass) }
	// The admin credentials are written once the first voter is active:
	// a login may be refused until they are.
	for _, mech := range []string{"SCRAM-SHA-512", "SCRAM-SHA-256"} {
		var out string
		waitFor(t, time.Minute, "kcat -L to log in with "+mech, func() bool {
			var err error
			out, err = kcat(mech, pass)
			return err == nil
		})
		// The answer comes from the voter kcat was given; it lists the
		// brokers (a voter no longer lists itself once brokers are live).
		if !strings.Contains(out, fmt.Sprintf("sasl_plaintext://%s/", boot)) || !strings.Contains(out, "(controller)") {
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

// kcatSASL runs kcat -L at addr logged in as admin with mech and pass.
func kcatSASL(addr, mech, pass string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "kcat", "-L", "-b", addr, "-m", "5",
		"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms="+mech,
		"-X", "sasl.username=admin", "-X", "sasl.password="+pass).CombinedOutput()
	return string(out), err
}

// TestKcatSASLLoginAtBroker: kcat logs in at a broker of `ctrlnode dev
// --sasl` with the printed admin password, with SCRAM-SHA-512 and -256
// (SaslHandshake v0, whose tokens the broker relays to a voter), and
// lists the brokers and a topic; a wrong password is refused, and so is
// a client that does not log in.
func TestKcatSASLLoginAtBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	_, err := exec.LookPath("kcat")
	testkit.Need(t, "kcat", err)
	base := freePortBase(t, devPorts...)
	boot := fmt.Sprintf("127.0.0.1:%d", base)
	broker := fmt.Sprintf("127.0.0.1:%d", base+300)
	data := t.TempDir()
	dev, passFile, pass := startDevSASL(t, data, base)
	login := []string{"--bootstrap", boot, "--timeout", "20s",
		"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "admin", "--sasl-password-file", passFile}
	var created itemResults
	ctlJSON(t, time.Minute, &created, append([]string{"topics", "create", "--topic", "seen-at-broker", "--partitions", "1", "--replication-factor", "3"}, login...)...)
	if len(created.Results) != 1 || created.Results[0].Status != "created" {
		t.Fatalf("topics create with SASL: %+v", created)
	}

	for _, mech := range []string{"SCRAM-SHA-512", "SCRAM-SHA-256"} {
		var out string
		waitFor(t, time.Minute, "kcat -L at a broker to log in with "+mech+" and list the topic", func() bool {
			var err error
			out, err = kcatSASL(broker, mech, pass)
			return err == nil && strings.Contains(out, `topic "seen-at-broker"`)
		})
		if !strings.Contains(out, fmt.Sprintf("(from broker 1: sasl_plaintext://%s/1)", broker)) {
			t.Fatalf("kcat -L at broker 1 with %s printed:\n%s", mech, out)
		}
	}
	for _, mech := range []string{"SCRAM-SHA-512", "SCRAM-SHA-256"} {
		out, err := kcatSASL(broker, mech, pass+"x")
		if err == nil || !strings.Contains(out, "SASL authentication error") {
			t.Fatalf("kcat -L at a broker with a wrong password and %s: %v\n%s", mech, err, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "kcat", "-L", "-b", broker, "-m", "3").CombinedOutput()
	if err == nil || strings.Contains(string(out), "seen-at-broker") {
		t.Fatalf("kcat -L at a broker without a login: %v\n%s", err, out)
	}
	if err := dev.signal(t, syscall.SIGINT, 30*time.Second); err != nil {
		t.Fatalf("dev exited with %v", err)
	}
}

// startDevSASL starts `ctrlnode dev --sasl` on base with its data in
// data, waits for a voter to be active, and returns the process, the
// admin password file it printed and the password.
func startDevSASL(t *testing.T, data string, base int) (dev *proc, passFile, pass string) {
	t.Helper()
	dev = startProc(t, "dev --sasl", nil, "dev", "--sasl", "--data", data, "--port", strconv.Itoa(base),
		"--log-level", "warn", "--session-timeout", "2s")
	m := dev.waitLine(t, regexp.MustCompile(`^SASL: .* password is in (\S+)$`), time.Minute)
	dev.waitLine(t, activeRE, time.Minute)
	raw, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return dev, m[1], strings.TrimSpace(string(raw))
}
