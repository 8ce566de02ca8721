package controller

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	"github.com/ctrlquorum/ctrlquorum/internal/gcpace"
	"github.com/ctrlquorum/ctrlquorum/voter"
)

// Peer is one controller voter of the quorum.
type Peer struct {
	ID   int32
	Addr string // raft address, host:port
}

// NodeConfig configures a controller node: a voter of the quorum that
// becomes the active controller whenever raft makes it leader.
type NodeConfig struct {
	NodeID int32
	// RaftAddr is the host:port raft listens on and dials from (and
	// advertises, unless RaftAdvertise is set).
	RaftAddr      string
	RaftAdvertise string
	DataDir       string
	// Peers are all voters including this one; used to bootstrap a fresh
	// data directory.
	Peers  []Peer
	Sender Sender
	Logger hclog.Logger
	// SessionTimeout for brokers; zero means 9 s.
	SessionTimeout time.Duration
	// Voter lets a caller adjust the voter configuration (timeouts,
	// snapshot thresholds, a TLS stream layer) before it starts.
	Voter func(*voter.Config)
	// Controller lets a caller adjust the controller configuration.
	Controller func(*Config)
	// FSM lets a caller adjust the FSM's options (a state-change
	// history's listeners).
	FSM func(*fsm.Options)
}

// Node is a running controller voter: the raft voter, the FSM every voter
// applies, and the controller that is active while this voter leads.
type Node struct {
	Voter      *voter.Voter
	FSM        *fsm.FSM
	Controller *Controller
	log        hclog.Logger
	watchDone  chan struct{}
	once       sync.Once

	// activation serializes watchLeadership's activations with Shutdown:
	// once stopping is set no activation starts, so no round of the
	// controller is left waiting on a raft that Shutdown has stopped (raft
	// answers no future still in flight when it shuts down).
	activation sync.Mutex
	stopping   bool

	// sender and readIndex serve the read-your-writes waits
	// (readyourwrites.go).
	sender    Sender
	readIndex readIndexSource
	// untrack takes the image out of the process's memory limit
	// (internal/gcpace).
	untrack func()
}

// StartNode starts a controller voter. A fresh data directory bootstraps
// the quorum from Peers; an existing one resumes from its log and
// snapshots, reading nothing from anywhere else.
func StartNode(cfg NodeConfig) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	logger := cfg.Logger.With("node", cfg.NodeID)
	fo := fsm.Options{Logger: logger.Named("fsm")}
	if cfg.FSM != nil {
		cfg.FSM(&fo)
	}
	f := fsm.New(fo)
	vc := voter.Config{
		NodeID:    strconv.Itoa(int(cfg.NodeID)),
		BindAddr:  cfg.RaftAddr,
		Advertise: cfg.RaftAdvertise,
		DataDir:   cfg.DataDir,
		FSM:       f,
		Logger:    logger,
	}
	for _, p := range cfg.Peers {
		vc.Peers = append(vc.Peers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(strconv.Itoa(int(p.ID))), Address: raft.ServerAddress(p.Addr)})
	}
	if cfg.Voter != nil {
		cfg.Voter(&vc)
	}
	v, err := voter.Start(vc)
	if err != nil {
		return nil, fmt.Errorf("start voter %d: %w", cfg.NodeID, err)
	}
	cc := Config{NodeID: cfg.NodeID, FSM: f, Log: v.Raft(), Sender: cfg.Sender, Logger: logger, SessionTimeout: cfg.SessionTimeout}
	if cfg.Controller != nil {
		cfg.Controller(&cc)
	}
	n := &Node{Voter: v, FSM: f, Controller: New(cc), log: logger, watchDone: make(chan struct{}), sender: cc.Sender}
	n.untrack = gcpace.Track(func() (parts int) {
		f.View(func(im *fsm.Image) { parts = im.NumPartitions() })
		return parts
	})
	go n.watchLeadership()
	return n, nil
}

// watchLeadership activates the controller while this voter leads.
func (n *Node) watchLeadership() {
	defer close(n.watchDone)
	for leader := range n.Voter.LeaderEvents() {
		if leader {
			n.activate()
		} else {
			n.Controller.Deactivate()
		}
	}
	n.Controller.Deactivate()
}

func (n *Node) activate() {
	n.activation.Lock()
	defer n.activation.Unlock()
	if n.stopping {
		return
	}
	n.log.Info("raft leadership gained: activating controller")
	n.Controller.Activate()
}

// Shutdown stops the node: the controller first, then raft and the stores.
// A leadership event still queued cannot activate the controller again in
// between.
func (n *Node) Shutdown() error {
	var err error
	n.once.Do(func() {
		n.activation.Lock()
		n.stopping = true
		n.activation.Unlock()
		n.Controller.Deactivate()
		err = n.Voter.Shutdown()
		<-n.watchDone
		n.untrack()
	})
	return err
}

// Leave hands leadership to another voter if this one leads, then shuts
// down: the graceful stop of a SIGTERM.
func (n *Node) Leave() error {
	if n.Voter.IsLeader() {
		n.Controller.Deactivate()
		if err := n.Voter.TransferLeadership(); err != nil && !errors.Is(err, raft.ErrNotLeader) {
			n.log.Warn("leadership transfer failed; stopping anyway", "error", err)
		}
	}
	return n.Shutdown()
}
