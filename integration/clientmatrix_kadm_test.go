package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The franz-go kadm column of the client matrix: in-process.

func kadmClient() matrixClient {
	return matrixClient{name: "kadm", offers: matrixRows(), need: func(*testing.T) {}, run: runKadm}
}

// newKadm is a kadm client of the run's bootstrap, logging in with mech
// (empty: none) as user with password.
func newKadm(r matrixRun, mech, user, password string) (*kadm.Client, error) {
	retry := 8 * time.Second
	if r.Phase == phaseLogin {
		// A login that fails fails at once; no retrying of a closed connection.
		retry = 5 * time.Second
	}
	opts := []kgo.Opt{kgo.SeedBrokers(r.Bootstrap), kgo.RetryTimeout(retry),
		kgo.MetadataMinAge(100 * time.Millisecond)}
	if r.TLSCA != "" {
		cfg, err := matrixTLS(r)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	var m kgosasl.Mechanism
	switch mech {
	case "":
	case "SCRAM-SHA-256":
		m = scram.Auth{User: user, Pass: password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		m = scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
	case "PLAIN":
		m = plain.Auth{User: user, Pass: password}.AsMechanism()
	default:
		return nil, fmt.Errorf("no mechanism %s", mech)
	}
	if m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(20000)
	return adm, nil
}

// matrixTLS is the client TLS config of a run against a --tls cluster.
func matrixTLS(r matrixRun) (*tls.Config, error) {
	ca, err := os.ReadFile(r.TLSCA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("no certificate in " + r.TLSCA)
	}
	cert, err := tls.LoadX509KeyPair(r.TLSCert, r.TLSKey)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// results collects a run's outcomes in order.
type results []opResult

func (rs *results) do(op string, f func() error) {
	e := ""
	if err := f(); err != nil {
		e = err.Error()
	}
	*rs = append(*rs, opResult{Op: op, Err: e})
}

func runKadm(ctx context.Context, _ *testing.T, r matrixRun) []opResult {
	switch r.Phase {
	case phaseLogin:
		return kadmLogin(ctx, r)
	}
	mech := ""
	if len(r.Mechanisms) > 0 {
		mech = r.Mechanisms[0]
	}
	adm, err := newKadm(r, mech, r.User, r.Password)
	if err != nil {
		return []opResult{{Op: phaseOps[r.Phase][0], Err: err.Error()}}
	}
	defer adm.Close()
	switch r.Phase {
	case phaseCluster:
		return kadmCluster(ctx, adm, r)
	case phaseSecurity:
		return kadmSecurity(ctx, adm, r)
	}
	return kadmTopics(ctx, adm, r)
}

func kadmTopics(ctx context.Context, adm *kadm.Client, r matrixRun) []opResult {
	var rs results
	a, b := r.Prefix+"-a", r.Prefix+"-b"
	rs.do(opDescribeCluster, func() error {
		m, err := adm.BrokerMetadata(ctx)
		if err != nil {
			return err
		}
		return checkBrokersOnly(m.Cluster, m.Controller, m.Brokers.NodeIDs(), r.Brokers)
	})
	rs.do(opCreateTopics, func() error {
		retention := "3600000"
		res, err := adm.CreateTopics(ctx, 3, 3, map[string]*string{"retention.ms": &retention}, a)
		if err != nil {
			return err
		}
		resB, errB := adm.CreateTopics(ctx, 1, 2, nil, b)
		if err := createdOrRetried(res[a].Err); err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
		if res[a].Err == nil && (res[a].ID == (kadm.TopicID{}) || res[a].NumPartitions != 3) {
			return fmt.Errorf("%s created with id %v and %d partitions", a, res[a].ID, res[a].NumPartitions)
		}
		if errB == nil {
			errB = createdOrRetried(resB[b].Err)
		}
		return errB
	})
	rs.do(opListTopics, func() error {
		td, err := adm.ListTopics(ctx)
		if err != nil {
			return err
		}
		if !td.Has(a) || !td.Has(b) {
			return fmt.Errorf("lists %v, without %s or %s", td.Names(), a, b)
		}
		return checkPartitions(td[a], 3, 3, r.Brokers)
	})
	rs.do(opDescribeTopics, func() error {
		td, err := adm.ListTopics(ctx, a)
		if err != nil {
			return err
		}
		return checkPartitions(td[a], 3, 3, r.Brokers)
	})
	rs.do(opAddPartitions, func() error {
		res, err := adm.CreatePartitions(ctx, 2, a)
		if err != nil {
			return err
		}
		if err := res[a].Err; err != nil {
			return err
		}
		td, err := adm.ListTopics(ctx, a)
		if err != nil {
			return err
		}
		return checkPartitions(td[a], 5, 3, r.Brokers)
	})
	describe := func() (map[string]kadm.Config, error) {
		rc, err := adm.DescribeTopicConfigs(ctx, a)
		if err != nil {
			return nil, err
		}
		c, err := rc.On(a, nil)
		if err != nil {
			return nil, err
		}
		if c.Err != nil {
			return nil, c.Err
		}
		m := map[string]kadm.Config{}
		for _, e := range c.Configs {
			m[e.Key] = e
		}
		return m, nil
	}
	rs.do(opDescribeTopicConfigs, func() error {
		m, err := describe()
		if err != nil {
			return err
		}
		if err := wantConfig(m, "retention.ms", "3600000", kmsg.ConfigSourceDynamicTopicConfig); err != nil {
			return err
		}
		// kadm asks for synonyms: the topic's own value first, then what
		// it would fall back to, down to the default.
		syn := m["retention.ms"].Synonyms
		if len(syn) < 2 || syn[0].Source != kmsg.ConfigSourceDynamicTopicConfig ||
			syn[len(syn)-1].Source != kmsg.ConfigSourceDefaultConfig {
			return fmt.Errorf("retention.ms synonyms %+v: want the topic's value first and the default last", syn)
		}
		// Every topic config, defaults included, as Kafka answers.
		return wantConfig(m, "cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig)
	})
	rs.do(opAlterTopicIncr, func() error {
		two := "2"
		res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: &two},
			{Op: kadm.DeleteConfig, Name: "retention.ms"},
		}, a)
		if err == nil {
			err = firstAlterErr(res)
		}
		if err != nil {
			return err
		}
		m, err := describe()
		if err != nil {
			return err
		}
		if err := wantConfig(m, "min.insync.replicas", "2", kmsg.ConfigSourceDynamicTopicConfig); err != nil {
			return err
		}
		return notDynamic(m, "retention.ms")
	})
	rs.do(opAlterTopicLegacy, func() error {
		seg := "1048576"
		res, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "segment.bytes", Value: &seg}}, a)
		if err == nil {
			err = firstAlterErr(res)
		}
		if err != nil {
			return err
		}
		m, err := describe()
		if err != nil {
			return err
		}
		if err := wantConfig(m, "segment.bytes", seg, kmsg.ConfigSourceDynamicTopicConfig); err != nil {
			return err
		}
		// A legacy AlterConfigs replaces the whole set.
		return notDynamic(m, "min.insync.replicas")
	})
	elect := func(how kadm.ElectLeadersHow) error {
		s := kadm.TopicsSet{}
		s.Add(a, 0, 1, 2, 3, 4)
		res, err := adm.ElectLeaders(ctx, how, s)
		if err != nil {
			return err
		}
		return checkElection(len(res[a]), func(yield func(int32, error)) {
			for p, e := range res[a] {
				yield(p, e.Err)
			}
		}, 5)
	}
	rs.do(opElectPreferred, func() error { return elect(kadm.ElectPreferredReplica) })
	rs.do(opElectUnclean, func() error { return elect(kadm.ElectLiveReplica) })
	var target []int32
	rs.do(opReassignStart, func() error {
		td, err := adm.ListTopics(ctx, b)
		if err != nil {
			return err
		}
		p, ok := td[b].Partitions[0]
		if !ok {
			return fmt.Errorf("%s has no partition 0", b)
		}
		target = reassignTarget(p.Replicas, r.Brokers)
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign(b, 0, target)
		res, err := adm.AlterPartitionAssignments(ctx, req)
		if err != nil {
			return err
		}
		if e := res[b][0].Err; e != nil {
			return e
		}
		return waitReplicas(ctx, func() ([]int32, error) {
			td, err := adm.ListTopics(ctx, b)
			if err != nil {
				return nil, err
			}
			return td[b].Partitions[0].Replicas, nil
		}, target)
	})
	rs.do(opReassignList, func() error {
		s := kadm.TopicsSet{}
		s.Add(b, 0)
		res, err := adm.ListPartitionReassignments(ctx, s)
		if err != nil {
			return err
		}
		if l, ok := res[b][0]; ok && (len(l.AddingReplicas) > 0 || len(l.RemovingReplicas) > 0) {
			return fmt.Errorf("lists a finished reassignment: %+v", l)
		}
		return nil
	})
	rs.do(opReassignCancel, func() error {
		var req kadm.AlterPartitionAssignmentsReq
		req.CancelAssign(b, 0)
		res, err := adm.AlterPartitionAssignments(ctx, req)
		if err != nil {
			return err
		}
		return wantNoReassignment(res[b][0].Err)
	})
	rs.do(opProduce, func() error { return kgoProduce(ctx, r, a, r.Prefix) })
	rs.do(opConsume, func() error { return kgoConsume(ctx, r, a, r.Prefix) })
	rs.do(opDeleteTopics, func() error {
		res, err := adm.DeleteTopics(ctx, a, b)
		if err != nil {
			return err
		}
		if err := res.Error(); err != nil {
			return err
		}
		td, err := adm.ListTopics(ctx)
		if err != nil {
			return err
		}
		if td.Has(a) || td.Has(b) {
			return fmt.Errorf("still listed right after the delete: %v", td.Names())
		}
		return nil
	})
	return rs
}

// kgoProduce produces value to partition 0 of topic with franz-go's
// client, acknowledged by all in-sync replicas.
func kgoProduce(ctx context.Context, r matrixRun, topic, value string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.Bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(5))
	if err != nil {
		return err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res := cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(value)})
	rec, err := res.First()
	if err != nil {
		return err
	}
	if rec.Offset != 0 {
		return fmt.Errorf("produced at offset %d of an empty partition", rec.Offset)
	}
	return nil
}

// kgoConsume reads partition 0 of topic from its start, without a
// group, and checks its first record is value.
func kgoConsume(ctx context.Context, r matrixRun, topic, value string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.Bootstrap),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return err
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(cctx)
		if err := cctx.Err(); err != nil {
			return fmt.Errorf("no record in 30s: %w", err)
		}
		for _, e := range fs.Errors() {
			return fmt.Errorf("%s-%d: %w", e.Topic, e.Partition, e.Err)
		}
		if recs := fs.Records(); len(recs) > 0 {
			if got := string(recs[0].Value); got != value || recs[0].Offset != 0 {
				return fmt.Errorf("first record %q at offset %d, want %q at 0", got, recs[0].Offset, value)
			}
			return nil
		}
	}
}

// kadmSecurity runs the ACL and SCRAM user operations.
func kadmSecurity(ctx context.Context, adm *kadm.Client, r matrixRun) []opResult {
	var rs results
	a := r.Prefix + "-a"
	principal := "User:" + r.Prefix
	acl := func() *kadm.ACLBuilder {
		return kadm.NewACLs().Allow(principal).Topics(a).Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	}
	rs.do(opCreateACLs, func() error {
		res, err := adm.CreateACLs(ctx, acl())
		if err != nil {
			return err
		}
		if len(res) != 1 || res[0].Err != nil {
			return fmt.Errorf("create results %+v", res)
		}
		return nil
	})
	describeACLs := func() (int, error) {
		res, err := adm.DescribeACLs(ctx, kadm.NewACLs().Allow(principal).AllowHosts("*").Topics(a).Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternMatch))
		if err != nil {
			return 0, err
		}
		n := 0
		for _, d := range res {
			if d.Err != nil {
				return 0, d.Err
			}
			for _, x := range d.Described {
				if x.Principal != principal || x.Name != a || x.Operation != kadm.OpRead || x.Host != "*" {
					return 0, fmt.Errorf("describe returns %+v", x)
				}
				n++
			}
		}
		return n, nil
	}
	rs.do(opDescribeACLs, func() error {
		n, err := describeACLs()
		if err == nil && n != 1 {
			err = fmt.Errorf("describes %d ACLs, want 1", n)
		}
		return err
	})
	rs.do(opDeleteACLs, func() error {
		res, err := adm.DeleteACLs(ctx, kadm.NewACLs().Allow(principal).AllowHosts("*").Topics(a).Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternMatch))
		if err != nil {
			return err
		}
		deleted := 0
		for _, d := range res {
			if d.Err != nil {
				return d.Err
			}
			deleted += len(d.Deleted)
		}
		if deleted != 1 {
			return fmt.Errorf("deleted %d ACLs, want 1", deleted)
		}
		n, err := describeACLs()
		if err == nil && n != 0 {
			err = fmt.Errorf("%d ACLs left after the delete", n)
		}
		return err
	})
	user := r.Prefix
	rs.do(opUpsertSCRAM, func() error {
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "matrix-pw"}})
		if err == nil {
			err = res[user].Err
		}
		return err
	})
	rs.do(opDescribeSCRAM, func() error {
		res, err := adm.DescribeUserSCRAMs(ctx, user)
		if err != nil {
			return err
		}
		d := res[user]
		if d.Err != nil {
			return d.Err
		}
		if len(d.CredInfos) != 1 || d.CredInfos[0].Mechanism != kadm.ScramSha256 || d.CredInfos[0].Iterations != 4096 {
			return fmt.Errorf("describes %+v, want one SCRAM-SHA-256 credential of 4096 iterations", d.CredInfos)
		}
		return nil
	})
	rs.do(opDeleteSCRAM, func() error {
		res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: user, Mechanism: kadm.ScramSha256}}, nil)
		if err == nil {
			err = res[user].Err
		}
		if err != nil {
			return err
		}
		d, err := adm.DescribeUserSCRAMs(ctx, user)
		if err != nil {
			return err
		}
		if !errors.Is(d[user].Err, kerr.ResourceNotFound) {
			return fmt.Errorf("describe after the delete: %+v, want RESOURCE_NOT_FOUND", d[user])
		}
		return nil
	})
	return rs
}

// kadmCluster runs the broker and cluster-default config operations.
func kadmCluster(ctx context.Context, adm *kadm.Client, r matrixRun) []opResult {
	var rs results
	key := r.ConfigKey
	broker := r.Brokers[0]
	describe := func(brokers ...int32) (map[string]kadm.Config, error) {
		rc, err := adm.DescribeBrokerConfigs(ctx, brokers...)
		if err != nil {
			return nil, err
		}
		if len(rc) != 1 {
			return nil, fmt.Errorf("%d resources described, want 1", len(rc))
		}
		if rc[0].Err != nil {
			return nil, rc[0].Err
		}
		m := map[string]kadm.Config{}
		for _, e := range rc[0].Configs {
			m[e.Key] = e
		}
		return m, nil
	}
	rs.do(opDescribeBroker, func() error {
		m, err := describe(broker)
		if err != nil {
			return err
		}
		// Every broker config, the controller's own among them.
		for _, k := range []string{key, "min.insync.replicas", "unclean.leader.election.enable", "auto.leader.rebalance.enable"} {
			if _, ok := m[k]; !ok {
				return fmt.Errorf("no %s among the %d configs of broker %d", k, len(m), broker)
			}
		}
		return nil
	})
	alter := func(state bool, set *string, brokers ...int32) error {
		var res kadm.AlterConfigsResponses
		var err error
		switch {
		case state && set != nil:
			res, err = adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Name: key, Value: set}}, brokers...)
		case state:
			res, err = adm.AlterBrokerConfigsState(ctx, nil, brokers...)
		case set != nil:
			res, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: key, Value: set}}, brokers...)
		default:
			res, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: key}}, brokers...)
		}
		if err == nil {
			err = firstAlterErr(res)
		}
		return err
	}
	roundTrip := func(state bool, value string, src kmsg.ConfigSource, brokers ...int32) error {
		if err := alter(state, &value, brokers...); err != nil {
			return err
		}
		m, err := describe(brokers...)
		if err != nil {
			return err
		}
		if err := wantConfig(m, key, value, src); err != nil {
			return err
		}
		if len(brokers) == 0 {
			// The default reaches the brokers: broker 1 shows it.
			mb, err := describe(broker)
			if err != nil {
				return err
			}
			if err := wantConfig(mb, key, value, kmsg.ConfigSourceDynamicDefaultBrokerConfig); err != nil {
				return fmt.Errorf("broker %d: %w", broker, err)
			}
		}
		if err := alter(state, nil, brokers...); err != nil {
			return fmt.Errorf("removing it again: %w", err)
		}
		if m, err = describe(brokers...); err != nil {
			return err
		}
		if c, ok := m[key]; ok && c.Source == src {
			return fmt.Errorf("%s still %s after its removal", key, src)
		}
		return nil
	}
	rs.do(opAlterBrokerIncr, func() error {
		return roundTrip(false, "3600001", kmsg.ConfigSourceDynamicBrokerConfig, broker)
	})
	rs.do(opAlterBrokerLegacy, func() error {
		return roundTrip(true, "3600002", kmsg.ConfigSourceDynamicBrokerConfig, broker)
	})
	rs.do(opDescribeDefault, func() error {
		_, err := describe()
		return err
	})
	rs.do(opAlterDefaultIncr, func() error {
		return roundTrip(false, "3600003", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	})
	rs.do(opAlterDefaultLegacy, func() error {
		return roundTrip(true, "3600004", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	})
	return rs
}

// kadmLogin logs in with each mechanism (listing the login topic) and
// with a wrong password (refused).
func kadmLogin(ctx context.Context, r matrixRun) []opResult {
	var rs results
	for _, mech := range r.Mechanisms {
		rs.do(loginOp(mech), func() error {
			adm, err := newKadm(r, mech, r.User, r.Password)
			if err != nil {
				return err
			}
			defer adm.Close()
			td, err := adm.ListTopics(ctx)
			if err != nil {
				return err
			}
			if !td.Has(r.LoginTopic) {
				return fmt.Errorf("lists %v, not %s", td.Names(), r.LoginTopic)
			}
			return nil
		})
		rs.do(wrongPasswordOp(mech), func() error {
			adm, err := newKadm(r, mech, r.User, r.Password+"-wrong")
			if err != nil {
				return err
			}
			defer adm.Close()
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, err = adm.ListTopics(cctx)
			if !errors.Is(err, kerr.SaslAuthenticationFailed) {
				return fmt.Errorf("got %v, want SASL_AUTHENTICATION_FAILED", err)
			}
			return nil
		})
	}
	if loginOpOf(opNoLogin, r.Mechanisms) {
		rs.do(opNoLogin, func() error {
			adm, err := newKadm(r, "", "", "")
			if err != nil {
				return err
			}
			defer adm.Close()
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			td, listErr := adm.ListTopics(cctx)
			res, createErr := adm.CreateTopics(cctx, 1, 1, nil, r.Prefix+"-no-login")
			if createErr == nil {
				createErr = res.Error()
			}
			return noLoginSeen(r.LoginTopic, td.Names(), listErr, createErr)
		})
	}
	return rs
}

// noLoginSeen checks what a client that does not log in gets from a
// SASL cluster: an error, or at least no login topic, from listTopics, and
// an error from createTopic.
func noLoginSeen(loginTopic string, listed []string, listErr, createErr error) error {
	if listErr == nil && slices.Contains(listed, loginTopic) {
		return fmt.Errorf("lists %s without a login", loginTopic)
	}
	if createErr == nil {
		return errors.New("created a topic without a login")
	}
	return nil
}

func loginOp(mech string) string {
	switch mech {
	case "SCRAM-SHA-256":
		return opLoginSCRAM256
	case "SCRAM-SHA-512":
		return opLoginSCRAM512
	}
	return opLoginPlain
}

func wrongPasswordOp(mech string) string {
	switch mech {
	case "SCRAM-SHA-256":
		return opWrongPasswordSCRA256
	case "SCRAM-SHA-512":
		return opWrongPasswordSCRAM
	}
	return opWrongPasswordPlain
}

// prepareLoginCluster creates topic on a --sasl cluster, for the logins
// to list. (dev gives admin SCRAM-SHA-512 and SCRAM-SHA-256 credentials.)
func prepareLoginCluster(t *testing.T, c *matrixCluster, topic string) {
	t.Helper()
	r := c.run(phaseSecurity, kindVoter, 0, "")
	adm, err := newKadm(r, "SCRAM-SHA-512", r.User, r.Password)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cr, err := adm.CreateTopics(ctx, 1, 3, nil, topic)
	if err == nil {
		err = cr[topic].Err
	}
	if err != nil {
		t.Fatalf("%s: creating %s: %v", c.name, topic, err)
	}
}

// createdOrRetried passes a topic creation's error when it is none, or
// TOPIC_ALREADY_EXISTS: the client sent its CreateTopics again after an
// answer it did not get (a controller failover under load), and the
// first one had created the topic. The operations after it check the
// topic as created.
func createdOrRetried(err error) error {
	if errors.Is(err, kerr.TopicAlreadyExists) {
		return nil
	}
	return err
}

// checkBrokersOnly checks a cluster description: a cluster id, the
// brokers exactly (no voter), and a controller among them.
func checkBrokersOnly(cluster string, controller int32, nodes, brokers []int32) error {
	got := slices.Clone(nodes)
	slices.Sort(got)
	if !slices.Equal(got, brokers) {
		return fmt.Errorf("nodes %v, want the brokers %v only", got, brokers)
	}
	if cluster == "" {
		return errors.New("no cluster id")
	}
	if !slices.Contains(brokers, controller) {
		return fmt.Errorf("controller %d is not a broker", controller)
	}
	return nil
}

// checkPartitions checks a topic's partitions: n of them, each with rf
// replicas among brokers, a leader among them and a full ISR.
func checkPartitions(td kadm.TopicDetail, n, rf int, brokers []int32) error {
	if td.Err != nil {
		return td.Err
	}
	if len(td.Partitions) != n {
		return fmt.Errorf("%s has %d partitions, want %d", td.Topic, len(td.Partitions), n)
	}
	for _, p := range td.Partitions {
		if p.Err != nil {
			return fmt.Errorf("%s-%d: %w", td.Topic, p.Partition, p.Err)
		}
		if len(p.Replicas) != rf || !slices.Contains(p.Replicas, p.Leader) || len(p.ISR) != rf {
			return fmt.Errorf("%s-%d: replicas %v, leader %d, ISR %v", td.Topic, p.Partition, p.Replicas, p.Leader, p.ISR)
		}
		for _, x := range p.Replicas {
			if !slices.Contains(brokers, x) {
				return fmt.Errorf("%s-%d: replica %d is not a broker", td.Topic, p.Partition, x)
			}
		}
	}
	return nil
}

// wantConfig checks a described config's value and source.
func wantConfig(m map[string]kadm.Config, key, value string, src kmsg.ConfigSource) error {
	c, ok := m[key]
	if !ok {
		return fmt.Errorf("no %s among %d configs", key, len(m))
	}
	if c.Value == nil || *c.Value != value || c.Source != src {
		v := "null"
		if c.Value != nil {
			v = *c.Value
		}
		return fmt.Errorf("%s = %s (%s), want %s (%s)", key, v, c.Source, value, src)
	}
	return nil
}

func notDynamic(m map[string]kadm.Config, key string) error {
	if c, ok := m[key]; ok && c.Source == kmsg.ConfigSourceDynamicTopicConfig {
		return fmt.Errorf("%s is still a topic override (%v)", key, *c.Value)
	}
	return nil
}

func firstAlterErr(res kadm.AlterConfigsResponses) error {
	if len(res) == 0 {
		return errors.New("no response")
	}
	for _, x := range res {
		if x.Err != nil {
			return fmt.Errorf("%s: %w %s", x.Name, x.Err, x.ErrMessage)
		}
	}
	return nil
}

// checkElection checks an election's results: one per partition asked,
// each done or ELECTION_NOT_NEEDED (the leaders are alive and preferred).
func checkElection(n int, each func(func(int32, error)), want int) error {
	if n != want {
		return fmt.Errorf("%d results, want %d", n, want)
	}
	var bad error
	each(func(p int32, err error) {
		if err != nil && !errors.Is(err, kerr.ElectionNotNeeded) && bad == nil {
			bad = fmt.Errorf("partition %d: %w", p, err)
		}
	})
	return bad
}

// reassignTarget is the replica set a reassignment moves a partition to:
// the brokers not among its replicas first, as many as it has.
func reassignTarget(replicas, brokers []int32) []int32 {
	var t []int32
	for _, b := range brokers {
		if !slices.Contains(replicas, b) {
			t = append(t, b)
		}
	}
	for _, b := range replicas {
		if len(t) == len(replicas) {
			break
		}
		t = append(t, b)
	}
	return t[:len(replicas)]
}

// waitReplicas waits for a partition's replicas to be want (as a set).
func waitReplicas(ctx context.Context, get func() ([]int32, error), want []int32) error {
	w := slices.Clone(want)
	slices.Sort(w)
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := get()
		if err != nil {
			return err
		}
		got = slices.Clone(got)
		sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
		if slices.Equal(got, w) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("replicas %v, want %v after the reassignment", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// wantNoReassignment checks the answer to cancelling a finished
// reassignment: Kafka's NO_REASSIGNMENT_IN_PROGRESS.
func wantNoReassignment(err error) error {
	if !errors.Is(err, kerr.NoReassignmentInProgress) {
		return fmt.Errorf("got %v, want NO_REASSIGNMENT_IN_PROGRESS", err)
	}
	return nil
}
