package server

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig/tlstest"
	"github.com/ctrlquorum/ctrlquorum/voter"
)

// TestTLSCluster runs two voters and a broker over mutual TLS: raft
// between the voters, the broker's registration and heartbeats, the
// controller's control requests to the broker and an admin client all go
// over TLS with the certificates of the test CA. The broker registers and
// is unfenced, a topic created through the listener with a client
// certificate reaches the broker, a certificate naming another broker
// cannot register, and a client certificate cannot send the broker
// control requests.
func TestTLSCluster(t *testing.T) {
	pki := tlstest.NewPKI(t, "server test CA")
	ids := []int32{1001, 1002}
	var peers []VoterPeer
	for _, id := range ids {
		peers = append(peers, VoterPeer{ID: id, Raft: freeAddr(t), Listener: freeAddr(t)})
	}
	var voters []*Server
	var cfgs []Config
	for _, p := range peers {
		cfgs = append(cfgs, Config{
			NodeID: p.ID, Voter: true, RaftAddr: p.Raft, Listener: p.Listener, Voters: peers,
			DataDir: t.TempDir(), SessionTimeout: 2 * time.Second, VoterOptions: voter.FastTimeouts,
			TLS: pki.Reloader(pki.Voter(p.ID)),
		})
	}
	formatAll(t, cfgs...)
	for _, cfg := range cfgs {
		s, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		voters = append(voters, s)
	}
	b1, err := Start(Config{
		NodeID: 1, Broker: true, BrokerID: 1, BrokerListener: "127.0.0.1:0", Voters: peers,
		SessionTimeout: 2 * time.Second, HeartbeatInterval: 100 * time.Millisecond,
		TLS: pki.Reloader(pki.Broker(1)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b1.Close() })
	waitFor(t, 30*time.Second, "broker 1 registered and unfenced over TLS", func() bool {
		st := b1.Agent.Status()
		return st.Registered && !st.Fenced
	})
	// Given no cluster id, the broker took the controllers'.
	want := voters[0].Cfg().ClusterID
	waitFor(t, 10*time.Second, "broker 1 to report the voters' cluster id "+want, func() bool {
		return want != "" && b1.Agent.ClusterID() == want
	})

	// An admin client with a client certificate creates a topic through a
	// voter's listener; the controller delivers it to the broker over TLS.
	admin := pki.Reloader(pki.Client("admin"))
	cl, err := kgo.NewClient(kgo.SeedBrokers(peers[0].Listener, peers[1].Listener),
		kgo.Dialer(admin.Dialer(&net.Dialer{Timeout: 10 * time.Second}, nil)), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).CreateTopics(ctx, 2, 1, nil, "over-tls")
	if err != nil || res.Error() != nil {
		t.Fatalf("CreateTopics over TLS: %v %v", err, res.Error())
	}
	waitFor(t, 30*time.Second, "the topic's partitions on broker 1", func() bool {
		_, ok0 := b1.Agent.Partition("over-tls", 0)
		_, ok1 := b1.Agent.Partition("over-tls", 1)
		return ok0 && ok1
	})

	// A broker whose certificate names broker 3 cannot register as broker 2.
	// (server.Start refuses that configuration outright, so the agent is
	// started on its own.)
	logs := &testkit.Log{}
	wrong := pki.Reloader(pki.Broker(3))
	a2, err := broker.Start(broker.Config{
		BrokerID: 2, Listener: "127.0.0.1:0", Controllers: []string{peers[0].Listener, peers[1].Listener},
		HeartbeatInterval: 100 * time.Millisecond, TLS: wrong, Voters: ids,
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: logs}),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	waitFor(t, 30*time.Second, "broker 2's registration refused with CLUSTER_AUTHORIZATION_FAILED", func() bool {
		return strings.Contains(logs.String(), "CLUSTER_AUTHORIZATION_FAILED")
	})
	if a2.Status().Registered {
		t.Fatal("broker 2 registered with broker 3's certificate")
	}
	reg := kmsg.NewPtrBrokerRegistrationRequest()
	reg.BrokerID, reg.IncarnationID = 2, [16]byte{2}
	l := kmsg.NewBrokerRegistrationRequestListener()
	l.Name, l.Host, l.Port = "PLAINTEXT", "127.0.0.1", 9
	reg.Listeners = append(reg.Listeners, l)
	if code := askTLS(t, ctx, wrong.Dialer(nil, tlsconfig.Voters(ids...)), peers[0].Listener, reg).(*kmsg.BrokerRegistrationResponse).ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("registration as broker 2 with broker 3's certificate: %v", kerr.ErrorForCode(code))
	}
	// The broker agent takes control requests only from a voter's
	// certificate.
	lai := kmsg.NewPtrLeaderAndISRRequest()
	lai.ControllerID, lai.ControllerEpoch = 1001, 1<<20
	if code := askTLS(t, ctx, admin.Dialer(nil, nil), b1.Agent.Addr(), lai).(*kmsg.LeaderAndISRResponse).ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("LeaderAndIsr with a client certificate: %v", kerr.ErrorForCode(code))
	}
	if st := b1.Agent.Status(); st.ControllerEpoch >= 1<<20 {
		t.Fatalf("the refused LeaderAndIsr moved the controller epoch to %d", st.ControllerEpoch)
	}

	// A reload with unchanged files succeeds; everything keeps working.
	for _, s := range append(voters, b1) {
		if err := s.ReloadTLS(); err != nil {
			t.Fatalf("ReloadTLS: %v", err)
		}
	}
	if res, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 1, nil, "after-reload"); err != nil || res.Error() != nil {
		t.Fatalf("CreateTopics after reload: %v %v", err, res.Error())
	}
}

func askTLS(t *testing.T, ctx context.Context, dial kafkaclient.DialFunc, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	conn, err := kafkaclient.Dial(ctx, addr, kafkaclient.Options{ClientID: "test", Dial: dial})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Pick(req, 0); err != nil {
		t.Fatal(err)
	}
	resp, err := conn.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestTLSCertificateMustNameTheNode: a node's certificate must name its
// voter id and broker id.
func TestTLSCertificateMustNameTheNode(t *testing.T) {
	pki := tlstest.NewPKI(t, "server test CA")
	raft, lis := freeAddr(t), freeAddr(t)
	cfg := Config{NodeID: 1001, Voter: true, RaftAddr: raft, Listener: lis, DataDir: t.TempDir(),
		Voters: []VoterPeer{{ID: 1001, Raft: raft, Listener: lis}}, TLS: pki.Reloader(pki.Voter(1002))}
	if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), "TLS: ") {
		t.Fatalf("voter 1001 with voter 1002's certificate: %v", err)
	}
	bcfg := Config{NodeID: 2, Broker: true, BrokerID: 2, BrokerListener: "127.0.0.1:0", Controllers: []string{lis},
		TLS: pki.Reloader(pki.Broker(3))}
	if err := bcfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), "TLS: ") {
		t.Fatalf("broker 2 with broker 3's certificate: %v", err)
	}
	if err := (&Server{}).ReloadTLS(); err == nil {
		t.Fatal("ReloadTLS without TLS succeeded")
	}
}
