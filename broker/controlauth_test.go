package broker_test

import (
	"context"
	"crypto/tls"
	"net"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig/tlstest"
)

// agentState is everything a control request can change on an agent.
type agentState struct {
	Status     broker.Status
	Partitions []broker.PartitionState
	Brokers    []broker.BrokerInfo
	ControlLog []broker.ControlRecord
	HostCalls  int
	Leading    []broker.TopicPartition
	Following  []broker.TopicPartition
	Stopped    []broker.TopicPartition
}

func stateOf(a *broker.Agent, h *broker.MemoryHost) agentState {
	return agentState{Status: a.Status(), Partitions: a.Partitions(), Brokers: a.Brokers(), ControlLog: a.ControlLog(),
		HostCalls: h.Calls(), Leading: h.Leading(), Following: h.Following(), Stopped: h.Stopped()}
}

// dialTLS returns a dial function that presents certs, accepts only the
// agent's broker certificate, and records the local address of the TCP
// connection, which is what the agent logs as the remote.
func dialTLS(certs *tlsconfig.Reloader, local *string) kafkaclient.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		raw, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		*local = raw.LocalAddr().String()
		tc := tls.Client(raw, certs.ClientConfig("", tlsconfig.Broker(1)))
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, err
		}
		return tc, nil
	}
}

// sendControl sends one request on a connection of its own and returns
// the response's top-level error code, the local address of the
// connection, and the error of a connection that was refused.
func sendControl(t *testing.T, certs *tlsconfig.Reloader, addr string, offset uint64, req kmsg.Request) (int16, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var local string
	conn, err := kafkaclient.Dial(ctx, addr, kafkaclient.Options{ClientID: kafkaclient.ControlClientID(1001, offset), Dial: dialTLS(certs, &local)})
	if err != nil {
		return 0, local, err
	}
	defer conn.Close()
	if err := conn.Pick(req, 0); err != nil {
		t.Fatal(err)
	}
	resp, err := conn.Request(ctx, req)
	if err != nil {
		return 0, local, err
	}
	switch r := resp.(type) {
	case *kmsg.LeaderAndISRResponse:
		return r.ErrorCode, local, nil
	case *kmsg.UpdateMetadataResponse:
		return r.ErrorCode, local, nil
	case *kmsg.StopReplicaResponse:
		return r.ErrorCode, local, nil
	}
	t.Fatalf("unexpected response %T", resp)
	return 0, "", nil
}

// TestControlRequestsNeedAConfiguredVoter runs an agent with a broker
// certificate and voters 1001–1003 configured, seeds it with state from
// voter 1001, then sends it LeaderAndIsr, UpdateMetadata and StopReplica
// as a succession of identities. Every request is one that would change a
// lot if served: a controller epoch far ahead, a new leader and leader
// epoch for the seeded partition, a new topic, a new live broker list, a
// deletion. A certificate of another CA (even one naming voter 1001)
// fails the handshake; a broker's certificate, one naming a voter that is
// not configured, and a plain client certificate are answered
// CLUSTER_AUTHORIZATION_FAILED. For each refusal nothing the agent holds
// has moved — epochs, metadata offset, partitions, brokers, control log,
// host calls — and a log line names the identity and the connection. The
// same requests from configured voter 1002 are then accepted.
func TestControlRequestsNeedAConfiguredVoter(t *testing.T) {
	pki := tlstest.NewPKI(t, "cluster CA")
	other := tlstest.NewPKI(t, "foreign CA")

	logs := &testkit.JSONLog{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", logs.String())
		}
	})
	host := broker.NewMemoryHost()
	a := startAgent(t, broker.Config{BrokerID: 1, Host: host, TLS: pki.Reloader(pki.Broker(1)), Voters: []int32{1001, 1002, 1003},
		Logger: logs.Logger()})

	// The seeded state, from the active controller.
	seeded := part{topic: "a", id: topicA, p: 0, leader: 1, le: 3, pe: 3, isr: []int32{1, 2}, reps: []int32{1, 2}}
	v1001 := pki.Reloader(pki.Voter(1001))
	for _, req := range []kmsg.Request{lai(5, -1, seeded), um(5, -1, []liveBroker{{1, a.Addr()}, {2, "127.0.0.1:9093"}}, seeded)} {
		if code, _, err := sendControl(t, v1001, a.Addr(), 10, req); err != nil || code != 0 {
			t.Fatalf("seeding %s from voter 1001: code %v, error %v", kmsg.NameForKey(req.Key()), kerr.ErrorForCode(code), err)
		}
	}
	if st := a.Status(); st.ControllerEpoch != 5 || st.MetadataOffset != 10 {
		t.Fatalf("after seeding: %+v", st)
	}

	// The hostile requests: controller epoch 100, metadata offset 999.
	takeover := seeded
	takeover.leader, takeover.le, takeover.pe, takeover.isr = 2, 9, 9, []int32{2}
	fresh := part{topic: "b", id: topicB, p: 0, leader: 1, le: 0, pe: 0, isr: []int32{1}, reps: []int32{1}}
	apis := []struct {
		name string
		req  func() kmsg.Request
		// served checks that an accepted request took effect.
		served func(t *testing.T)
	}{
		{"LeaderAndIsr", func() kmsg.Request { return lai(100, -1, takeover, fresh) }, func(t *testing.T) {
			if p, ok := a.Partition("a", 0); !ok || p.Leader != 2 || p.LeaderEpoch != 9 {
				t.Errorf("a-0 after an accepted LeaderAndIsr: %+v", p)
			}
			if _, ok := a.Partition("b", 0); !ok {
				t.Error("b-0 not created by an accepted LeaderAndIsr")
			}
		}},
		{"UpdateMetadata", func() kmsg.Request { return um(100, -1, []liveBroker{{7, "127.0.0.1:1"}}, takeover) }, func(t *testing.T) {
			if bs := a.Brokers(); len(bs) != 1 || bs[0].ID != 7 {
				t.Errorf("live brokers after an accepted UpdateMetadata: %+v", bs)
			}
		}},
		{"StopReplica", func() kmsg.Request { return stopReq(100, -1, "a", 0, 9, true) }, func(t *testing.T) {
			if !slices.Contains(host.Deleted(), broker.TopicPartition{Topic: "a", Partition: 0}) {
				t.Errorf("a-0 not deleted by an accepted StopReplica: %v", host.Deleted())
			}
		}},
	}

	// The stranger of another CA trusts the cluster's CA as well as its
	// own, so that the handshake fails on the agent's verdict alone.
	foreign := other.Voter(1001)
	foreign.CA = filepath.Join(t.TempDir(), "both.crt")
	if err := tlsconfig.WriteFileAtomic(foreign.CA, append(append([]byte{}, other.CA.CertPEM...), pki.CA.CertPEM...), 0o644); err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		name  string
		files tlsconfig.Files
		// handshake: refused at the handshake rather than answered.
		handshake bool
	}{
		{"another CA naming configured voter 1001", foreign, true},
		{"same CA, broker 2", pki.Broker(2), false},
		{"same CA, the agent's own broker id", pki.Issue("broker-1-again", tlsconfig.BrokerURI(1)), false},
		{"same CA, unconfigured voter 1009", pki.Voter(1009), false},
		{"same CA, client certificate", pki.Client("admin"), false},
	}
	for _, id := range refused {
		certs := pki.Reloader(id.files)
		for _, api := range apis {
			t.Run(id.name+"/"+api.name, func(t *testing.T) {
				before := stateOf(a, host)
				req := api.req()
				code, local, err := sendControl(t, certs, a.Addr(), 999, req)
				if id.handshake {
					if err == nil {
						t.Fatalf("answered over a certificate of another CA (code %v)", kerr.ErrorForCode(code))
					}
					// The agent logs the failed handshake after its alert
					// has gone out, so the client may see it first.
					var lines []map[string]any
					waitFor(t, "the refused handshake in the agent's log", func() bool {
						lines = logs.Find(t, "closing connection: TLS handshake failed", map[string]string{"remote": local})
						return len(lines) > 0
					})
					if reason, _ := lines[0]["reason"].(string); !strings.Contains(reason, "certificate signed by unknown authority") {
						t.Errorf("handshake refused for another reason: %q", reason)
					}
					if uris, _ := lines[0]["unverified_uris"].(string); uris != tlsconfig.VoterURI(1001).String() {
						t.Errorf("the log line does not name the identity the certificate claimed: %v", lines[0])
					}
				} else {
					if err != nil {
						t.Fatalf("connection failed instead of an answer: %v", err)
					}
					if code != kerr.ClusterAuthorizationFailed.Code {
						t.Fatalf("answered %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
					}
					lines := logs.Find(t, "refused a control request", map[string]string{
						"remote": local, "api": kmsg.NameForKey(req.Key()), "certificate": certs.Identity().String()})
					if len(lines) != 1 {
						t.Fatalf("%d log lines for the refusal naming %s from %s, want 1", len(lines), certs.Identity(), local)
					}
				}
				if after := stateOf(a, host); !reflect.DeepEqual(before, after) {
					t.Fatalf("a refused request changed the agent:\nbefore %+v\nafter  %+v", before, after)
				}
			})
		}
	}

	// The same requests from a configured voter are served.
	v1002 := pki.Reloader(pki.Voter(1002))
	for _, api := range apis {
		t.Run("configured voter 1002/"+api.name, func(t *testing.T) {
			n := len(a.ControlLog())
			code, local, err := sendControl(t, v1002, a.Addr(), 999, api.req())
			if err != nil || code != 0 {
				t.Fatalf("code %v, error %v", kerr.ErrorForCode(code), err)
			}
			if st := a.Status(); st.ControllerEpoch != 100 || st.MetadataOffset != 999 {
				t.Errorf("status after an accepted request: %+v", st)
			}
			if len(a.ControlLog()) <= n {
				t.Error("an accepted request left no record in the control log")
			}
			if lines := logs.Find(t, "refused a control request", map[string]string{"remote": local}); len(lines) != 0 {
				t.Errorf("an accepted request was logged as refused: %v", lines)
			}
			api.served(t)
		})
	}
}
