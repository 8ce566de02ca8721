package server

import (
	"errors"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig/tlstest"
)

// issueAs writes a certificate with common name cn naming uris to the
// files of name, replacing what is there (a rotation).
func issueAs(t *testing.T, pki *tlstest.PKI, name, cn string, uris ...*url.URL) tlsconfig.Files {
	t.Helper()
	is, err := pki.CA.Issue(tlsconfig.Leaf{CommonName: cn, URIs: uris, Hosts: []string{"127.0.0.1"},
		Server: true, Client: true, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	f, err := is.Write(pki.Dir, name, pki.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestPerListenerTLS runs a node with both roles whose Kafka listener and
// broker agent listener have certificates of their own while raft uses
// the node-wide one: each listener presents its own, the broker still
// registers and receives a topic (its connections to the controller, and
// the controller's to it, use those certificates), and a reload picks up
// a rotated listener certificate while raft keeps the node-wide one.
func TestPerListenerTLS(t *testing.T) {
	pki := tlstest.NewPKI(t, "server test CA")
	nodeFiles := issueAs(t, pki, "node", "voter-1001", tlsconfig.VoterURI(1001))
	listenerFiles := issueAs(t, pki, "listener", "listener-1001", tlsconfig.VoterURI(1001))
	agentFiles := issueAs(t, pki, "agent", "agent-1", tlsconfig.BrokerURI(1))
	listenerTLS := pki.Reloader(listenerFiles)
	cfg := oneNode(t)
	cfg.TLS, cfg.ListenerTLS, cfg.BrokerListenerTLS = pki.Reloader(nodeFiles), listenerTLS, pki.Reloader(agentFiles)
	raft, lis := cfg.RaftAddr, cfg.Listener
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })

	asVoter := pki.Reloader(nodeFiles).ClientConfig("", tlsconfig.Voters(1001))
	admin := pki.Reloader(pki.Client("admin"))
	if cn := tlstest.Presented(t, raft, asVoter).Subject.CommonName; cn != "voter-1001" {
		t.Errorf("raft presents %q, want the node-wide voter-1001", cn)
	}
	if cn := tlstest.Presented(t, lis, admin.ClientConfig("127.0.0.1", nil)).Subject.CommonName; cn != "listener-1001" {
		t.Errorf("the Kafka listener presents %q, want its own listener-1001", cn)
	}
	if cn := tlstest.Presented(t, s.Agent.Addr(), admin.ClientConfig("127.0.0.1", nil)).Subject.CommonName; cn != "agent-1" {
		t.Errorf("the broker agent's listener presents %q, want its own agent-1", cn)
	}

	createOnBroker(t, s, "per-listener", kgo.Dialer(admin.Dialer(&net.Dialer{Timeout: 10 * time.Second}, nil)))

	// A rotation of the listener's files only: after a reload the listener
	// presents the new certificate, raft and the agent keep theirs.
	issueAs(t, pki, "listener", "listener-1001-rotated", tlsconfig.VoterURI(1001))
	loads := listenerTLS.Loads()
	if err := s.ReloadTLS(); err != nil {
		t.Fatalf("ReloadTLS: %v", err)
	}
	if listenerTLS.Loads() != loads+1 {
		t.Fatalf("the listener's files were not reloaded")
	}
	if cn := tlstest.Presented(t, lis, admin.ClientConfig("127.0.0.1", nil)).Subject.CommonName; cn != "listener-1001-rotated" {
		t.Errorf("after the reload the Kafka listener presents %q, want listener-1001-rotated", cn)
	}
	if cn := tlstest.Presented(t, raft, asVoter).Subject.CommonName; cn != "voter-1001" {
		t.Errorf("after the reload raft presents %q, want voter-1001", cn)
	}
	if cn := tlstest.Presented(t, s.Agent.Addr(), admin.ClientConfig("127.0.0.1", nil)).Subject.CommonName; cn != "agent-1" {
		t.Errorf("after the reload the agent presents %q, want agent-1", cn)
	}

	// A listener's files that no longer load are named in the error; the
	// others are reloaded all the same.
	if err := os.WriteFile(agentFiles.Cert, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.ReloadTLS(); err == nil || !strings.HasPrefix(err.Error(), "broker listener: ") {
		t.Fatalf("ReloadTLS with the agent's certificate file broken: %v", err)
	}
	if listenerTLS.Loads() != loads+2 {
		t.Fatalf("a failing broker listener reload stopped the listener's")
	}
	if cn := tlstest.Presented(t, s.Agent.Addr(), admin.ClientConfig("127.0.0.1", nil)).Subject.CommonName; cn != "agent-1" {
		t.Errorf("after a refused reload the agent presents %q, want agent-1", cn)
	}
}

// TestValidatePerListenerTLS: each listener's certificate must name the
// node as that listener needs, a listener's own material needs the role
// that runs it, and no listener may stay plain beside TLS ones.
func TestValidatePerListenerTLS(t *testing.T) {
	pki := tlstest.NewPKI(t, "server test CA")
	voter1001 := pki.Reloader(pki.Voter(1001))
	voter1002 := pki.Reloader(pki.Voter(1002))
	broker1 := pki.Reloader(pki.Broker(1))
	both := pki.Reloader(pki.Issue("both", tlsconfig.VoterURI(1001), tlsconfig.BrokerURI(1)))
	good := func() Config {
		return Config{NodeID: 1001, Voter: true, Broker: true, BrokerID: 1, RaftAddr: "127.0.0.1:9093", Listener: "127.0.0.1:9092",
			DataDir: "/d", BrokerListener: "127.0.0.1:0", Voters: []VoterPeer{{1001, "127.0.0.1:9093", "127.0.0.1:9092"}}}
	}
	for _, tc := range []struct {
		name  string
		mod   func(*Config)
		field string
		msg   string
	}{
		{"node-wide for all", func(c *Config) { c.TLS = both }, "", ""},
		{"each its own", func(c *Config) { c.RaftTLS, c.ListenerTLS, c.BrokerListenerTLS = voter1001, voter1001, broker1 }, "", ""},
		{"node-wide left to raft only needs the voter id", func(c *Config) { c.TLS, c.BrokerListenerTLS = voter1001, broker1 }, "", ""},
		{"node-wide left to the agent must name the broker", func(c *Config) { c.TLS, c.RaftTLS, c.ListenerTLS = voter1001, voter1001, voter1001 },
			"TLS", "does not name broker 1"},
		{"listener naming another voter", func(c *Config) { c.TLS, c.ListenerTLS = both, voter1002 }, "ListenerTLS", "does not name voter 1001"},
		{"raft naming a broker", func(c *Config) { c.TLS, c.RaftTLS = both, broker1 }, "RaftTLS", "does not name voter 1001"},
		{"agent naming a voter", func(c *Config) { c.TLS, c.BrokerListenerTLS = both, voter1001 }, "BrokerListenerTLS", "does not name broker 1"},
		{"raft alone on TLS", func(c *Config) { c.RaftTLS = voter1001 }, "RaftTLS", "raft runs TLS but the Kafka listener would be plain TCP"},
		{"agent alone on TLS", func(c *Config) { c.Voter = true; c.BrokerListenerTLS = broker1 }, "BrokerListenerTLS", "would be plain TCP"},
		{"broker listener TLS on a voter", func(c *Config) { c.Broker, c.TLS, c.BrokerListenerTLS = false, voter1001, broker1 }, "BrokerListenerTLS", "without the broker role"},
		{"raft TLS on a broker", func(c *Config) {
			c.Voter, c.NodeID, c.Voters, c.Controllers, c.TLS, c.RaftTLS = false, 1, nil, []string{"127.0.0.1:9092"}, broker1, voter1001
		}, "RaftTLS", "without the voter role"},
	} {
		c := good()
		tc.mod(&c)
		err := c.Validate()
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Msg, tc.msg) {
			t.Errorf("%s: Validate() = %v, want a FieldError on %s saying %q", tc.name, err, tc.field, tc.msg)
		}
	}
}
