package listener

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/sasl"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig/tlstest"
)

const (
	adminUser = "admin"
	adminPass = "admin-secret"
)

func scram512(user, pass string) kgo.Opt {
	return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())
}

func scram256(user, pass string) kgo.Opt {
	return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism())
}

// newSASLCluster runs three voters whose listeners require SCRAM, with
// User:admin a super user created at bootstrap, and three brokers that
// log in as admin. The voters' and listeners' log lines also go to logs.
func newSASLCluster(t *testing.T, logs io.Writer) *testCluster {
	c := newTestCluster(t, clusterOpts{
		logs: logs,
		security: SecurityConfig{
			SASLMechanisms: []string{sasl.ScramSHA256, sasl.ScramSHA512, sasl.Plain},
			SuperUsers:     []string{"User:" + adminUser},
			BootstrapUsers: []BootstrapUser{{Name: adminUser, Password: adminPass, Mechanism: sasl.ScramSHA512}},
			PeerSASL:       scram.Auth{User: adminUser, Pass: adminPass}.AsSha512Mechanism(),
		},
		clientOpts: []kgo.Opt{scram512(adminUser, adminPass)},
	})
	waitFor(t, 30*time.Second, "the bootstrap user in every voter's image", func() bool {
		for i := range 3 {
			n := 0
			c.view(i, func(im *fsm.Image) { n = len(im.Security().ScramCredentials(adminUser)) })
			if n != 1 {
				return false
			}
		}
		return true
	})
	c.startBrokers(3)
	c.waitBrokers(3)
	return c
}

// bareClient is a kgo client with only the options given: no harness
// login.
func (c *testCluster) bareClient(t *testing.T, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addrs()...), kgo.RetryTimeout(5 * time.Second),
		kgo.RequestRetries(2)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// wantDenialLogged fails the test unless exactly one "request denied"
// line names the principal, the operation and the resource, with the
// reason and the client's address.
func wantDenialLogged(t *testing.T, logs *testkit.JSONLog, principal, operation, resource string) {
	t.Helper()
	lines := logs.Find(t, "request denied", map[string]string{"principal": principal, "operation": operation, "resource": resource})
	if len(lines) != 1 {
		t.Fatalf("%d lines log the denial of %s %s to %s, want 1: %v", len(lines), operation, resource, principal, lines)
	}
	if reason, _ := lines[0]["reason"].(string); reason != "no rule allows it" {
		t.Errorf("denial logged with reason %q", reason)
	}
	if remote, _ := lines[0]["remote"].(string); !strings.HasPrefix(remote, "127.0.0.1:") {
		t.Errorf("denial logged with remote %q", remote)
	}
}

// unanswered sends req on a connection of its own without logging in, and
// returns the error of reading the answer: io.EOF when the server closed
// the connection without sending a byte.
func unanswered(t *testing.T, addr string, req kmsg.Request) error {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	req.SetVersion(APIs()[req.Key()])
	if _, err := conn.Write(kafkaclient.AppendRequest(nil, 1, "anonymous", req)); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	_, err = io.ReadFull(conn, size[:])
	return err
}

// adminState is what the requests of the tests below could change in an
// image: topics, rules, SCRAM users and registered brokers.
type adminState struct {
	Topics  []string
	Rules   []rl.AclRule
	Users   []string
	Brokers []int32
}

func (c *testCluster) adminState(i int) adminState {
	var st adminState
	c.view(i, func(im *fsm.Image) {
		for _, tp := range im.Topics() {
			st.Topics = append(st.Topics, tp.Name)
		}
		slices.Sort(st.Topics)
		st.Rules = slices.Clone(im.Security().Rules())
		st.Users = slices.Sorted(slices.Values(im.Security().Users()))
		for _, b := range im.Brokers() {
			st.Brokers = append(st.Brokers, b.ID)
		}
		slices.Sort(st.Brokers)
	})
	return st
}

func TestSASLAuthenticationAndAuthorization(t *testing.T) {
	logs := &testkit.JSONLog{}
	c := newSASLCluster(t, logs)
	ctx := ctxT(t)
	// kgo answers Metadata from its cache unless asked for authorized
	// operations, and a cached refusal would hide a later grant.
	fresh := kadm.WithAuthorizedOps(ctx)
	_, admin := c.admin()

	// The admin creates alice's credentials over the wire (both
	// mechanisms) and a topic alice will not be allowed to see.
	altered, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-pw"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "bob-pw"},
	})
	if err != nil || altered.Error() != nil {
		t.Fatalf("create users: %v %v", err, altered.Error())
	}
	if res, err := admin.CreateTopics(ctx, 1, 1, nil, "secret"); err != nil || res.Error() != nil {
		t.Fatalf("admin creates a topic: %v %v", err, res.Error())
	}

	t.Run("no credentials", func(t *testing.T) {
		// As a Kafka broker does, the listener closes the connection on
		// the first request that is neither ApiVersions nor part of
		// authentication, without answering it. Each such request counts
		// once, on the listener it reached, as unauthenticated and as
		// nothing else, and nothing it asked for happens.
		active := c.active(10 * time.Second)
		before := c.adminState(active)
		topic := kmsg.NewCreateTopicsRequestTopic()
		topic.Topic, topic.NumPartitions, topic.ReplicationFactor = "anonymous-topic", 1, 1
		create := kmsg.NewPtrCreateTopicsRequest()
		create.Topics = append(create.Topics, topic)
		rule := kmsg.NewCreateACLsRequestCreation()
		rule.ResourceType, rule.ResourceName, rule.ResourcePatternType = kmsg.ACLResourceTypeCluster, rl.ClusterResourceName, kmsg.ACLResourcePatternTypeLiteral
		rule.Principal, rule.Host, rule.Operation, rule.PermissionType = "User:ANONYMOUS", "*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
		grant := kmsg.NewPtrCreateACLsRequest()
		grant.Creations = append(grant.Creations, rule)
		reg := kmsg.NewPtrBrokerRegistrationRequest()
		reg.BrokerID, reg.ClusterID, reg.IncarnationID = 42, testClusterID, [16]byte{42}
		ln := kmsg.NewBrokerRegistrationRequestListener()
		ln.Name, ln.Host, ln.Port = "PLAINTEXT", "127.0.0.1", 9
		reg.Listeners = append(reg.Listeners, ln)
		for _, l := range []*Listener{c.listener(c.standbyIndex(active)), c.listener(active)} {
			for _, req := range []kmsg.Request{kmsg.NewPtrMetadataRequest(), create, grant, reg} {
				mine, all := l.SecurityCounts(), c.securityCounts()
				if err := unanswered(t, l.Addr().String(), req); !errors.Is(err, io.EOF) {
					t.Fatalf("unauthenticated %s to %s: read %v, want the connection closed without an answer (EOF)",
						kmsg.NameForKey(req.Key()), l.Addr(), err)
				}
				// The count is taken before the connection is closed.
				// (Logins are not compared: the brokers and the voters
				// log in on their own connections meanwhile.)
				mine.Unauthenticated++
				all.Unauthenticated++
				same := func(a, b SecurityCounts) bool {
					return a.Unauthenticated == b.Unauthenticated && a.Denials == b.Denials && a.AuthenticationFailures == b.AuthenticationFailures
				}
				if got := l.SecurityCounts(); !same(got, mine) {
					t.Fatalf("after an unauthenticated %s, the listener counts %+v, want %+v", kmsg.NameForKey(req.Key()), got, mine)
				}
				if got := c.securityCounts(); !same(got, all) {
					t.Fatalf("after an unauthenticated %s, the listeners count %+v, want %+v", kmsg.NameForKey(req.Key()), got, all)
				}
			}
		}
		// Anything these requests had set in motion would be committed
		// before a topic the admin creates now.
		if res, err := admin.CreateTopics(ctx, 1, 1, nil, "after-anonymous"); err != nil || res.Error() != nil {
			t.Fatalf("admin creates a topic: %v %v", err, res.Error())
		}
		c.converged(30 * time.Second)
		want := before
		want.Topics = slices.Sorted(slices.Values(append(slices.Clone(before.Topics), "after-anonymous")))
		for i := range c.ids {
			if got := c.adminState(i); !reflect.DeepEqual(got, want) {
				t.Fatalf("voter %d's image after the unauthenticated requests: %+v, want %+v", c.ids[i], got, want)
			}
		}

		_, adm := c.bareClient(t)
		if _, err := adm.ListTopics(ctx); err == nil {
			t.Fatal("a client without credentials listed topics")
		}
	})

	t.Run("wrong password", func(t *testing.T) {
		_, adm := c.bareClient(t, scram256("alice", "not-her-password"))
		_, err := adm.ListTopics(ctx)
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
		}
	})

	t.Run("unknown user", func(t *testing.T) {
		_, adm := c.bareClient(t, scram256("mallory", "x"))
		if _, err := adm.ListTopics(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("unknown user: %v, want SASL_AUTHENTICATION_FAILED", err)
		}
	})

	t.Run("PLAIN refused without TLS", func(t *testing.T) {
		_, adm := c.bareClient(t, kgo.SASL(plain.Auth{User: "alice", Pass: "alice-pw"}.AsMechanism()))
		if _, err := adm.ListTopics(ctx); !errors.Is(err, kerr.UnsupportedSaslMechanism) {
			t.Fatalf("PLAIN over plaintext: %v, want UNSUPPORTED_SASL_MECHANISM", err)
		}
	})

	_, alice := c.bareClient(t, scram256("alice", "alice-pw"))
	t.Run("right password, no rule", func(t *testing.T) {
		res, err := alice.CreateTopics(ctx, 1, 1, nil, "alice-orders")
		if err != nil || !errors.Is(res["alice-orders"].Err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("create without a rule: %v %+v, want TOPIC_AUTHORIZATION_FAILED", err, res["alice-orders"])
		}
		topics, err := alice.ListTopics(fresh)
		if err != nil || topics.Has("secret") {
			t.Fatalf("alice lists topics she may not describe: %v %v", err, topics.Names())
		}
		// kadm turns a topic's authorization error into the call's.
		if _, err := alice.Metadata(fresh, "secret"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("named topic without a rule: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		el, err := alice.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"secret": {0: {}}})
		if !errors.Is(err, kerr.ClusterAuthorizationFailed) && !(err == nil && errors.Is(el["secret"][0].Err, kerr.ClusterAuthorizationFailed)) {
			t.Fatalf("elect without a rule: %v %+v", err, el)
		}
		res2, err := alice.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("x").Operations(kadm.OpAll))
		if err != nil || len(res2) != 1 || !errors.Is(res2[0].Err, kerr.ClusterAuthorizationFailed) {
			t.Fatalf("alice grants herself a rule: %v %+v", err, res2)
		}
	})

	t.Run("denials logged", func(t *testing.T) {
		// Each refusal above is logged before it is answered, by the
		// listener that decided it: who asked, for what, on what.
		wantDenialLogged(t, logs, "User:alice", "Create", "Topic:alice-orders")
		wantDenialLogged(t, logs, "User:alice", "Describe", "Topic:secret")
		// ElectLeaders, then CreateACLs.
		lines := logs.Find(t, "request denied", map[string]string{"principal": "User:alice", "operation": "Alter", "resource": "Cluster:kafka-cluster"})
		if len(lines) != 2 {
			t.Fatalf("%d lines log alice's denied cluster alterations, want 2: %v", len(lines), lines)
		}
	})

	// The admin lets alice do everything on topics starting with
	// "alice-", except delete "alice-keep".
	created, err := admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().
		Topics("alice-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAll))
	if err != nil || len(created) != 1 || created[0].Err != nil {
		t.Fatalf("create allow rule: %v %+v", err, created)
	}
	created, err = admin.CreateACLs(ctx, kadm.NewACLs().Deny("User:alice").DenyHosts().
		Topics("alice-keep").Operations(kadm.OpDelete))
	if err != nil || len(created) != 1 || created[0].Err != nil {
		t.Fatalf("create deny rule: %v %+v", err, created)
	}
	c.converged(30 * time.Second)

	t.Run("permitted principal", func(t *testing.T) {
		res, err := alice.CreateTopics(ctx, 1, 3, nil, "alice-orders", "alice-keep", "bob-orders")
		if err != nil {
			t.Fatal(err)
		}
		if res["alice-orders"].Err != nil || res["alice-keep"].Err != nil {
			t.Fatalf("allowed creations failed: %+v", res)
		}
		if !errors.Is(res["bob-orders"].Err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("creation outside the rule: %+v", res["bob-orders"])
		}
		// The answering voter may be an entry behind the creation.
		var topics kadm.TopicDetails
		waitFor(t, 20*time.Second, "alice-orders in alice's listing", func() bool {
			topics, err = alice.ListTopics(fresh)
			return err == nil && topics.Has("alice-orders")
		})
		if topics.Has("secret") {
			t.Fatalf("alice's listing shows a topic she may not describe: %v", topics.Names())
		}
		del, err := alice.DeleteTopics(ctx, "alice-keep")
		if err != nil || !errors.Is(del["alice-keep"].Err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("deny rule did not hold: %v %+v", err, del)
		}
		del, err = alice.DeleteTopics(ctx, "alice-orders")
		if err != nil || del["alice-orders"].Err != nil {
			t.Fatalf("allowed deletion: %v %+v", err, del)
		}
	})

	t.Run("config resources", func(t *testing.T) {
		// kadm turns a resource's authorization error into the call's.
		if _, err := alice.DescribeTopicConfigs(ctx, "alice-keep", "secret"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("DescribeConfigs of a topic alice may not describe: %v", err)
		}
		if rcs, err := alice.DescribeTopicConfigs(ctx, "alice-keep"); err != nil || len(rcs) != 1 || rcs[0].Err != nil {
			t.Fatalf("DescribeConfigs of her own topic: %v %+v", err, rcs)
		}
		req := kmsg.NewPtrAlterConfigsRequest()
		for _, res := range []struct {
			typ  kmsg.ConfigResourceType
			name string
		}{{kmsg.ConfigResourceTypeTopic, "secret"}, {kmsg.ConfigResourceTypeBroker, "1"}} {
			rr := kmsg.NewAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = res.typ, res.name
			req.Resources = append(req.Resources, rr)
		}
		cl, _ := c.bareClient(t, scram256("alice", "alice-pw"))
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		codes := map[string]int16{}
		for _, r := range resp.Resources {
			codes[r.ResourceName] = r.ErrorCode
		}
		if codes["secret"] != kerr.TopicAuthorizationFailed.Code || codes["1"] != kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("AlterConfigs: %v", codes)
		}
	})

	t.Run("SCRAM-SHA-512 user", func(t *testing.T) {
		_, bob := c.bareClient(t, scram512("bob", "bob-pw"))
		res, err := bob.CreateTopics(ctx, 1, 1, nil, "bob-x")
		if err != nil || !errors.Is(res["bob-x"].Err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("bob without a rule: %v %+v", err, res)
		}
	})

	t.Run("config change through a standby carries the principal", func(t *testing.T) {
		active := c.active(10 * time.Second)
		standby := c.standbyIndex(active)
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		for _, topic := range []string{"alice-keep", "secret"} {
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
			cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			cfg.Name, cfg.Value = "retention.ms", kmsg.StringPtr("1000")
			rr.Configs = append(rr.Configs, cfg)
			req.Resources = append(req.Resources, rr)
		}
		cl, _ := c.bareClient(t, scram256("alice", "alice-pw"))
		resp, err := c.voterBroker(t, cl, c.ids[standby]).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		codes := map[string]int16{}
		for _, r := range resp.(*kmsg.IncrementalAlterConfigsResponse).Resources {
			codes[r.ResourceName] = r.ErrorCode
		}
		if codes["alice-keep"] != 0 || codes["secret"] != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("through standby %d: codes %v", c.ids[standby], codes)
		}
		waitConfigIn(t, c, "alice-keep", "retention.ms", "1000")
	})

	t.Run("rules listed and removed", func(t *testing.T) {
		described, err := admin.DescribeACLs(ctx, kadm.NewACLs().Allow("User:alice").Deny("User:alice").
			AllowHosts().DenyHosts().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny))
		if err != nil || len(described) == 0 {
			t.Fatalf("describe: %v %+v", err, described)
		}
		n := 0
		for _, d := range described {
			if d.Err != nil {
				t.Fatal(d.Err)
			}
			n += len(d.Described)
		}
		if n != 2 {
			t.Fatalf("described %d rules for alice, want 2", n)
		}
		deleted, err := admin.DeleteACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().
			AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny))
		if err != nil {
			t.Fatal(err)
		}
		removed := 0
		for _, d := range deleted {
			removed += len(d.Deleted)
		}
		if removed != 1 {
			t.Fatalf("removed %d allow rules, want 1", removed)
		}
		res, err := alice.CreateTopics(ctx, 1, 1, nil, "alice-again")
		if err != nil || !errors.Is(res["alice-again"].Err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("after removing her rule: %v %+v", err, res)
		}
		c.converged(30 * time.Second)
		c.view(0, func(im *fsm.Image) {
			if rules := im.Security().Rules(); len(rules) != 1 || rules[0].Permission != rl.PermissionDeny {
				t.Fatalf("rules left: %v", rules)
			}
		})
	})

	t.Run("counted", func(t *testing.T) {
		// Wrong password, unknown user, PLAIN without TLS at least; the
		// denials above; the anonymous Metadata.
		if n := c.securityCounts(); n.AuthenticationFailures < 3 || n.Denials < 5 || n.Unauthenticated < 1 || n.Authentications < 3 {
			t.Fatalf("security counters: %+v", n)
		}
	})

	t.Run("credentials described and deleted", func(t *testing.T) {
		d, err := admin.DescribeUserSCRAMs(ctx)
		if err != nil || len(d) != 3 || d["bob"].CredInfos[0].Iterations != 8192 {
			t.Fatalf("describe: %v %+v", err, d)
		}
		altered, err := admin.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha512}}, nil)
		if err != nil || altered.Error() != nil {
			t.Fatalf("delete bob: %v %v", err, altered.Error())
		}
		altered, err = admin.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha512}}, nil)
		if err != nil || !errors.Is(altered["bob"].Err, kerr.ResourceNotFound) {
			t.Fatalf("delete bob twice: %v %+v", err, altered)
		}
		c.converged(30 * time.Second)
		_, bob := c.bareClient(t, scram512("bob", "bob-pw"))
		if _, err := bob.ListTopics(fresh); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("deleted user logs in: %v", err)
		}
	})

	t.Run("cluster actions by rule", func(t *testing.T) {
		// A principal with no rule on the cluster may neither manage
		// reassignments and elections nor act as a broker; each rule
		// opens what it covers in Kafka: Describe lists reassignments,
		// Alter reassigns and elects, ClusterAction registers a broker.
		altered, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "ops", Mechanism: kadm.ScramSha512, Password: "ops-pw"}})
		if err != nil || altered.Error() != nil {
			t.Fatalf("create ops: %v %v", err, altered.Error())
		}
		c.converged(30 * time.Second)
		ops, _ := c.bareClient(t, scram512("ops", "ops-pw"))
		secret, ok := c.partition(c.active(10*time.Second), "secret", 0)
		if !ok {
			t.Fatal("secret-0 not in the image")
		}
		cr := rl.ClusterResourceName
		calls := []struct {
			api string
			op  string
			// send returns the request's top-level error code, or an
			// error when it was served but did not do its work.
			send func() (int16, error)
		}{
			{"ListPartitionReassignments", "Describe", func() (int16, error) {
				req := kmsg.NewPtrListPartitionReassignmentsRequest()
				resp := c.toControllerRetry(t, ops, req, func(r kmsg.Response) int16 { return r.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode })
				return resp.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode, nil
			}},
			{"AlterPartitionAssignments", "Alter", func() (int16, error) {
				// To where it already is: served, and a no-op.
				req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
				rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
				rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
				rp.Partition, rp.Replicas = 0, slices.Clone(secret.Replicas)
				rt.Topic, rt.Partitions = "secret", append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp := c.toControllerRetry(t, ops, req, func(r kmsg.Response) int16 { return r.(*kmsg.AlterPartitionAssignmentsResponse).ErrorCode })
				r := resp.(*kmsg.AlterPartitionAssignmentsResponse)
				if r.ErrorCode == 0 {
					if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 || r.Topics[0].Partitions[0].ErrorCode != 0 {
						return 0, fmt.Errorf("served, but: %+v", r.Topics)
					}
				}
				return r.ErrorCode, nil
			}},
			{"ElectLeaders", "Alter", func() (int16, error) {
				req := kmsg.NewPtrElectLeadersRequest()
				rt := kmsg.NewElectLeadersRequestTopic()
				rt.Topic, rt.Partitions = "secret", []int32{0}
				req.Topics = append(req.Topics, rt)
				resp := c.toControllerRetry(t, ops, req, func(r kmsg.Response) int16 { return r.(*kmsg.ElectLeadersResponse).ErrorCode })
				r := resp.(*kmsg.ElectLeadersResponse)
				if r.ErrorCode == 0 {
					// The preferred replica leads already.
					if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 || r.Topics[0].Partitions[0].ErrorCode != kerr.ElectionNotNeeded.Code {
						return 0, fmt.Errorf("served, but: %+v", r.Topics)
					}
				}
				return r.ErrorCode, nil
			}},
			{"BrokerRegistration", "ClusterAction", func() (int16, error) {
				req := kmsg.NewPtrBrokerRegistrationRequest()
				req.BrokerID, req.ClusterID, req.IncarnationID = 43, testClusterID, [16]byte{43}
				ln := kmsg.NewBrokerRegistrationRequestListener()
				ln.Name, ln.Host, ln.Port = "PLAINTEXT", "127.0.0.1", 9
				req.Listeners = append(req.Listeners, ln)
				resp := c.toControllerRetry(t, ops, req, func(r kmsg.Response) int16 { return r.(*kmsg.BrokerRegistrationResponse).ErrorCode })
				r := resp.(*kmsg.BrokerRegistrationResponse)
				if r.ErrorCode == 0 && r.BrokerEpoch <= 0 {
					return 0, fmt.Errorf("registered with broker epoch %d", r.BrokerEpoch)
				}
				return r.ErrorCode, nil
			}},
		}
		// granted holds the operations ops has a rule for.
		granted := map[string]bool{}
		phases := []struct {
			name string
			op   kadm.ACLOperation
		}{{"", 0}, {"Describe", kadm.OpDescribe}, {"Alter", kadm.OpAlter}, {"ClusterAction", kadm.OpClusterAction}}
		for _, phase := range phases {
			if phase.name != "" {
				created, err := admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:ops").AllowHosts().Clusters().Operations(phase.op))
				if err != nil || len(created) != 1 || created[0].Err != nil {
					t.Fatalf("allow ops %s on the cluster: %v %+v", phase.name, err, created)
				}
				granted[phase.name] = true
				c.converged(30 * time.Second)
			}
			for _, call := range calls {
				denials := c.securityCounts().Denials
				code, err := call.send()
				if err != nil {
					t.Fatalf("%s with ops allowed %v: %v", call.api, granted, err)
				}
				// Alter implies Describe, as in Kafka.
				allowed := granted[call.op] || call.op == "Describe" && granted["Alter"]
				if !allowed {
					if code != kerr.ClusterAuthorizationFailed.Code {
						t.Fatalf("%s with ops allowed %v: %v, want CLUSTER_AUTHORIZATION_FAILED", call.api, granted, kerr.ErrorForCode(code))
					}
					if got := c.securityCounts().Denials; got != denials+1 {
						t.Fatalf("%s refused: %d denials counted, want 1", call.api, got-denials)
					}
					continue
				}
				if code != 0 {
					t.Fatalf("%s with ops allowed %v: %v", call.api, granted, kerr.ErrorForCode(code))
				}
			}
		}
		// Each refusal is logged once: Describe before any rule, Alter
		// (two calls) before the Alter rule, ClusterAction before its own.
		for op, n := range map[string]int{"Describe": 1, "Alter": 4, "ClusterAction": 3} {
			lines := logs.Find(t, "request denied", map[string]string{"principal": "User:ops", "operation": op, "resource": "Cluster:" + cr})
			if len(lines) != n {
				t.Errorf("%d lines log ops denied %s on the cluster, want %d", len(lines), op, n)
			}
		}
		c.converged(30 * time.Second)
		if st := c.adminState(0); !slices.Contains(st.Brokers, 43) {
			t.Fatalf("broker 43 not registered: %v", st.Brokers)
		}
	})
}

// securityCounts sums the listeners' security counters.
func (c *testCluster) securityCounts() SecurityCounts {
	var sum SecurityCounts
	_, ls := c.snapshot()
	for _, l := range ls {
		if l == nil {
			continue
		}
		s := l.SecurityCounts()
		sum.Authentications += s.Authentications
		sum.AuthenticationFailures += s.AuthenticationFailures
		sum.Denials += s.Denials
		sum.Unauthenticated += s.Unauthenticated
	}
	return sum
}

// waitConfigIn waits until the active voter's image shows a topic config.
func waitConfigIn(t *testing.T, c *testCluster, topic, key, want string) {
	t.Helper()
	waitFor(t, 20*time.Second, fmt.Sprintf("%s=%s on %q", key, want, topic), func() bool {
		got := ""
		c.view(c.active(10*time.Second), func(im *fsm.Image) {
			if tp := im.TopicByName(topic); tp != nil {
				got, _ = tp.Config(key)
			}
		})
		return got == want
	})
}

// In dev mode (no SASL, no rules) nothing is checked; the first rule
// turns authorization on for everyone, anonymous clients included.
func TestFirstRuleTurnsAuthorizationOn(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	c.startBrokers(1)
	c.waitBrokers(1)
	ctx := ctxT(t)
	_, adm := c.admin()
	if res, err := adm.CreateTopics(ctx, 1, 1, nil, "before"); err != nil || res.Error() != nil {
		t.Fatalf("dev mode: %v %v", err, res.Error())
	}
	created, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:ANONYMOUS").AllowHosts().
		Topics("open-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAll))
	if err != nil || created[0].Err != nil {
		t.Fatalf("create rule: %v %+v", err, created)
	}
	res, err := adm.CreateTopics(ctx, 1, 1, nil, "open-1", "closed-1")
	if err != nil || res["open-1"].Err != nil || !errors.Is(res["closed-1"].Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("after the first rule: %v %+v", err, res)
	}
	// Nobody may manage rules now: the lockout Kafka also has without a
	// super user.
	created, err = adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:ANONYMOUS").AllowHosts().Clusters().Operations(kadm.OpAll))
	if err != nil || !errors.Is(created[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("an anonymous client adds a cluster rule after authorization turned on: %v %+v", err, created)
	}
}

// Over TLS: a client certificate is a principal of its own, PLAIN is
// offered, clients without a certificate log in with SASL, and a config
// change sent to a standby is authorized on the active voter as the
// client that sent it (the voters' certificates vouch for the principal
// they forward).
func TestTLSClientsCertificatesAndSASL(t *testing.T) {
	c := newTestCluster(t, clusterOpts{tls: true, security: SecurityConfig{
		SASLMechanisms: []string{sasl.ScramSHA512, sasl.Plain},
		SuperUsers:     []string{"User:admin"}, // the harness's admin client certificate
	}})
	c.startBrokers(3)
	c.waitBrokers(3)
	ctx := ctxT(t)
	fresh := kadm.WithAuthorizedOps(ctx)
	_, admin := c.admin()
	if altered, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Password: "carol-pw"}}); err != nil || altered.Error() != nil {
		t.Fatalf("create carol: %v %v", err, altered.Error())
	}
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:carol").AllowHosts().Topics("carol-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAll),
		kadm.NewACLs().Allow("User:dave").AllowHosts().Topics("dave-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAll),
	} {
		if res, err := admin.CreateACLs(ctx, b); err != nil || res[0].Err != nil {
			t.Fatalf("create rule: %v %+v", err, res)
		}
	}
	c.converged(30 * time.Second)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.tls.pki.CA.CertPEM)
	noCert := kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})

	t.Run("PLAIN over TLS without a certificate", func(t *testing.T) {
		_, carol := c.bareClient(t, noCert, kgo.SASL(plain.Auth{User: "carol", Pass: "carol-pw"}.AsMechanism()))
		res, err := carol.CreateTopics(ctx, 1, 3, nil, "carol-1", "dave-1")
		if err != nil || res["carol-1"].Err != nil || !errors.Is(res["dave-1"].Err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("carol over PLAIN: %v %+v", err, res)
		}
		_, wrong := c.bareClient(t, noCert, kgo.SASL(plain.Auth{User: "carol", Pass: "nope"}.AsMechanism()))
		if _, err := wrong.ListTopics(fresh); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("PLAIN with a wrong password: %v", err)
		}
	})

	t.Run("no certificate and no SASL", func(t *testing.T) {
		_, anon := c.bareClient(t, noCert)
		if _, err := anon.ListTopics(fresh); err == nil {
			t.Fatal("a TLS client with neither certificate nor SASL listed topics")
		}
	})

	dave := c.tls.pki.Reloader(c.tls.pki.Client("dave"))
	daveDial := kgo.Dialer(dave.Dialer(&net.Dialer{Timeout: 10 * time.Second}, nil))
	t.Run("client certificate principal", func(t *testing.T) {
		_, d := c.bareClient(t, daveDial)
		res, err := d.CreateTopics(ctx, 1, 3, nil, "dave-1", "carol-2")
		if err != nil || res["dave-1"].Err != nil || !errors.Is(res["carol-2"].Err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("dave by certificate: %v %+v", err, res)
		}
	})

	t.Run("forwarded as the client", func(t *testing.T) {
		active := c.active(10 * time.Second)
		sb := c.standbyIndex(active)
		waitFor(t, 10*time.Second, "the standby to know the leader", func() bool { return c.listener(sb).activeID() == c.ids[active] })
		inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
		for _, topic := range []string{"dave-1", "carol-1"} {
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
			cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			cfg.Name, cfg.Value = "retention.ms", kmsg.StringPtr("777")
			rr.Configs = append(rr.Configs, cfg)
			inc.Resources = append(inc.Resources, rr)
		}
		inc.SetVersion(inc.MaxVersion())
		resp, err := callWith(ctx, dave.Dialer(nil, nil), c.listener(sb).Addr().String(), "dave", inc)
		if err != nil {
			t.Fatal(err)
		}
		codes := map[string]int16{}
		for _, r := range resp.(*kmsg.IncrementalAlterConfigsResponse).Resources {
			codes[r.ResourceName] = r.ErrorCode
		}
		if codes["dave-1"] != 0 || codes["carol-1"] != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("dave through standby %d: %v", c.ids[sb], codes)
		}
		waitConfigIn(t, c, "dave-1", "retention.ms", "777")
		// A client cannot pass itself off as a forwarding voter: the
		// principal in the client id counts only from a voter's
		// certificate.
		spoof := kmsg.NewPtrCreateTopicsRequest()
		st := kmsg.NewCreateTopicsRequestTopic()
		st.Topic, st.NumPartitions, st.ReplicationFactor = "carol-spoofed", 1, 1
		spoof.Topics = append(spoof.Topics, st)
		spoof.SetVersion(spoof.MaxVersion())
		resp, err = callWith(ctx, dave.Dialer(nil, nil), c.listener(active).Addr().String(), forwardClientID+"/1001/User:carol", spoof)
		if err != nil {
			t.Fatal(err)
		}
		if ec := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; ec != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("spoofed forward: %v", kerr.ErrorForCode(ec))
		}
		// Nor wrap its request in an envelope naming another principal:
		// only a broker's, a voter's or a super user's is taken at its
		// word; dave's is served as dave.
		resp, err = callWith(ctx, dave.Dialer(nil, nil), c.listener(active).Addr().String(), "dave", kafkaclient.Envelope(spoof, "dave", "User:carol", nil))
		if err != nil {
			t.Fatal(err)
		}
		inner, err := kafkaclient.OpenEnvelope(resp.(*kmsg.EnvelopeResponse), spoof)
		if err != nil {
			t.Fatalf("spoofed envelope: %v", err)
		}
		if ec := inner.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; ec != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("spoofed envelope: %v", kerr.ErrorForCode(ec))
		}
	})
}

// TestUnauthenticatedFrameCap: on a SASL listener, a request frame above
// the wire server's MaxUnauthenticatedFrameBytes (512 KiB by default)
// sent before logging in closes the connection and is counted among the
// wire limits; small requests are served before logging in, and after a
// SCRAM login the large one is answered.
func TestUnauthenticatedFrameCap(t *testing.T) {
	l := singleVoterListenerWith(t, func(cfg *Config) {
		cfg.Security = SecurityConfig{
			SASLMechanisms: []string{sasl.ScramSHA512},
			SuperUsers:     []string{"User:" + adminUser},
			BootstrapUsers: []BootstrapUser{{Name: adminUser, Password: adminPass, Mechanism: sasl.ScramSHA512}},
		}
	})
	waitFor(t, 20*time.Second, "the bootstrap user", func() bool { return len(l.securityState().ScramCredentials(adminUser)) > 0 })
	ctx := ctxT(t)
	addr := l.Addr().String()

	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(1)
	for i := range 2200 {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(fmt.Sprintf("%04d-%s", i, strings.Repeat("t", 250)))
		req.Topics = append(req.Topics, rt)
	}
	if n := len(req.AppendTo(nil)); n <= 512<<10 {
		t.Fatalf("the request is %d bytes, not above the cap", n)
	}

	versions := kmsg.NewPtrApiVersionsRequest()
	if _, err := call(ctx, addr, "anon", versions); err != nil {
		t.Fatalf("ApiVersions before logging in: %v", err)
	}
	if _, err := call(ctx, addr, "anon", req); err == nil {
		t.Fatal("a large request before logging in was answered")
	}
	waitFor(t, 10*time.Second, "the frame counted", func() bool { return l.WireLimits().UnauthenticatedFramesTooLarge == 1 })

	resp, err := callAuth(ctx, nil, scram.Auth{User: adminUser, Pass: adminPass}.AsSha512Mechanism(), addr, "admin", req)
	if err != nil {
		t.Fatalf("the large request after logging in: %v", err)
	}
	if got := len(resp.(*kmsg.MetadataResponse).Topics); got != len(req.Topics) {
		t.Fatalf("answered %d topics of %d", got, len(req.Topics))
	}
	if got := l.WireLimits(); got.UnauthenticatedFramesTooLarge != 1 || got.FramesTooLarge != 0 {
		t.Fatalf("wire limits: %+v", got)
	}
}

// TestCertificateNeedsNoLogin: a connection whose client certificate
// identifies the client counts as authenticated from its first frame, as
// identify treats it; one without a certificate must log in.
func TestCertificateNeedsNoLogin(t *testing.T) {
	pki := tlstest.NewPKI(t, "test CA")
	for name, files := range map[string]tlsconfig.Files{"voter": pki.Voter(1001), "client": pki.Client("dave")} {
		pair, err := tls.LoadX509KeyPair(files.Cert, files.Key)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if needsLogin(&tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}) {
			t.Fatalf("a connection with a %s certificate must log in", name)
		}
	}
	if !needsLogin(nil) || !needsLogin(&tls.ConnectionState{}) {
		t.Fatal("a connection without a certificate needs no login")
	}
}
