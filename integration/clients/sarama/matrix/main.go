// Command matrix is the IBM/sarama column of the client matrix
// (integration/clientmatrix_test.go), which builds and runs it: it runs
// one phase of admin operations with sarama's ClusterAdmin against the
// `ctrlnode dev` its only argument (a JSON run) names, checks what each
// returns, and prints one JSON line per operation: {"op": ..., "err": ""}
// when it checked out.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// run mirrors matrixRun of the test.
type run struct {
	Phase      string   `json:"phase"`
	Kind       string   `json:"kind"`
	Bootstrap  string   `json:"bootstrap"`
	Prefix     string   `json:"prefix"`
	Brokers    []int32  `json:"brokers"`
	ConfigKey  string   `json:"config_key"`
	Mechanisms []string `json:"mechanisms"`
	User       string   `json:"user"`
	Password   string   `json:"password"`
	LoginTopic string   `json:"login_topic"`
	TLSCA      string   `json:"tls_ca"`
	TLSCert    string   `json:"tls_cert"`
	TLSKey     string   `json:"tls_key"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: matrix '<run as JSON>'")
		os.Exit(2)
	}
	var r run
	if err := json.Unmarshal([]byte(os.Args[1]), &r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if r.Phase == "login" {
		login(r)
		noLogin(r)
		return
	}
	mech := ""
	if len(r.Mechanisms) > 0 {
		mech = r.Mechanisms[0]
	}
	adm, err := admin(r, mech, r.User, r.Password)
	if err != nil {
		fmt.Fprintln(os.Stderr, "connecting:", err)
		os.Exit(1)
	}
	defer adm.Close()
	switch r.Phase {
	case "topics":
		topics(adm, r)
	case "security":
		security(adm, r)
	case "cluster":
		cluster(adm, r)
	default:
		fmt.Fprintln(os.Stderr, "no phase", r.Phase)
		os.Exit(2)
	}
}

// report prints an operation's outcome.
func report(op string, err error) {
	e := ""
	if err != nil {
		e = err.Error()
	}
	b, _ := json.Marshal(map[string]string{"op": op, "err": e})
	fmt.Println(string(b))
}

func do(op string, f func() error) { report(op, f()) }

func config(r run, mech, user, password string) (*sarama.Config, error) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.ClientID = "ctrlquorum-matrix-sarama"
	cfg.Admin.Timeout = 20 * time.Second
	cfg.Admin.Retry.Max = 10
	cfg.Metadata.Retry.Max = 10
	cfg.Net.DialTimeout = 10 * time.Second
	if r.Phase == "login" {
		cfg.Admin.Retry.Max, cfg.Metadata.Retry.Max = 1, 1
	}
	if r.TLSCA != "" {
		ca, err := os.ReadFile(r.TLSCA)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		cert, err := tls.LoadX509KeyPair(r.TLSCert, r.TLSKey)
		if err != nil {
			return nil, err
		}
		cfg.Net.TLS.Enable = true
		cfg.Net.TLS.Config = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if mech != "" {
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Handshake = true
		cfg.Net.SASL.User, cfg.Net.SASL.Password = user, password
		switch mech {
		case "PLAIN":
			cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		case "SCRAM-SHA-256":
			cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{gen: scram.SHA256} }
		case "SCRAM-SHA-512":
			cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{gen: scram.SHA512} }
		default:
			return nil, fmt.Errorf("no mechanism %s", mech)
		}
	}
	return cfg, nil
}

func admin(r run, mech, user, password string) (sarama.ClusterAdmin, error) {
	cfg, err := config(r, mech, user, password)
	if err != nil {
		return nil, err
	}
	return sarama.NewClusterAdmin([]string{r.Bootstrap}, cfg)
}

// scramClient is sarama's SCRAMClient on xdg-go/scram, as sarama's own
// example has it.
type scramClient struct {
	gen  scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (c *scramClient) Begin(user, password, authzID string) error {
	cl, err := c.gen.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	c.conv = cl.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) { return c.conv.Step(challenge) }
func (c *scramClient) Done() bool                            { return c.conv.Done() }

func topics(adm sarama.ClusterAdmin, r run) {
	a, b := r.Prefix+"-a", r.Prefix+"-b"
	do("describe cluster", func() error {
		brokers, controller, err := adm.DescribeCluster()
		if err != nil {
			return err
		}
		var ids []int32
		for _, br := range brokers {
			ids = append(ids, br.ID())
		}
		slices.Sort(ids)
		if !slices.Equal(ids, r.Brokers) {
			return fmt.Errorf("nodes %v, want the brokers %v only", ids, r.Brokers)
		}
		if !slices.Contains(r.Brokers, controller) {
			return fmt.Errorf("controller %d is not a broker", controller)
		}
		// The cluster id, which DescribeCluster() leaves out: its request
		// to the controller, as sarama sends it.
		b, err := adm.Controller()
		if err != nil {
			return err
		}
		resp, err := b.DescribeCluster(sarama.NewDescribeClusterRequest(sarama.V3_6_0_0))
		if err != nil {
			return err
		}
		if resp.ClusterID == "" {
			return errors.New("no cluster id")
		}
		return nil
	})
	do("create topics", func() error {
		ret := "3600000"
		errA := adm.CreateTopic(a, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 3,
			ConfigEntries: map[string]*string{"retention.ms": &ret}}, false)
		errB := adm.CreateTopic(b, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 2}, false)
		// TOPIC_ALREADY_EXISTS: sarama sent it again after an answer it
		// did not get, and the first one had created the topic; the
		// operations after this one check it.
		for _, err := range []error{errA, errB} {
			if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
				return err
			}
		}
		return nil
	})
	do("list topics", func() error {
		l, err := adm.ListTopics()
		if err != nil {
			return err
		}
		da, okA := l[a]
		_, okB := l[b]
		if !okA || !okB {
			return fmt.Errorf("lists %d topics, without %s or %s", len(l), a, b)
		}
		if da.NumPartitions != 3 || da.ReplicationFactor != 3 {
			return fmt.Errorf("%s: %d partitions, replication factor %d", a, da.NumPartitions, da.ReplicationFactor)
		}
		return nil
	})
	describe := func(n int) error {
		md, err := adm.DescribeTopics([]string{a})
		if err != nil {
			return err
		}
		if len(md) != 1 || md[0].Name != a {
			return fmt.Errorf("describes %d topics", len(md))
		}
		return checkPartitions(md[0], n, 3, r.Brokers)
	}
	do("describe topics", func() error { return describe(3) })
	do("add partitions", func() error {
		if err := adm.CreatePartitions(a, 5, nil, false); err != nil {
			return err
		}
		return describe(5)
	})
	topicConfigs := func() (map[string]sarama.ConfigEntry, error) {
		return describeConfig(adm, sarama.TopicResource, a)
	}
	do("describe topic configs", func() error {
		m, err := topicConfigs()
		if err != nil {
			return err
		}
		if err := wantConfig(m, "retention.ms", "3600000", sarama.SourceTopic); err != nil {
			return err
		}
		return wantConfig(m, "cleanup.policy", "delete", sarama.SourceDefault)
	})
	do("alter topic configs (incremental)", func() error {
		two := "2"
		if err := adm.IncrementalAlterConfig(sarama.TopicResource, a, map[string]sarama.IncrementalAlterConfigsEntry{
			"min.insync.replicas": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &two},
			"retention.ms":        {Operation: sarama.IncrementalAlterConfigsOperationDelete},
		}, false); err != nil {
			return err
		}
		m, err := topicConfigs()
		if err != nil {
			return err
		}
		if err := wantConfig(m, "min.insync.replicas", "2", sarama.SourceTopic); err != nil {
			return err
		}
		return notSource(m, "retention.ms", sarama.SourceTopic)
	})
	do("alter topic configs (legacy)", func() error {
		seg := "1048576"
		if err := adm.AlterConfig(sarama.TopicResource, a, map[string]*string{"segment.bytes": &seg}, false); err != nil {
			return err
		}
		m, err := topicConfigs()
		if err != nil {
			return err
		}
		if err := wantConfig(m, "segment.bytes", seg, sarama.SourceTopic); err != nil {
			return err
		}
		return notSource(m, "min.insync.replicas", sarama.SourceTopic)
	})
	elect := func(t sarama.ElectionType) error {
		res, err := adm.ElectLeaders(t, map[string][]int32{a: {0, 1, 2, 3, 4}})
		if err != nil {
			return err
		}
		if len(res[a]) != 5 {
			return fmt.Errorf("%d results, want 5", len(res[a]))
		}
		for p, x := range res[a] {
			if x.ErrorCode != sarama.ErrNoError && x.ErrorCode != sarama.ErrElectionNotNeeded {
				return fmt.Errorf("partition %d: %v", p, x.ErrorCode)
			}
		}
		return nil
	}
	do("elect preferred leaders", func() error { return elect(sarama.PreferredElection) })
	do("elect unclean leaders", func() error { return elect(sarama.UncleanElection) })
	do("start reassignment", func() error {
		md, err := adm.DescribeTopics([]string{b})
		if err != nil {
			return err
		}
		if len(md) != 1 || len(md[0].Partitions) != 1 {
			return fmt.Errorf("%s: %d topics described", b, len(md))
		}
		target := reassignTarget(md[0].Partitions[0].Replicas, r.Brokers)
		if err := adm.AlterPartitionReassignments(b, [][]int32{target}); err != nil {
			return err
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			md, err := adm.DescribeTopics([]string{b})
			if err != nil {
				return err
			}
			got := slices.Clone(md[0].Partitions[0].Replicas)
			slices.Sort(got)
			want := slices.Clone(target)
			slices.Sort(want)
			if slices.Equal(got, want) {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("replicas %v, want %v after the reassignment", got, target)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	do("list reassignments", func() error {
		res, err := adm.ListPartitionReassignments(b, []int32{0})
		if err != nil {
			return err
		}
		if s, ok := res[b][0]; ok && (len(s.AddingReplicas) > 0 || len(s.RemovingReplicas) > 0) {
			return fmt.Errorf("lists a finished reassignment: %+v", s)
		}
		return nil
	})
	do("cancel reassignment", func() error {
		err := adm.AlterPartitionReassignments(b, [][]int32{nil})
		if !errors.Is(err, sarama.ErrNoReassignmentInProgress) {
			return fmt.Errorf("got %v, want NO_REASSIGNMENT_IN_PROGRESS", err)
		}
		return nil
	})
	do("produce", func() error {
		cfg, err := config(r, "", "", "")
		if err != nil {
			return err
		}
		cfg.Producer.Return.Successes = true
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
		p, err := sarama.NewSyncProducer([]string{r.Bootstrap}, cfg)
		if err != nil {
			return err
		}
		defer p.Close()
		part, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: a, Partition: 0, Value: sarama.StringEncoder(r.Prefix)})
		if err != nil {
			return err
		}
		if part != 0 || off != 0 {
			return fmt.Errorf("produced to partition %d offset %d, want 0 at 0 of an empty partition", part, off)
		}
		return nil
	})
	do("consume", func() error {
		cfg, err := config(r, "", "", "")
		if err != nil {
			return err
		}
		c, err := sarama.NewConsumer([]string{r.Bootstrap}, cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		pc, err := c.ConsumePartition(a, 0, sarama.OffsetOldest)
		if err != nil {
			return err
		}
		defer pc.Close()
		select {
		case m := <-pc.Messages():
			if string(m.Value) != r.Prefix || m.Offset != 0 {
				return fmt.Errorf("first record %q at offset %d, want %q at 0", m.Value, m.Offset, r.Prefix)
			}
			return nil
		case err := <-pc.Errors():
			return err
		case <-time.After(30 * time.Second):
			return errors.New("no record in 30s")
		}
	})
	do("delete topics", func() error {
		for _, t := range []string{a, b} {
			if err := adm.DeleteTopic(t); err != nil {
				return err
			}
		}
		l, err := adm.ListTopics()
		if err != nil {
			return err
		}
		if _, ok := l[a]; ok {
			return fmt.Errorf("%s still listed right after the delete", a)
		}
		if _, ok := l[b]; ok {
			return fmt.Errorf("%s still listed right after the delete", b)
		}
		return nil
	})
}

func security(adm sarama.ClusterAdmin, r run) {
	a := r.Prefix + "-a"
	principal := "User:" + r.Prefix
	star := "*"
	filter := sarama.AclFilter{ResourceType: sarama.AclResourceTopic, ResourceName: &a,
		ResourcePatternTypeFilter: sarama.AclPatternLiteral, Principal: &principal, Host: &star,
		Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny}
	do("create ACLs", func() error {
		return adm.CreateACL(sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: a, ResourcePatternType: sarama.AclPatternLiteral},
			sarama.Acl{Principal: principal, Host: "*", Operation: sarama.AclOperationRead, PermissionType: sarama.AclPermissionAllow})
	})
	count := func() (int, error) {
		res, err := adm.ListAcls(filter)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, ra := range res {
			for _, acl := range ra.Acls {
				if ra.ResourceName != a || acl.Principal != principal || acl.Operation != sarama.AclOperationRead || acl.Host != "*" {
					return 0, fmt.Errorf("describes %+v %+v", ra.Resource, acl)
				}
				n++
			}
		}
		return n, nil
	}
	do("describe ACLs", func() error {
		n, err := count()
		if err == nil && n != 1 {
			err = fmt.Errorf("describes %d ACLs, want 1", n)
		}
		return err
	})
	do("delete ACLs", func() error {
		m, err := adm.DeleteACL(filter, false)
		if err != nil {
			return err
		}
		if len(m) != 1 {
			return fmt.Errorf("deleted %d ACLs, want 1", len(m))
		}
		n, err := count()
		if err == nil && n != 0 {
			err = fmt.Errorf("%d ACLs left after the delete", n)
		}
		return err
	})
	user := r.Prefix
	do("upsert SCRAM users", func() error {
		res, err := adm.UpsertUserScramCredentials([]sarama.AlterUserScramCredentialsUpsert{
			{Name: user, Mechanism: sarama.SCRAM_MECHANISM_SHA_256, Iterations: 4096, Salt: []byte("matrix-salt-0123"), Password: []byte("matrix-pw")}})
		if err != nil {
			return err
		}
		return scramResults(res)
	})
	describe := func() (*sarama.DescribeUserScramCredentialsResult, error) {
		res, err := adm.DescribeUserScramCredentials([]string{user})
		if err != nil {
			return nil, err
		}
		if len(res) != 1 {
			return nil, fmt.Errorf("%d users described", len(res))
		}
		return res[0], nil
	}
	do("describe SCRAM users", func() error {
		d, err := describe()
		if err != nil {
			return err
		}
		if d.ErrorCode != sarama.ErrNoError {
			return d.ErrorCode
		}
		if len(d.CredentialInfos) != 1 || d.CredentialInfos[0].Mechanism != sarama.SCRAM_MECHANISM_SHA_256 || d.CredentialInfos[0].Iterations != 4096 {
			return fmt.Errorf("describes %+v, want one SCRAM-SHA-256 credential of 4096 iterations", d.CredentialInfos)
		}
		return nil
	})
	do("delete SCRAM users", func() error {
		res, err := adm.DeleteUserScramCredentials([]sarama.AlterUserScramCredentialsDelete{{Name: user, Mechanism: sarama.SCRAM_MECHANISM_SHA_256}})
		if err != nil {
			return err
		}
		if err := scramResults(res); err != nil {
			return err
		}
		d, err := describe()
		if err != nil {
			return err
		}
		if d.ErrorCode != errResourceNotFound {
			return fmt.Errorf("describe after the delete: %v, want RESOURCE_NOT_FOUND", d.ErrorCode)
		}
		return nil
	})
}

// scramResults checks the one result of an AlterUserScramCredentials.
func scramResults(res []*sarama.AlterUserScramCredentialsResult) error {
	if len(res) != 1 {
		return fmt.Errorf("%d results, want 1", len(res))
	}
	if res[0].ErrorCode != sarama.ErrNoError {
		msg := ""
		if res[0].ErrorMessage != nil {
			msg = *res[0].ErrorMessage
		}
		return fmt.Errorf("%s: %w %s", res[0].User, res[0].ErrorCode, msg)
	}
	return nil
}

// errResourceNotFound is Kafka's RESOURCE_NOT_FOUND (91), which sarama
// has no name for.
const errResourceNotFound sarama.KError = 91

func cluster(adm sarama.ClusterAdmin, r run) {
	key := r.ConfigKey
	broker := strconv.Itoa(int(r.Brokers[0]))
	do("describe broker configs", func() error {
		m, err := describeConfig(adm, sarama.BrokerResource, broker)
		if err != nil {
			return err
		}
		for _, k := range []string{key, "min.insync.replicas", "unclean.leader.election.enable", "auto.leader.rebalance.enable"} {
			if _, ok := m[k]; !ok {
				return fmt.Errorf("no %s among the %d configs of broker %s", k, len(m), broker)
			}
		}
		return nil
	})
	roundTrip := func(legacy bool, value string, src sarama.ConfigSource, name string) error {
		var err error
		if legacy {
			err = adm.AlterConfig(sarama.BrokerResource, name, map[string]*string{key: &value}, false)
		} else {
			err = adm.IncrementalAlterConfig(sarama.BrokerResource, name, map[string]sarama.IncrementalAlterConfigsEntry{
				key: {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &value}}, false)
		}
		if err != nil {
			return err
		}
		m, err := describeConfig(adm, sarama.BrokerResource, name)
		if err != nil {
			return err
		}
		if err := wantConfig(m, key, value, src); err != nil {
			return err
		}
		if name == "" {
			mb, err := describeConfig(adm, sarama.BrokerResource, broker)
			if err != nil {
				return err
			}
			if err := wantConfig(mb, key, value, sarama.SourceDynamicDefaultBroker); err != nil {
				return fmt.Errorf("broker %s: %w", broker, err)
			}
		}
		if legacy {
			err = adm.AlterConfig(sarama.BrokerResource, name, map[string]*string{}, false)
		} else {
			err = adm.IncrementalAlterConfig(sarama.BrokerResource, name, map[string]sarama.IncrementalAlterConfigsEntry{
				key: {Operation: sarama.IncrementalAlterConfigsOperationDelete}}, false)
		}
		if err != nil {
			return fmt.Errorf("removing it again: %w", err)
		}
		if m, err = describeConfig(adm, sarama.BrokerResource, name); err != nil {
			return err
		}
		return notSource(m, key, src)
	}
	do("alter broker configs (incremental)", func() error {
		return roundTrip(false, "3600011", sarama.SourceDynamicBroker, broker)
	})
	do("alter broker configs (legacy)", func() error {
		return roundTrip(true, "3600012", sarama.SourceDynamicBroker, broker)
	})
	do("describe cluster-default configs", func() error {
		_, err := describeConfig(adm, sarama.BrokerResource, "")
		return err
	})
	do("alter cluster-default configs (incremental)", func() error {
		return roundTrip(false, "3600013", sarama.SourceDynamicDefaultBroker, "")
	})
	do("alter cluster-default configs (legacy)", func() error {
		return roundTrip(true, "3600014", sarama.SourceDynamicDefaultBroker, "")
	})
}

// login logs in with each mechanism, listing the login topic, and with
// a wrong password, which must be refused.
func login(r run) {
	for _, mech := range r.Mechanisms {
		do(loginOp(mech), func() error {
			adm, err := admin(r, mech, r.User, r.Password)
			if err != nil {
				return err
			}
			defer adm.Close()
			l, err := adm.ListTopics()
			if err != nil {
				return err
			}
			if _, ok := l[r.LoginTopic]; !ok {
				return fmt.Errorf("lists %d topics, not %s", len(l), r.LoginTopic)
			}
			return nil
		})
		do(wrongPasswordOp(mech), func() error {
			adm, err := admin(r, mech, r.User, r.Password+"-wrong")
			if err == nil {
				_, err = adm.ListTopics()
				adm.Close()
			}
			if !errors.Is(err, sarama.ErrSASLAuthenticationFailed) {
				return fmt.Errorf("got %v, want SASL_AUTHENTICATION_FAILED", err)
			}
			return nil
		})
	}
}

// noLogin checks what a client that does not log in gets from a SASL
// cluster (the run of its SCRAM mechanisms): an error, or at least no
// login topic, from ListTopics, and an error from CreateTopic.
func noLogin(r run) {
	if !slices.Contains(r.Mechanisms, "SCRAM-SHA-512") {
		return
	}
	do("no login, nothing seen or done", func() error {
		adm, err := admin(r, "", "", "")
		if err != nil {
			return nil // refused at once
		}
		defer adm.Close()
		l, err := adm.ListTopics()
		if _, ok := l[r.LoginTopic]; err == nil && ok {
			return fmt.Errorf("lists %s without a login", r.LoginTopic)
		}
		if err := adm.CreateTopic(r.Prefix+"-no-login", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err == nil {
			return errors.New("created a topic without a login")
		}
		return nil
	})
}

func loginOp(mech string) string {
	if mech == "PLAIN" {
		return "login PLAIN over TLS"
	}
	return "login " + mech
}

func wrongPasswordOp(mech string) string {
	if mech == "PLAIN" {
		return "wrong password refused (PLAIN over TLS)"
	}
	return "wrong password refused (" + mech + ")"
}

func describeConfig(adm sarama.ClusterAdmin, t sarama.ConfigResourceType, name string) (map[string]sarama.ConfigEntry, error) {
	entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: t, Name: name})
	if err != nil {
		return nil, err
	}
	m := map[string]sarama.ConfigEntry{}
	for _, e := range entries {
		m[e.Name] = e
	}
	return m, nil
}

func wantConfig(m map[string]sarama.ConfigEntry, key, value string, src sarama.ConfigSource) error {
	c, ok := m[key]
	if !ok {
		return fmt.Errorf("no %s among %d configs", key, len(m))
	}
	if c.Value != value || c.Source != src {
		return fmt.Errorf("%s = %s (%s), want %s (%s)", key, c.Value, c.Source, value, src)
	}
	return nil
}

func notSource(m map[string]sarama.ConfigEntry, key string, src sarama.ConfigSource) error {
	if c, ok := m[key]; ok && c.Source == src {
		return fmt.Errorf("%s is still %s (%s)", key, src, c.Value)
	}
	return nil
}

func checkPartitions(md *sarama.TopicMetadata, n, rf int, brokers []int32) error {
	if md.Err != sarama.ErrNoError {
		return md.Err
	}
	if len(md.Partitions) != n {
		return fmt.Errorf("%s has %d partitions, want %d", md.Name, len(md.Partitions), n)
	}
	for _, p := range md.Partitions {
		if p.Err != sarama.ErrNoError {
			return fmt.Errorf("%s-%d: %w", md.Name, p.ID, p.Err)
		}
		if len(p.Replicas) != rf || !slices.Contains(p.Replicas, p.Leader) || len(p.Isr) != rf {
			return fmt.Errorf("%s-%d: replicas %v, leader %d, ISR %v", md.Name, p.ID, p.Replicas, p.Leader, p.Isr)
		}
		for _, x := range p.Replicas {
			if !slices.Contains(brokers, x) {
				return fmt.Errorf("%s-%d: replica %d is not a broker", md.Name, p.ID, x)
			}
		}
	}
	return nil
}

// reassignTarget is the test's: the brokers not among the replicas
// first, as many as there are replicas.
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
