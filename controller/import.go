package controller

import (
	"context"
	"fmt"
	"sort"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// NodeID returns the id of the voter this controller runs on.
func (c *Controller) NodeID() int32 { return c.cfg.NodeID }

// Import commits metadata taken from another system (a ZooKeeper-mode
// Kafka cluster being migrated) through the event loop, so every record is
// staged with the FSM's own rules before it is proposed. It returns the
// index of the last entry it committed, or the applied index when there was
// nothing left to import.
//
// Records are taken in units, and a unit the image already has is skipped,
// which makes Import idempotent and lets an interrupted import resume:
//   - ControllerEpoch{Epoch: E}: the controller epoch is raised to at least
//     E (one ControllerEpoch record per step, held by this node), and the
//     active controller's requests carry it from then on.
//   - RegisterBroker: a broker the image does not know is registered and
//     then unfenced with a fresh session, as if it had just heartbeated; it
//     is fenced like any other broker if it does not heartbeat within the
//     session timeout. A broker id the image already has is left alone.
//   - Topic, and every following record with its topic id: a topic whose
//     id the image has is skipped whole; a name the image holds under
//     another id is a conflict and fails the import before anything
//     commits.
//
// Topics are staged a few at a time, each event kept under half an entry
// so a topic's records are not spread over many log entries. When topics
// were imported, a last event settles them as an active controller would
// have: partitions that had no leader-and-ISR yet are brought online like
// new ones, the broker-failure transitions run for brokers that are not
// live (those a ZooKeeper-era controller may have died before running),
// partitions without a leader get an Offline election, and then the
// activation's resumption runs (pending deletions and
// reassignments carry on).
func (c *Controller) Import(ctx context.Context, records []rl.Record) (uint64, error) {
	if ok, _ := c.Active(); !ok {
		return 0, ErrNotController
	}
	u, err := splitImport(records)
	if err != nil {
		return 0, err
	}
	var conflicts []string
	var todo []*importTopic
	c.cfg.FSM.View(func(im *fsm.Image) {
		for _, t := range u.topics {
			if im.Topic(t.id) != nil {
				continue
			}
			if other := im.TopicByName(t.name); other != nil {
				conflicts = append(conflicts, fmt.Sprintf("topic %q has id %s here and %s in the import", t.name, other.ID, t.id))
				continue
			}
			todo = append(todo, t)
		}
	})
	if len(conflicts) > 0 {
		return 0, fmt.Errorf("import refused: %d conflict(s): %v", len(conflicts), conflicts)
	}
	last := c.cfg.FSM.AppliedIndex()
	note := func(idx uint64) {
		if idx > last {
			last = idx
		}
	}

	// Controller epoch and brokers first: a broker's epoch is the index
	// of its registration, so it can only be unfenced once that committed.
	var registered []*rl.RegisterBroker
	if u.epoch > 0 || len(u.brokers) > 0 {
		v, idx, err := c.submit(ctx, "import-brokers", func(m *managers, w *work) (eventOutcome, error) {
			epoch, err := m.quorum.raiseEpoch(w, u.epoch)
			if err != nil {
				return eventOutcome{}, err
			}
			res, err := m.cluster.importBrokers(w, u.brokers)
			res.epoch = epoch.epoch
			return respond(res, err)
		}, nil)
		if err != nil {
			return 0, fmt.Errorf("import brokers: %w", err)
		}
		note(idx)
		registered = v.([]*rl.RegisterBroker)
	}
	if len(registered) > 0 {
		_, idx, err := c.submit(ctx, "import-unfence", func(m *managers, w *work) (eventOutcome, error) {
			return respond(m.cluster.importUnfence(w, registered))
		}, nil)
		if err != nil {
			return last, fmt.Errorf("import brokers: unfence: %w", err)
		}
		note(idx)
	}

	// Topics, packed into events of at most half an entry each, a few
	// events in flight at a time.
	budget := max(c.cfg.MaxRecordsPerEntry/2, 1)
	var packs [][]*importTopic
	n := 0
	for _, t := range todo {
		if len(packs) == 0 || n+len(t.records) > budget {
			packs = append(packs, nil)
			n = 0
		}
		packs[len(packs)-1] = append(packs[len(packs)-1], t)
		n += len(t.records)
	}
	const window = 4
	var inflight []call
	var firstErr error
	drain := func(keep int) {
		for len(inflight) > keep {
			_, idx, err := inflight[0].wait(ctx)
			inflight = inflight[1:]
			if err != nil && firstErr == nil {
				firstErr = err
			}
			note(idx)
		}
	}
	for _, pack := range packs {
		inflight = append(inflight, c.enqueue(ctx, "import-topics", func(m *managers, w *work) (eventOutcome, error) {
			return answer(nil, m.replication.importTopics(w, pack))
		}, nil))
		drain(window - 1)
		if firstErr != nil {
			break
		}
	}
	drain(0)
	if firstErr != nil {
		return last, fmt.Errorf("import topics: %w", firstErr)
	}
	if len(todo) == 0 {
		return last, nil
	}

	_, idx, err := c.submit(ctx, "import-settle", func(m *managers, w *work) (eventOutcome, error) {
		return answer(nil, m.replication.settleImport(w, todo))
	}, nil)
	if err != nil {
		return last, fmt.Errorf("import settle: %w", err)
	}
	note(idx)
	return last, nil
}

// importUnits is an import's records grouped for staging.
type importUnits struct {
	epoch   int32
	brokers []*rl.RegisterBroker
	topics  []*importTopic
}

type importTopic struct {
	id      rl.TopicID
	name    string
	records []rl.Record
}

func splitImport(records []rl.Record) (*importUnits, error) {
	u := &importUnits{}
	byID := map[rl.TopicID]*importTopic{}
	seenBroker := map[int32]bool{}
	for i, r := range records {
		var id rl.TopicID
		switch rec := r.(type) {
		case *rl.ControllerEpoch:
			u.epoch = max(u.epoch, rec.Epoch)
			continue
		case *rl.RegisterBroker:
			if seenBroker[rec.BrokerID] {
				return nil, fmt.Errorf("import record %d: broker %d registered twice", i, rec.BrokerID)
			}
			seenBroker[rec.BrokerID] = true
			u.brokers = append(u.brokers, rec)
			continue
		case *rl.Topic:
			if byID[rec.TopicID] != nil {
				return nil, fmt.Errorf("import record %d: topic id %s given twice", i, rec.TopicID)
			}
			t := &importTopic{id: rec.TopicID, name: rec.Name, records: []rl.Record{rec}}
			byID[rec.TopicID] = t
			u.topics = append(u.topics, t)
			continue
		case *rl.TopicConfig:
			id = rec.TopicID
		case *rl.Partition:
			id = rec.TopicID
		case *rl.PartitionChange:
			id = rec.TopicID
		case *rl.ReplicaStateChange:
			id = rec.TopicID
		case *rl.PartitionStateChange:
			id = rec.TopicID
		case *rl.BeginDeleteTopic:
			id = rec.TopicID
		default:
			return nil, fmt.Errorf("import record %d: %s records cannot be imported", i, r.Type())
		}
		t := byID[id]
		if t == nil {
			return nil, fmt.Errorf("import record %d (%s): topic id %s has no Topic record before it", i, r.Type(), id)
		}
		t.records = append(t.records, r)
	}
	return u, nil
}

// importTopics stages the records of the imported topics the view does
// not have yet.
func (m *replicationManager) importTopics(w *work, pack []*importTopic) error {
	for _, t := range pack {
		if w.img().Topic(t.id) != nil {
			continue // imported meanwhile
		}
		if err := w.stageEach(t.records...); err != nil {
			return fmt.Errorf("topic %q: %w", t.name, err)
		}
	}
	return nil
}

// settleImport runs, over the imported topics, what an active controller
// would have run had it been in charge: new partitions come online, the
// broker-failure transitions of brokers that are not live, then the
// activation's resumption (see resume).
func (m *replicationManager) settleImport(w *work, topics []*importTopic) error {
	im := w.img()
	live, _ := w.liveSet()
	dead := map[int32]bool{}
	var fresh []partRef
	var freshReps []replica
	for _, it := range topics {
		t := im.Topic(it.id)
		if t == nil {
			continue
		}
		im.EachPartition(t.ID, func(i int32, p *fsm.Partition) bool {
			for _, b := range p.Replicas {
				if !live.Has(b) {
					dead[b] = true
				}
			}
			if p.State == rl.NewPartition {
				ref := partRef{id: t.ID, name: t.Name, part: i}
				fresh = append(fresh, ref)
				for _, b := range p.Replicas {
					if p.ReplicaState(b) == rl.NonExistentReplica {
						freshReps = append(freshReps, replica{ref: ref, broker: b})
					}
				}
			}
			return true
		})
	}
	if len(fresh) > 0 {
		w.log.Info("imported partitions had no leader yet: bringing them online", "partitions", len(fresh))
		if _, err := m.handleReplicaStateChanges(w, freshReps, rl.NewReplica); err != nil {
			return err
		}
		if _, err := m.handlePartitionStateChanges(w, fresh, rl.OnlinePartition, OfflineElection, nil); err != nil {
			return err
		}
		var online []replica
		for _, ref := range fresh {
			p := w.img().Partition(ref.id, ref.part)
			for _, b := range p.Replicas {
				if live.Has(b) && p.ReplicaState(b) == rl.NewReplica {
					online = append(online, replica{ref: ref, broker: b})
				}
			}
		}
		if _, err := m.handleReplicaStateChanges(w, online, rl.OnlineReplica); err != nil {
			return err
		}
	}
	ids := make([]int32, 0, len(dead))
	for b := range dead {
		ids = append(ids, b)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, b := range ids {
		if err := m.offlineBrokerReplicas(w, b); err != nil {
			return err
		}
	}
	// Partitions left without a leader get an election, as a ZooKeeper-era
	// controller ran for every offline partition when it took over; those
	// with no live ISR member stay offline, their ISR kept.
	var offline []partRef
	for _, it := range topics {
		t := w.img().Topic(it.id)
		if t == nil || t.Deleting {
			continue
		}
		w.img().EachPartition(t.ID, func(i int32, p *fsm.Partition) bool {
			if p.State == rl.OfflinePartition {
				offline = append(offline, partRef{id: t.ID, name: t.Name, part: i})
			}
			return true
		})
	}
	if len(offline) > 0 {
		if _, err := m.handlePartitionStateChanges(w, offline, rl.OnlinePartition, OfflineElection, w.uncleanAllowed); err != nil {
			return err
		}
	}
	return m.resume(w)
}
