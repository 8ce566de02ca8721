// Package devcluster assembles what `ctrlnode dev` runs: three controller
// voters (ids 1001-1003) and three brokers (ids 1-3) in one process on a
// loopback address, each a server.Server, optionally over mutual TLS
// (Certs) and with SASL (Security). The brokers keep partition data, or
// with SimulatedBrokers only what the controller told them.
//
// The layout is fixed, so that a restart finds the quorum it
// bootstrapped. Ports are offsets from Layout.Port (default 19092):
//
//	Kafka listeners of voters 1001-1003   port+0 .. port+2   (the bootstrap address is port+0)
//	raft of voters 1001-1003              port+100 .. +102
//	HTTP endpoints of voters 1001-1003    port+200 .. +202
//	broker agents 1-3                     port+300 .. +302
//
// Data: <data>/voter-1001 .. voter-1003, one raft log each, and
// <data>/broker-1 .. broker-3, each broker's partition logs.
package devcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/server"
	"github.com/ctrlquorum/ctrlquorum/transport/listener"
)

const (
	// DefaultPort is the first port of the default layout.
	DefaultPort = 19092
	// PortSpan is how far above Layout.Port the layout's ports reach.
	PortSpan     = 302
	firstVoterID = 1001
	numVoters    = 3
	numBrokers   = 3
)

// Layout is where the cluster's nodes listen.
type Layout struct {
	Host string
	Port int
}

func (l Layout) addr(offset, i int) string {
	return net.JoinHostPort(l.Host, strconv.Itoa(l.Port+offset+i))
}

// Listener is the Kafka listener of the i-th voter; Listener(0) is the
// bootstrap address.
func (l Layout) Listener(i int) string { return l.addr(0, i) }

// Raft is the raft address of the i-th voter.
func (l Layout) Raft(i int) string { return l.addr(100, i) }

// HTTP is the HTTP endpoint of the i-th voter.
func (l Layout) HTTP(i int) string { return l.addr(200, i) }

// Broker is the agent's listener of the i-th broker (broker id i+1).
func (l Layout) Broker(i int) string { return l.addr(300, i) }

// Voters are the quorum's voters.
func (l Layout) Voters() []server.VoterPeer {
	var out []server.VoterPeer
	for i := 0; i < numVoters; i++ {
		out = append(out, server.VoterPeer{ID: int32(firstVoterID + i), Raft: l.Raft(i), Listener: l.Listener(i)})
	}
	return out
}

// OldLayout reports whether dataDir holds data of the older dev layout
// (voter-1 .. voter-3), which is left alone and not used.
func OldLayout(dataDir string) bool {
	_, err := os.Stat(filepath.Join(dataDir, "voter-1"))
	return err == nil
}

// Config is a dev cluster.
type Config struct {
	Layout
	// DataDir holds a folder per voter.
	DataDir         string
	SessionTimeout  time.Duration
	Pprof           bool
	ZooKeeperMirror string
	Logger          hclog.Logger
	// Certs, if not nil, runs everything over mutual TLS.
	Certs *Certs
	// Security is the listeners' SASL and every node's login; zero: none.
	Security Security
	// SimulatedBrokers runs brokers that keep no data (a broker.MemoryHost
	// each, with simulated replication) in place of brokers with a real
	// data path in DataDir/broker-<id>.
	SimulatedBrokers bool
}

// Cluster is a dev cluster, started in steps: StartVoters, then
// StartBrokers.
type Cluster struct {
	cfg     Config
	Voters  []*server.Server
	Brokers []*server.Server

	stopSim context.CancelFunc
	sim     sync.WaitGroup
}

// New prepares a cluster; nothing runs yet.
func New(cfg Config) *Cluster { return &Cluster{cfg: cfg} }

// HeartbeatInterval is the brokers' heartbeat interval and the period of
// their simulated replication: a quarter of the session timeout, at most
// 2 s.
func (c *Cluster) HeartbeatInterval() time.Duration {
	return min(c.cfg.SessionTimeout/4, 2*time.Second)
}

// VoterDir is the data directory of voter id.
func (c *Cluster) VoterDir(id int32) string {
	return filepath.Join(c.cfg.DataDir, fmt.Sprintf("voter-%d", id))
}

// StartVoters formats the voters' folders that are not formatted yet, as
// a new cluster of the three (a folder of an earlier release, holding raft
// state without meta.properties, is adopted by its voter instead), then
// starts the voters. On error, Stop stops those that started.
func (c *Cluster) StartVoters() error {
	cfg := c.cfg
	dirs := map[int32]string{}
	for _, vp := range cfg.Voters() {
		dirs[vp.ID] = c.VoterDir(vp.ID)
	}
	if _, err := server.FormatVoters("", cfg.Voters(), dirs); err != nil {
		return err
	}
	for i, vp := range cfg.Voters() {
		s, err := server.Start(server.Config{
			NodeID: vp.ID, Voter: true, RaftAddr: vp.Raft, Listener: vp.Listener, ListenerAdvertise: vp.Listener,
			Voters: cfg.Voters(), DataDir: dirs[vp.ID], SessionTimeout: cfg.SessionTimeout,
			HTTPAddr: cfg.HTTP(i), Pprof: cfg.Pprof, ZooKeeperMirror: cfg.ZooKeeperMirror, StateChangeLog: true,
			Logger: cfg.Logger, TLS: cfg.Certs.voter(vp.ID), Security: cfg.Security.Listener, SASL: cfg.Security.Login,
		})
		if err != nil {
			return fmt.Errorf("voter %d: %w", vp.ID, err)
		}
		c.Voters = append(c.Voters, s)
	}
	return nil
}

// StartBrokers starts the brokers, calling started with each: brokers
// with their partition data in DataDir/broker-<id>, or with
// SimulatedBrokers, once all run, their simulated replication
// (broker.Agent.SimulateReplication). On error, Stop stops those that
// started.
func (c *Cluster) StartBrokers(started func(*server.Server)) error {
	cfg := c.cfg
	hb := c.HeartbeatInterval()
	var cluster string
	if len(c.Voters) > 0 {
		cluster = c.Voters[0].Cfg().ClusterID
	}
	for i := 0; i < numBrokers; i++ {
		id := int32(i + 1)
		s, err := server.Start(server.Config{
			NodeID: id, Broker: true, BrokerID: id, BrokerListener: cfg.Broker(i), Voters: cfg.Voters(), ClusterID: cluster,
			SessionTimeout: cfg.SessionTimeout, HeartbeatInterval: hb, Logger: cfg.Logger.Named(fmt.Sprintf("broker-%d", id)),
			TLS: cfg.Certs.broker(id), SASL: cfg.Security.Login, BrokerData: c.brokerData(id),
			Security: listener.SecurityConfig{SASLMechanisms: cfg.Security.Listener.SASLMechanisms, SuperUsers: cfg.Security.Listener.SuperUsers},
		})
		if err != nil {
			return fmt.Errorf("broker %d: %w", id, err)
		}
		c.Brokers = append(c.Brokers, s)
		started(s)
	}
	if !cfg.SimulatedBrokers {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.stopSim = cancel
	for _, b := range c.Brokers {
		c.sim.Add(1)
		go func() {
			defer c.sim.Done()
			b.Agent.SimulateReplication(ctx, hb)
		}()
	}
	return nil
}

// brokerData is where broker id keeps its data; none with
// SimulatedBrokers.
func (c *Cluster) brokerData(id int32) server.BrokerData {
	if c.cfg.SimulatedBrokers {
		return server.BrokerData{}
	}
	return server.BrokerData{Dir: filepath.Join(c.cfg.DataDir, fmt.Sprintf("broker-%d", id))}
}

// WatchActive calls changed, until ctx is done, each time it finds a
// voter that is the active controller in another controller epoch than
// the last one it reported.
func (c *Cluster) WatchActive(ctx context.Context, changed func(voter, epoch int32)) {
	var last int32 = -1
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, v := range c.Voters {
			if ok, epoch := v.Node.Controller.Active(); ok && epoch != last {
				last = epoch
				changed(v.Cfg().NodeID, epoch)
			}
		}
	}
}

// Stop stops the simulated replication, then the brokers (a controlled
// shutdown each, at once, bounded by ctx), then the voters: every voter
// stops, so there is no leadership to hand over.
func (c *Cluster) Stop(ctx context.Context) {
	if c.stopSim != nil {
		c.stopSim()
		c.sim.Wait()
	}
	var wg sync.WaitGroup
	for _, b := range c.Brokers {
		wg.Add(1)
		go func() { defer wg.Done(); _ = b.Stop(ctx) }()
	}
	wg.Wait()
	for _, v := range c.Voters {
		_ = v.Close()
	}
}
