package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/ops"
	"github.com/ctrlquorum/ctrlquorum/voter"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// oneNode is the Config of a single node with both roles, voter 1001 and
// broker 1, on free loopback ports and fast raft timeouts.
func oneNode(t *testing.T) Config {
	raft, lis := freeAddr(t), freeAddr(t)
	cfg := Config{
		NodeID: 1001, Voter: true, Broker: true, BrokerID: 1,
		RaftAddr: raft, Listener: lis, Voters: []VoterPeer{{ID: 1001, Raft: raft, Listener: lis}},
		DataDir: t.TempDir(), SessionTimeout: 2 * time.Second, BrokerListener: "127.0.0.1:0",
		HeartbeatInterval: 100 * time.Millisecond, VoterOptions: voter.FastTimeouts,
	}
	formatAll(t, cfg)
	return cfg
}

// formatAll formats the data directories of voters cfgs as a new cluster.
func formatAll(t *testing.T, cfgs ...Config) {
	t.Helper()
	dirs := map[int32]string{}
	for _, c := range cfgs {
		dirs[c.NodeID] = c.DataDir
	}
	if _, err := FormatVoters("", cfgs[0].Voters, dirs); err != nil {
		t.Fatal(err)
	}
}

// createOnBroker waits for broker 1 to register, creates a one-partition
// topic through the node's Kafka listener with a client built from opts,
// and waits until the broker's agent has the partition.
func createOnBroker(t *testing.T, s *Server, name string, opts ...kgo.Opt) {
	t.Helper()
	waitFor(t, 30*time.Second, "broker 1 registered and unfenced", func() bool {
		st := s.Agent.Status()
		return st.Registered && !st.Fenced
	})
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.cfg.Listener), kgo.RetryTimeout(30 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if res, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 1, nil, name); err != nil || res.Error() != nil {
		t.Fatalf("CreateTopics %s: %v %v", name, err, res.Error())
	}
	waitFor(t, 30*time.Second, "the topic on broker 1", func() bool {
		_, ok := s.Agent.Partition(name, 0)
		return ok
	})
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var waitFor = testkit.WaitFor

// TestOneNodeVoterAndBroker starts a single node with both roles and its
// HTTP endpoint: it becomes ready once it leads and its broker has
// registered through its own listener, and its metrics, state hash and
// broker list say so. A graceful stop succeeds.
func TestOneNodeVoterAndBroker(t *testing.T) {
	cfg := oneNode(t)
	cfg.HTTPAddr, cfg.Pprof = "127.0.0.1:0", true
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = s.Close()
		}
	})
	base := "http://" + s.HTTP.Addr()
	if code, body := get(t, base+"/healthz"); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	waitFor(t, 30*time.Second, "/readyz 200", func() bool {
		code, _ := get(t, base+"/readyz")
		return code == 200
	})
	var brokers ops.Brokers
	waitFor(t, 30*time.Second, "broker 1 unfenced in /brokers", func() bool {
		_, body := get(t, base+"/brokers")
		if err := json.Unmarshal([]byte(body), &brokers); err != nil {
			t.Fatalf("/brokers: %v: %s", err, body)
		}
		return len(brokers.Brokers) == 1 && brokers.Brokers[0].ID == 1 && !brokers.Brokers[0].Fenced
	})
	if len(brokers.Brokers[0].Endpoints) == 0 || brokers.Brokers[0].Epoch <= 0 {
		t.Fatalf("/brokers: %+v", brokers)
	}
	var sh ops.StateHash
	_, body := get(t, base+"/state-hash")
	if err := json.Unmarshal([]byte(body), &sh); err != nil || sh.Node != 1001 || sh.Index == 0 || len(sh.Hash) != 64 || sh.ControllerEpoch < 1 {
		t.Fatalf("/state-hash: %s (%v)", body, err)
	}
	waitFor(t, 10*time.Second, "metrics of an active controller with one broker", func() bool {
		_, m := get(t, base+"/metrics")
		return strings.Contains(m, "\nkafka_controller_active_controller_count 1\n") &&
			strings.Contains(m, "\nkafka_controller_active_broker_count 1\n") &&
			strings.Contains(m, `kafka_raft_current_state{state="Leader"} 1`) &&
			strings.Contains(m, "kafka_controller_event_queue_time_seconds_count") &&
			strings.Contains(m, "\ngo_goroutines ") &&
			strings.Contains(m, `ctrlquorum_listener_limit_hits_total{limit="max_frame_bytes"} 0`) &&
			strings.Contains(m, "\nctrlquorum_listener_authorization_denials_total 0\n")
	})
	if code, _ := get(t, base+"/debug/pprof/cmdline"); code != 200 {
		t.Fatalf("pprof enabled but /debug/pprof/cmdline answers %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	stopped = true
	if code, _ := get(t, base+"/healthz"); code != 0 {
		t.Fatalf("the HTTP endpoint still answers after Stop: %d", code)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	good := func() Config {
		return Config{NodeID: 1001, Voter: true, RaftAddr: "127.0.0.1:9093", Listener: "127.0.0.1:9092", DataDir: "/d",
			Voters: []VoterPeer{{1001, "127.0.0.1:9093", "127.0.0.1:9092"}}}
	}
	if err := (func() *Config { c := good(); return &c }()).Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	for _, tc := range []struct {
		field string
		mod   func(*Config)
	}{
		{"Roles", func(c *Config) { c.Voter = false }},
		{"Voters", func(c *Config) { c.Voters = nil }},
		{"Voters[1].ID", func(c *Config) { c.Voters = append(c.Voters, c.Voters[0]) }},
		{"Voters[0].Raft", func(c *Config) { c.RaftAddr = "127.0.0.1:1" }},
		{"DataDir", func(c *Config) { c.DataDir = "" }},
		{"BrokerID", func(c *Config) { c.Broker, c.BrokerID, c.BrokerListener = true, 1001, "127.0.0.1:0" }},
		{"BrokerListener", func(c *Config) { c.Broker, c.BrokerID = true, 1 }},
		{"HTTPAddr", func(c *Config) { c.HTTPAddr = "nope" }},
		{"SessionTimeout", func(c *Config) { c.SessionTimeout = time.Millisecond }},
		{"RaftSnapshotInterval", func(c *Config) { c.RaftSnapshotInterval = -time.Second }},
		{"RaftSnapshotInterval", func(c *Config) { c.RaftSnapshotInterval = time.Millisecond }},
	} {
		c := good()
		tc.mod(&c)
		var fe *FieldError
		if err := c.Validate(); !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: Validate() = %v, want a FieldError on %s", tc.field, err, tc.field)
		}
	}
}

// TestRaftSnapshotSettingsReachRaft: the snapshot settings of a Config
// are the running raft's, and unset ones are hashicorp/raft's defaults.
// VoterOptions still has the last word.
func TestRaftSnapshotSettingsReachRaft(t *testing.T) {
	for _, tc := range []struct {
		name      string
		set       func(*Config)
		threshold uint64
		interval  time.Duration
		trailing  uint64
	}{
		{"set", func(c *Config) {
			c.RaftSnapshotThreshold, c.RaftSnapshotInterval, c.RaftTrailingLogs = 300, 3*time.Second, 70
		}, 300, 3 * time.Second, 70},
		{"defaults", func(*Config) {}, voter.DefaultSnapshotThreshold, voter.DefaultSnapshotInterval, voter.DefaultTrailingLogs},
		{"VoterOptions last", func(c *Config) {
			c.RaftSnapshotThreshold, c.RaftTrailingLogs = 300, 70
			c.VoterOptions = func(vc *voter.Config) { voter.FastTimeouts(vc); vc.TrailingLogs = 90 }
		}, 300, voter.DefaultSnapshotInterval, 90},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := oneNode(t)
			cfg.Broker = false
			tc.set(&cfg)
			s, err := Start(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			rc := s.Node.Voter.Raft().ReloadableConfig()
			if rc.SnapshotThreshold != tc.threshold || rc.SnapshotInterval != tc.interval || rc.TrailingLogs != tc.trailing {
				t.Errorf("raft runs with threshold %d, interval %v, trailing logs %d; want %d, %v, %d",
					rc.SnapshotThreshold, rc.SnapshotInterval, rc.TrailingLogs, tc.threshold, tc.interval, tc.trailing)
			}
		})
	}
}
