package devcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// saslCluster runs an in-process dev cluster with SASL, as `ctrlnode dev
// --sasl` (and --tls with withTLS) does, and returns it with the admin
// user's password.
func saslCluster(t *testing.T, withTLS bool) (*Cluster, Layout, string, *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	sec, err := SASL(dir, withTLS)
	if err != nil {
		t.Fatal(err)
	}
	pass, err := os.ReadFile(sec.PasswordFile)
	if err != nil {
		t.Fatal(err)
	}
	var clientTLS *tls.Config
	var certs *Certs
	if withTLS {
		if certs, err = LoadCerts(t.TempDir(), "127.0.0.1", hclog.NewNullLogger(), nil); err != nil {
			t.Fatal(err)
		}
		ca, err := os.ReadFile(certs.Client.CA)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			t.Fatal("no CA certificate in " + certs.Client.CA)
		}
		// No client certificate: the client is who it logs in as.
		clientTLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	c, layout := startClusterWith(t, func(cfg *Config) { cfg.Security, cfg.Certs = sec, certs })
	return c, layout, strings.TrimSpace(string(pass)), clientTLS
}

// brokerClient is a franz-go admin client bootstrapped at addr (a
// broker's), logged in with m (none when nil).
func brokerClient(t *testing.T, addr string, m kgosasl.Mechanism, tc *tls.Config) *kadm.Client {
	return kadm.NewClient(brokerKgo(t, addr, m, tc))
}

// brokerKgo is brokerClient's franz-go client.
func brokerKgo(t *testing.T, addr string, m kgosasl.Mechanism, tc *tls.Config, more ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts := append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(2), kgo.RetryTimeout(20 * time.Second)}, more...)
	if m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestBrokerSASLLogin: at a broker of a dev cluster with SASL, a client
// logs in with the admin user's password by SCRAM-SHA-512 and -256 and
// creates and lists topics through the broker; a user it creates there
// logs in too and is refused what it is not allowed (so the broker
// forwards as that user, not as itself); a wrong password and no login
// at all are refused.
func TestBrokerSASLLogin(t *testing.T) {
	c, layout, pass, _ := saslCluster(t, false)
	broker := layout.Broker(0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	admin := brokerClient(t, broker, scram.Auth{User: "admin", Pass: pass}.AsSha512Mechanism(), nil)
	created, err := admin.CreateTopics(ctx, 1, 3, nil, "sasl-at-broker")
	if err != nil {
		t.Fatal(err)
	}
	if r := created["sasl-at-broker"]; r.Err != nil {
		t.Fatalf("create topic as admin (SCRAM-SHA-512) at a broker: %v", r.Err)
	}

	admin256 := brokerClient(t, layout.Broker(1), scram.Auth{User: "admin", Pass: pass}.AsSha256Mechanism(), nil)
	listed, err := admin256.ListTopics(ctx)
	if err != nil {
		t.Fatalf("list topics as admin (SCRAM-SHA-256) at a broker: %v", err)
	}
	if !listed.Has("sasl-at-broker") {
		t.Fatalf("the topic created through a broker is not listed: %v", listed.Names())
	}

	// The brokers' followers log in to the leaders too: a record produced
	// with acks=all is answered once every replica has it, before a
	// follower that could not fetch would leave the ISR (30 s).
	producer := brokerKgo(t, broker, scram.Auth{User: "admin", Pass: pass}.AsSha512Mechanism(), nil,
		kgo.DefaultProduceTopic("sasl-at-broker"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
	produceCtx, cancelProduce := context.WithTimeout(ctx, 20*time.Second)
	err = producer.ProduceSync(produceCtx, &kgo.Record{Value: []byte("replicated")}).FirstErr()
	cancelProduce()
	if err != nil {
		t.Fatalf("produce with acks=all at a broker of a SASL cluster: %v", err)
	}

	up, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := up.Error(); err != nil {
		t.Fatalf("create user alice through a broker: %v", err)
	}
	aliceKgo := brokerKgo(t, broker, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(), nil)
	alice := kadm.NewClient(aliceKgo)
	var aliceErr error
	deadline := time.Now().Add(30 * time.Second)
	for {
		var res kadm.CreateTopicResponses
		res, aliceErr = alice.CreateTopics(ctx, 1, 1, nil, "alice-topic")
		if aliceErr == nil {
			aliceErr = res["alice-topic"].Err
		}
		// The login is checked by a voter; one that has not applied the
		// new credential yet refuses it, and a new client tries again.
		if !errors.Is(aliceErr, kerr.SaslAuthenticationFailed) || time.Now().After(deadline) {
			break
		}
		aliceKgo = brokerKgo(t, broker, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(), nil)
		alice = kadm.NewClient(aliceKgo)
	}
	if !errors.Is(aliceErr, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice, not a super user, creating a topic through a broker: %v, want TOPIC_AUTHORIZATION_FAILED", aliceErr)
	}
	// Nor may alice send the broker a control request: only the voters'
	// login, a super user, may.
	um := kmsg.NewPtrUpdateMetadataRequest()
	um.ControllerID, um.ControllerEpoch, um.BrokerEpoch = 1001, 1<<30, -1
	resp, err := aliceKgo.SeedBrokers()[0].Request(ctx, um)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.UpdateMetadataResponse).ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("UpdateMetadata from alice at a broker: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}

	wrong := brokerClient(t, broker, scram.Auth{User: "admin", Pass: pass + "x"}.AsSha512Mechanism(), nil)
	if _, err := wrong.ListTopics(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a wrong password at a broker: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	anon := brokerClient(t, broker, nil, nil)
	short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
	defer cancelShort()
	if topics, err := anon.ListTopics(short); err == nil {
		t.Fatalf("a client that did not log in listed topics at a broker: %v", topics.Names())
	}
	if n := len(c.Brokers); n != numBrokers {
		t.Fatalf("%d brokers, want %d", n, numBrokers)
	}
}

// TestBrokerSASLPlainTLS: at a broker of a dev cluster with SASL and TLS,
// a client without a certificate logs in with PLAIN and the admin user's
// password, and is refused with a wrong one.
func TestBrokerSASLPlainTLS(t *testing.T) {
	_, layout, pass, tc := saslCluster(t, true)
	broker := layout.Broker(2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	admin := brokerClient(t, broker, plain.Auth{User: "admin", Pass: pass}.AsMechanism(), tc)
	created, err := admin.CreateTopics(ctx, 1, 3, nil, "plain-at-broker")
	if err != nil {
		t.Fatal(err)
	}
	if r := created["plain-at-broker"]; r.Err != nil {
		t.Fatalf("create topic as admin (PLAIN over TLS) at a broker: %v", r.Err)
	}
	wrong := brokerClient(t, broker, plain.Auth{User: "admin", Pass: "not-" + pass}.AsMechanism(), tc)
	if _, err := wrong.ListTopics(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a wrong PLAIN password at a broker: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}
