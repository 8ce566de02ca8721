package kafkaclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
	"github.com/ctrlquorum/ctrlquorum/transport/sasl"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig/tlstest"
)

// saslListener is a TLS listener that takes clients without a
// certificate and requires a SASL login (SCRAM-SHA-512 or PLAIN, as user
// alice) before anything but ApiVersions and the SASL requests, with the
// server sessions of package sasl, as the controller's listener does. It
// answers Metadata naming itself, node 1, the controller.
type saslListener struct {
	srv  *kafkawire.Server
	pool *x509.CertPool
	// versions are those of the SASL requests it was sent.
	versions chan [2]int16
}

const alicePassword = "alice-secret"

func newSASLListener(t *testing.T) *saslListener {
	pki := tlstest.NewPKI(t, "test CA")
	certs := pki.Reloader(pki.Voter(1))
	cred, err := sasl.NewCredential(sasl.ScramSHA512, alicePassword, []byte("0123456789abcdef"), sasl.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(user string) []sasl.Credential {
		if user == "alice" {
			return []sasl.Credential{cred}
		}
		return nil
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &saslListener{pool: x509.NewCertPool(), versions: make(chan [2]int16, 100)}
	l.pool.AppendCertsFromPEM(pki.CA.CertPEM)
	type state struct {
		session sasl.Session
		user    string
	}
	l.srv = kafkawire.Serve(tls.NewListener(tcp, certs.ClientListenerConfig()), kafkawire.Config{
		APIs: map[int16]int16{3: 12, 17: 1, 36: 2},
		Handler: kafkawire.HandlerFunc(func(_ context.Context, c *kafkawire.Conn, req kmsg.Request) (kmsg.Response, error) {
			st, _ := c.Session.Value.(*state)
			if st == nil {
				st = &state{}
				c.Session.Value = st
			}
			switch r := req.(type) {
			case *kmsg.SASLHandshakeRequest:
				l.versions <- [2]int16{17, r.Version}
				resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
				resp.SupportedMechanisms = []string{sasl.ScramSHA512, sasl.Plain}
				session, err := sasl.NewSession(r.Mechanism, c.TLS != nil, lookup)
				if err != nil {
					resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
				}
				st.session = session
				return resp, nil
			case *kmsg.SASLAuthenticateRequest:
				l.versions <- [2]int16{36, r.Version}
				resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
				if st.session == nil {
					resp.ErrorCode = kerr.IllegalSaslState.Code
					return resp, nil
				}
				msg, done, err := st.session.Step(r.SASLAuthBytes)
				if err != nil {
					resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
					text := err.Error()
					resp.ErrorMessage = &text
					c.Session.CloseAfterResponse("login refused")
					return resp, nil
				}
				resp.SASLAuthBytes = msg
				if done {
					st.user = st.session.User()
					c.Session.SetAuthenticated()
				}
				return resp, nil
			case *kmsg.MetadataRequest:
				if st.user == "" {
					return nil, errors.New("request before a login")
				}
				resp := r.ResponseKind().(*kmsg.MetadataResponse)
				host, port, _ := net.SplitHostPort(l.srv.Addr().String())
				p, _ := strconv.Atoi(port)
				b := kmsg.NewMetadataResponseBroker()
				b.NodeID, b.Host, b.Port = 1, host, int32(p)
				resp.Brokers, resp.ControllerID = []kmsg.MetadataResponseBroker{b}, 1
				return resp, nil
			}
			return nil, errors.New("not served")
		}),
	})
	t.Cleanup(func() { l.srv.Close() })
	return l
}

// opts are the options of a client that verifies the listener against
// the CA, presents no certificate and logs in with mech.
func (l *saslListener) opts(mech kgosasl.Mechanism) Options {
	return Options{ClientID: "test", SASL: mech, Dial: TLSDialer(nil, &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: l.pool})}
}

// TestDialTLSSASL: a client without a certificate logs in over TLS with
// SCRAM-SHA-512 and with PLAIN, at the highest SASL versions both sides
// know, or at v1 without ApiVersions; a wrong password fails the dial
// with SASL_AUTHENTICATION_FAILED; the controller is found over the
// same kind of connection.
func TestDialTLSSASL(t *testing.T) {
	l := newSASLListener(t)
	addr := l.srv.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md := func(c *Conn) {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		if err := c.Pick(req, 1); err != nil {
			req.SetVersion(1)
		}
		resp, err := c.Request(ctx, req)
		if err != nil || resp.(*kmsg.MetadataResponse).ControllerID != 1 {
			t.Fatalf("metadata after the login: %v", err)
		}
	}
	drain := func() (got [][2]int16) {
		for {
			select {
			case v := <-l.versions:
				got = append(got, v)
			default:
				return got
			}
		}
	}
	for _, tc := range []struct {
		name     string
		mech     kgosasl.Mechanism
		noApiVer bool
		want     [][2]int16 // SASL requests (key, version)
	}{
		{"SCRAM-SHA-512", scram.Auth{User: "alice", Pass: alicePassword}.AsSha512Mechanism(), false, [][2]int16{{17, 1}, {36, 2}, {36, 2}}},
		{"PLAIN", plain.Auth{User: "alice", Pass: alicePassword}.AsMechanism(), false, [][2]int16{{17, 1}, {36, 2}}},
		{"SCRAM-SHA-512 without ApiVersions", scram.Auth{User: "alice", Pass: alicePassword}.AsSha512Mechanism(), true, [][2]int16{{17, 1}, {36, 1}, {36, 1}}},
	} {
		opts := l.opts(tc.mech)
		opts.NoApiVersions = tc.noApiVer
		c, err := Dial(ctx, addr, opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		md(c)
		c.Close()
		if got := drain(); len(got) != len(tc.want) || got[0] != tc.want[0] || got[len(got)-1] != tc.want[len(tc.want)-1] {
			t.Fatalf("%s: SASL requests %v, want %v", tc.name, got, tc.want)
		}
	}

	_, err := Dial(ctx, addr, l.opts(scram.Auth{User: "alice", Pass: "wrong"}.AsSha512Mechanism()))
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a wrong password: %v", err)
	}
	// No login: the listener refuses the first request.
	if c, err := Dial(ctx, addr, l.opts(nil)); err != nil {
		t.Fatal(err)
	} else {
		if _, err := c.Request(ctx, kmsg.NewPtrMetadataRequest()); err == nil {
			t.Fatal("metadata without a login")
		}
		c.Close()
	}
	// Without the CA the handshake fails.
	if c, err := Dial(ctx, addr, Options{Dial: TLSDialer(nil, &tls.Config{MinVersion: tls.VersionTLS12})}); err == nil {
		c.Close()
		t.Fatal("dialled a listener whose CA the client does not have")
	}

	drain()
	ctl := NewController(ControllerConfig{Bootstrap: []string{addr}, Options: l.opts(scram.Auth{User: "alice", Pass: alicePassword}.AsSha512Mechanism())})
	defer ctl.Close()
	if _, err := ctl.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatalf("through the controller: %v", err)
	}
	bad := NewController(ControllerConfig{Bootstrap: []string{addr}, Options: l.opts(scram.Auth{User: "alice", Pass: "wrong"}.AsSha512Mechanism()),
		Permanent: func(err error) error {
			if errors.Is(err, kerr.SaslAuthenticationFailed) {
				return err
			}
			return nil
		}})
	defer bad.Close()
	start := time.Now()
	if _, err := bad.Do(ctx, kmsg.NewPtrMetadataRequest(), nil); !errors.Is(err, kerr.SaslAuthenticationFailed) || time.Since(start) > 5*time.Second {
		t.Fatalf("Do with a wrong password: %v after %v", err, time.Since(start))
	}
}
