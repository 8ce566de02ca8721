package listener

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
	"github.com/ctrlquorum/ctrlquorum/transport/sasl"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig/tlstest"
)

// TestSASLHandshakeV0: ApiVersions offers SaslHandshake from v0, as Kafka
// does (librdkafka logs in only where it is offered); after a v0
// handshake the exchange runs as bare size-prefixed tokens, with
// franz-go's SCRAM-SHA-256 client, and its PLAIN client over TLS (whose
// token is answered with an empty one), on the other end, and the
// connection then serves requests as the user; a wrong password closes
// the connection after the client's last token and counts as a failed
// login.
func TestSASLHandshakeV0(t *testing.T) {
	t.Run("SCRAM-SHA-256", func(t *testing.T) {
		testSASLHandshakeV0(t, sasl.ScramSHA256, func(user, pass string) kgosasl.Mechanism {
			return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
		}, false)
	})
	t.Run("PLAIN over TLS", func(t *testing.T) {
		testSASLHandshakeV0(t, sasl.Plain, func(user, pass string) kgosasl.Mechanism {
			return plain.Auth{User: user, Pass: pass}.AsMechanism()
		}, true)
	})
}

func testSASLHandshakeV0(t *testing.T, mechanism string, mech func(user, pass string) kgosasl.Mechanism, overTLS bool) {
	pki := tlstest.NewPKI(t, "v0 CA")
	l := singleVoterListenerWith(t, func(cfg *Config) {
		cfg.Security = SecurityConfig{
			SASLMechanisms: []string{sasl.ScramSHA512, sasl.ScramSHA256, sasl.Plain},
			SuperUsers:     []string{"User:" + adminUser},
			BootstrapUsers: []BootstrapUser{{Name: adminUser, Password: adminPass, Mechanism: sasl.ScramSHA256}},
		}
		if overTLS {
			cfg.Listener = tls.NewListener(cfg.Listener, pki.Reloader(pki.Voter(1001)).ClientListenerConfig())
		}
	})
	dial := func() (net.Conn, error) { return net.Dial("tcp", l.Addr().String()) }
	if overTLS {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pki.CA.CertPEM)
		dial = func() (net.Conn, error) {
			return tls.Dial("tcp", l.Addr().String(), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1"})
		}
	}
	waitFor(t, 20*time.Second, "the bootstrap user", func() bool { return len(l.securityState().ScramCredentials(adminUser)) > 0 })
	addr := l.Addr().String()

	corr := int32(0)
	roundTrip := func(c net.Conn, r *bufio.Reader, req kmsg.Request, resp kmsg.Response) error {
		corr++
		if _, err := c.Write(kafkaclient.AppendRequest(nil, corr, "v0-client", req)); err != nil {
			return err
		}
		frame, err := readToken(r)
		if err != nil {
			return err
		}
		if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
			t.Fatalf("answer with correlation id %d, want %d", got, corr)
		}
		resp.SetVersion(req.GetVersion())
		return resp.ReadFrom(frame[4:])
	}
	login := func(pass string) (net.Conn, *bufio.Reader, error) {
		c, err := dial()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		r := bufio.NewReader(c)
		versions := kmsg.NewPtrApiVersionsRequest()
		vresp := kmsg.NewPtrApiVersionsResponse()
		if err := roundTrip(c, r, versions, vresp); err != nil {
			t.Fatal(err)
		}
		offered := false
		for _, k := range vresp.ApiKeys {
			if k.ApiKey == kmsg.SASLHandshake.Int16() {
				offered = k.MinVersion == 0 && k.MaxVersion >= 1
			}
		}
		if !offered {
			t.Fatalf("ApiVersions does not offer SaslHandshake 0–1: %+v", vresp.ApiKeys)
		}
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.SetVersion(0)
		hs.Mechanism = mechanism
		hsResp := kmsg.NewPtrSASLHandshakeResponse()
		if err := roundTrip(c, r, hs, hsResp); err != nil || hsResp.ErrorCode != 0 {
			t.Fatalf("SaslHandshake v0: %v, error code %d", err, hsResp.ErrorCode)
		}
		sess, msg, err := mech(adminUser, pass).Authenticate(ctxT(t), addr)
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := c.Write(kafkawire.AppendSASLToken(nil, msg)); err != nil {
				return c, r, err
			}
			answer, err := readToken(r)
			if err != nil {
				return c, r, err
			}
			done, next, err := sess.Challenge(answer)
			if err != nil {
				t.Fatalf("the server's token %q: %v", answer, err)
			}
			if done {
				return c, r, nil
			}
			msg = next
		}
	}

	c, r, err := login(adminPass)
	if err != nil {
		t.Fatalf("%s over SaslHandshake v0: %v", mechanism, err)
	}
	topics := kmsg.NewPtrCreateTopicsRequest()
	topics.SetVersion(4)
	topics.ValidateOnly = true
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "after-v0-login", 1, 1
	topics.Topics = append(topics.Topics, rt)
	tresp := kmsg.NewPtrCreateTopicsResponse()
	if err := roundTrip(c, r, topics, tresp); err != nil {
		t.Fatalf("a request after the v0 login: %v", err)
	}
	if len(tresp.Topics) != 1 || tresp.Topics[0].ErrorCode == kerr.TopicAuthorizationFailed.Code || tresp.Topics[0].ErrorCode == kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("CreateTopics as %s after the v0 login: %+v", adminUser, tresp.Topics)
	}

	before := l.SecurityCounts()
	if _, r, err := login("wrong"); err == nil {
		t.Fatal("a wrong password logged in over SaslHandshake v0")
	} else if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("the connection stayed open after a refused login: %v", err)
	}
	if got := l.SecurityCounts(); got.AuthenticationFailures != before.AuthenticationFailures+1 || got.Authentications != before.Authentications {
		t.Fatalf("security counts %+v after a wrong password, were %+v", got, before)
	}
}

// readToken reads one size-prefixed frame.
func readToken(r *bufio.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(r, b)
	return b, err
}
