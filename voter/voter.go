package voter

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
	"github.com/ctrlquorum/ctrlquorum/voter/meta"
)

// Voter is one running raft node with its stores and transport.
type Voter struct {
	id      string
	dir     string
	addr    string
	raft    *raft.Raft
	trans   *raft.NetworkTransport
	stores  *raftlog.Stores
	leaders *leaderForwarder
	log     hclog.Logger
	members membership
	ident   meta.Properties

	shutdownOnce sync.Once
	shutdownErr  error
}

// Start opens the stores in cfg.DataDir, starts the transport and raft, and
// bootstraps the cluster if the data directory holds no raft state: from
// the initial voters of its meta.properties when it is formatted, from
// cfg.Peers when it is not (see the package comment). Restarting on
// existing data resumes from it.
func Start(cfg Config) (*Voter, error) {
	if err := cfg.validate(); err != nil {
		closeStream(cfg.Stream)
		return nil, err
	}
	ident, err := readIdentity(&cfg)
	if err != nil {
		closeStream(cfg.Stream)
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}

	storeOpts := cfg.Store
	storeOpts.Logger = logger
	stores, err := raftlog.OpenStores(cfg.DataDir, storeOpts)
	if err != nil {
		closeStream(cfg.Stream)
		return nil, err
	}

	stream := cfg.Stream
	if stream == nil {
		stream, err = raftnet.NewTCPStreamLayer(cfg.BindAddr, cfg.Advertise)
		if err != nil {
			_ = stores.Close()
			return nil, err
		}
	}
	stream.SetIdentity(cfg.NodeID, cfg.DirectoryID, logger.Named("raftnet"))
	trans := raftnet.NewRaftTransport(stream, logger.Named("transport"))
	fail := func(err error) (*Voter, error) {
		_ = trans.Close()
		_ = stores.Close()
		return nil, err
	}

	leaders := newLeaderForwarder()
	rc := cfg.raftConfig(logger, leaders.in)
	if err := raft.ValidateConfig(rc); err != nil {
		leaders.close()
		return fail(fmt.Errorf("voter: %w", err))
	}

	if err := bootstrapIfNew(&cfg, rc, stores, trans, logger); err != nil {
		leaders.close()
		return fail(err)
	}

	r, err := raft.NewRaft(rc, cfg.FSM, stores.Log, stores.Stable, stores.Snapshots, trans)
	if err != nil {
		leaders.close()
		return fail(fmt.Errorf("voter: start raft: %w", err))
	}
	return &Voter{
		id:      cfg.NodeID,
		dir:     cfg.DirectoryID,
		addr:    string(trans.LocalAddr()),
		raft:    r,
		trans:   trans,
		stores:  stores,
		leaders: leaders,
		log:     logger,
		ident:   ident,
	}, nil
}

// readIdentity reads DataDir's meta.properties, if any, checks that it
// belongs to this node, takes its directory id as Config.DirectoryID, and
// makes its initial voters the only bootstrap configuration.
func readIdentity(cfg *Config) (meta.Properties, error) {
	p, err := meta.Read(cfg.DataDir)
	if errors.Is(err, meta.ErrUnformatted) {
		return meta.Properties{}, nil
	}
	if err != nil {
		return p, fmt.Errorf("voter: %w", err)
	}
	if strconv.Itoa(int(p.NodeID)) != cfg.NodeID {
		return p, fmt.Errorf("voter: %s is formatted for node %d, not node %s", cfg.DataDir, p.NodeID, cfg.NodeID)
	}
	if len(cfg.Peers) > 0 {
		return p, fmt.Errorf("voter: %s is formatted, and only its initial voters bootstrap raft: Config.Peers must be empty", cfg.DataDir)
	}
	dir := p.DirectoryID.String()
	if cfg.DirectoryID != "" && cfg.DirectoryID != dir {
		return p, fmt.Errorf("voter: %s has directory id %s, not %s (Config.DirectoryID)", cfg.DataDir, dir, cfg.DirectoryID)
	}
	cfg.DirectoryID = dir
	// Each initial voter's address names its directory id, so that the
	// first configuration already tells a voter from a node formatted
	// again under its id (see raftnet.PeerAddress).
	for _, v := range p.InitialVoters {
		addr := raftnet.PeerAddress{HostPort: v.Addr, DirectoryID: v.DirectoryID.String()}
		cfg.Peers = append(cfg.Peers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(strconv.Itoa(int(v.NodeID))), Address: raft.ServerAddress(addr.String())})
	}
	return p, nil
}

// bootstrapIfNew writes the initial cluster configuration into a data
// directory that has none. It runs before raft.NewRaft so that raft starts
// from the bootstrapped log like from any other.
func bootstrapIfNew(cfg *Config, rc *raft.Config, stores *raftlog.Stores, trans raft.Transport, logger hclog.Logger) error {
	existing, err := stores.HasExistingState()
	if err != nil {
		return fmt.Errorf("voter: inspect data dir: %w", err)
	}
	if existing {
		logger.Info("resuming from existing raft state", "dir", cfg.DataDir)
		return nil
	}
	if len(cfg.Peers) == 0 {
		logger.Info("no raft state and no initial voters: waiting to be added to the quorum", "dir", cfg.DataDir)
		return nil
	}
	self := trans.LocalAddr()
	for _, p := range cfg.Peers {
		a, err := raftnet.ParsePeerAddress(string(p.Address))
		if err != nil {
			return fmt.Errorf("voter: Peers: %w", err)
		}
		if string(p.ID) == cfg.NodeID && raft.ServerAddress(a.HostPort) != self {
			return fmt.Errorf("voter: Peers list this node (%s) at %s but it advertises %s", cfg.NodeID, p.Address, self)
		}
	}
	logger.Info("bootstrapping new cluster", "voters", len(cfg.Peers))
	conf := raft.Configuration{Servers: append([]raft.Server(nil), cfg.Peers...)}
	if err := raft.BootstrapCluster(rc, stores.Log, stores.Stable, stores.Snapshots, trans, conf); err != nil {
		return fmt.Errorf("voter: bootstrap: %w", err)
	}
	return nil
}

func closeStream(s *raftnet.StreamLayer) {
	if s != nil {
		_ = s.Close()
	}
}

// Identity is the meta.properties of the data directory (its cluster id,
// node id and directory id), the zero Properties for a directory that is
// not formatted (a voter of an in-process cluster started from
// Config.Peers).
func (v *Voter) Identity() meta.Properties { return v.ident }

// ID is the raft server id of this voter.
func (v *Voter) ID() string { return v.id }

// DirectoryID is the directory id this voter was started with (see
// Config.DirectoryID); empty when none.
func (v *Voter) DirectoryID() string { return v.dir }

// Addr is the address this voter advertises to its peers.
func (v *Voter) Addr() string { return v.addr }

// Raft gives access to the underlying raft node for what this type does not
// wrap (stats, configuration changes, barriers, snapshots).
func (v *Voter) Raft() *raft.Raft { return v.raft }

// LogStore is the voter's raft log, for reading committed entries back
// (benchmarks replay an event's entries elsewhere). Do not write to it.
func (v *Voter) LogStore() raft.LogStore { return v.stores.Log }

// Apply proposes data as one log entry. It succeeds only on the leader; the
// future's Response is what the FSM returned for the entry.
func (v *Voter) Apply(data []byte, timeout time.Duration) raft.ApplyFuture {
	return v.raft.Apply(data, timeout)
}

// IsLeader reports whether this voter currently believes it leads. Use
// VerifyLeader on Raft() when a stale answer is not acceptable.
func (v *Voter) IsLeader() bool { return v.raft.State() == raft.Leader }

// LeaderID returns the address and id of the current leader as this voter
// knows it, or empty strings when there is none.
func (v *Voter) LeaderID() (addr, id string) {
	a, i := v.raft.LeaderWithID()
	return string(a), string(i)
}

// LeaderEvents delivers true when this voter becomes leader and false when
// it stops being leader. It holds only the latest value: a consumer that
// falls behind skips intermediate changes but never reads a stale state.
// The channel is closed after Shutdown.
func (v *Voter) LeaderEvents() <-chan bool { return v.leaders.out }

// TransferLeadership hands leadership to the most up-to-date follower and
// waits for the handover. On a voter that is not the leader there is nothing
// to hand over and it returns nil, so a stopping node can call it
// unconditionally.
func (v *Voter) TransferLeadership() error {
	err := v.raft.LeadershipTransfer().Error()
	if errors.Is(err, raft.ErrNotLeader) {
		return nil
	}
	return err
}

// Shutdown stops raft and waits for its goroutines, then closes the
// transport and the stores, in that order because raft writes to both
// until it has stopped. Calling it again returns the first result.
func (v *Voter) Shutdown() error {
	v.shutdownOnce.Do(func() {
		errRaft := v.raft.Shutdown().Error()
		v.leaders.close()
		errTrans := v.trans.Close()
		errStores := v.stores.Close()
		v.shutdownErr = errors.Join(errRaft, errTrans, errStores)
	})
	return v.shutdownErr
}
