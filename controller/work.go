package controller

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/controller/configmodel"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// managers are the handlers of one activation and the state they own
// beyond the image (see doc.go). The loop makes a fresh set when the node
// becomes the active controller: what they own lives as long as the term.
type managers struct {
	quorum      *quorumManager
	cluster     *clusterManager
	replication *replicationManager
	configs     *configManager
	security    *securityManager
	features    *featuresManager
}

func newManagers(nodeID int32, sessionTimeout time.Duration) *managers {
	replication := &replicationManager{}
	return &managers{
		quorum:      &quorumManager{nodeID: nodeID},
		cluster:     &clusterManager{replication: replication, sessionTimeout: sessionTimeout, sessions: newSessions()},
		replication: replication,
		configs:     &configManager{replication: replication},
		security:    &securityManager{},
		features:    &featuresManager{},
	}
}

// work is what a handler reads and writes. Its Txn is the handler's read
// view — the committed image, what the round's earlier events staged, and
// what the handler staged itself so far — and where it stages its records,
// each checked by the FSM's own apply, so that a later step of the same
// handler reads what an earlier one decided. Its plan collects the control
// requests to send once those records have committed. Both are the
// event's own: the loop merges them into the round if the handler
// succeeds and drops them whole if it fails.
type work struct {
	txn  *fsm.Txn
	plan *plan
	now  time.Time
	log  hclog.Logger
	// live caches liveSet until a broker record is staged.
	live *[2]BrokerSet
	// lists holds the event's election and ISR lists.
	lists int32Arena
	// cause is the StateChangeCause staged ahead of the event's records
	// (nil below the level that has it); causeSet once because named it.
	cause    *rl.StateChangeCause
	causeSet bool
	// static is the node's static broker configs by Kafka's names (the
	// STATIC_BROKER_CONFIG level of a config's resolution); nil: none.
	static map[string]string
}

// newWork opens a handler's work over txn.
func newWork(txn *fsm.Txn, now time.Time, log hclog.Logger) *work {
	return &work{txn: txn, plan: newPlan(), now: now, log: log}
}

// records returns what the handler staged, in order.
func (w *work) records() []rl.Record { return w.txn.Records() }

// effects are the changes a handler makes to state that is not in the
// image: its manager's own (the cluster manager's broker sessions) and
// the loop's (the epoch requests go out under, where a round ends). The
// handler only describes them; the loop applies them (see doc.go).
type effects struct {
	// sessions are applied as the event joins its round: the round's
	// later events, and rounds computed over it, see them.
	sessions []sessionChange
	// committed are applied once the event's records have committed.
	committed []sessionChange
	// epoch, if positive, is the controller epoch the requests of this
	// round on go out under (activation, an import that raises it).
	epoch int32
	// endRound: nothing more is computed in or over the event's round
	// before it commits (a broker's epoch is its entry's index).
	endRound bool
}

// result is what a handler with effects returns besides its work.
type result[T any] struct {
	response T
	effects
}

// eventOutcome is what an event's compute hands the loop: the value its
// caller gets (after finish, if the event has one) and the effects.
type eventOutcome struct {
	value any
	effects
}

// respond turns a handler's result into an eventOutcome.
func respond[T any](r result[T], err error) (eventOutcome, error) {
	return eventOutcome{value: r.response, effects: r.effects}, err
}

// answer is an eventOutcome that is a response alone.
func answer(v any, err error) (eventOutcome, error) { return eventOutcome{value: v}, err }

// img is the view the handler decides against.
func (w *work) img() fsm.Reader { return w.txn }

// stage applies records to the work's Txn, all or none.
func (w *work) stage(records ...rl.Record) error {
	if err := w.txn.Apply(records...); err != nil {
		return stagingErr(records[0].Type(), err)
	}
	return nil
}

// stagingErr is the error of a record the FSM refused to stage. A record
// the finalized metadata.version does not allow yet is a request the
// cluster cannot serve at its level: UNSUPPORTED_VERSION, as Kafka answers
// a request that needs a newer metadata.version. Any other refusal is a
// bug of the handler that computed the record.
func stagingErr(t rl.RecordType, err error) error {
	if errors.Is(err, fsm.ErrFeatureLevel) {
		return kafkaErr(kerr.UnsupportedVersion, "%v", err)
	}
	return fmt.Errorf("staging %s: %w", t, err)
}

// stageEach applies records to the work's Txn one by one. A failure
// leaves the Txn half-staged: the handler must then fail, and the loop
// drops its Txn whole.
func (w *work) stageEach(records ...rl.Record) error {
	for _, r := range records {
		if err := w.txn.Stage(r); err != nil {
			return stagingErr(r.Type(), err)
		}
		switch r.Type() {
		case rl.TypeRegisterBroker, rl.TypeFenceBroker, rl.TypeUnfenceBroker, rl.TypeBrokerShutdown, rl.TypeUnregisterBroker:
			w.live = nil
		}
	}
	return nil
}

// stageChange stages a partition change. Runs of one topic's changes are
// packed into PartitionChanges records as they are staged (see
// fsm.Txn.StagePartitionChange).
func (w *work) stageChange(c rl.PartitionChange) error {
	if err := w.txn.StagePartitionChange(c.TopicID, c.Delta()); err != nil {
		return stagingErr(rl.TypePartitionChange, err)
	}
	return nil
}

// atomically runs fn over a Txn and a plan of its own on top of the
// work's, and keeps what it staged and planned only if it succeeds. A
// failure (the FSM refusing a record fn computed, which is a bug) is
// logged and leaves the work as it was, so work that merely rides along
// with an event (a broker's return, an ISR change) cannot make that event
// fail; the next activation's resumption picks the work up again.
func (w *work) atomically(what string, fn func(sub *work) error) {
	sub := newWork(w.txn.Child(), w.now, w.log)
	sub.static = w.static
	if err := fn(sub); err != nil {
		w.log.Error("work left for later: staging failed", "work", what, "error", err)
		return
	}
	w.txn.Merge(sub.txn)
	w.plan.merge(sub.plan)
	w.live = nil
}

// liveSet returns the brokers that are registered and unfenced in the
// view, and those of them in controlled shutdown.
func (w *work) liveSet() (live, shuttingDown BrokerSet) {
	if w.live != nil {
		return w.live[0], w.live[1]
	}
	var l, s []int32
	for _, b := range w.img().Brokers() {
		if b.Live() {
			l = append(l, b.ID)
			if b.ShuttingDown {
				s = append(s, b.ID)
			}
		}
	}
	w.live = &[2]BrokerSet{NewBrokerSet(l...), NewBrokerSet(s...)}
	return w.live[0], w.live[1]
}

// electableLive is the live brokers not in controlled shutdown: those an
// election may hand leadership to.
func (w *work) electableLive() BrokerSet {
	live, shutting := w.liveSet()
	return live.Without(shutting.IDs()...)
}

// brokerInfos lists the registered brokers for replica placement; with
// liveOnly, only those live and not shutting down.
func (w *work) brokerInfos(liveOnly bool) []BrokerInfo {
	var out []BrokerInfo
	for _, b := range w.img().Brokers() {
		if liveOnly && (!b.Live() || b.ShuttingDown) {
			continue
		}
		out = append(out, BrokerInfo{ID: b.ID, Rack: b.Rack})
	}
	return out
}

// uncleanAllowed reads the topic's effective
// unclean.leader.election.enable (see topicLevels).
func (w *work) uncleanAllowed(ref partRef) bool {
	t := w.img().Topic(ref.id)
	if t == nil {
		return false
	}
	return configmodel.UncleanLeaderElection(w.topicLevels(t))
}

// topicLevels are the levels the controller resolves a topic's config
// over, as Kafka's controller does: the topic's own, then the dynamic
// configs of the active controller's node (the node of the view's
// controller epoch), the cluster-wide default, this node's static
// settings, Kafka's default.
func (w *work) topicLevels(t *fsm.Topic) configmodel.Levels {
	_, node := w.img().ControllerEpoch()
	lv := configmodel.Levels{Topic: t.Configs, Dynamic: w.img().BrokerConfigs(), Static: w.static}
	if node >= 0 {
		lv.Broker = strconv.Itoa(int(node))
	}
	return lv
}

// allPartitionRefs lists every partition of every topic not being
// deleted, by topic name and then partition, so the answer to an
// ElectLeaders for all partitions reads in a stable order.
func (w *work) allPartitionRefs() []partRef {
	im := w.img()
	var topics []*fsm.Topic
	im.ForEachTopic(func(t *fsm.Topic) bool {
		if !t.Deleting {
			topics = append(topics, t)
		}
		return true
	})
	sort.Slice(topics, func(i, j int) bool { return topics[i].Name < topics[j].Name })
	var out []partRef
	for _, t := range topics {
		out = append(out, w.topicPartitionRefs(t)...)
	}
	return out
}

// topicPartitionRefs lists the existing partitions of a topic in order.
func (w *work) topicPartitionRefs(t *fsm.Topic) []partRef {
	im := w.img()
	n := im.PartitionCount(t.ID)
	out := make([]partRef, 0, n)
	for i := int32(0); i < n; i++ {
		if im.Partition(t.ID, i) != nil {
			out = append(out, partRef{id: t.ID, name: t.Name, part: i})
		}
	}
	return out
}

// partitionsOf scans the view for the partitions a broker leads and those
// it hosts a replica of, both in (topic id, partition) order.
func (w *work) partitionsOf(id int32) (led, hosted []partRef) {
	im := w.img()
	// A broker of a large cluster hosts hundreds of thousands of
	// replicas: collect them in chunks and copy once, rather than grow
	// one slice through many copies.
	var ledC, hostedC chunks[partRef]
	for _, t := range sortedTopics(im) {
		im.EachPartition(t.ID, func(i int32, p *fsm.Partition) bool {
			if slices.Index(p.Replicas, id) < 0 {
				return true
			}
			ref := partRef{id: t.ID, name: t.Name, part: i}
			hostedC.add(ref)
			if p.Leader == id {
				ledC.add(ref)
			}
			return true
		})
	}
	return ledC.slice(), hostedC.slice()
}

// chunks collects values in chunks of bounded size; slice returns them
// as one slice of exactly their length.
type chunks[T any] struct {
	full [][]T
	cur  []T
	n    int
}

func (c *chunks[T]) add(v T) {
	if len(c.cur) == cap(c.cur) {
		if c.cur != nil {
			c.full = append(c.full, c.cur)
		}
		c.cur = make([]T, 0, min(max(c.n, 256), 1<<15))
	}
	c.cur = append(c.cur, v)
	c.n++
}

func (c *chunks[T]) slice() []T {
	if len(c.full) == 0 {
		return c.cur
	}
	out := make([]T, 0, c.n)
	for _, f := range c.full {
		out = append(out, f...)
	}
	return append(out, c.cur...)
}

// sortedTopics returns every topic in id order.
func sortedTopics(im fsm.Reader) []*fsm.Topic {
	var out []*fsm.Topic
	im.ForEachTopic(func(t *fsm.Topic) bool { out = append(out, t); return true })
	slices.SortFunc(out, func(a, b *fsm.Topic) int { return compareIDs(a.ID, b.ID) })
	return out
}

// reserveBrokerWork makes room, once, for what the transitions of a
// broker's partitions stage and plan slice by slice.
func (w *work) reserveBrokerWork(led, hosted int) {
	w.plan.reserve(hosted)
	w.txn.Grow(led + hosted)
}
