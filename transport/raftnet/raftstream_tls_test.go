package raftnet

import (
	"crypto/tls"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig/tlstest"
)

var testVoters = tlsconfig.Voters(1001, 1002, 1003)

func tlsLayer(t *testing.T, certs *tlsconfig.Reloader, opts ...func(*TLSStreamConfig)) (*StreamLayer, *testkit.Log) {
	t.Helper()
	logs := &testkit.Log{}
	cfg := TLSStreamConfig{BindAddr: "127.0.0.1:0", Certs: certs, Peers: testVoters,
		Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := NewTLSStreamLayer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, logs
}

func peerSerial(t *testing.T, c net.Conn) string {
	t.Helper()
	tc, ok := c.(*trackedConn).Conn.(*tls.Conn)
	if !ok {
		t.Fatalf("connection is a %T, not TLS", c.(*trackedConn).Conn)
	}
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	return tc.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func echo(t *testing.T, a, b net.Conn) {
	t.Helper()
	_ = a.SetDeadline(time.Now().Add(ioTimeout))
	_ = b.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := a.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(b, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("read %q: %v", buf, err)
	}
}

func TestTLSStreamLayerConnectsConfiguredVoters(t *testing.T) {
	pki := tlstest.NewPKI(t, "cluster CA")
	one, _ := tlsLayer(t, pki.Reloader(pki.Voter(1001)))
	two, _ := tlsLayer(t, pki.Reloader(pki.Voter(1002)))
	dialed, accepted := dialAccept(t, one, two)
	echo(t, dialed, accepted)
	echo(t, accepted, dialed)
	if _, ok := accepted.(*trackedConn).Conn.(*tls.Conn); !ok {
		t.Fatal("accepted connection is not TLS")
	}
}

// TestTLSStreamLayerRefusesStrangers: a peer with a certificate of
// another CA, or one naming a node that is not a configured voter, gets
// no connection in either direction, and nothing reaches Accept.
func TestTLSStreamLayerRefusesStrangers(t *testing.T) {
	pki := tlstest.NewPKI(t, "cluster CA")
	other := tlstest.NewPKI(t, "another CA")
	voter, logs := tlsLayer(t, pki.Reloader(pki.Voter(1001)))
	// Whatever the voter accepts is echoed back, so a connection that got
	// through would carry data.
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := voter.Accept()
			if err != nil {
				return
			}
			accepted <- c
			go func() { _, _ = io.Copy(c, c) }()
		}
	}()

	// The stranger of another CA trusts the cluster's CA too, so that
	// only the voter's verdict decides.
	foreign := other.Voter(1002)
	foreign.CA = filepath.Join(t.TempDir(), "both.crt")
	if err := tlsconfig.WriteFileAtomic(foreign.CA, append(append([]byte{}, other.CA.CertPEM...), pki.CA.CertPEM...), 0o644); err != nil {
		t.Fatal(err)
	}
	strangers := map[string]*tlsconfig.Reloader{
		"another CA":         other.Reloader(foreign),
		"unconfigured voter": pki.Reloader(pki.Voter(1009)),
		"broker certificate": pki.Reloader(pki.Broker(2)),
		"client certificate": pki.Reloader(pki.Client("admin")),
	}
	for name, certs := range strangers {
		// The stranger dials the voter. With TLS 1.3 the client side of
		// the handshake may finish before the server has checked the
		// client's certificate; the refusal then arrives on the first read.
		// Its own check is permissive: only the voter's verdict is tested.
		st, err := NewTLSStreamLayer(TLSStreamConfig{BindAddr: "127.0.0.1:0", Certs: certs,
			Peers: func(tlsconfig.Identity) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		c, err := st.Dial(raft.ServerAddress(voter.Addr().String()), ioTimeout)
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(ioTimeout))
			_, _ = c.Write([]byte{1})
			_, err = c.Read(make([]byte, 1))
			c.Close()
		}
		if err == nil {
			t.Errorf("%s: connection to the voter carried data", name)
		}

		// The voter dials the stranger: its verification refuses the server.
		want := "peer refused"
		if name == "another CA" {
			want = "certificate signed by unknown authority"
		}
		if c, err := voter.Dial(raft.ServerAddress(st.Addr().String()), ioTimeout); err == nil {
			c.Close()
			t.Errorf("%s: the voter dialled it", name)
		} else if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: dial error %v, want %q", name, err, want)
		}
		st.Close()
	}
	// Every refusal was logged by the voter; none reached Accept.
	waitUntil(t, func() bool {
		return strings.Count(logs.String(), "refused connection: TLS handshake failed") >= len(strangers)
	})
	select {
	case c := <-accepted:
		t.Fatalf("a stranger's connection from %v reached Accept", c.RemoteAddr())
	default:
	}
	// The voter still takes a configured peer.
	peer, _ := tlsLayer(t, pki.Reloader(pki.Voter(1003)))
	c, err := peer.Dial(raft.ServerAddress(voter.Addr().String()), ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case a := <-accepted:
		defer a.Close()
	case <-time.After(ioTimeout):
		t.Fatal("configured voter not accepted")
	}
	_ = c.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo from the voter: %q %v", buf, err)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTLSStreamLayerStalledHandshake: a peer that connects and sends
// nothing is dropped after the handshake timeout, and meanwhile other
// peers connect normally.
func TestTLSStreamLayerStalledHandshake(t *testing.T) {
	pki := tlstest.NewPKI(t, "cluster CA")
	voter, logs := tlsLayer(t, pki.Reloader(pki.Voter(1001)), func(c *TLSStreamConfig) { c.HandshakeTimeout = 300 * time.Millisecond })
	stall, err := net.Dial("tcp", voter.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stall.Close()

	peer, _ := tlsLayer(t, pki.Reloader(pki.Voter(1002)))
	dialed, accepted := dialAccept(t, peer, voter)
	echo(t, dialed, accepted)

	_ = stall.SetReadDeadline(time.Now().Add(ioTimeout))
	if _, err := stall.Read(make([]byte, 1)); err == nil {
		t.Fatal("stalled connection got data")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("stalled connection was not closed by the voter")
	}
	waitUntil(t, func() bool {
		return strings.Contains(logs.String(), "handshake not complete within the 300ms handshake timeout")
	})
}

// TestTLSStreamLayerHandshakeCap: beyond MaxHandshakes pending handshakes
// a new connection is closed at once and the limit is logged.
func TestTLSStreamLayerHandshakeCap(t *testing.T) {
	pki := tlstest.NewPKI(t, "cluster CA")
	voter, logs := tlsLayer(t, pki.Reloader(pki.Voter(1001)), func(c *TLSStreamConfig) { c.MaxHandshakes = 2 })
	var stalls []net.Conn
	defer func() {
		for _, c := range stalls {
			c.Close()
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", voter.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		stalls = append(stalls, c)
	}
	waitUntil(t, func() bool {
		return strings.Contains(logs.String(), "TLS handshake limit reached: closing new connection")
	})
	if !strings.Contains(logs.String(), "max_handshakes=2") {
		t.Fatalf("limit line does not name the limit:\n%s", logs)
	}
}

// TestTLSStreamLayerRotation: after new files and a Reload, new
// connections present the new certificate; a connection made before
// keeps working.
func TestTLSStreamLayerRotation(t *testing.T) {
	pki := tlstest.NewPKI(t, "cluster CA")
	certs := pki.Reloader(pki.Voter(1001))
	voter, _ := tlsLayer(t, certs)
	peer, _ := tlsLayer(t, pki.Reloader(pki.Voter(1002)))

	oldDialed, oldAccepted := dialAccept(t, peer, voter)
	before := peerSerial(t, oldDialed)
	if before != certs.Leaf().SerialNumber.String() {
		t.Fatalf("peer saw serial %s, voter has %s", before, certs.Leaf().SerialNumber)
	}
	pki.Voter(1001)
	if err := certs.Reload(); err != nil {
		t.Fatal(err)
	}
	newDialed, _ := dialAccept(t, peer, voter)
	if after := peerSerial(t, newDialed); after == before || after != certs.Leaf().SerialNumber.String() {
		t.Fatalf("after rotation the peer saw serial %s (before %s, current %s)", after, before, certs.Leaf().SerialNumber)
	}
	// The voter dials with the new certificate too.
	d, a := dialAccept(t, voter, peer)
	if got := peerSerial(t, a); got != certs.Leaf().SerialNumber.String() {
		t.Fatalf("voter dialled with serial %s, want %s", got, certs.Leaf().SerialNumber)
	}
	echo(t, d, a)
	echo(t, oldDialed, oldAccepted)
	echo(t, oldAccepted, oldDialed)
}

func TestTLSStreamConfigRequired(t *testing.T) {
	pki := tlstest.NewPKI(t, "cluster CA")
	if _, err := NewTLSStreamLayer(TLSStreamConfig{BindAddr: "127.0.0.1:0", Certs: pki.Reloader(pki.Voter(1001))}); err == nil {
		t.Fatal("a TLS stream layer without a peer check")
	}
	if _, err := NewTLSStreamLayer(TLSStreamConfig{BindAddr: "127.0.0.1:0", Peers: testVoters}); err == nil {
		t.Fatal("a TLS stream layer without certificates")
	}
}
