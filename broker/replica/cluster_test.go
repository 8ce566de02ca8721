package replica_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/server"
)

// cluster is one controller voter and brokers with real data paths, in
// this process, on 127.0.0.1.
type cluster struct {
	t       *testing.T
	voter   *server.Server
	peers   []server.VoterPeer
	dir     string
	data    server.BrokerData
	mu      sync.Mutex
	brokers map[int32]*server.Server
	addrs   map[int32]string
}

// sessionTimeout is the brokers' session timeout unless a test sets one.
const sessionTimeout = 2 * time.Second

func newCluster(t *testing.T, n int, data server.BrokerData) *cluster {
	return newClusterSession(t, n, data, sessionTimeout)
}

func newClusterSession(t *testing.T, n int, data server.BrokerData, session time.Duration) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir(), data: data, brokers: map[int32]*server.Server{}, addrs: map[int32]string{}}
	raft := testkit.BindOutsideEphemeral(t, "127.0.0.1", func(addr string) (string, error) { return freeAddr(addr) })
	listen := testkit.BindOutsideEphemeral(t, "127.0.0.1", func(addr string) (string, error) { return freeAddr(addr) })
	c.peers = []server.VoterPeer{{ID: 1001, Raft: raft, Listener: listen}}
	if _, err := server.FormatVoters("", c.peers, map[int32]string{1001: filepath.Join(c.dir, "voter")}); err != nil {
		t.Fatal(err)
	}
	v, err := server.Start(server.Config{
		NodeID: 1001, Voter: true, RaftAddr: raft, Listener: listen, Voters: c.peers,
		DataDir: filepath.Join(c.dir, "voter"), SessionTimeout: session, Logger: testkit.Logger(t).Named("voter"),
	})
	if err != nil {
		t.Fatal(err)
	}
	c.voter = v
	t.Cleanup(func() {
		c.mu.Lock()
		bs := c.brokers
		c.brokers = map[int32]*server.Server{}
		c.mu.Unlock()
		for _, b := range bs {
			_ = b.Close()
		}
		_ = v.Stop(context.Background())
	})
	for id := int32(1); id <= int32(n); id++ {
		c.start(id)
	}
	c.waitLive(n)
	return c
}

// freeAddr checks that addr can be bound now.
func freeAddr(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	_ = ln.Close()
	return addr, nil
}

// start starts broker id (again, on its old address and data).
func (c *cluster) start(id int32) {
	c.t.Helper()
	data := c.data
	data.Dir = filepath.Join(c.dir, fmt.Sprintf("broker-%d", id))
	cfg := server.Config{
		NodeID: id, Broker: true, BrokerID: id, Voters: c.peers, HeartbeatInterval: 200 * time.Millisecond,
		BrokerData: data, Logger: testkit.Logger(c.t).Named(fmt.Sprintf("broker-%d", id)),
	}
	c.mu.Lock()
	addr := c.addrs[id]
	c.mu.Unlock()
	var s *server.Server
	if addr == "" {
		s = testkit.BindOutsideEphemeral(c.t, "127.0.0.1", func(addr string) (*server.Server, error) {
			cfg.BrokerListener = addr
			return server.Start(cfg)
		})
	} else {
		cfg.BrokerListener = addr
		testkit.WaitFor(c.t, 10*time.Second, "broker's port free again", func() bool {
			var err error
			s, err = server.Start(cfg)
			return err == nil
		})
	}
	c.mu.Lock()
	c.brokers[id], c.addrs[id] = s, cfg.BrokerListener
	c.mu.Unlock()
}

// kill stops broker id at once, as a crash would: no controlled
// shutdown; the controller fences it when its session expires.
func (c *cluster) kill(id int32) {
	c.mu.Lock()
	s := c.brokers[id]
	delete(c.brokers, id)
	c.mu.Unlock()
	_ = s.Close()
}

func (c *cluster) broker(id int32) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokers[id]
}

func (c *cluster) seeds() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, a := range c.addrs {
		out = append(out, a)
	}
	return out
}

func (c *cluster) waitLive(n int) {
	c.t.Helper()
	testkit.WaitFor(c.t, 30*time.Second, fmt.Sprintf("%d brokers registered and unfenced", n), func() bool {
		live := 0
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, b := range c.brokers {
			if st := b.Agent.Status(); st.Registered && !st.Fenced {
				live++
			}
		}
		return live >= n
	})
}

// createTopic creates a topic through the controller's listener and
// waits until every replica has a leader that knows it leads.
func (c *cluster) createTopic(name string, partitions int32, rf int16) {
	c.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.peers[0].Listener))
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, rf, nil, name); err != nil {
		c.t.Fatal(err)
	}
	for p := int32(0); p < partitions; p++ {
		c.leaderOf(name, p)
	}
}

// leaderOf waits for a partition's leader to run as leader and returns it.
func (c *cluster) leaderOf(topic string, partition int32) int32 {
	c.t.Helper()
	var leader int32 = -1
	testkit.WaitFor(c.t, 30*time.Second, fmt.Sprintf("a leader of %s-%d", topic, partition), func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for id, b := range c.brokers {
			for _, r := range b.Replicas.Replicas() {
				if r.Topic == topic && r.Partition == partition && r.Leader {
					if st, ok := b.Agent.Partition(topic, partition); ok && st.Leader == id {
						leader = id
						return true
					}
				}
			}
		}
		return false
	})
	return leader
}

// client is a kgo client of the brokers: producing with acks=all and no
// idempotence (no producer ids: this broker serves no InitProducerID).
func (c *cluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(100 * time.Millisecond)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// consumeAll reads a partition from the start up to its high watermark.
func consumeAll(t *testing.T, seeds []string, topic string, partition int32, upTo int64) map[int64]string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {partition: kgo.NewOffset().AtStart()},
	}), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[int64]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for next := int64(0); next < upTo; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %s-%d up to %d of %d: %v", topic, partition, next, upTo, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("fetch error (the client retries): %v", err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if old, dup := got[r.Offset]; dup {
				t.Fatalf("offset %d read twice: %q, then %q", r.Offset, old, r.Value)
			}
			got[r.Offset] = string(r.Value)
			next = max(next, r.Offset+1)
		})
	}
	return got
}

func isRetriable(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "NOT_LEADER") || strings.Contains(err.Error(), "timed out"))
}
