package integration

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"
)

// TestRunPerListenerSettings runs one `ctrlnode run` node with both roles
// whose settings come from a file, the environment and flags: raft on the
// node-wide certificate, the Kafka listener and the broker agent's
// listener each on a certificate of its own, and a small frame limit on
// each listener. Each listener presents its own certificate, the broker
// registers through the controller's listener, a frame above a
// listener's limit closes the connection, the limits in force are logged,
// and SIGHUP reloads every listener's files.
func TestRunPerListenerSettings(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	if r := ctl(t, nil, "certs", "--out", certs, "--voters", "1001", "--brokers", "1", "--combined", "1001:1", "--clients", "admin"); r.code != 0 {
		t.Fatalf("certs: %v", r)
	}
	file := func(name string) string { return filepath.Join(certs, name) }
	base := freePortBase(t, 0, 1, 2)
	raft, lis, agent := fmt.Sprintf("127.0.0.1:%d", base), fmt.Sprintf("127.0.0.1:%d", base+1), fmt.Sprintf("127.0.0.1:%d", base+2)
	conf := configFile(t, dir, 1001, [][2]string{
		{"node.id", "1001"}, {"roles", "voter,broker"}, {"broker.id", "1"},
		{"data.dir", filepath.Join(dir, "data")}, {"raft.listener", raft}, {"listener", lis}, {"broker.listener", agent},
		{"voters", "1001@" + raft}, {"voter.listeners", "1001@" + lis},
		{"session.timeout", "2s"}, {"broker.heartbeat.interval", "300ms"},
		{"tls.ca.file", file("ca.crt")}, {"tls.cert.file", file("node-1001-1.crt")}, {"tls.key.file", file("node-1001-1.key")},
		{"listener.max.frame.bytes", "2048"},
		{"broker.listener.max.frame.bytes", "100000"}, // the environment's wins
	})
	if r := ctl(t, nil, "format", "--config", conf, "--standalone"); r.code != 0 {
		t.Fatalf("format: %v", r)
	}
	env := append(os.Environ(),
		"CTRLNODE_BROKER_LISTENER_TLS_CA_FILE="+file("ca.crt"),
		"CTRLNODE_BROKER_LISTENER_TLS_CERT_FILE="+file("broker-1.crt"),
		"CTRLNODE_BROKER_LISTENER_TLS_KEY_FILE="+file("broker-1.key"),
		"CTRLNODE_BROKER_LISTENER_MAX_FRAME_BYTES=4096",
		"CTRLNODE_LISTENER_IDLE_TIMEOUT=1h",
	)
	p := startProc(t, "node 1001", env, "run", "--config", conf,
		"--listener-tls-ca-file", file("ca.crt"), "--listener-tls-cert-file", file("voter-1001.crt"), "--listener-tls-key-file", file("voter-1001.key"),
		"--listener-idle-timeout", "20m")

	p.waitLine(t, regexp.MustCompile(`^  tls       broker    .*/broker-1\.crt \(CA .*/ca\.crt\); SIGHUP reloads$`), time.Minute)
	for _, re := range []string{
		`^  tls       raft      .*/node-1001-1\.crt `,
		`^  tls       listener  .*/voter-1001\.crt `,
		`limits of the voter's Kafka listener: listener=` + regexp.QuoteMeta(lis) + ` listener\.max\.frame\.bytes=2048 listener\.idle\.timeout=20m0s `,
		`limits of the broker agent's listener: broker\.listener=` + regexp.QuoteMeta(agent) + ` broker\.listener\.max\.frame\.bytes=4096 `,
		`limits of raft's TLS handshakes: raft\.tls\.handshake\.timeout=10s raft\.tls\.max\.handshakes=64`,
	} {
		if _, _, ok := p.find(regexp.MustCompile(re)); !ok {
			t.Errorf("no line matching %q", re)
		}
	}

	caPEM, err := os.ReadFile(file("ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	admin, err := tls.LoadX509KeyPair(file("client-admin.crt"), file("client-admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	node, err := tls.LoadX509KeyPair(file("node-1001-1.crt"), file("node-1001-1.key"))
	if err != nil {
		t.Fatal(err)
	}
	dial := func(addr string, cert tls.Certificate) *tls.Conn {
		t.Helper()
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr,
			&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatalf("TLS to %s: %v", addr, err)
		}
		return c
	}
	for _, tc := range []struct {
		addr string
		as   tls.Certificate
		cn   string
	}{{raft, node, "node-1001-1"}, {lis, admin, "voter-1001"}, {agent, admin, "broker-1"}} {
		c := dial(tc.addr, tc.as)
		if got := c.ConnectionState().PeerCertificates[0].Subject.CommonName; got != tc.cn {
			t.Errorf("%s presents %q, want %q", tc.addr, got, tc.cn)
		}
		_ = c.Close()
	}

	p.waitLine(t, regexp.MustCompile(`broker: registered: broker=1`), time.Minute)

	// A frame above each listener's limit closes the connection.
	for _, tc := range []struct {
		addr string
		size uint32
	}{{lis, 4096}, {agent, 8192}} {
		c := dial(tc.addr, admin)
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], tc.size)
		if _, err := c.Write(hdr[:]); err != nil {
			t.Fatal(err)
		}
		// The deadline only keeps a limit that does not work from hanging
		// the test.
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: after announcing a %d-byte frame: %v, want the connection closed", tc.addr, tc.size, err)
		}
		_ = c.Close()
	}
	p.waitLine(t, regexp.MustCompile(`frame exceeds the maximum frame size: .*max_frame_bytes=2048`), 30*time.Second)
	p.waitLine(t, regexp.MustCompile(`frame exceeds the maximum frame size: .*max_frame_bytes=4096`), 30*time.Second)

	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"raft", "listener", "broker"} {
		p.waitLine(t, regexp.MustCompile(`SIGHUP: TLS certificate reloaded: listener=`+l+` `), 30*time.Second)
	}
	if err := p.signal(t, syscall.SIGTERM, time.Minute); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}
