package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
)

// TestDataConfigsAndACLsWithClients: on `ctrlnode dev --sasl`, franz-go
// and kcat producing with acks=all to a topic whose min.insync.replicas
// is above its ISR get NOT_ENOUGH_REPLICAS, and succeed once `topics
// alter-config` lowers it, with no restart; a user with rules on its own
// prefix only gets TOPIC_AUTHORIZATION_FAILED producing to and consuming
// from another topic, from both clients, and produces to its own.
func TestDataConfigsAndACLsWithClients(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	_, err := exec.LookPath("kcat")
	testkit.Need(t, "kcat", err)
	base := freePortBase(t, devPorts...)
	boot := fmt.Sprintf("127.0.0.1:%d", base)
	brokers := []string{fmt.Sprintf("127.0.0.1:%d", base+300), fmt.Sprintf("127.0.0.1:%d", base+301), fmt.Sprintf("127.0.0.1:%d", base+302)}
	data := t.TempDir()
	dev, passFile, adminPass := startDevSASL(t, data, base)
	login := []string{"--bootstrap", boot, "--timeout", "20s",
		"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "admin", "--sasl-password-file", passFile}
	admin := func(args ...string) {
		t.Helper()
		var last result
		waitFor(t, time.Minute, "ctrlnode "+strings.Join(args, " "), func() bool {
			last = ctl(t, nil, append(args, login...)...)
			return last.code == 0 || strings.Contains(last.stdout+last.stderr, "TOPIC_ALREADY_EXISTS")
		})
	}
	admin("topics", "create", "--topic", "strict", "--partitions", "1", "--replication-factor", "3", "--config", "min.insync.replicas=4")
	admin("topics", "create", "--topic", "secret", "--partitions", "1", "--replication-factor", "3")
	admin("topics", "create", "--topic", "alice-data", "--partitions", "1", "--replication-factor", "3")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	client := func(user, pass string, opts ...kgo.Opt) *kgo.Client {
		t.Helper()
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(200 * time.Millisecond),
			kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	produce := func(cl *kgo.Client, topic, value string) error {
		return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(value)}).FirstErr()
	}
	kcat := func(user, pass string, args ...string) (string, error) {
		kctx, kcancel := context.WithTimeout(ctx, 30*time.Second)
		defer kcancel()
		cmd := exec.CommandContext(kctx, "kcat", append([]string{"-b", strings.Join(brokers, ","),
			"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=" + user, "-X", "sasl.password=" + pass}, args...)...)
		cmd.Stdin = strings.NewReader("from-kcat\n")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	kcatProduce := func(user, pass, topic string) (string, error) {
		return kcat(user, pass, "-P", "-t", topic, "-p", "0", "-X", "acks=all", "-X", "retries=0", "-X", "message.timeout.ms=20000")
	}

	// min.insync.replicas 4 on an ISR of 3. Retries off in both clients:
	// NOT_ENOUGH_REPLICAS is retriable, and a retry would hide it.
	adminCl := client("admin", adminPass, kgo.RecordRetries(0))
	waitFor(t, time.Minute, "the brokers to refuse acks=all below the topic's min.insync.replicas", func() bool {
		return errors.Is(produce(adminCl, "strict", "franz-go"), kerr.NotEnoughReplicas)
	})
	if out, err := kcatProduce("admin", adminPass, "strict"); err == nil || !strings.Contains(out, "Not enough in-sync replicas") {
		t.Fatalf("kcat -P acks=all below min.insync.replicas: %v\n%s", err, out)
	}
	admin("topics", "alter-config", "--topic", "strict", "--set", "min.insync.replicas=2")
	if err := produce(adminCl, "strict", "franz-go"); err != nil {
		t.Fatalf("franz-go acks=all once min.insync.replicas is 2: %v", err)
	}
	if out, err := kcatProduce("admin", adminPass, "strict"); err != nil {
		t.Fatalf("kcat -P acks=all once min.insync.replicas is 2: %v\n%s", err, out)
	}

	// alice may do anything on alice-*, nothing else.
	pwFile := filepath.Join(data, "alice.pw")
	if err := os.WriteFile(pwFile, []byte("alice-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	admin("scram", "set", "--user", "alice", "--password-file", pwFile, "--mechanism", "SCRAM-SHA-512")
	admin("acl", "add", "--principal", "User:alice", "--topic", "alice-", "--prefixed", "--operation", "all")
	alice := client("alice", "alice-secret", kgo.RecordRetries(0))
	waitFor(t, time.Minute, "alice to produce to her own topic", func() bool { return produce(alice, "alice-data", "mine") == nil })
	if err := produce(alice, "secret", "not mine"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("franz-go as alice producing to another topic: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	consumer := client("alice", "alice-secret", kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"secret": {0: kgo.NewOffset().AtStart()}}))
	var fetchErr error
	waitFor(t, time.Minute, "franz-go as alice consuming another topic to be refused", func() bool {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		defer pcancel()
		consumer.PollFetches(pctx).EachError(func(_ string, _ int32, err error) {
			if errors.Is(err, kerr.TopicAuthorizationFailed) {
				fetchErr = err
			}
		})
		return fetchErr != nil
	})
	if out, err := kcatProduce("alice", "alice-secret", "secret"); err == nil || !strings.Contains(out, "Topic authorization failed") {
		t.Fatalf("kcat -P as alice to another topic: %v\n%s", err, out)
	}
	if out, _ := kcat("alice", "alice-secret", "-C", "-t", "secret", "-p", "0", "-o", "beginning", "-e"); !strings.Contains(out, "Topic authorization failed") {
		t.Fatalf("kcat -C as alice from another topic printed:\n%s", out)
	}
	if out, err := kcatProduce("alice", "alice-secret", "alice-data"); err != nil {
		t.Fatalf("kcat -P as alice to her own topic: %v\n%s", err, out)
	}
	if err := dev.signal(t, syscall.SIGINT, 30*time.Second); err != nil {
		t.Fatalf("dev exited with %v", err)
	}
}
