package listener

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig/tlstest"
)

// clusterTLS is the certificates of a test cluster run over mutual TLS:
// one per voter (raft and listener alike), one per broker, one admin
// client.
type clusterTLS struct {
	t      testing.TB
	pki    *tlstest.PKI
	ids    []int32
	voters []*tlsconfig.Reloader
	admin  *tlsconfig.Reloader

	mu      sync.Mutex
	brokers map[int32]*tlsconfig.Reloader
}

func newClusterTLS(t testing.TB, ids []int32) *clusterTLS {
	ct := &clusterTLS{t: t, pki: tlstest.NewPKI(t, "test cluster CA"), ids: ids, brokers: map[int32]*tlsconfig.Reloader{}}
	for _, id := range ids {
		ct.voters = append(ct.voters, ct.pki.Reloader(ct.pki.Voter(id)))
	}
	ct.admin = ct.pki.Reloader(ct.pki.Client("admin"))
	return ct
}

func (ct *clusterTLS) broker(id int32) *tlsconfig.Reloader {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	r, ok := ct.brokers[id]
	if !ok {
		r = ct.pki.Reloader(ct.pki.Broker(id))
		ct.brokers[id] = r
	}
	return r
}

func (c *testCluster) openRaft(i int, addr string) (*raftnet.StreamLayer, error) {
	if c.tls == nil {
		return raftnet.NewTCPStreamLayer(addr, "")
	}
	return raftnet.NewTLSStreamLayer(raftnet.TLSStreamConfig{BindAddr: addr, Certs: c.tls.voters[i],
		Peers: tlsconfig.Voters(c.tls.ids...), Logger: testLogger("raft-tls")})
}

func (c *testCluster) openListener(i int, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil || c.tls == nil {
		return ln, err
	}
	if len(c.security.SASLMechanisms) > 0 {
		// SASL clients come without a certificate.
		return tls.NewListener(ln, c.tls.voters[i].ClientListenerConfig()), nil
	}
	return tls.NewListener(ln, c.tls.voters[i].ServerConfig(nil)), nil
}

// peerDial is how voter i's listener reaches the others: a voter dials
// with its certificate and accepts only another voter's.
func (c *testCluster) peerDial(i int) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if c.tls == nil {
		return nil
	}
	return c.tls.voters[i].Dialer(nil, tlsconfig.Voters(c.tls.ids...))
}

// clientTLS is the kgo option of the admin client, none without TLS.
func (c *testCluster) clientTLS() []kgo.Opt {
	if c.tls == nil {
		return nil
	}
	return []kgo.Opt{kgo.Dialer(c.tls.admin.Dialer(&net.Dialer{Timeout: 10 * time.Second}, nil))}
}

// brokerTLS is the kgo option of broker id's client, none without TLS.
func (c *testCluster) brokerTLS(id int32) []kgo.Opt {
	if c.tls == nil {
		return nil
	}
	return []kgo.Opt{kgo.Dialer(c.tls.broker(id).Dialer(&net.Dialer{Timeout: 10 * time.Second}, nil))}
}

func heartbeatCode(r kmsg.Response) int16 { return r.(*kmsg.BrokerHeartbeatResponse).ErrorCode }

// TestTLSBrokerIdentity: over mutual TLS, a broker registers and
// heartbeats as the broker its certificate names and as no other; a
// client certificate naming no broker cannot act as one.
func TestTLSBrokerIdentity(t *testing.T) {
	c := newTestCluster(t, clusterOpts{tls: true})
	c.startBrokers(2) // brokers 1 and 2, each with its own certificate
	b2 := c.broker(2)
	caf := kerr.ClusterAuthorizationFailed.Code

	// Broker 2's certificate, acting as broker 3.
	reg := kmsg.NewPtrBrokerRegistrationRequest()
	reg.BrokerID, reg.ClusterID, reg.IncarnationID = 3, testClusterID, [16]byte{3, 0xb0}
	ln := kmsg.NewBrokerRegistrationRequestListener()
	ln.Name, ln.Host, ln.Port = "PLAINTEXT", "127.0.0.1", 9
	reg.Listeners = append(reg.Listeners, ln)
	if got := c.toControllerRetry(t, b2.cl, reg, func(r kmsg.Response) int16 { return r.(*kmsg.BrokerRegistrationResponse).ErrorCode }); got.(*kmsg.BrokerRegistrationResponse).ErrorCode != caf {
		t.Fatalf("registration as broker 3 with broker 2's certificate: %v", kerr.ErrorForCode(got.(*kmsg.BrokerRegistrationResponse).ErrorCode))
	}
	// Heartbeat as broker 1 (registered, so only the certificate refuses it).
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.BrokerID, hb.BrokerEpoch = 1, c.broker(1).epoch.Load()
	hresp := c.toControllerRetry(t, b2.cl, hb, heartbeatCode).(*kmsg.BrokerHeartbeatResponse)
	if hresp.ErrorCode != caf || !hresp.IsFenced {
		t.Fatalf("heartbeat as broker 1 with broker 2's certificate: %v fenced=%v", kerr.ErrorForCode(hresp.ErrorCode), hresp.IsFenced)
	}
	ap := kmsg.NewPtrAlterPartitionRequest()
	ap.BrokerID, ap.BrokerEpoch = 1, c.broker(1).epoch.Load()
	if got := c.toControllerRetry(t, b2.cl, ap, func(r kmsg.Response) int16 { return r.(*kmsg.AlterPartitionResponse).ErrorCode }); got.(*kmsg.AlterPartitionResponse).ErrorCode != caf {
		t.Fatalf("AlterPartition as broker 1: %v", kerr.ErrorForCode(got.(*kmsg.AlterPartitionResponse).ErrorCode))
	}
	ub := kmsg.NewPtrUnregisterBrokerRequest()
	ub.BrokerID = 1
	if got := c.toControllerRetry(t, b2.cl, ub, func(r kmsg.Response) int16 { return r.(*kmsg.UnregisterBrokerResponse).ErrorCode }); got.(*kmsg.UnregisterBrokerResponse).ErrorCode != caf {
		t.Fatalf("UnregisterBroker as broker 1: %v", kerr.ErrorForCode(got.(*kmsg.UnregisterBrokerResponse).ErrorCode))
	}
	// The admin certificate names no broker.
	admin := c.client()
	hb2 := kmsg.NewPtrBrokerHeartbeatRequest()
	hb2.BrokerID, hb2.BrokerEpoch = 2, b2.epoch.Load()
	if got := c.toControllerRetry(t, admin, hb2, heartbeatCode); heartbeatCode(got) != caf {
		t.Fatalf("heartbeat as broker 2 with the admin certificate: %v", kerr.ErrorForCode(heartbeatCode(got)))
	}
	// Broker 2 as itself is served.
	if got := c.toControllerRetry(t, b2.cl, hb2, heartbeatCode).(*kmsg.BrokerHeartbeatResponse); got.ErrorCode != 0 || got.IsFenced {
		t.Fatalf("broker 2's own heartbeat: %v fenced=%v", kerr.ErrorForCode(got.ErrorCode), got.IsFenced)
	}
	// Nothing of the refused requests reached the image.
	c.view(c.active(10*time.Second), func(im *fsmImage) {
		if im.Broker(3) != nil {
			t.Error("broker 3 registered with broker 2's certificate")
		}
		if b := im.Broker(1); b == nil || b.Fenced {
			t.Error("broker 1 was unregistered or fenced by another broker's requests")
		}
	})
	// Admin operations work for the admin certificate.
	if res, err := kadm.NewClient(admin).CreateTopics(ctxT(t), 1, 2, nil, "over-tls"); err != nil || res.Error() != nil {
		t.Fatalf("CreateTopics over TLS: %v %v", err, res.Error())
	}
}

// TestTLSForwardBetweenVoters: a standby forwards a config change to the
// active controller over TLS, with its own voter certificate.
func TestTLSForwardBetweenVoters(t *testing.T) {
	// One leader throughout: kgo sends a CreateTopics again after an
	// election, and the second one finds the topic the first created.
	c := newTestCluster(t, clusterOpts{tls: true, stable: true})
	c.startBrokers(1)
	ctx := ctxT(t)
	if res, err := kadm.NewClient(c.client()).CreateTopics(ctx, 1, 1, nil, "cfg"); err != nil || res.Error() != nil {
		t.Fatalf("%v %v", err, res.Error())
	}
	active := c.active(10 * time.Second)
	sb := c.standbyIndex(active)
	waitFor(t, 10*time.Second, "the standby to know the leader", func() bool { return c.listener(sb).activeID() == c.ids[active] })
	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "cfg"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "retention.ms", kmsg.StringPtr("4321")
	rr.Configs = append(rr.Configs, cfg)
	inc.Resources = append(inc.Resources, rr)
	inc.SetVersion(inc.MaxVersion())
	resp, err := callWith(ctx, c.tls.admin.Dialer(nil, nil), c.listener(sb).Addr().String(), "test", inc)
	if err != nil {
		t.Fatal(err)
	}
	if ec := resp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode; ec != 0 {
		t.Fatalf("forwarded alter over TLS: %v", kerr.ErrorForCode(ec))
	}
	c.view(active, func(im *fsmImage) {
		if v, _ := im.TopicByName("cfg").Config("retention.ms"); v != "4321" {
			t.Errorf("retention.ms = %q on the active controller", v)
		}
	})
	// A plain-TCP client gets nothing from a TLS listener.
	if _, err := call(ctx, c.listener(sb).Addr().String(), "plain", kmsg.NewPtrMetadataRequest()); err == nil {
		t.Fatal("a plain-TCP request was answered by a TLS listener")
	}
}

// TestTLSRotation: every voter's and broker 1's certificates are replaced
// and reloaded while brokers heartbeat and topics are created. Clients
// connected before keep working, new connections see the new
// certificates, and no broker is fenced.
func TestTLSRotation(t *testing.T) {
	c := newTestCluster(t, clusterOpts{tls: true})
	c.startBrokers(2)
	admin := kadm.NewClient(c.client())
	ctx := ctxT(t)
	if res, err := admin.CreateTopics(ctx, 1, 2, nil, "before"); err != nil || res.Error() != nil {
		t.Fatalf("%v %v", err, res.Error())
	}
	old := map[int]string{}
	for i, r := range c.tls.voters {
		old[i] = r.Leaf().SerialNumber.String()
		c.tls.pki.Voter(c.ids[i])
		if err := r.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	b1 := c.tls.broker(1)
	oldBroker := b1.Leaf().SerialNumber.String()
	c.tls.pki.Broker(1)
	if err := b1.Reload(); err != nil {
		t.Fatal(err)
	}
	if b1.Leaf().SerialNumber.String() == oldBroker {
		t.Fatal("broker 1's certificate did not change")
	}
	// The client connected before the rotation still creates topics.
	if res, err := admin.CreateTopics(ctx, 1, 2, nil, "after"); err != nil || res.Error() != nil {
		t.Fatalf("after rotation, on the old connections: %v %v", err, res.Error())
	}
	// New connections present the new certificates.
	for i := range c.ids {
		conn, err := tls.Dial("tcp", c.listener(i).Addr().String(), c.tls.admin.ClientConfig("127.0.0.1", nil))
		if err != nil {
			t.Fatalf("new connection to voter %d: %v", c.ids[i], err)
		}
		got := conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
		conn.Close()
		if got == old[i] || got != c.tls.voters[i].Leaf().SerialNumber.String() {
			t.Fatalf("voter %d presented serial %s (old %s)", c.ids[i], got, old[i])
		}
	}
	// A fresh client, and broker 1 on a fresh connection with its new
	// certificate, are served.
	if res, err := kadm.NewClient(c.client()).CreateTopics(ctx, 1, 2, nil, "fresh"); err != nil || res.Error() != nil {
		t.Fatalf("fresh client after rotation: %v %v", err, res.Error())
	}
	fresh := c.client(c.brokerTLS(1)...)
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.BrokerID, hb.BrokerEpoch = 1, c.broker(1).epoch.Load()
	if got := c.toControllerRetry(t, fresh, hb, heartbeatCode).(*kmsg.BrokerHeartbeatResponse); got.ErrorCode != 0 {
		t.Fatalf("broker 1 with its new certificate: %v", kerr.ErrorForCode(got.ErrorCode))
	}
	c.view(c.active(10*time.Second), func(im *fsmImage) {
		for _, id := range []int32{1, 2} {
			if b := im.Broker(id); b == nil || b.Fenced {
				t.Errorf("broker %d fenced across the rotation", id)
			}
		}
	})
}

// TestAuthorizeBrokerRules checks the rule table directly, and that each
// refusal is logged.
func TestAuthorizeBrokerRules(t *testing.T) {
	pki := tlstest.NewPKI(t, "CA")
	issue := func(name string, uris ...*url.URL) *tls.ConnectionState {
		is, err := pki.CA.Issue(tlsconfig.Leaf{CommonName: name, URIs: uris, Client: true, Validity: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return &tls.ConnectionState{PeerCertificates: []*x509.Certificate{is.Cert}}
	}
	var logs bytes.Buffer
	l := &Listener{log: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})}
	broker2 := issue("broker-2", tlsconfig.BrokerURI(2))
	voter := issue("voter-1001", tlsconfig.VoterURI(1001))
	admin := issue("admin")
	reqs := func(id int32) []kmsg.Request {
		reg := kmsg.NewPtrBrokerRegistrationRequest()
		reg.BrokerID = id
		hb := kmsg.NewPtrBrokerHeartbeatRequest()
		hb.BrokerID = id
		ap := kmsg.NewPtrAlterPartitionRequest()
		ap.BrokerID = id
		ub := kmsg.NewPtrUnregisterBrokerRequest()
		ub.BrokerID = id
		return []kmsg.Request{reg, hb, ap, ub}
	}
	code := func(r kmsg.Response) int16 {
		switch r := r.(type) {
		case *kmsg.BrokerRegistrationResponse:
			return r.ErrorCode
		case *kmsg.BrokerHeartbeatResponse:
			return r.ErrorCode
		case *kmsg.AlterPartitionResponse:
			return r.ErrorCode
		case *kmsg.UnregisterBrokerResponse:
			return r.ErrorCode
		}
		return -1
	}
	cases := []struct {
		name    string
		state   *tls.ConnectionState
		id      int32
		allowed bool
	}{
		{"plain connection", nil, 3, true},
		{"broker 2 as itself", broker2, 2, true},
		{"broker 2 as broker 3", broker2, 3, false},
		{"voter certificate", voter, 2, false},
		{"admin certificate", admin, 2, false},
		{"TLS without a certificate", &tls.ConnectionState{}, 2, false},
	}
	for _, tc := range cases {
		for _, req := range reqs(tc.id) {
			denied := l.authorizeBroker(&kafkawire.Conn{TLS: tc.state}, req)
			if tc.allowed != (denied == nil) {
				t.Errorf("%s, %s: allowed=%v", tc.name, kmsg.NameForKey(req.Key()), denied == nil)
				continue
			}
			if denied != nil && code(denied) != kerr.ClusterAuthorizationFailed.Code {
				t.Errorf("%s, %s: code %d", tc.name, kmsg.NameForKey(req.Key()), code(denied))
			}
		}
	}
	// Other requests are not the rule's business.
	if l.authorizeBroker(&kafkawire.Conn{TLS: admin}, kmsg.NewPtrCreateTopicsRequest()) != nil {
		t.Error("CreateTopics refused by the broker identity rule")
	}
	out := logs.String()
	if n := strings.Count(out, "refused a broker request"); n != 16 {
		t.Errorf("%d refusals logged, want 16:\n%s", n, out)
	}
	if !strings.Contains(out, "the client certificate names another broker") || !strings.Contains(out, "principal=User:broker-2") {
		t.Errorf("refusal lines do not say why or who:\n%s", out)
	}
}
