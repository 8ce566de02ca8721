package voter_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/voter"
	"github.com/ctrlquorum/ctrlquorum/voter/votertest"
)

// Timeouts of the image-cluster tests. They are generous because they only
// bound a failure: every wait is a polled condition.
const (
	imgWaitTimeout  = 15 * time.Second
	imgApplyTimeout = 10 * time.Second
)

// imageFSM is the controller's real FSM, offered one log entry at a time so
// that the state hash can be recorded at every index it applies. That lets
// tests compare voters at exactly the same index even when one of them has
// already moved on. Entry-at-a-time application is equivalent to raft's
// batches: fsm.FSM.ApplyBatch applies its entries in order, one by one.
type imageFSM struct {
	inner *fsm.FSM

	mu       sync.Mutex
	hashes   map[uint64]fsm.StateHash // index -> hash once applied (or restored to)
	offered  uint64                   // highest log index raft handed over
	restores []uint64                 // applied index after each Restore
	halts    []error                  // every call of the FSM's Halt
	haltedAt uint64                   // index of the entry that halted the FSM
}

var _ raft.BatchingFSM = (*imageFSM)(nil)

func newImageFSM(string) raft.FSM {
	w := &imageFSM{hashes: map[uint64]fsm.StateHash{}}
	// Halt only records: the test then checks that the FSM applies
	// nothing after the entry it could not decode, with the node still up.
	w.inner = fsm.New(fsm.Options{Halt: func(err error) {
		w.mu.Lock()
		w.halts = append(w.halts, err)
		w.mu.Unlock()
	}})
	return w
}

func (w *imageFSM) Apply(l *raft.Log) any { return w.ApplyBatch([]*raft.Log{l})[0] }

func (w *imageFSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	for i, l := range logs {
		wasHalted := w.inner.Halted() != nil
		out[i] = w.inner.ApplyBatch(logs[i : i+1])[0]
		applied := w.inner.AppliedIndex() == l.Index
		var h fsm.StateHash
		if applied {
			h, _ = w.inner.StateHash()
		}
		w.mu.Lock()
		w.offered = max(w.offered, l.Index)
		if applied {
			w.hashes[l.Index] = h
		}
		if !wasHalted && w.inner.Halted() != nil {
			w.haltedAt = l.Index
		}
		w.mu.Unlock()
	}
	return out
}

func (w *imageFSM) Snapshot() (raft.FSMSnapshot, error) { return w.inner.Snapshot() }

func (w *imageFSM) Restore(rc io.ReadCloser) error {
	if err := w.inner.Restore(rc); err != nil {
		return err
	}
	h, idx := w.inner.StateHash()
	w.mu.Lock()
	w.restores = append(w.restores, idx)
	w.hashes[idx] = h
	w.mu.Unlock()
	return nil
}

// hashAt returns the state hash recorded when the FSM reached index.
func (w *imageFSM) hashAt(index uint64) (fsm.StateHash, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := w.hashes[index]
	return h, ok
}

// appliedIndexes returns every index the FSM applied or restored to, sorted.
func (w *imageFSM) appliedIndexes() []uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]uint64, 0, len(w.hashes))
	for i := range w.hashes {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

func (w *imageFSM) offeredIndex() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.offered
}

func (w *imageFSM) restoredIndexes() []uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.restores)
}

func (w *imageFSM) haltCalls() ([]error, uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.halts), w.haltedAt
}

// The marker topic carries, in config key "batch", the sequence number of
// the last batch a test committed. When leadership moves while a batch is in
// flight its outcome is unknown; the marker tells after a barrier whether it
// committed, so it is proposed again only if it did not. (Proposing it
// blindly would apply PartitionChanges twice, and the second time they
// would rightly be rejected as stale.)
var markerTopic = imgTopicID(0xFFFF)

const markerName = "__test_batches"

// imageCluster is a votertest.Cluster of voters that run imageFSM.
type imageCluster struct {
	*votertest.Cluster
	t       *testing.T
	batches int
}

func newImageCluster(t *testing.T, opts ...func(*voter.Config)) *imageCluster {
	t.Helper()
	return &imageCluster{Cluster: votertest.NewCluster(t, 3, newImageFSM, opts...), t: t}
}

func (c *imageCluster) fsm(i int) *imageFSM { return c.FSM(i).(*imageFSM) }

func (c *imageCluster) leaderFSM() *imageFSM {
	return c.fsm(c.Index(c.Leader(imgWaitTimeout)))
}

func imgLeadershipMoved(err error) bool {
	return errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
		errors.Is(err, raft.ErrLeadershipTransferInProgress)
}

// commit proposes recs as one log entry on the leader and fails the test
// unless it commits with every record applied.
func (c *imageCluster) commit(recs ...rl.Record) {
	c.t.Helper()
	seq := c.batches
	var marker rl.Record = &rl.TopicConfig{TopicID: markerTopic, Key: "batch", Value: strconv.Itoa(seq)}
	if seq == 0 {
		marker = &rl.Topic{TopicID: markerTopic, Name: markerName, Configs: []rl.ConfigEntry{{Key: "batch", Value: "0"}}}
	}
	data, err := rl.EncodeBatch(append([]rl.Record{marker}, recs...))
	if err != nil {
		c.t.Fatal(err)
	}
	deadline := time.Now().Add(imgWaitTimeout)
	for {
		f := c.Leader(imgWaitTimeout).Apply(data, imgApplyTimeout)
		err := f.Error()
		if err == nil {
			res, ok := f.Response().(*fsm.ApplyResult)
			if !ok {
				c.t.Fatalf("batch %d: FSM answered %v, want an *fsm.ApplyResult", seq, f.Response())
			}
			if err := res.Err(); err != nil {
				c.t.Fatalf("batch %d: %v", seq, err)
			}
			break
		}
		if !imgLeadershipMoved(err) || time.Now().After(deadline) {
			c.t.Fatalf("batch %d: %v", seq, err)
		}
		if c.committedOnLeader(seq) {
			c.t.Logf("batch %d committed although its proposer lost leadership (%v)", seq, err)
			break
		}
		c.t.Logf("batch %d lost with leadership (%v); proposing it again", seq, err)
	}
	c.batches++
}

// committedOnLeader waits for a leader to apply everything it has
// committed and reports whether batch seq is among it.
func (c *imageCluster) committedOnLeader(seq int) bool {
	c.t.Helper()
	for {
		leader := c.Leader(imgWaitTimeout)
		err := leader.Raft().Barrier(imgApplyTimeout).Error()
		if imgLeadershipMoved(err) {
			continue
		}
		if err != nil {
			c.t.Fatalf("barrier: %v", err)
		}
		found := false
		c.fsm(c.Index(leader)).inner.View(func(im *fsm.Image) {
			t := im.Topic(markerTopic)
			if t == nil {
				return
			}
			v, _ := t.Config("batch")
			found = v == strconv.Itoa(seq)
		})
		return found
	}
}

// agreeAt waits until every listed node has reached index and fails the
// test unless they all hold the same image there. It returns that hash.
func (c *imageCluster) agreeAt(nodes []int, index uint64) fsm.StateHash {
	c.t.Helper()
	votertest.WaitFor(c.t, imgWaitTimeout, fmt.Sprintf("nodes %v to apply index %d", nodes, index), func() bool {
		for _, i := range nodes {
			if _, ok := c.fsm(i).hashAt(index); !ok {
				return false
			}
		}
		return true
	})
	want, _ := c.fsm(nodes[0]).hashAt(index)
	for _, i := range nodes[1:] {
		if got, _ := c.fsm(i).hashAt(index); got != want {
			c.t.Fatalf("at index %d node %d has state hash %s, node %d has %s", index, i, got, nodes[0], want)
		}
	}
	return want
}

// agree waits for the listed nodes to reach the leader's applied index and
// to agree there; it returns that index and hash.
func (c *imageCluster) agree(nodes []int) (uint64, fsm.StateHash) {
	c.t.Helper()
	index := c.leaderFSM().inner.AppliedIndex()
	return index, c.agreeAt(nodes, index)
}

// snapshot takes a raft snapshot on node i and returns its index.
func (c *imageCluster) snapshot(i int) uint64 {
	c.t.Helper()
	f := c.Voter(i).Raft().Snapshot()
	if err := f.Error(); err != nil {
		c.t.Fatalf("snapshot on node %d: %v", i, err)
	}
	meta, rc, err := f.Open()
	if err != nil {
		c.t.Fatalf("open snapshot of node %d: %v", i, err)
	}
	_ = rc.Close()
	return meta.Index
}

func imgAll() []int { return []int{0, 1, 2} }

func imgTopicID(n int) rl.TopicID {
	var id rl.TopicID
	id[0], id[1], id[2] = byte(n>>16), byte(n>>8), byte(n)
	id[15] = 0x7E
	return id
}

// imageModel is what a test expects the image to hold: enough to write
// records the FSM accepts (broker epochs, partition epochs, leaders, ISRs)
// and to check the image afterwards.
type imageModel struct {
	ctrlEpoch int32
	brokers   map[int32]int64 // broker id -> broker epoch
	topics    []rl.TopicID    // in creation order
	names     map[rl.TopicID]string
	parts     map[rl.TopicID][]*modelPartition
}

type modelPartition struct {
	replicas []int32
	isr      []int32
	leader   int32
	epoch    int32 // partition epoch
	leaderEp int32
}

func newImageModel() *imageModel {
	return &imageModel{brokers: map[int32]int64{}, names: map[rl.TopicID]string{}, parts: map[rl.TopicID][]*modelPartition{}}
}

// registerBrokers registers brokers 1..n and unfences them with the
// broker epoch the FSM assigned: the raft index of the registration.
func (m *imageModel) registerBrokers(c *imageCluster, n int32) {
	c.t.Helper()
	var recs []rl.Record
	for b := int32(1); b <= n; b++ {
		recs = append(recs, &rl.RegisterBroker{
			BrokerID:  b,
			Endpoints: []rl.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: uint16(9091 + b)}},
			Rack:      "rack-" + strconv.Itoa(int(b%2)),
		})
	}
	c.commit(recs...)
	c.leaderFSM().inner.View(func(im *fsm.Image) {
		for b := int32(1); b <= n; b++ {
			m.brokers[b] = im.Broker(b).Epoch
		}
	})
	recs = recs[:0]
	for b := int32(1); b <= n; b++ {
		recs = append(recs, &rl.UnfenceBroker{BrokerID: b, BrokerEpoch: m.brokers[b]})
	}
	c.commit(recs...)
}

func (m *imageModel) controllerEpoch(node string) rl.Record {
	m.ctrlEpoch++
	id, _ := strconv.Atoi(node)
	return &rl.ControllerEpoch{Epoch: m.ctrlEpoch, NodeID: int32(id)}
}

// createTopic returns the records that create a topic whose partitions are
// spread over brokers 1..nb and brought online with their first replica
// leading, as the controller does: NewPartition with NewReplicas, leader
// and ISR, then OnlinePartition with OnlineReplicas.
func (m *imageModel) createTopic(n int, name string, partitions, rf int, nb int32) []rl.Record {
	id := imgTopicID(n)
	m.topics = append(m.topics, id)
	m.names[id] = name
	recs := []rl.Record{&rl.Topic{TopicID: id, Name: name, Configs: []rl.ConfigEntry{{Key: "min.insync.replicas", Value: "2"}}}}
	var refs []rl.ReplicaRef
	var pids []int32
	var changes []rl.Record
	for p := int32(0); p < int32(partitions); p++ {
		reps := make([]int32, rf)
		for k := range reps {
			reps[k] = (p+int32(k)+int32(n))%nb + 1
		}
		recs = append(recs, &rl.Partition{TopicID: id, Partition: p, Replicas: reps})
		for _, b := range reps {
			refs = append(refs, rl.ReplicaRef{Partition: p, Broker: b})
		}
		pids = append(pids, p)
		changes = append(changes, &rl.PartitionChange{TopicID: id, Partition: p, PartitionEpoch: 0,
			Set: rl.ChangeLeader | rl.ChangeISR, Leader: reps[0], ISR: reps})
		m.parts[id] = append(m.parts[id], &modelPartition{replicas: reps, isr: reps, leader: reps[0], epoch: 1, leaderEp: 1})
	}
	recs = append(recs, &rl.ReplicaStateChange{TopicID: id, State: rl.NewReplica, Replicas: refs})
	recs = append(recs, changes...)
	return append(recs,
		&rl.PartitionStateChange{TopicID: id, State: rl.OnlinePartition, Partitions: pids},
		&rl.ReplicaStateChange{TopicID: id, State: rl.OnlineReplica, Replicas: refs})
}

// change returns a PartitionChange to a new leader and ISR computed from
// the partition's current epoch, and records its effect.
func (m *imageModel) change(id rl.TopicID, p int32, leader int32, isr []int32) rl.Record {
	mp := m.parts[id][p]
	rec := &rl.PartitionChange{TopicID: id, Partition: p, PartitionEpoch: mp.epoch,
		Set: rl.ChangeLeader | rl.ChangeISR, Leader: leader, ISR: isr}
	if leader != mp.leader {
		mp.leaderEp++
	}
	mp.epoch++
	mp.leader, mp.isr = leader, isr
	return rec
}

// rotateLeaders moves the leadership of every partition of a topic to the
// next ISR member and re-runs the partitions' online transition, as a
// preferred-leader or reassignment election does.
func (m *imageModel) rotateLeaders(id rl.TopicID) []rl.Record {
	var recs []rl.Record
	var pids []int32
	for p, mp := range m.parts[id] {
		i := slices.Index(mp.isr, mp.leader)
		recs = append(recs, m.change(id, int32(p), mp.isr[(i+1)%len(mp.isr)], mp.isr))
		pids = append(pids, int32(p))
	}
	return append(recs, &rl.PartitionStateChange{TopicID: id, State: rl.OnlinePartition, Partitions: pids})
}

// brokerDown fences broker b, takes its replicas offline and removes it
// from every ISR, electing another leader where it led.
func (m *imageModel) brokerDown(b int32) []rl.Record {
	recs := []rl.Record{&rl.FenceBroker{BrokerID: b, BrokerEpoch: m.brokers[b]}}
	for _, id := range m.topics {
		var refs []rl.ReplicaRef
		var changes []rl.Record
		for p, mp := range m.parts[id] {
			if !slices.Contains(mp.replicas, b) {
				continue
			}
			refs = append(refs, rl.ReplicaRef{Partition: int32(p), Broker: b})
			isr := slices.DeleteFunc(slices.Clone(mp.isr), func(x int32) bool { return x == b })
			leader := mp.leader
			if leader == b {
				leader = isr[0]
			}
			changes = append(changes, m.change(id, int32(p), leader, isr))
		}
		if len(refs) > 0 {
			recs = append(recs, &rl.ReplicaStateChange{TopicID: id, State: rl.OfflineReplica, Replicas: refs})
			recs = append(recs, changes...)
		}
	}
	return recs
}

// brokerUp unfences broker b, brings its replicas online and back into the
// ISR.
func (m *imageModel) brokerUp(b int32) []rl.Record {
	recs := []rl.Record{&rl.UnfenceBroker{BrokerID: b, BrokerEpoch: m.brokers[b]}}
	for _, id := range m.topics {
		var refs []rl.ReplicaRef
		var changes []rl.Record
		for p, mp := range m.parts[id] {
			if !slices.Contains(mp.replicas, b) {
				continue
			}
			refs = append(refs, rl.ReplicaRef{Partition: int32(p), Broker: b})
			changes = append(changes, m.change(id, int32(p), mp.leader, append(slices.Clone(mp.isr), b)))
		}
		if len(refs) > 0 {
			recs = append(recs, &rl.ReplicaStateChange{TopicID: id, State: rl.OnlineReplica, Replicas: refs})
			recs = append(recs, changes...)
		}
	}
	return recs
}

// check fails the test unless node i's image holds what the model says.
// It catches records that committed but were lost to the test with a
// leader change and so were never checked for rejection.
func (m *imageModel) check(c *imageCluster, i int) {
	c.t.Helper()
	var problems []string
	c.fsm(i).inner.View(func(im *fsm.Image) {
		if e, _ := im.ControllerEpoch(); e != m.ctrlEpoch {
			problems = append(problems, fmt.Sprintf("controller epoch %d, want %d", e, m.ctrlEpoch))
		}
		for b, epoch := range m.brokers {
			if br := im.Broker(b); br == nil || br.Epoch != epoch {
				problems = append(problems, fmt.Sprintf("broker %d: %+v, want epoch %d", b, br, epoch))
			}
		}
		for _, id := range m.topics {
			if t := im.Topic(id); t == nil || t.Name != m.names[id] {
				problems = append(problems, fmt.Sprintf("topic %s missing", m.names[id]))
				continue
			}
			for p, mp := range m.parts[id] {
				got := im.Partition(id, int32(p))
				if got == nil || got.PartitionEpoch != mp.epoch || got.LeaderEpoch != mp.leaderEp ||
					got.Leader != mp.leader || !slices.Equal(got.ISR, mp.isr) || !slices.Equal(got.Replicas, mp.replicas) {
					problems = append(problems, fmt.Sprintf("%s-%d: %+v, want %+v", m.names[id], p, got, *mp))
				}
			}
		}
	})
	sort.Strings(problems)
	if len(problems) > 0 {
		c.t.Fatalf("node %d image differs from what was committed:\n%s", i, strings.Join(problems, "\n"))
	}
}

// seedImage commits a small but varied history: brokers, a controller
// epoch, two topics, leader moves, and a broker going down and back up.
func seedImage(c *imageCluster, m *imageModel) {
	c.t.Helper()
	c.commit(m.controllerEpoch(c.Leader(imgWaitTimeout).ID()))
	m.registerBrokers(c, 4)
	c.commit(m.createTopic(1, "orders", 8, 3, 4)...)
	c.commit(m.createTopic(2, "payments", 5, 3, 4)...)
	c.commit(m.rotateLeaders(m.topics[0])...)
	c.commit(m.brokerDown(2)...)
	c.commit(m.brokerUp(2)...)
	c.commit(m.rotateLeaders(m.topics[1])...)
}

// TestFSMClusterFailoverKeepsImage commits controller records through
// three voters, stops the leader, and checks that the new leader holds
// exactly the image the old one had at its last index and goes on from it.
func TestFSMClusterFailoverKeepsImage(t *testing.T) {
	c := newImageCluster(t)
	m := newImageModel()
	seedImage(c, m)

	_, h := c.agree(imgAll())
	old := c.Leader(imgWaitTimeout)
	oi := c.Index(old)
	oldHash, oldIndex := c.fsm(oi).inner.StateHash()
	if oldHash != h {
		t.Fatalf("old leader's hash %s at index %d differs from the one agreed at that index %s", oldHash, oldIndex, h)
	}
	m.check(c, oi)

	c.Stop(oi)
	leader := c.Leader(imgWaitTimeout)
	if leader.ID() == old.ID() {
		t.Fatalf("leader is still %s after it stopped", old.ID())
	}
	survivors := c.Running()
	// Before anything new is committed: the survivors' image at the old
	// leader's last index is the old leader's.
	if got := c.agreeAt(survivors, oldIndex); got != oldHash {
		t.Fatalf("new leader %s has hash %s at index %d, the old leader had %s", leader.ID(), got, oldIndex, oldHash)
	}

	c.commit(m.controllerEpoch(leader.ID()))
	c.commit(m.createTopic(3, "audit", 6, 3, 4)...)
	c.commit(m.brokerDown(3)...)
	c.commit(m.rotateLeaders(m.topics[0])...)
	c.commit(m.brokerUp(3)...)
	newIndex, _ := c.agree(survivors)
	if newIndex <= oldIndex {
		t.Fatalf("applied index %d after new commits, not past the old leader's %d", newIndex, oldIndex)
	}
	for _, i := range survivors {
		m.check(c, i)
	}

	// The old leader returns as a follower and converges on the same image.
	c.Restart(oi)
	c.commit(m.rotateLeaders(m.topics[2])...)
	c.agree(imgAll())
	m.check(c, oi)
}

// TestFSMClusterRestartAllFromDisk restarts every voter and checks that
// each rebuilds, from its own snapshot and log, the image it had.
func TestFSMClusterRestartAllFromDisk(t *testing.T) {
	c := newImageCluster(t)
	m := newImageModel()
	seedImage(c, m)
	// Node 0 restarts from a snapshot plus the log after it, the others
	// from the log alone.
	c.agree(imgAll())
	snapIndex := c.snapshot(0)
	c.commit(m.createTopic(3, "audit", 6, 3, 4)...)
	c.commit(m.brokerDown(4)...)
	index, hash := c.agree(imgAll())

	for i := range c.Size() {
		c.Stop(i)
	}
	for i := range c.Size() {
		c.Restart(i)
	}
	c.Leader(imgWaitTimeout)
	if got := c.agreeAt(imgAll(), index); got != hash {
		t.Fatalf("after restart the image at index %d hashes %s, before it was %s", index, got, hash)
	}
	for i := range c.Size() {
		want := []uint64(nil)
		if i == 0 {
			want = []uint64{snapIndex}
		}
		if got := c.fsm(i).restoredIndexes(); !slices.Equal(got, want) {
			t.Fatalf("node %d restored snapshots at %v, want %v (its own snapshot only)", i, got, want)
		}
		m.check(c, i)
	}

	c.commit(m.brokerUp(4)...)
	c.agree(imgAll())
}

// TestFSMClusterLaggingFollowerRestoresSnapshot stops a follower, lets the
// others move on and compact their logs, and checks that the follower
// comes back through the leader's snapshot with the same image.
func TestFSMClusterLaggingFollowerRestoresSnapshot(t *testing.T) {
	const trailing = 4
	c := newImageCluster(t, func(cfg *voter.Config) {
		cfg.SnapshotThreshold = 8
		cfg.TrailingLogs = trailing
	})
	m := newImageModel()
	seedImage(c, m)
	c.agree(imgAll())

	c.Leader(imgWaitTimeout)
	lagging := c.Index(c.Followers()[0])
	stoppedAt := c.fsm(lagging).inner.AppliedIndex()
	c.Stop(lagging)

	c.commit(m.createTopic(3, "audit", 6, 3, 4)...)
	for range 3 * trailing {
		c.commit(m.rotateLeaders(m.topics[2])...)
	}
	up := c.Running()
	c.agree(up)
	// Snapshot every running voter: whichever leads when the lagging one
	// returns must have compacted away what it missed.
	minSnap := ^uint64(0)
	for _, i := range up {
		minSnap = min(minSnap, c.snapshot(i))
	}
	if minSnap <= stoppedAt+trailing {
		t.Fatalf("snapshots at %d keep the log after %d: the follower could catch up without one", minSnap, stoppedAt)
	}

	c.Restart(lagging)
	c.commit(m.brokerDown(1)...)
	index, _ := c.agree(imgAll())
	m.check(c, lagging)

	w := c.fsm(lagging)
	restored := w.restoredIndexes()
	if len(restored) != 1 || restored[0] < minSnap {
		t.Fatalf("lagging node restored snapshots at %v, want one at or after %d", restored, minSnap)
	}
	for _, i := range w.appliedIndexes() {
		if i > stoppedAt && i < restored[0] {
			t.Fatalf("lagging node applied entry %d, which the snapshot at %d should have skipped (stopped at %d)", i, restored[0], stoppedAt)
		}
	}
	t.Logf("follower stopped at %d, restored snapshot %d, converged at %d", stoppedAt, restored[0], index)
}

// corruptPartitionChange returns a one-record entry whose PartitionChange
// body is cut short: the framing is intact, the record is not.
func corruptPartitionChange(t *testing.T) []byte {
	t.Helper()
	rec, err := rl.EncodeRecord(&rl.PartitionChange{TopicID: imgTopicID(1), Partition: 3, PartitionEpoch: 7,
		Set: rl.ChangeLeader | rl.ChangeISR, Leader: 2, ISR: []int32{2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	rec = rec[:len(rec)-2]
	out := []byte{0xCB, 1, 1}
	out = binary.AppendUvarint(out, uint64(len(rec)))
	return append(out, rec...)
}

// applyRaw proposes data until a leader commits it and returns the
// future. Proposing an undecodable entry twice is harmless: a halted FSM
// applies nothing and does not halt again.
func (c *imageCluster) applyRaw(data []byte) raft.ApplyFuture {
	c.t.Helper()
	deadline := time.Now().Add(imgWaitTimeout)
	for {
		f := c.Leader(imgWaitTimeout).Apply(data, imgApplyTimeout)
		err := f.Error()
		if err == nil {
			return f
		}
		if !imgLeadershipMoved(err) || time.Now().After(deadline) {
			c.t.Fatalf("apply: %v", err)
		}
	}
}

// TestFSMClusterHaltsOnUndecodableEntry commits entries no voter can
// apply and checks that every voter stops applying at that entry, saying
// which index and which record type: skipping it would let voters built
// from different versions diverge.
func TestFSMClusterHaltsOnUndecodableEntry(t *testing.T) {
	cases := []struct {
		name     string
		data     func(*testing.T) []byte
		wantType string
	}{
		{"unknown record type", func(*testing.T) []byte { return []byte{0xCB, 1, 1, 3, 250, 1, 0x90} }, "type unknown(250)"},
		{"corrupt body", corruptPartitionChange, "type PartitionChange"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newImageCluster(t)
			m := newImageModel()
			c.commit(m.controllerEpoch(c.Leader(imgWaitTimeout).ID()))
			m.registerBrokers(c, 3)
			c.commit(m.createTopic(1, "orders", 4, 3, 3)...)
			before, beforeHash := c.agree(imgAll())

			bad := c.applyRaw(tc.data(t))
			resp, _ := bad.Response().(error)
			if !errors.Is(resp, fsm.ErrHalted) {
				t.Fatalf("leader's FSM answered %v to the bad entry, want an error wrapping fsm.ErrHalted", bad.Response())
			}
			// A valid entry after the bad one: raft commits it, no FSM
			// may apply it.
			later, err := rl.EncodeBatch([]rl.Record{m.rotateLeaders(m.topics[0])[0]})
			if err != nil {
				t.Fatal(err)
			}
			f := c.applyRaw(later)
			if resp, _ := f.Response().(error); !errors.Is(resp, fsm.ErrHalted) {
				t.Fatalf("leader's FSM answered %v to an entry after the bad one, want fsm.ErrHalted", f.Response())
			}
			votertest.WaitFor(t, imgWaitTimeout, fmt.Sprintf("every FSM to be offered index %d", f.Index()), func() bool {
				for i := range c.Size() {
					if c.fsm(i).offeredIndex() < f.Index() {
						return false
					}
				}
				return true
			})

			for i := range c.Size() {
				w := c.fsm(i)
				halts, at := w.haltCalls()
				if len(halts) != 1 {
					t.Fatalf("node %d: Halt called %d times (%v), want once", i, len(halts), halts)
				}
				if at <= before || at > bad.Index() {
					t.Fatalf("node %d halted at index %d, want the bad entry's (after %d, at most %d)", i, at, before, bad.Index())
				}
				msg := halts[0].Error()
				if !strings.Contains(msg, fmt.Sprintf("log index %d:", at)) || !strings.Contains(msg, tc.wantType) {
					t.Fatalf("node %d halt message %q does not name log index %d and %s", i, msg, at, tc.wantType)
				}
				if !errors.Is(halts[0], fsm.ErrHalted) || !errors.Is(w.inner.Halted(), fsm.ErrHalted) {
					t.Fatalf("node %d: halt error %v, Halted() %v, want fsm.ErrHalted", i, halts[0], w.inner.Halted())
				}
				applied := w.appliedIndexes()
				if last := applied[len(applied)-1]; last >= at {
					t.Fatalf("node %d applied index %d at or after the bad entry %d", i, last, at)
				}
				if got := w.inner.AppliedIndex(); got >= at {
					t.Fatalf("node %d FSM reports applied index %d, bad entry is %d", i, got, at)
				}
				if h, _ := w.inner.StateHash(); h != beforeHash {
					t.Fatalf("node %d image changed after the bad entry", i)
				}
				t.Logf("node %d: %v", i, halts[0])
			}
		})
	}
}
