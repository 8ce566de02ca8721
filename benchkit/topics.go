package benchkit

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/listener"
)

// topicCreation creates cfg.Topics one-partition topics of replication
// factor 3 through the voters' Kafka listeners with a Kafka client
// (franz-go), TopicsPerRequest per CreateTopics, InFlight at once.
func topicCreation(ctx context.Context, cfg Config, dir string, col *collector, phase func(string, ...any)) error {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c, err := startWithBrokers(wctx, cfg, dir, nil)
	if err != nil {
		return err
	}
	defer c.shutdown()
	addrs, err := freeAddrs(3)
	if err != nil {
		return err
	}
	var peers []listener.PeerListener
	for i, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		p, _ := strconv.Atoi(port)
		peers = append(peers, listener.PeerListener{NodeID: c.peers[i].ID, Host: host, Port: int32(p)})
	}
	for i, n := range c.running() {
		l, err := listener.New(listener.Config{Addr: addrs[i], Node: n, Peers: peers, Logger: cfg.Logger})
		if err != nil {
			return err
		}
		defer l.Close()
	}
	activeIdx, node, err := c.active(wctx)
	if err != nil {
		return err
	}
	floor, err := rawRaftFloor(node, cfg.FloorSamples)
	if err != nil {
		return err
	}
	phase("  raw raft floor %v", floor.Round(time.Microsecond))

	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ClientID("ctrlnode-bench"), kgo.RetryTimeout(time.Minute))
	if err != nil {
		return err
	}
	defer cl.Close()
	// Every creation goes to the active voter itself: what is measured is
	// the controller, and a voter's Metadata names a broker, not the
	// voter, as controller (these brokers serve no clients). addrs are
	// the seeds in order, and leadership does not move in this scenario.
	ctrl := cl.SeedBrokers()[activeIdx]
	// One request first, so the connection is up before the clock starts.
	if err := createTopics(ctx, ctrl, []string{"bench-warmup"}); err != nil {
		return err
	}
	names := make(chan []string)
	go func() {
		defer close(names)
		for i := 0; i < cfg.Topics; i += cfg.TopicsPerRequest {
			var batch []string
			for j := i; j < min(i+cfg.TopicsPerRequest, cfg.Topics); j++ {
				batch = append(batch, fmt.Sprintf("bench-topic-%06d", j))
			}
			select {
			case names <- batch:
			case <-ctx.Done():
				return
			}
		}
	}()
	var created atomic.Int64
	var firstErr error
	var emu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	stopProgress := make(chan struct{})
	go func() {
		t := time.NewTicker(cfg.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-stopProgress:
				return
			case <-t.C:
				phase("  created %d/%d topics", created.Load(), cfg.Topics)
			}
		}
	}()
	for w := 0; w < cfg.InFlight; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range names {
				if err := createTopics(ctx, ctrl, batch); err != nil {
					emu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					emu.Unlock()
					continue
				}
				created.Add(int64(len(batch)))
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(stopProgress)
	if firstErr != nil {
		return firstErr
	}
	rate := float64(cfg.Topics) / took.Seconds()
	col.add("topics", Result{Scenario: "topic creation via the Kafka listener", Unit: "topics/s"},
		sample{v: rate, floorMs: ms(floor), load: loadAverage(), note: fmt.Sprintf("%d topics (1 partition, RF 3), %d per request, %d in flight", cfg.Topics, cfg.TopicsPerRequest, cfg.InFlight)})
	phase("  %d topics in %v: %.0f topics/s", cfg.Topics, took.Round(time.Millisecond), rate)
	return nil
}

func createTopics(ctx context.Context, cl *kgo.Broker, names []string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 60_000
	for _, n := range names {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = n, 1, 3
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("create %s: %w", t.Topic, err)
		}
	}
	return nil
}
