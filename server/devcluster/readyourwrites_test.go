package devcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/server"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
)

// freeLayout is a Layout whose ports (listener, raft, HTTP and broker
// ports of the three nodes of each kind) are all free, below the
// ephemeral range.
func freeLayout(t *testing.T) Layout {
	return testkit.BindOutsideEphemeral(t, "127.0.0.1", func(addr string) (Layout, error) {
		_, port, _ := net.SplitHostPort(addr)
		base, _ := strconv.Atoi(port)
		l := Layout{Host: "127.0.0.1", Port: base}
		var held []net.Listener
		defer func() {
			for _, h := range held {
				_ = h.Close()
			}
		}()
		for i := range 3 {
			for _, a := range []string{l.Listener(i), l.Raft(i), l.HTTP(i), l.Broker(i)} {
				h, err := net.Listen("tcp", a)
				if err != nil {
					return l, err
				}
				held = append(held, h)
			}
		}
		return l, nil
	})
}

// startCluster runs a dev cluster in this process (three voters, three
// brokers with their agents' metadata caches) and waits for the brokers
// to be registered and live.
func startCluster(t *testing.T) (*Cluster, Layout) {
	return startClusterWith(t, nil)
}

// startClusterWith is startCluster with the configuration adjusted by
// adjust (if not nil) before anything starts.
func startClusterWith(t *testing.T, adjust func(*Config)) (*Cluster, Layout) {
	t.Helper()
	layout := freeLayout(t)
	level := hclog.Warn
	if os.Getenv("CQ_DEBUG") != "" {
		level = hclog.Debug
	}
	cfg := Config{Layout: layout, DataDir: t.TempDir(), SessionTimeout: 6 * time.Second,
		Logger: hclog.New(&hclog.LoggerOptions{Name: "dev", Level: level})}
	if adjust != nil {
		adjust(&cfg)
	}
	c := New(cfg)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c.Stop(ctx)
	})
	if err := c.StartVoters(); err != nil {
		t.Fatal(err)
	}
	if err := c.StartBrokers(func(s *server.Server) {}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		live := 0
		for _, v := range c.Voters {
			if ok, _ := v.Node.Controller.Active(); ok {
				v.Node.FSM.View(func(im *fsm.Image) {
					for _, b := range im.Brokers() {
						if b.Live() {
							live++
						}
					}
				})
			}
		}
		if live == numBrokers {
			return c, layout
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d live brokers after 60 s", live)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pinned is a franz-go client that sends every request to one node: its
// seed broker, never another it learns of.
type pinned struct {
	addr string
	cl   *kgo.Client
}

func (p pinned) metadata(ctx context.Context, topics ...string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, tp := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(tp)
		req.Topics = append(req.Topics, rt)
	}
	if len(topics) == 0 {
		req.Topics = nil // all
	}
	resp, err := p.cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// TestReadYourWrites: with an in-process dev cluster (three voters,
// three brokers), round after round a topic is created through the
// active controller or a broker (which forwards it) and, as soon as the
// creation is answered, described
// from every node at once, voters and brokers, each by a client pinned to
// it; then deleted through the controller or a broker, and as soon as the
// deletion is answered, listed from every node. An answer that lacks the created topic, or still names
// the deleted one, is stale; there must be none.
func TestReadYourWrites(t *testing.T) {
	rounds := 1000
	if testing.Short() {
		rounds = 100
	}
	_, layout := startCluster(t)
	var nodes []pinned
	for i := range 3 {
		nodes = append(nodes, pinned{addr: layout.Listener(i)}, pinned{addr: layout.Broker(i)})
	}
	for i := range nodes {
		cl, err := kgo.NewClient(kgo.SeedBrokers(nodes[i].addr), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		nodes[i].cl = cl
	}
	var voters []string
	for i := range 3 {
		voters = append(voters, layout.Listener(i))
	}
	// The active controller, found as --bootstrap-controller finds it: a
	// voter's Metadata names a broker as controller, not the voter.
	ctl := kafkaclient.NewController(kafkaclient.ControllerConfig{Bootstrap: voters})
	t.Cleanup(ctl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	// look asks every node at once; stale reports, per node, whether its
	// answer missed the write.
	look := func(topic string, stale func(*kmsg.MetadataResponse) bool) (int, error) {
		var wg sync.WaitGroup
		errs := make([]error, len(nodes))
		bad := make([]bool, len(nodes))
		for i, n := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var resp *kmsg.MetadataResponse
				var err error
				if stale == nil {
					resp, err = n.metadata(ctx, topic)
				} else {
					resp, err = n.metadata(ctx)
				}
				if err != nil {
					errs[i] = fmt.Errorf("%s: %w", n.addr, err)
					return
				}
				if stale == nil {
					bad[i] = !hasTopic(resp, topic, true)
				} else {
					bad[i] = stale(resp)
				}
			}()
		}
		wg.Wait()
		n := 0
		for i := range nodes {
			if errs[i] != nil {
				return 0, errs[i]
			}
			if bad[i] {
				n++
			}
		}
		return n, nil
	}

	// Changes go in turn to the active controller and to each broker,
	// which forwards them.
	create := func(r int, topic string) error {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
		req.Topics, req.TimeoutMillis = append(req.Topics, rt), 30_000
		var resp kmsg.Response
		var err error
		if b := r % 4; b < 3 {
			resp, err = nodes[2*b+1].cl.SeedBrokers()[0].Request(ctx, req)
		} else {
			resp, err = ctl.Do(ctx, req, nil)
		}
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode)
	}
	remove := func(r int, topic string) error {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TopicNames, req.TimeoutMillis = []string{topic}, 30_000
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		var resp kmsg.Response
		var err error
		if b := (r + 1) % 4; b < 3 {
			resp, err = nodes[2*b+1].cl.SeedBrokers()[0].Request(ctx, req)
		} else {
			resp, err = ctl.Do(ctx, req, nil)
		}
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode)
	}

	var staleDescribe, staleList int
	// Time spent creating, through a broker (forwarded) and through the
	// controller, each answer waiting for the brokers' acknowledgement.
	var viaBroker, viaController time.Duration
	var nBroker, nController int
	start := time.Now()
	for r := range rounds {
		topic := fmt.Sprintf("ryw-%04d", r)
		began := time.Now()
		if err := create(r, topic); err != nil {
			t.Fatalf("round %d: create %s: %v", r, topic, err)
		}
		if r%4 < 3 {
			viaBroker += time.Since(began)
			nBroker++
		} else {
			viaController += time.Since(began)
			nController++
		}
		n, err := look(topic, nil)
		if err != nil {
			t.Fatalf("round %d: describe: %v", r, err)
		}
		staleDescribe += n
		if err := remove(r, topic); err != nil {
			t.Fatalf("round %d: delete %s: %v", r, topic, err)
		}
		n, err = look(topic, func(resp *kmsg.MetadataResponse) bool { return hasTopic(resp, topic, false) })
		if err != nil {
			t.Fatalf("round %d: list: %v", r, err)
		}
		staleList += n
	}
	elapsed := time.Since(start)
	t.Logf("%d rounds in %v (%.1f rounds/s): %d stale describes and %d stale lists of %d each, from %d nodes (3 voters, 3 brokers)",
		rounds, elapsed.Round(time.Millisecond), float64(rounds)/elapsed.Seconds(), staleDescribe, staleList, rounds*len(nodes), len(nodes))
	if nBroker > 0 && nController > 0 {
		t.Logf("one CreateTopics at a time: %.0f/s through a broker (forwarded), %.0f/s through the controller",
			float64(nBroker)/viaBroker.Seconds(), float64(nController)/viaController.Seconds())
	}
	if staleDescribe != 0 || staleList != 0 {
		t.Fatalf("%d stale describes after a create and %d stale lists after a delete", staleDescribe, staleList)
	}
}

// hasTopic reports whether a Metadata answer names the topic; with
// complete, only with its partition and no error.
func hasTopic(resp *kmsg.MetadataResponse, topic string, complete bool) bool {
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if !complete {
			return t.ErrorCode != kerr.UnknownTopicOrPartition.Code
		}
		return t.ErrorCode == 0 && len(t.Partitions) == 1
	}
	return false
}
