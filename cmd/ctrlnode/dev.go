package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/controller"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// devPorts are the fixed raft ports of dev mode, so a restart finds the
// same quorum it bootstrapped.
var devPorts = []int{19091, 19092, 19093}

func runDev(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data", "./ctrlnode-data", "folder for the voters' data; kept between runs")
	host := fs.String("host", "127.0.0.1", "loopback address the voters bind")
	logLevel := fs.String("log-level", "info", "log level: trace, debug, info, warn, error")
	session := fs.Duration("session-timeout", 9*time.Second, "broker session timeout")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ctrlnode dev [flags]")
		fmt.Fprintln(stderr, "\nRuns three controller voters and three simulated brokers in this process.")
		fmt.Fprintln(stderr, "Ctrl-C stops them cleanly; starting again resumes from the data folder.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if ip := net.ParseIP(*host); ip == nil || !ip.IsLoopback() {
		fmt.Fprintf(stderr, "ctrlnode dev: --host %q is not a loopback address\n", *host)
		return 2
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "ctrlnode", Level: hclog.LevelFromString(*logLevel), Output: stderr})

	var peers []controller.Peer
	for i, p := range devPorts {
		peers = append(peers, controller.Peer{ID: int32(i + 1), Addr: net.JoinHostPort(*host, strconv.Itoa(p))})
	}
	var nodes []*controller.Node
	stopAll := func() {
		for _, n := range nodes {
			_ = n.Shutdown()
		}
	}
	for _, p := range peers {
		dir := filepath.Join(*dataDir, fmt.Sprintf("voter-%d", p.ID))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintf(stderr, "ctrlnode dev: %v\n", err)
			stopAll()
			return 1
		}
		n, err := controller.StartNode(controller.NodeConfig{
			NodeID: p.ID, RaftAddr: p.Addr, DataDir: dir, Peers: peers,
			Logger: logger, SessionTimeout: *session,
		})
		if err != nil {
			fmt.Fprintf(stderr, "ctrlnode dev: %v\n", err)
			stopAll()
			return 1
		}
		nodes = append(nodes, n)
	}
	fmt.Fprintf(stdout, "ctrlquorum dev: three voters, data in %s\n", *dataDir)
	for _, p := range peers {
		fmt.Fprintf(stdout, "  voter %d  raft %s\n", p.ID, p.Addr)
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var wg sync.WaitGroup
	for id := int32(1); id <= 3; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			simulateBroker(ctx, nodes, id, *session, logger.Named(fmt.Sprintf("broker-%d", id)))
		}()
	}
	go reportLeader(ctx, nodes, stdout)
	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping…")
	wg.Wait()
	stopAll()
	fmt.Fprintln(stdout, "stopped")
	return 0
}

// activeNode returns the node whose controller is active, or nil.
func activeNode(nodes []*controller.Node) *controller.Node {
	for _, n := range nodes {
		if ok, _ := n.Controller.Active(); ok {
			return n
		}
	}
	return nil
}

func reportLeader(ctx context.Context, nodes []*controller.Node, out io.Writer) {
	var last int32 = -1
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for i, n := range nodes {
			if ok, epoch := n.Controller.Active(); ok && epoch != last {
				last = epoch
				fmt.Fprintf(out, "active controller: voter %d, controller epoch %d\n", i+1, epoch)
			}
		}
	}
}

// simulateBroker registers a broker with the active controller and
// heartbeats until ctx ends. Each run is a new incarnation.
func simulateBroker(ctx context.Context, nodes []*controller.Node, id int32, session time.Duration, log hclog.Logger) {
	inc := rl.IncarnationID{byte(id)}
	binaryTime := time.Now().UnixNano()
	for i := 0; i < 8; i++ {
		inc[8+i] = byte(binaryTime >> (8 * i))
	}
	var epoch int64 = -1
	t := time.NewTicker(session / 6)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := activeNode(nodes)
		if n == nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if epoch < 0 {
			e, err := n.Controller.RegisterBroker(cctx, controller.BrokerRegistration{BrokerID: id, IncarnationID: inc,
				Endpoints: []rl.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: uint16(29091 + id)}}})
			if err != nil {
				log.Debug("registration failed; retrying", "error", err)
			} else {
				epoch = e
				log.Info("registered", "epoch", e)
			}
		} else {
			_, err := n.Controller.Heartbeat(cctx, controller.Heartbeat{BrokerID: id, BrokerEpoch: epoch, MetadataOffset: n.FSM.AppliedIndex()})
			if errors.Is(err, kerr.StaleBrokerEpoch) || errors.Is(err, kerr.BrokerIDNotRegistered) {
				epoch = -1 // replaced or forgotten: register again
			}
		}
		cancel()
	}
}
