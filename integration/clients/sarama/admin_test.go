package sarama

import (
	"context"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/server"
	"github.com/ctrlquorum/ctrlquorum/server/devcluster"
)

// devPortOffsets are the ports a dev cluster takes above its base (see
// devcluster.Layout).
var devPortOffsets = []int{0, 1, 2, 100, 101, 102, 200, 201, 202, 300, 301, 302}

// freeBase finds a base port below the ephemeral range whose dev cluster
// ports are all free.
func freeBase(t *testing.T) int {
	for range 100 {
		base := 20000 + rand.IntN(8000)
		free := true
		for _, off := range devPortOffsets {
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+off)))
			if err != nil {
				free = false
				break
			}
			ln.Close()
		}
		if free {
			return base
		}
	}
	t.Fatal("no free port range for a dev cluster")
	return 0
}

// startDev starts the voters and brokers of a dev cluster in this process
// and returns the brokers' addresses once each is unfenced.
func startDev(t *testing.T) []string {
	t.Helper()
	dc := devcluster.New(devcluster.Config{Layout: devcluster.Layout{Host: "127.0.0.1", Port: freeBase(t)}, DataDir: t.TempDir(),
		SessionTimeout: 2 * time.Second, Logger: testkit.Logger(t)})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		dc.Stop(ctx)
	})
	if err := dc.StartVoters(); err != nil {
		t.Fatal(err)
	}
	var brokers []string
	if err := dc.StartBrokers(func(s *server.Server) { brokers = append(brokers, s.Agent.Addr()) }); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, time.Minute, "three brokers unfenced and known to each other", func() bool {
		for _, b := range dc.Brokers {
			if s := b.Agent.Status(); !s.Registered || s.Fenced || len(b.Agent.Brokers()) != 3 {
				return false
			}
		}
		return true
	})
	return brokers
}

// TestClusterAdminAtBrokers runs IBM/sarama's ClusterAdmin bootstrapped at
// the brokers only: the operations that failed when brokers served no
// admin API ("The version of API is not supported" for ListTopics,
// DescribeConfig, IncrementalAlterConfig, AlterConfig), and the others it
// offers that the cluster supports, each checked by what it did.
func TestClusterAdminAtBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("a dev cluster in process")
	}
	brokers := startDev(t)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_7_0_0
	cfg.Admin.Timeout = 20 * time.Second
	adm, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()

	nodes, ctrl, err := adm.DescribeCluster()
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	for _, b := range nodes {
		ids = append(ids, b.ID())
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []int32{1, 2, 3}) || ctrl < 1 || ctrl > 3 {
		t.Fatalf("DescribeCluster at a broker: nodes %v controller %d", ids, ctrl)
	}

	retention := "60000"
	if err := adm.CreateTopic("sarama-orders", &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 3,
		ConfigEntries: map[string]*string{"retention.ms": &retention}}, false); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	testkit.WaitFor(t, 30*time.Second, "sarama-orders listed", func() bool {
		topics, err := adm.ListTopics()
		if err != nil {
			t.Fatalf("ListTopics: %v", err)
		}
		d, ok := topics["sarama-orders"]
		return ok && d.NumPartitions == 2 && d.ReplicationFactor == 3
	})
	if err := adm.CreatePartitions("sarama-orders", 3, nil, false); err != nil {
		t.Fatalf("CreatePartitions: %v", err)
	}

	value := func(name string) string {
		entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "sarama-orders"})
		if err != nil {
			t.Fatalf("DescribeConfig: %v", err)
		}
		for _, e := range entries {
			if e.Name == name {
				return e.Value
			}
		}
		return ""
	}
	if v := value("retention.ms"); v != retention {
		t.Fatalf("retention.ms %q, want %q", v, retention)
	}
	compact := "compact"
	if err := adm.IncrementalAlterConfig(sarama.TopicResource, "sarama-orders", map[string]sarama.IncrementalAlterConfigsEntry{
		"cleanup.policy": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &compact}}, false); err != nil {
		t.Fatalf("IncrementalAlterConfig: %v", err)
	}
	if v := value("cleanup.policy"); v != compact {
		t.Fatalf("cleanup.policy %q after IncrementalAlterConfig", v)
	}
	// The legacy AlterConfig replaces every override.
	segment := "3600000"
	if err := adm.AlterConfig(sarama.TopicResource, "sarama-orders", map[string]*string{"segment.ms": &segment}, false); err != nil {
		t.Fatalf("AlterConfig: %v", err)
	}
	if v := value("segment.ms"); v != segment {
		t.Fatalf("segment.ms %q after AlterConfig", v)
	}
	if v := value("cleanup.policy"); v == compact {
		t.Fatal("AlterConfig kept an override it did not name")
	}

	res, err := adm.ElectLeaders(sarama.PreferredElection, map[string][]int32{"sarama-orders": {0, 1}})
	if err != nil {
		t.Fatalf("ElectLeaders: %v", err)
	}
	for p, r := range res["sarama-orders"] {
		if r.ErrorCode != sarama.ErrNoError && r.ErrorCode != sarama.ErrElectionNotNeeded {
			t.Fatalf("preferred election of partition %d: %v", p, r.ErrorCode)
		}
	}
	if _, err := adm.ListPartitionReassignments("sarama-orders", []int32{0}); err != nil {
		t.Fatalf("ListPartitionReassignments: %v", err)
	}

	up, err := adm.UpsertUserScramCredentials([]sarama.AlterUserScramCredentialsUpsert{{Name: "bob",
		Mechanism: sarama.SCRAM_MECHANISM_SHA_256, Iterations: 4096, Salt: []byte("salt-of-bob"), Password: []byte("pw")}})
	if err != nil || len(up) != 1 || up[0].ErrorCode != sarama.ErrNoError {
		t.Fatalf("UpsertUserScramCredentials: %v %+v", err, up)
	}
	users, err := adm.DescribeUserScramCredentials([]string{"bob"})
	if err != nil || len(users) != 1 || users[0].ErrorCode != sarama.ErrNoError || len(users[0].CredentialInfos) != 1 {
		t.Fatalf("DescribeUserScramCredentials: %v %+v", err, *users[0])
	}

	if err := adm.DeleteTopic("sarama-orders"); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	testkit.WaitFor(t, 30*time.Second, "sarama-orders gone from every broker", func() bool {
		for _, b := range brokers {
			one, err := sarama.NewClusterAdmin([]string{b}, cfg)
			if err != nil {
				return false
			}
			md, err := one.DescribeTopics([]string{"sarama-orders"})
			one.Close()
			if err != nil || len(md) != 1 || md[0].Err != sarama.ErrUnknownTopicOrPartition {
				return false
			}
		}
		return true
	})
}
