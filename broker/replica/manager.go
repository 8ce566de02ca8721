package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/ctrlquorum/ctrlquorum/authz"
	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/broker/partlog"
	"github.com/ctrlquorum/ctrlquorum/controller/configmodel"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// Config configures a Manager. Zero values take the defaults.
type Config struct {
	// BrokerID is this broker's id.
	BrokerID int32
	// DataDir holds a directory per partition replica,
	// <topic>-<partition>, as Kafka's log.dirs.
	DataDir string
	// Log is the template of each partition's log configuration
	// (segment size, fsync policy); the topic id is filled in.
	Log partlog.Config
	// ReplicaLagTime is Kafka's replica.lag.time.max.ms: a follower that
	// has not caught up for this long leaves the ISR. Default 30 s.
	ReplicaLagTime time.Duration
	// MinInsyncReplicas is the broker's min.insync.replicas where no
	// level of the topic's configs sets it (the agent's TopicLevels: the
	// topic, this broker's dynamic config, the cluster default, the
	// static settings): an acks=all produce needs an ISR of at least this
	// many. Zero: Kafka's default, 1.
	MinInsyncReplicas int
	// HighWatermarkCheckpointInterval is how often the high watermarks
	// are written to the checkpoint file when one moved (Kafka's
	// replica.high.watermark.checkpoint.interval.ms). Default 5 s.
	HighWatermarkCheckpointInterval time.Duration
	// FetchMaxWait is how long a follower's fetch waits at the leader for
	// data (Kafka's replica.fetch.wait.max.ms). Default 500 ms.
	FetchMaxWait time.Duration
	// Dial opens follower connections to leaders (TLS, a bound source
	// address); nil: plain TCP.
	Dial kafkaclient.DialFunc
	// SASL, if set, logs follower connections in to leaders whose
	// listeners require SASL (the node's own login). Nil: none.
	SASL   kgosasl.Mechanism
	Logger hclog.Logger
}

// Agent is what the manager uses of the broker agent it runs beside
// (*broker.Agent has these methods): its metadata cache, for leaders'
// addresses and for telling a partition this broker does not host from
// one that does not exist; AlterPartition for ISR changes; the levels a
// topic's configs resolve from (min.insync.replicas); and the ACL rules'
// answer for a client.
type Agent interface {
	BrokerID() int32
	Partition(topic string, partition int32) (broker.PartitionState, bool)
	Brokers() []broker.BrokerInfo
	AlterPartition(ctx context.Context, topic string, partition int32, newISR []int32) (broker.PartitionState, error)
	TopicLevels(topic string) configmodel.Levels
	Authorize(c *kafkawire.Conn, op rl.AclOperation, rt rl.ResourceType, name string) authz.Decision
}

// Manager is a broker's replica manager; see the package doc.
type Manager struct {
	cfg Config
	log hclog.Logger

	agentMu sync.RWMutex
	agent   Agent

	mu       sync.Mutex
	parts    map[broker.TopicPartition]*partition
	fetchers map[int32]*fetcher // by leader broker id
	closed   bool

	// changed is closed and replaced whenever a partition's log end, high
	// watermark, ISR or role changes: waiting produces and fetches wake.
	changedMu sync.Mutex
	changed   chan struct{}

	// savedHW holds the checkpointed high watermarks of replicas not
	// opened since the start (guarded by mu); checkpointed is the
	// checkpoint last written (guarded by checkpointMu). See checkpoint.go.
	savedHW      map[broker.TopicPartition]int64
	checkpointMu sync.Mutex
	checkpointed []byte

	stop chan struct{}
	wg   sync.WaitGroup
}

// New returns a manager keeping its data under cfg.DataDir. Attach gives
// it the agent once the agent is started.
func New(cfg Config) (*Manager, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("replica manager: no data directory")
	}
	if cfg.ReplicaLagTime <= 0 {
		cfg.ReplicaLagTime = 30 * time.Second
	}
	if cfg.HighWatermarkCheckpointInterval <= 0 {
		cfg.HighWatermarkCheckpointInterval = 5 * time.Second
	}
	if cfg.FetchMaxWait <= 0 {
		cfg.FetchMaxWait = 500 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	m := &Manager{
		cfg: cfg, log: cfg.Logger.Named("replicas").With("broker", cfg.BrokerID),
		parts: map[broker.TopicPartition]*partition{}, fetchers: map[int32]*fetcher{},
		changed: make(chan struct{}), stop: make(chan struct{}),
	}
	m.loadCheckpoint()
	m.wg.Add(1)
	go m.housekeeping()
	return m, nil
}

// Attach gives the manager the agent it serves beside. Until then ISR
// changes wait and followers do not know where their leaders are.
func (m *Manager) Attach(a Agent) {
	m.agentMu.Lock()
	m.agent = a
	m.agentMu.Unlock()
	m.notify()
}

func (m *Manager) getAgent() Agent {
	m.agentMu.RLock()
	defer m.agentMu.RUnlock()
	return m.agent
}

// notify wakes everything waiting on a change.
func (m *Manager) notify() {
	m.changedMu.Lock()
	close(m.changed)
	m.changed = make(chan struct{})
	m.changedMu.Unlock()
}

// changes returns the channel the next notify closes.
func (m *Manager) changes() <-chan struct{} {
	m.changedMu.Lock()
	defer m.changedMu.Unlock()
	return m.changed
}

// Close stops the fetchers, writes the high-watermark checkpoint and
// closes every log.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.stop)
	fetchers := m.fetchers
	m.fetchers = map[int32]*fetcher{}
	parts := m.parts
	m.mu.Unlock()
	for _, f := range fetchers {
		f.close()
	}
	m.wg.Wait()
	var errs []error
	if err := m.writeCheckpoint(); err != nil {
		errs = append(errs, fmt.Errorf("high-watermark checkpoint: %w", err))
	}
	for _, p := range parts {
		p.mu.Lock()
		p.role = roleNone
		if p.log != nil {
			errs = append(errs, p.log.Close())
		}
		p.mu.Unlock()
	}
	m.notify()
	return errors.Join(errs...)
}

// get returns the local replica of a partition, or nil.
func (m *Manager) get(tp broker.TopicPartition) *partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.parts[tp]
}

// ensure returns the local replica of a partition, creating it (with its
// log opened) if needed. A replica kept for another topic id is a topic
// deleted and created again: its directory goes.
func (m *Manager) ensure(st broker.PartitionState) (*partition, error) {
	tp := broker.TopicPartition{Topic: st.Topic, Partition: st.Partition}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errors.New("replica manager closed")
	}
	if p := m.parts[tp]; p != nil {
		if p.topicID == st.TopicID || st.TopicID.IsZero() {
			if p.log == nil {
				if err := p.open(m); err != nil {
					return nil, err
				}
			}
			return p, nil
		}
		m.log.Info("topic re-created under the same name: deleting the old replica", "topic", st.Topic, "partition", st.Partition)
		m.dropLocked(p, true)
	}
	p := &partition{tp: tp, topicID: st.TopicID, dir: m.partitionDir(tp), leader: -1, leaderEpoch: -1, role: roleNone}
	if err := p.open(m); err != nil {
		return nil, err
	}
	pol := m.logPolicy(tp.Topic)
	p.log.SetRoll(pol.segmentBytes, pol.segmentMs)
	m.restoreHWLocked(p)
	m.parts[tp] = p
	return p, nil
}

func (m *Manager) partitionDir(tp broker.TopicPartition) string {
	return filepath.Join(m.cfg.DataDir, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
}

// dropLocked stops a replica and, with del, removes its data. m.mu is held.
func (m *Manager) dropLocked(p *partition, del bool) error {
	m.unfollowLocked(p)
	delete(m.parts, p.tp)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.role = roleNone
	var err error
	if p.log != nil {
		if del {
			err = p.log.Delete()
		} else {
			err = p.log.Close()
		}
		p.log = nil
	} else if del {
		err = os.RemoveAll(p.dir)
	}
	return err
}

// BecomeLeader implements broker.Host.
func (m *Manager) BecomeLeader(st broker.PartitionState) {
	p, err := m.ensure(st)
	if err != nil {
		m.log.Error("cannot open a replica's log to lead it", "topic", st.Topic, "partition", st.Partition, "error", err)
		return
	}
	m.mu.Lock()
	m.unfollowLocked(p)
	m.mu.Unlock()
	if fresh, logEnd := p.becomeLeader(m, st); fresh {
		m.log.Info("leading", "topic", st.Topic, "partition", st.Partition, "leader_epoch", st.LeaderEpoch, "isr", st.ISR, "log_end", logEnd)
	}
	m.notify()
}

// BecomeFollower implements broker.Host.
func (m *Manager) BecomeFollower(st broker.PartitionState) {
	p, err := m.ensure(st)
	if err != nil {
		m.log.Error("cannot open a replica's log to follow", "topic", st.Topic, "partition", st.Partition, "error", err)
		return
	}
	if fresh, logEnd := p.becomeFollower(st); fresh {
		m.log.Info("following", "topic", st.Topic, "partition", st.Partition, "leader", st.Leader, "leader_epoch", st.LeaderEpoch, "log_end", logEnd)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.unfollowLocked(p)
	if st.Leader >= 0 {
		f := m.fetchers[st.Leader]
		if f == nil {
			f = newFetcher(m, st.Leader)
			m.fetchers[st.Leader] = f
		}
		f.add(p)
		p.fetcher = f
	}
	m.mu.Unlock()
	m.notify()
}

// unfollowLocked takes p off its fetcher, stopping a fetcher left with
// nothing to fetch. m.mu is held.
func (m *Manager) unfollowLocked(p *partition) {
	f := p.fetcher
	if f == nil {
		return
	}
	p.fetcher = nil
	if f.remove(p) == 0 {
		delete(m.fetchers, f.leader)
		go f.close()
	}
}

// StopReplica implements broker.Host.
func (m *Manager) StopReplica(topic string, id rl.TopicID, partition int32, del bool) error {
	tp := broker.TopicPartition{Topic: topic, Partition: partition}
	m.mu.Lock()
	defer m.notify()
	defer m.mu.Unlock()
	if del {
		delete(m.savedHW, tp)
	}
	p := m.parts[tp]
	if p == nil {
		if del {
			return os.RemoveAll(m.partitionDir(tp))
		}
		return nil
	}
	m.log.Info("stopping replica", "topic", topic, "partition", partition, "delete", del)
	return m.dropLocked(p, del)
}

// housekeeping checks the ISRs the manager leads, flushes logs due for
// it, applies retention and segment rolls (retention.go) and writes the
// high-watermark checkpoint when due, until Close.
func (m *Manager) housekeeping() {
	defer m.wg.Done()
	every := min(m.cfg.ReplicaLagTime/2, time.Second, m.cfg.HighWatermarkCheckpointInterval)
	t := time.NewTicker(every)
	defer t.Stop()
	var lastCheckpoint time.Time
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			parts := m.snapshot()
			for _, p := range parts {
				p.maybeShrinkISR(m, now)
				p.maybeFlush(m, now)
			}
			m.applyLogPolicies(parts, now)
			// Half a tick of slack: tick times jitter.
			if now.Sub(lastCheckpoint) >= m.cfg.HighWatermarkCheckpointInterval-every/2 {
				lastCheckpoint = now
				if err := m.writeCheckpoint(); err != nil {
					m.log.Warn("writing the high-watermark checkpoint failed", "file", m.checkpointPath(), "error", err)
				}
			}
		}
	}
}

func (m *Manager) snapshot() []*partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*partition, 0, len(m.parts))
	for _, p := range m.parts {
		out = append(out, p)
	}
	return out
}

// Replica is a local replica as Replicas reports it.
type Replica struct {
	Topic       string
	Partition   int32
	Leader      bool
	LeaderEpoch int32
	ISR         []int32
	LogStart    int64
	LogEnd      int64
	HighWater   int64
}

// Replicas reports every local replica, for tests and status pages.
func (m *Manager) Replicas() []Replica {
	var out []Replica
	for _, p := range m.snapshot() {
		p.mu.Lock()
		r := Replica{Topic: p.tp.Topic, Partition: p.tp.Partition, Leader: p.role == roleLeader, LeaderEpoch: p.leaderEpoch,
			ISR: append([]int32(nil), p.isr...), HighWater: p.hw}
		if p.log != nil {
			r.LogStart, r.LogEnd = p.log.StartOffset(), p.log.EndOffset()
		}
		p.mu.Unlock()
		out = append(out, r)
	}
	sortReplicas(out)
	return out
}
