package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// MirrorConfig configures a Mirror.
type MirrorConfig struct {
	// Addr is Kafka's zookeeper.connect: "host:port[,host:port][/chroot]".
	Addr string
	Node *controller.Node
	// NodeID is the node's id; zero means node.Controller.NodeID().
	NodeID int32
	Logger hclog.Logger
	// SessionTimeout of the ZooKeeper session; default 10 s.
	SessionTimeout time.Duration
	// MaxPending bounds the znodes queued for writing. Past it the queue
	// is dropped and the next write is a full reconcile (nothing is lost:
	// a reconcile compares every znode). Default 1<<20.
	MaxPending int
	// MaxOpsPerMulti and MaxBytesPerMulti bound one fenced multi-op;
	// defaults 1000 and 512 KiB (ZooKeeper refuses requests over
	// jute.maxbuffer, 1 MiB by default).
	MaxOpsPerMulti, MaxBytesPerMulti int
	// RetryInterval is the pause before retrying after a failed write;
	// default 200 ms.
	RetryInterval time.Duration
	// Now gives the timestamps of /controller and broker znodes.
	Now func() time.Time
}

// Mirror writes Kafka's znodes after each committed batch, so ZooKeeper
// readers (older tools, a cluster being migrated) see the image. It writes
// only while its node is the controller of record (the image's controller
// epoch names it); every write is a multi-op that first checks the version
// of /controller_epoch that this node set when it claimed ZooKeeper, so
// the late write of a deposed node fails.
//
// The FSM's commit listener only notes which znodes a batch touched; a
// background writer renders them from the image at write time (so many
// changes to one znode coalesce into one write of the latest value) and
// skips those whose content ZooKeeper already holds. On every new session
// (first connect, reconnect after an outage) and after any failed write it
// reconciles in full: it reads every znode it manages and writes those
// that differ from the image, so it ends identical whatever it missed.
type Mirror struct {
	cfg    MirrorConfig
	log    hclog.Logger
	fsm    *fsm.FSM
	nodeID int32
	cl     *client

	mu       sync.Mutex
	dirty    map[mkey]struct{}
	full     bool   // next step is a full reconcile
	latest   uint64 // last committed index seen
	synced   uint64 // ZooKeeper reflects the image through this index
	epoch    int32  // the image's controller epoch ...
	ctrlNode int32  // ... and the node that holds it
	fence    fence  // the claim this node holds on ZooKeeper (zero: none)
	fenced   int32  // epoch at which ZooKeeper was found ahead of us (0: not)
	progress chan struct{}
	stats    MirrorStats

	wake chan struct{}
	stop chan struct{}
	done chan struct{}

	// Owned by the writer goroutine: what ZooKeeper holds, as compare
	// keys by path, and the partition slots known per topic name.
	cache      map[string]string
	topicParts map[string]int32
	topicName  map[rl.TopicID]string
}

// fence is a claim on ZooKeeper: /controller_epoch holds epoch at version.
type fence struct {
	epoch   int32
	version int32
}

// MirrorStats describe what a mirror did.
type MirrorStats struct {
	Connected bool
	// Epoch and Version of the claim this node holds on /controller_epoch
	// (0 and -1 when none).
	Epoch   int32
	Version int32
	// Fenced is set while ZooKeeper shows a newer controller epoch.
	Fenced bool
	// Latest is the last committed index seen; Synced the index through
	// which ZooKeeper matches the image.
	Latest, Synced uint64
	Pending        int
	Reconciles     int
	Multis, Ops    int
	Failures       int
}

type mkind uint8

const (
	kController mkind = iota
	kBroker
	kTopic
	kPart
	kReassign
)

type mkey struct {
	kind   mkind
	topic  rl.TopicID
	part   int32
	broker int32
}

// StartMirror starts mirroring the node's image to ZooKeeper. It returns
// once the listener is installed; the session is established in the
// background (and re-established after outages).
func StartMirror(cfg MirrorConfig) (*Mirror, error) {
	if cfg.Node == nil {
		return nil, errors.New("zookeeper mirror: no node")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 10 * time.Second
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 1 << 20
	}
	if cfg.MaxOpsPerMulti <= 0 {
		cfg.MaxOpsPerMulti = 1000
	}
	if cfg.MaxBytesPerMulti <= 0 {
		cfg.MaxBytesPerMulti = 512 << 10
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = 200 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NodeID == 0 {
		cfg.NodeID = cfg.Node.Controller.NodeID()
	}
	m := &Mirror{
		cfg:        cfg,
		log:        cfg.Logger.Named("zk-mirror"),
		fsm:        cfg.Node.FSM,
		nodeID:     cfg.NodeID,
		dirty:      map[mkey]struct{}{},
		full:       true,
		progress:   make(chan struct{}),
		wake:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
		cache:      map[string]string{},
		topicParts: map[string]int32{},
		topicName:  map[rl.TopicID]string{},
	}
	cl, err := dial(cfg.Addr, cfg.SessionTimeout, m.log, m.onSession)
	if err != nil {
		return nil, err
	}
	m.cl = cl
	m.fsm.View(func(im *fsm.Image) {
		m.epoch, m.ctrlNode = im.ControllerEpoch()
		m.latest = im.AppliedIndex()
	})
	m.fsm.SetCommitListener(m.onCommit)
	go m.run()
	m.poke()
	return m, nil
}

// Stop removes the listener, stops the writer and closes the session.
func (m *Mirror) Stop() {
	select {
	case <-m.stop:
		return
	default:
	}
	m.fsm.SetCommitListener(nil)
	close(m.stop)
	<-m.done
	m.cl.close()
}

// Stats returns a snapshot of the mirror's state.
func (m *Mirror) Stats() MirrorStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	s.Connected = m.cl.zk.State() == zk.StateHasSession
	s.Epoch, s.Version = m.fence.epoch, m.fence.version
	if m.fence.epoch == 0 {
		s.Version = -1
	}
	s.Fenced = m.fenced != 0
	s.Latest, s.Synced, s.Pending = m.latest, m.synced, len(m.dirty)
	return s
}

// WaitSynced waits until ZooKeeper reflects the image through index.
func (m *Mirror) WaitSynced(ctx context.Context, index uint64) error {
	for {
		m.mu.Lock()
		ok, ch := m.synced >= index, m.progress
		m.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("zookeeper mirror: not synced through %d: %w", index, ctx.Err())
		case <-m.stop:
			return errors.New("zookeeper mirror stopped")
		}
	}
}

func (m *Mirror) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// onSession sees the session's events: every new session calls for a
// full reconcile.
func (m *Mirror) onSession(ev zk.Event) {
	if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
		m.mu.Lock()
		m.full = true
		m.mu.Unlock()
		m.poke()
	}
}

// onCommit is the FSM's commit listener: it notes which znodes the batch
// touched and wakes the writer. It never waits on ZooKeeper.
func (m *Mirror) onCommit(index uint64, batch rl.Batch, res *fsm.ApplyResult) {
	var rejected map[int]bool
	if res != nil && len(res.Rejected) > 0 {
		rejected = map[int]bool{}
		for _, r := range res.Rejected {
			rejected[r.Record] = true
		}
	}
	var keys []mkey
	epoch, node, epochSet := int32(0), int32(0), false
	for i, r := range batch {
		if rejected[i] {
			continue
		}
		switch rec := r.(type) {
		case *rl.ControllerEpoch:
			epoch, node, epochSet = rec.Epoch, rec.NodeID, true
		case *rl.RegisterBroker:
			keys = append(keys, mkey{kind: kBroker, broker: rec.BrokerID})
		case *rl.FenceBroker:
			keys = append(keys, mkey{kind: kBroker, broker: rec.BrokerID})
		case *rl.UnfenceBroker:
			keys = append(keys, mkey{kind: kBroker, broker: rec.BrokerID})
		case *rl.BrokerShutdown:
			keys = append(keys, mkey{kind: kBroker, broker: rec.BrokerID})
		case *rl.UnregisterBroker:
			keys = append(keys, mkey{kind: kBroker, broker: rec.BrokerID})
		case *rl.Topic:
			keys = append(keys, mkey{kind: kTopic, topic: rec.TopicID})
		case *rl.TopicConfig:
			keys = append(keys, mkey{kind: kTopic, topic: rec.TopicID})
		case *rl.Partition:
			keys = append(keys, mkey{kind: kTopic, topic: rec.TopicID})
		case *rl.PartitionChange:
			keys = append(keys, mkey{kind: kPart, topic: rec.TopicID, part: rec.Partition})
			if rec.Has(rl.ChangeReplicas) || rec.Has(rl.ChangeReassignment) {
				keys = append(keys, mkey{kind: kTopic, topic: rec.TopicID}, mkey{kind: kReassign})
			}
		case *rl.PartitionChanges:
			reassign := false
			for _, d := range rec.Changes {
				keys = append(keys, mkey{kind: kPart, topic: rec.TopicID, part: d.Partition})
				reassign = reassign || d.Has(rl.ChangeReplicas) || d.Has(rl.ChangeReassignment)
			}
			if reassign {
				keys = append(keys, mkey{kind: kTopic, topic: rec.TopicID}, mkey{kind: kReassign})
			}
		case *rl.ReplicaStateChange:
			if rec.State == rl.NonExistentReplica {
				keys = append(keys, mkey{kind: kTopic, topic: rec.TopicID})
			}
		case *rl.PartitionStateChange:
			if rec.State == rl.NonExistentPartition {
				keys = append(keys, mkey{kind: kTopic, topic: rec.TopicID})
			}
		case *rl.BeginDeleteTopic:
			keys = append(keys, mkey{kind: kTopic, topic: rec.TopicID})
		case *rl.RemoveTopic:
			keys = append(keys, mkey{kind: kTopic, topic: rec.TopicID}, mkey{kind: kReassign})
		}
	}
	m.mu.Lock()
	if index > m.latest {
		m.latest = index
	}
	if epochSet {
		m.epoch, m.ctrlNode = epoch, node
		m.full = true
		m.dirty = map[mkey]struct{}{}
		if node == m.nodeID {
			m.fenced = 0
		}
	}
	if m.ctrlNode == m.nodeID && !m.full {
		for _, k := range keys {
			m.dirty[k] = struct{}{}
		}
		if len(m.dirty) > m.cfg.MaxPending {
			m.log.Warn("mirror queue over its bound: the next write is a full reconcile", "pending", len(m.dirty))
			m.dirty = map[mkey]struct{}{}
			m.full = true
		}
	}
	m.mu.Unlock()
	m.poke()
}

func (m *Mirror) run() {
	defer close(m.done)
	var retry <-chan time.Time
	for {
		select {
		case <-m.stop:
			return
		case <-m.wake:
		case <-retry:
		}
		retry = nil
		if err := m.step(); err != nil {
			m.mu.Lock()
			m.stats.Failures++
			m.full = true
			m.mu.Unlock()
			if errors.Is(err, ErrFenced) {
				m.log.Warn("mirror fenced: another controller has claimed ZooKeeper", "error", err)
			} else {
				m.log.Debug("mirror write failed; retrying with a full reconcile", "error", err)
			}
			retry = time.After(m.cfg.RetryInterval)
		}
	}
}

// step does one round of writing: a claim and full reconcile when needed,
// else the queued znodes.
func (m *Mirror) step() error {
	m.mu.Lock()
	if m.ctrlNode != m.nodeID || m.epoch <= 0 || m.fenced == m.epoch {
		// Not the controller of record: nothing to write. The commits
		// seen so far are another node's to mirror.
		m.dirty = map[mkey]struct{}{}
		m.mu.Unlock()
		return nil
	}
	if m.cl.zk.State() != zk.StateHasSession {
		m.mu.Unlock()
		return errors.New("no zookeeper session")
	}
	full := m.full || m.fence.epoch != m.epoch
	epoch := m.epoch
	latest := m.latest
	keys := m.dirty
	m.dirty = map[mkey]struct{}{}
	m.full = false
	f := m.fence
	m.mu.Unlock()

	if f.epoch != epoch {
		nf, err := m.claim(epoch)
		if err != nil {
			if errors.Is(err, ErrFenced) {
				m.mu.Lock()
				m.fenced = epoch
				m.fence = fence{}
				m.mu.Unlock()
			}
			return err
		}
		f = nf
		m.mu.Lock()
		m.fence = f
		m.mu.Unlock()
		m.log.Info("claimed zookeeper", "epoch", f.epoch, "version", f.version)
	}
	var err error
	if full {
		err = m.reconcile(f)
	} else if len(keys) > 0 {
		err = m.writeKeys(f, keys)
	}
	if errors.Is(err, ErrFenced) {
		m.mu.Lock()
		if m.fence == f {
			m.fence = fence{}
		}
		m.mu.Unlock()
	}
	if err != nil {
		return err
	}
	m.mu.Lock()
	if full {
		m.stats.Reconciles++
	}
	if latest > m.synced {
		m.synced = latest
		close(m.progress)
		m.progress = make(chan struct{})
	}
	m.mu.Unlock()
	return nil
}

// claim makes /controller_epoch hold epoch and returns its version. A
// newer epoch there means this node was deposed: ErrFenced.
func (m *Mirror) claim(epoch int32) (fence, error) {
	for _, p := range basePaths {
		if err := m.cl.ensurePath(p); err != nil {
			return fence{}, err
		}
	}
	for attempt := 0; attempt < 5; attempt++ {
		data, stat, ok, err := m.cl.get(pathControllerEpoch)
		if err != nil {
			return fence{}, err
		}
		val := []byte(strconv.Itoa(int(epoch)))
		if !ok {
			_, err := m.cl.zk.Create(m.cl.p(pathControllerEpoch), val, 0, zk.WorldACL(zk.PermAll))
			if errors.Is(err, zk.ErrNodeExists) {
				continue
			}
			if err != nil {
				return fence{}, err
			}
			return fence{epoch, 0}, nil
		}
		have, err := parseEpoch(data)
		if err != nil {
			have = 0 // unreadable: ours to overwrite
		}
		switch {
		case have > epoch:
			return fence{}, fmt.Errorf("%w: it holds epoch %d, this node's is %d", ErrFenced, have, epoch)
		case have == epoch:
			// An epoch belongs to one node: this claim is ours already.
			return fence{epoch, stat.Version}, nil
		}
		st, err := m.cl.zk.Set(m.cl.p(pathControllerEpoch), val, stat.Version)
		if errors.Is(err, zk.ErrBadVersion) {
			continue // raced with another claim: read again
		}
		if err != nil {
			return fence{}, err
		}
		return fence{epoch, st.Version}, nil
	}
	return fence{}, errors.New("claim of /controller_epoch kept racing")
}

// op is one write: create, set or delete of a path.
type op struct {
	kind byte // 'c', 's', 'd'
	path string
	data []byte
	key  string
}

// apply writes ops in multi-ops, each led by the fence check, in order.
// It updates the cache for every multi that succeeded.
func (m *Mirror) apply(f fence, ops []op) error {
	check := &zk.CheckVersionRequest{Path: m.cl.p(pathControllerEpoch), Version: f.version}
	for start := 0; start < len(ops); {
		reqs := []any{check}
		size := 0
		end := start
		for end < len(ops) && end-start < m.cfg.MaxOpsPerMulti && (size == 0 || size+len(ops[end].data)+len(ops[end].path)+32 <= m.cfg.MaxBytesPerMulti) {
			o := ops[end]
			p := m.cl.p(o.path)
			switch o.kind {
			case 'c':
				reqs = append(reqs, &zk.CreateRequest{Path: p, Data: o.data, Acl: zk.WorldACL(zk.PermAll)})
			case 's':
				reqs = append(reqs, &zk.SetDataRequest{Path: p, Data: o.data, Version: -1})
			case 'd':
				reqs = append(reqs, &zk.DeleteRequest{Path: p, Version: -1})
			}
			size += len(o.data) + len(o.path) + 32
			end++
		}
		res, err := m.cl.zk.Multi(reqs...)
		m.mu.Lock()
		m.stats.Multis++
		m.mu.Unlock()
		if err != nil {
			if len(res) > 0 && (errors.Is(res[0].Error, zk.ErrBadVersion) || errors.Is(res[0].Error, zk.ErrNoNode)) {
				return fmt.Errorf("%w (claimed version %d of epoch %d)", ErrFenced, f.version, f.epoch)
			}
			for i, r := range res {
				if i > 0 && r.Error != nil && !isRolledBack(r.Error) {
					return fmt.Errorf("multi: %s %s: %w", string(ops[start+i-1].kind), ops[start+i-1].path, r.Error)
				}
			}
			return fmt.Errorf("multi: %w", err)
		}
		for _, o := range ops[start:end] {
			if o.kind == 'd' {
				delete(m.cache, o.path)
			} else {
				m.cache[o.path] = o.key
			}
		}
		m.mu.Lock()
		m.stats.Ops += end - start
		m.mu.Unlock()
		start = end
	}
	return nil
}

// isRolledBack tells the result ZooKeeper gives the ops of a failed multi
// that were not the cause (runtime inconsistency, -2).
func isRolledBack(err error) bool {
	return err != nil && err.Error() == "unknown error: -2"
}

// znode is one desired znode.
type znode struct {
	path string
	data []byte
	key  string
}

// topicView is a topic copied out of the image.
type topicView struct {
	id       rl.TopicID
	name     string
	configs  []rl.ConfigEntry
	deleting bool
	reassign map[int32]fsm.Reassignment
	parts    []fsm.Partition // by slot; State NonExistentPartition: none
}

func viewTopic(im *fsm.Image, t *fsm.Topic) *topicView {
	tv := &topicView{id: t.ID, name: t.Name, configs: t.Configs, deleting: t.Deleting}
	if len(t.Reassignments) > 0 {
		tv.reassign = make(map[int32]fsm.Reassignment, len(t.Reassignments))
		for k, v := range t.Reassignments {
			tv.reassign[k] = v
		}
	}
	n := im.PartitionCount(t.ID)
	tv.parts = make([]fsm.Partition, n)
	for i := int32(0); i < n; i++ {
		if p := im.Partition(t.ID, i); p != nil {
			tv.parts[i] = *p
		}
	}
	return tv
}

// nodes returns the topic's znodes, parents first.
func (tv *topicView) nodes(epoch int32) []znode {
	a := topicAssignment{ID: tv.id, Replicas: make([][]int32, len(tv.parts)), Adding: map[int32][]int32{}, Removing: map[int32][]int32{}}
	for i, p := range tv.parts {
		if p.State != rl.NonExistentPartition {
			a.Replicas[i] = p.Replicas
		}
	}
	for p, r := range tv.reassign {
		a.Adding[p], a.Removing[p] = r.Adding, r.Removing
	}
	data := encodeTopic(a)
	out := []znode{{path: topicPath(tv.name), data: data, key: string(data)}, {path: partitionsPath(tv.name)}}
	for i, p := range tv.parts {
		if p.State == rl.NonExistentPartition {
			continue
		}
		s := partitionState{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, ControllerEpoch: epoch, ISR: p.ISR}
		out = append(out, znode{path: partitionPath(tv.name, int32(i))},
			znode{path: statePath(tv.name, int32(i)), data: encodePartitionState(s), key: stateKey(s)})
	}
	cfg := encodeConfig(tv.configs)
	out = append(out, znode{path: configPath(tv.name), data: cfg, key: string(cfg)})
	if tv.deleting {
		out = append(out, znode{path: deletePath(tv.name)})
	}
	return out
}

// cachedTopicPaths lists the paths the cache holds for a topic name,
// children first (the order to delete them in).
func (m *Mirror) cachedTopicPaths(name string) []string {
	var out []string
	for p := m.topicParts[name] - 1; p >= 0; p-- {
		out = append(out, statePath(name, p), partitionPath(name, p))
	}
	out = append(out, partitionsPath(name), topicPath(name), configPath(name), deletePath(name))
	var have []string
	for _, p := range out {
		if _, ok := m.cache[p]; ok {
			have = append(have, p)
		}
	}
	return have
}

// diffTopic appends the ops that make a topic name's znodes those of tv
// (nil: none).
func (m *Mirror) diffTopic(name string, tv *topicView, epoch int32, ops []op) []op {
	want := map[string]bool{}
	if tv != nil {
		for _, z := range tv.nodes(epoch) {
			want[z.path] = true
			ops = m.diffNode(z, ops)
		}
	}
	// Deletes, children first; the topic znode goes last of its tree.
	for _, p := range m.cachedTopicPaths(name) {
		if !want[p] {
			ops = append(ops, op{kind: 'd', path: p})
		}
	}
	if tv != nil {
		m.topicParts[name] = int32(len(tv.parts))
		m.topicName[tv.id] = name
	}
	return ops
}

func (m *Mirror) diffNode(z znode, ops []op) []op {
	have, ok := m.cache[z.path]
	switch {
	case !ok:
		return append(ops, op{kind: 'c', path: z.path, data: z.data, key: z.key})
	case have != z.key:
		return append(ops, op{kind: 's', path: z.path, data: z.data, key: z.key})
	}
	return ops
}

func (m *Mirror) brokerNode(b *fsm.Broker) znode {
	return znode{path: brokerPath(b.ID), data: encodeBroker(b.Endpoints, b.Rack, m.cfg.Now().UnixMilli()), key: brokerKey(b.Endpoints, b.Rack)}
}

func (m *Mirror) controllerNode() znode {
	return znode{path: pathController, data: encodeController(m.nodeID, m.cfg.Now().UnixMilli()), key: strconv.Itoa(int(m.nodeID))}
}

func reassignNode(im *fsm.Image) (znode, bool) {
	var parts []reassignPartition
	im.ForEachTopic(func(t *fsm.Topic) bool {
		for p, ra := range t.Reassignments {
			if part := im.Partition(t.ID, p); part != nil {
				target := make([]int32, 0, len(part.Replicas))
				for _, b := range part.Replicas {
					if !contains(ra.Removing, b) {
						target = append(target, b)
					}
				}
				parts = append(parts, reassignPartition{Topic: t.Name, Partition: p, Replicas: target})
			}
		}
		return true
	})
	if len(parts) == 0 {
		return znode{}, false
	}
	data := encodeReassign(parts)
	return znode{path: pathReassignPartions, data: data, key: string(data)}, true
}

// writeKeys writes the znodes of the queued keys that differ from what
// ZooKeeper holds.
func (m *Mirror) writeKeys(f fence, keys map[mkey]struct{}) error {
	var brokers []*fsm.Broker
	var brokerIDs []int32
	topics := map[string]*topicView{} // by name; nil: remove
	var states []znode
	var reassign *znode
	reassignDirty, ctrlDirty := false, false
	var goneIDs []rl.TopicID
	m.fsm.View(func(im *fsm.Image) {
		for k := range keys {
			switch k.kind {
			case kController:
				ctrlDirty = true
			case kBroker:
				brokerIDs = append(brokerIDs, k.broker)
				if b := im.Broker(k.broker); b != nil {
					c := *b
					brokers = append(brokers, &c)
				}
			case kReassign:
				reassignDirty = true
			case kTopic:
				t := im.Topic(k.topic)
				if old, ok := m.topicName[k.topic]; ok && (t == nil || t.Name != old) {
					goneIDs = append(goneIDs, k.topic)
					if _, seen := topics[old]; !seen {
						topics[old] = nil
						if other := im.TopicByName(old); other != nil {
							topics[old] = viewTopic(im, other)
						}
					}
				}
				if t != nil {
					topics[t.Name] = viewTopic(im, t)
				}
			}
		}
		for k := range keys {
			if k.kind != kPart {
				continue
			}
			t := im.Topic(k.topic)
			if t == nil {
				continue
			}
			if _, whole := topics[t.Name]; whole {
				continue
			}
			if _, known := m.cache[topicPath(t.Name)]; !known || k.part >= m.topicParts[t.Name] {
				topics[t.Name] = viewTopic(im, t)
				continue
			}
			p := im.Partition(t.ID, k.part)
			if p == nil {
				continue
			}
			s := partitionState{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, ControllerEpoch: f.epoch, ISR: p.ISR}
			states = append(states, znode{path: statePath(t.Name, k.part), data: encodePartitionState(s), key: stateKey(s)})
		}
		if reassignDirty {
			if z, ok := reassignNode(im); ok {
				reassign = &z
			}
		}
	})
	var ops []op
	if ctrlDirty {
		ops = m.diffNode(m.controllerNode(), ops)
	}
	sort.Slice(brokerIDs, func(i, j int) bool { return brokerIDs[i] < brokerIDs[j] })
	live := map[int32]*fsm.Broker{}
	for _, b := range brokers {
		live[b.ID] = b
	}
	for _, id := range brokerIDs {
		if b := live[id]; b != nil && b.Live() {
			ops = m.diffNode(m.brokerNode(b), ops)
		} else if _, ok := m.cache[brokerPath(id)]; ok {
			ops = append(ops, op{kind: 'd', path: brokerPath(id)})
		}
	}
	names := make([]string, 0, len(topics))
	for n := range topics {
		names = append(names, n)
	}
	sort.Strings(names)
	// Removals first, so a name taken over by a new topic is free.
	for _, n := range names {
		if topics[n] == nil {
			ops = m.diffTopic(n, nil, f.epoch, ops)
			delete(m.topicParts, n)
		}
	}
	for _, n := range names {
		if tv := topics[n]; tv != nil {
			ops = m.diffTopic(n, tv, f.epoch, ops)
		}
	}
	for _, z := range states {
		ops = m.diffNode(z, ops)
	}
	if reassignDirty {
		if reassign != nil {
			ops = m.diffNode(*reassign, ops)
		} else if _, ok := m.cache[pathReassignPartions]; ok {
			ops = append(ops, op{kind: 'd', path: pathReassignPartions})
		}
	}
	for _, id := range goneIDs {
		delete(m.topicName, id)
	}
	return m.apply(f, ops)
}

// reconcile reads every znode the mirror manages and writes what differs
// from the image.
func (m *Mirror) reconcile(f fence) error {
	if err := m.readAll(); err != nil {
		return err
	}
	var ops []op
	var views []*topicView
	var live []*fsm.Broker
	var reassign *znode
	m.fsm.View(func(im *fsm.Image) {
		for _, b := range im.Brokers() {
			if b.Live() {
				c := *b
				live = append(live, &c)
			}
		}
		for _, t := range im.Topics() {
			views = append(views, viewTopic(im, t))
		}
		if z, ok := reassignNode(im); ok {
			reassign = &z
		}
	})
	ops = m.diffNode(m.controllerNode(), ops)
	wantBroker := map[string]bool{}
	for _, b := range live {
		z := m.brokerNode(b)
		wantBroker[z.path] = true
		ops = m.diffNode(z, ops)
	}
	for p := range m.cache {
		if isBrokerPath(p) && !wantBroker[p] {
			ops = append(ops, op{kind: 'd', path: p})
		}
	}
	want := map[string]*topicView{}
	for _, tv := range views {
		want[tv.name] = tv
	}
	var stale []string
	for n := range m.topicParts {
		if want[n] == nil {
			stale = append(stale, n)
		}
	}
	sort.Strings(stale)
	for _, n := range stale {
		m.log.Info("removing a topic from zookeeper that the image does not have", "topic", n)
		ops = m.diffTopic(n, nil, f.epoch, ops)
		delete(m.topicParts, n)
	}
	// Config and delete-marker znodes of topics with no topic znode.
	for p := range m.cache {
		if n, ok := childOf(p, pathConfigTopics); ok && want[n] == nil {
			if _, known := m.topicParts[n]; !known {
				ops = append(ops, op{kind: 'd', path: p})
			}
		}
		if n, ok := childOf(p, pathDeleteTopics); ok && (want[n] == nil || !want[n].deleting) {
			if _, known := m.topicParts[n]; !known || want[n] != nil {
				ops = append(ops, op{kind: 'd', path: p})
			}
		}
	}
	m.topicName = map[rl.TopicID]string{}
	for _, tv := range views {
		ops = m.diffTopic(tv.name, tv, f.epoch, ops)
	}
	if reassign != nil {
		ops = m.diffNode(*reassign, ops)
	} else if _, ok := m.cache[pathReassignPartions]; ok {
		ops = append(ops, op{kind: 'd', path: pathReassignPartions})
	}
	ops = dedupeOps(ops)
	return m.apply(f, ops)
}

// dedupeOps drops a repeated delete of the same path (a path can be
// reached both as a topic's child and as a stray).
func dedupeOps(ops []op) []op {
	seen := map[string]bool{}
	out := ops[:0]
	for _, o := range ops {
		if o.kind == 'd' {
			if seen[o.path] {
				continue
			}
			seen[o.path] = true
		}
		out = append(out, o)
	}
	return out
}

func isBrokerPath(p string) bool {
	_, ok := childOf(p, pathBrokerIDs)
	return ok
}

// childOf reports whether p is a direct child of parent, and its name.
func childOf(p, parent string) (string, bool) {
	if len(p) <= len(parent)+1 || p[:len(parent)] != parent || p[len(parent)] != '/' {
		return "", false
	}
	rest := p[len(parent)+1:]
	for i := 0; i < len(rest); i++ {
		if rest[i] == '/' {
			return "", false
		}
	}
	return rest, true
}

// readAll rebuilds the cache from what ZooKeeper holds.
func (m *Mirror) readAll() error {
	cache := map[string]string{}
	parts := map[string]int32{}
	c := m.cl
	if data, _, ok, err := c.get(pathController); err != nil {
		return err
	} else if ok {
		key := "?"
		if id, err := parseController(data); err == nil {
			key = strconv.Itoa(int(id))
		}
		cache[pathController] = key
	}
	if data, _, ok, err := c.get(pathReassignPartions); err != nil {
		return err
	} else if ok {
		key := "?"
		if ps, err := parseReassign(data); err == nil {
			key = string(encodeReassign(ps))
		}
		cache[pathReassignPartions] = key
	}
	ids, err := c.children(pathBrokerIDs)
	if err != nil {
		return err
	}
	var paths []string
	for _, id := range ids {
		paths = append(paths, pathBrokerIDs+"/"+id)
	}
	for i, r := range c.getMany(paths, readParallel) {
		if r.err != nil {
			return r.err
		}
		if r.ok {
			key := "?"
			if eps, rack, err := parseBroker(r.data); err == nil {
				key = brokerKey(eps, rack)
			}
			cache[paths[i]] = key
		}
	}
	for _, dir := range []string{pathConfigTopics, pathDeleteTopics} {
		kids, err := c.children(dir)
		if err != nil {
			return err
		}
		paths = paths[:0]
		for _, k := range kids {
			paths = append(paths, dir+"/"+k)
		}
		if dir == pathDeleteTopics {
			for _, p := range paths {
				cache[p] = ""
			}
			continue
		}
		for i, r := range c.getMany(paths, readParallel) {
			if r.err != nil {
				return r.err
			}
			if r.ok {
				key := "?"
				if cfg, err := parseConfig(r.data); err == nil {
					key = configKeyOf(cfg)
				}
				cache[paths[i]] = key
			}
		}
	}
	names, err := c.children(pathTopics)
	if err != nil {
		return err
	}
	paths = paths[:0]
	for _, n := range names {
		paths = append(paths, topicPath(n))
	}
	topicRes := c.getMany(paths, readParallel)
	kidRes := make([][]string, len(names))
	kidErr := make([]error, len(names))
	parallel(len(names), readParallel, func(i int) {
		kids, _, err := c.zk.Children(c.p(partitionsPath(names[i])))
		if errors.Is(err, zk.ErrNoNode) {
			kidRes[i], kidErr[i] = nil, zk.ErrNoNode
			return
		}
		kidRes[i], kidErr[i] = kids, err
	})
	var statePaths []string
	for i, n := range names {
		r := topicRes[i]
		if r.err != nil {
			return r.err
		}
		if !r.ok {
			continue
		}
		key := "?"
		if a, err := parseTopic(r.data); err == nil {
			key = topicKey(a)
		}
		cache[topicPath(n)] = key
		parts[n] = 0
		if errors.Is(kidErr[i], zk.ErrNoNode) {
			continue
		}
		if kidErr[i] != nil {
			return fmt.Errorf("children %s: %w", partitionsPath(n), kidErr[i])
		}
		cache[partitionsPath(n)] = ""
		for _, k := range kidRes[i] {
			p, err := strconv.Atoi(k)
			if err != nil || p < 0 {
				continue // not Kafka's: left alone
			}
			cache[partitionPath(n, int32(p))] = ""
			parts[n] = max(parts[n], int32(p)+1)
			statePaths = append(statePaths, statePath(n, int32(p)))
		}
	}
	for i, r := range c.getMany(statePaths, readParallel) {
		if r.err != nil {
			return r.err
		}
		if r.ok {
			key := "?"
			if s, err := parsePartitionState(r.data); err == nil {
				key = stateKey(s)
			}
			cache[statePaths[i]] = key
		}
	}
	m.cache, m.topicParts = cache, parts
	return nil
}

// parallel runs fn(0..n-1) on up to width goroutines.
func parallel(n, width int, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(width, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}
