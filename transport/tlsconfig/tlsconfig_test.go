package tlsconfig_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig/tlstest"
)

func certWith(uris ...string) *x509.Certificate {
	c := &x509.Certificate{}
	c.Subject.CommonName = "x"
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			panic(err)
		}
		c.URIs = append(c.URIs, u)
	}
	return c
}

func TestIdentityOf(t *testing.T) {
	cases := []struct {
		uris           []string
		voter, broker  int32
		wantErrSubject string
	}{
		{nil, -1, -1, ""},
		{[]string{"spiffe://example.org/ns/x"}, -1, -1, ""},
		{[]string{"ctrlquorum://voter/1001"}, 1001, -1, ""},
		{[]string{"ctrlquorum://broker/0"}, -1, 0, ""},
		{[]string{"ctrlquorum://voter/1001", "ctrlquorum://broker/1"}, 1001, 1, ""},
		{[]string{"ctrlquorum://voter/1001", "ctrlquorum://voter/1001"}, 1001, -1, ""},
		{[]string{"ctrlquorum://voter/1001", "ctrlquorum://voter/1002"}, -1, -1, "two voter ids"},
		{[]string{"ctrlquorum://admin/1"}, -1, -1, "unknown role"},
		{[]string{"ctrlquorum://voter/01001"}, -1, -1, "not a non-negative"},
		{[]string{"ctrlquorum://voter/+1001"}, -1, -1, "not a non-negative"},
		{[]string{"ctrlquorum://broker/-2"}, -1, -1, "not a non-negative"},
		{[]string{"ctrlquorum://broker/4294967298"}, -1, -1, "not a non-negative"},
		{[]string{"ctrlquorum://broker/"}, -1, -1, "no id"},
		{[]string{"ctrlquorum://broker/2?x=1"}, -1, -1, "unexpected parts"},
		{[]string{"ctrlquorum://broker:9/2"}, -1, -1, "unexpected parts"},
		{[]string{"ctrlquorum:broker/2"}, -1, -1, "unexpected parts"},
	}
	for _, tc := range cases {
		id, err := tlsconfig.IdentityOf(certWith(tc.uris...))
		if tc.wantErrSubject != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrSubject) {
				t.Errorf("%v: error %v, want one about %q", tc.uris, err, tc.wantErrSubject)
			}
			if id.IsVoter() || id.IsBroker() {
				t.Errorf("%v: a bad certificate named %v", tc.uris, id)
			}
			continue
		}
		if err != nil || id.Voter != tc.voter || id.Broker != tc.broker || id.Name != "x" {
			t.Errorf("%v: got %+v %v, want voter %d broker %d", tc.uris, id, err, tc.voter, tc.broker)
		}
	}
	if p := (tlsconfig.Identity{Name: "admin"}).Principal(); p != "User:admin" {
		t.Errorf("principal %q", p)
	}
	// The URIs the helpers write parse back to the same ids.
	for _, id := range []int32{0, 7, 1001, 1<<31 - 1} {
		got, err := tlsconfig.IdentityOf(&x509.Certificate{URIs: []*url.URL{tlsconfig.VoterURI(id), tlsconfig.BrokerURI(id)}})
		if err != nil || got.Voter != id || got.Broker != id {
			t.Errorf("round trip of %d: %+v %v", id, got, err)
		}
	}
}

func TestPeerChecks(t *testing.T) {
	voter := tlsconfig.Identity{Voter: 1001, Broker: -1}
	other := tlsconfig.Identity{Voter: 1009, Broker: -1}
	broker := tlsconfig.Identity{Voter: -1, Broker: 2}
	check := tlsconfig.Voters(1001, 1002)
	if err := check(voter); err != nil {
		t.Errorf("configured voter refused: %v", err)
	}
	if err := check(other); err == nil {
		t.Error("voter 1009 accepted by a check for 1001, 1002")
	}
	if err := check(broker); err == nil {
		t.Error("a broker certificate accepted as a voter")
	}
	if err := tlsconfig.Broker(2)(broker); err != nil {
		t.Errorf("broker 2 refused: %v", err)
	}
	if err := tlsconfig.Broker(3)(broker); err == nil {
		t.Error("broker 2 accepted as broker 3")
	}
	if err := tlsconfig.Broker(2)(voter); err == nil {
		t.Error("a voter certificate accepted as broker 2")
	}
	if err := tlsconfig.AnyBroker()(voter); err == nil {
		t.Error("a voter certificate accepted as a broker")
	}
}

// handshake runs one TLS connection on 127.0.0.1 between a server and a
// client config and returns each side's handshake error and, when both
// succeeded, what each saw of the other.
type handshakeResult struct {
	serverErr, clientErr   error
	serverSaw, clientSaw   *x509.Certificate
	serverConn, clientConn *tls.Conn
}

func handshake(t *testing.T, server, client *tls.Config) handshakeResult {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var res handshakeResult
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			res.serverErr = err
			return
		}
		tc := tls.Server(c, server)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		res.serverErr = tc.Handshake()
		if res.serverErr == nil {
			res.serverSaw = tc.ConnectionState().PeerCertificates[0]
			res.serverConn = tc
			// Complete TLS 1.3's exchange: the client learns of a refusal
			// of its certificate only when it reads.
			_, _ = tc.Write([]byte{1})
		} else {
			tc.Close()
		}
	}()
	tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", ln.Addr().String(), client)
	if err == nil {
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		var b [1]byte
		if _, err = io.ReadFull(tc, b[:]); err == nil {
			res.clientSaw = tc.ConnectionState().PeerCertificates[0]
			res.clientConn = tc
		} else {
			tc.Close()
		}
	}
	res.clientErr = err
	wg.Wait()
	t.Cleanup(func() {
		if res.serverConn != nil {
			res.serverConn.Close()
		}
		if res.clientConn != nil {
			res.clientConn.Close()
		}
	})
	return res
}

func TestMutualHandshakeAndPeerChecks(t *testing.T) {
	pki := tlstest.NewPKI(t, "cluster CA")
	v1 := pki.Reloader(pki.Voter(1001))
	v2 := pki.Reloader(pki.Voter(1002))
	v9 := pki.Reloader(pki.Voter(1009))
	b2 := pki.Reloader(pki.Broker(2))
	strange := tlstest.NewPKI(t, "another CA")
	s1 := strange.Reloader(strange.Voter(1002))
	voters := tlsconfig.Voters(1001, 1002, 1003)

	// Two configured voters: both sides verified, each sees the other.
	r := handshake(t, v1.ServerConfig(voters), v2.ClientConfig("", voters))
	if r.serverErr != nil || r.clientErr != nil {
		t.Fatalf("voter to voter: server %v, client %v", r.serverErr, r.clientErr)
	}
	if r.serverSaw.Subject.CommonName != "voter-1002" || r.clientSaw.Subject.CommonName != "voter-1001" {
		t.Fatalf("saw %q and %q", r.serverSaw.Subject.CommonName, r.clientSaw.Subject.CommonName)
	}

	refused := []struct {
		name           string
		server, client *tls.Config
	}{
		{"client from another CA", v1.ServerConfig(voters), s1.ClientConfig("", voters)},
		{"server from another CA", s1.ServerConfig(voters), v1.ClientConfig("", voters)},
		{"client names an unconfigured voter", v1.ServerConfig(voters), v9.ClientConfig("", voters)},
		{"server names an unconfigured voter", v9.ServerConfig(nil), v1.ClientConfig("", voters)},
		{"client is a broker", v1.ServerConfig(voters), b2.ClientConfig("", voters)},
		{"client sends no certificate", v1.ServerConfig(voters), &tls.Config{InsecureSkipVerify: true}},
		{"broker dialled as broker 3", b2.ServerConfig(nil), v1.ClientConfig("", tlsconfig.Broker(3))},
	}
	for _, tc := range refused {
		r := handshake(t, tc.server, tc.client)
		if r.serverErr == nil && r.clientErr == nil {
			t.Errorf("%s: connection made", tc.name)
		}
	}

	// Without a check the client verifies the host name it dialled.
	if r := handshake(t, b2.ServerConfig(nil), v1.ClientConfig("127.0.0.1", nil)); r.clientErr != nil || r.serverErr != nil {
		t.Fatalf("host name check: %v %v", r.clientErr, r.serverErr)
	}
	if r := handshake(t, b2.ServerConfig(nil), v1.ClientConfig("localhost", nil)); r.clientErr != nil || r.serverErr != nil {
		t.Fatalf("host name check: %v %v", r.clientErr, r.serverErr)
	}
	for _, name := range []string{"elsewhere.example", "127.0.0.2", ""} {
		if r := handshake(t, b2.ServerConfig(nil), v1.ClientConfig(name, nil)); r.clientErr == nil {
			t.Fatalf("certificate accepted for host %q it does not name", name)
		}
	}
}

func logBuffer() (hclog.Logger, *testkit.Log) {
	var b testkit.Log
	return hclog.New(&hclog.LoggerOptions{Output: &b, Level: hclog.Info}), &b
}

func TestReloadRotatesAndKeepsOldOnBadFiles(t *testing.T) {
	pki := tlstest.NewPKI(t, "cluster CA")
	logger, logs := logBuffer()
	files := pki.Voter(1001)
	r, err := tlsconfig.NewReloader(files, tlsconfig.Options{Logger: logger, Expect: tlsconfig.Voters(1001)})
	if err != nil {
		t.Fatal(err)
	}
	peer := pki.Reloader(pki.Voter(1002))
	voters := tlsconfig.Voters(1001, 1002)
	first := r.Leaf().SerialNumber

	// An open connection made before the rotation.
	before := handshake(t, r.ServerConfig(voters), peer.ClientConfig("", voters))
	if before.clientErr != nil || before.clientSaw.SerialNumber.Cmp(first) != 0 {
		t.Fatalf("before rotation: %v", before.clientErr)
	}

	// Rotate: new certificate and key in place, then Reload.
	pki.Voter(1001)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	second := r.Leaf().SerialNumber
	if second.Cmp(first) == 0 || r.Loads() != 2 {
		t.Fatalf("reload kept serial %v (loads %d)", first, r.Loads())
	}
	after := handshake(t, r.ServerConfig(voters), peer.ClientConfig("", voters))
	if after.clientErr != nil || after.clientSaw.SerialNumber.Cmp(second) != 0 {
		t.Fatalf("after rotation the server presented %v (err %v), want the new %v", after.clientSaw.SerialNumber, after.clientErr, second)
	}
	// As a client too.
	after = handshake(t, peer.ServerConfig(voters), r.ClientConfig("", voters))
	if after.serverErr != nil || after.serverSaw.SerialNumber.Cmp(second) != 0 {
		t.Fatalf("after rotation the client presented %v (err %v)", after.serverSaw, after.serverErr)
	}
	// The connection from before still carries data.
	if _, err := before.clientConn.Write([]byte("x")); err != nil {
		t.Fatalf("connection from before the rotation broke: %v", err)
	}
	var b [1]byte
	if _, err := io.ReadFull(before.serverConn, b[:]); err != nil || b[0] != 'x' {
		t.Fatalf("connection from before the rotation broke: %v", err)
	}

	keyPEM, err := os.ReadFile(files.Key)
	if err != nil {
		t.Fatal(err)
	}
	otherCA := tlstest.NewPKI(t, "another CA")
	foreign := otherCA.Voter(1001)
	stranger := pki.Voter(1009)
	bad := []struct {
		name  string
		setup func()
		want  string
	}{
		{"truncated certificate", func() { write(t, files.Cert, []byte("-----BEGIN CERTIFICATE-----\nMIIB")) }, "certificate"},
		{"key of another certificate", func() { pki.Voter(1001); write(t, files.Key, keyPEM) }, "private key does not match"},
		{"certificate of another CA", func() { copyFile(t, foreign.Cert, files.Cert); copyFile(t, foreign.Key, files.Key) }, "does not chain"},
		{"certificate of another voter", func() { copyFile(t, stranger.Cert, files.Cert); copyFile(t, stranger.Key, files.Key) }, "not this node's"},
		{"CA bundle of garbage", func() { pki.Voter(1001); write(t, files.CA, []byte("nonsense")) }, "holds no certificate"},
		{"missing CA bundle", func() { _ = os.Remove(files.CA) }, "no such file"},
	}
	for _, tc := range bad {
		tc.setup()
		err := r.Reload()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: reload error %v, want one with %q", tc.name, err, tc.want)
		}
		if got := r.Leaf().SerialNumber; got.Cmp(second) != 0 {
			t.Fatalf("%s: the refused reload replaced the certificate", tc.name)
		}
		// New connections still work with the kept material.
		if res := handshake(t, r.ServerConfig(voters), peer.ClientConfig("", voters)); res.clientErr != nil || res.serverErr != nil {
			t.Fatalf("%s: handshake after a refused reload: %v %v", tc.name, res.clientErr, res.serverErr)
		}
	}
	if !strings.Contains(logs.String(), "TLS reload refused: keeping the certificate loaded before") {
		t.Fatalf("refused reloads not logged:\n%s", logs)
	}
	if r.Loads() != 2 {
		t.Fatalf("loads = %d after refused reloads", r.Loads())
	}
}

func TestExpiredCertificateIsRefused(t *testing.T) {
	pki := tlstest.NewPKI(t, "cluster CA")
	files := pki.Voter(1001)
	_, err := tlsconfig.NewReloader(files, tlsconfig.Options{Now: func() time.Time { return time.Now().Add(48 * time.Hour) }})
	if err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired certificate: %v", err)
	}
	_, err = tlsconfig.NewReloader(tlsconfig.Files{CA: files.CA, Cert: files.Cert}, tlsconfig.Options{})
	if err == nil {
		t.Fatal("a reloader without a key file")
	}
}

func TestRemovingACAFromTheBundleLocksItOut(t *testing.T) {
	old := tlstest.NewPKI(t, "old CA")
	next := tlstest.NewPKI(t, "new CA")
	server := next.Voter(1001)
	// The server trusts both CAs during the rotation.
	write(t, server.CA, append(append([]byte{}, old.CA.CertPEM...), next.CA.CertPEM...))
	r := next.Reloader(server)
	client := old.Reloader(old.Voter(1002))
	write(t, client.Files().CA, append(append([]byte{}, old.CA.CertPEM...), next.CA.CertPEM...))
	if err := client.Reload(); err != nil {
		t.Fatal(err)
	}
	check := tlsconfig.Voters(1001, 1002)
	if res := handshake(t, r.ServerConfig(check), client.ClientConfig("", check)); res.serverErr != nil || res.clientErr != nil {
		t.Fatalf("during rotation: %v %v", res.serverErr, res.clientErr)
	}
	// Rotation done: the old CA leaves the server's bundle.
	write(t, server.CA, next.CA.CertPEM)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if res := handshake(t, r.ServerConfig(check), client.ClientConfig("", check)); res.serverErr == nil {
		t.Fatal("a certificate of the removed CA was still accepted")
	}
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := tlsconfig.WriteFileAtomic(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	write(t, to, data)
}

// A server that refuses a certificate of another CA can still log who it
// claimed to be; a refusal for any other reason adds nothing.
func TestUnverifiedPeer(t *testing.T) {
	pki := tlstest.NewPKI(t, "cluster CA")
	v1 := pki.Reloader(pki.Voter(1001))
	strange := tlstest.NewPKI(t, "another CA")
	files := strange.Voter(1002)
	cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	voters := tlsconfig.Voters(1001, 1002, 1003)

	// The client skips verifying the server, so that only the server's
	// verdict on the client's certificate decides, and presents its
	// certificate although the server names other CAs.
	r := handshake(t, v1.ServerConfig(voters), &tls.Config{InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }})
	if r.serverErr == nil {
		t.Fatal("a certificate of another CA was accepted")
	}
	got := tlsconfig.UnverifiedPeer(r.serverErr)
	want := []any{"unverified_subject", "CN=voter-1002,O=ctrlquorum", "unverified_issuer", "CN=another CA,O=ctrlquorum",
		"unverified_uris", "ctrlquorum://voter/1002"}
	if !slices.Equal(got, want) {
		t.Fatalf("UnverifiedPeer = %v, want %v", got, want)
	}

	v9 := pki.Reloader(pki.Voter(1009))
	r = handshake(t, v1.ServerConfig(voters), v9.ClientConfig("", nil))
	if r.serverErr == nil {
		t.Fatal("an unconfigured voter was accepted")
	}
	if got := tlsconfig.UnverifiedPeer(r.serverErr); got != nil {
		t.Fatalf("UnverifiedPeer of a verified certificate refused by the peer check = %v", got)
	}
}
