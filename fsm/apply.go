package fsm

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// applyRecord applies one record at raft index idx. It either changes the
// image completely or, returning an error, not at all.
func applyRecord(im store, idx uint64, r rl.Record) error {
	if err := checkLevel(im, r); err != nil {
		return err
	}
	switch rec := r.(type) {
	case *rl.ControllerEpoch:
		return applyControllerEpoch(im, rec)
	case *rl.RegisterBroker:
		return applyRegisterBroker(im, idx, rec)
	case *rl.FenceBroker:
		return applyBrokerChange(im, rec.BrokerID, rec.BrokerEpoch, func(b *Broker) { b.Fenced = true })
	case *rl.UnfenceBroker:
		return applyBrokerChange(im, rec.BrokerID, rec.BrokerEpoch, func(b *Broker) { b.Fenced = false })
	case *rl.BrokerShutdown:
		return applyBrokerChange(im, rec.BrokerID, rec.BrokerEpoch, func(b *Broker) { b.ShuttingDown = true })
	case *rl.UnregisterBroker:
		return applyUnregisterBroker(im, rec)
	case *rl.Topic:
		return applyTopic(im, rec)
	case *rl.TopicConfig:
		return applyTopicConfig(im, rec)
	case *rl.Partition:
		return applyPartition(im, idx, rec)
	case *rl.PartitionChange:
		return applyPartitionChange(im, idx, rec)
	case *rl.PartitionChanges:
		return applyPartitionChanges(im, idx, rec)
	case *rl.ReplicaStateChange:
		return applyReplicaStates(im, idx, rec)
	case *rl.PartitionStateChange:
		return applyPartitionStates(im, rec)
	case *rl.BeginDeleteTopic:
		return applyBeginDeleteTopic(im, rec)
	case *rl.RemoveTopic:
		return applyRemoveTopic(im, rec)
	case *rl.ScramCredential:
		return applyScramCredential(im, rec)
	case *rl.DeleteScramCredential:
		return applyDeleteScramCredential(im, rec)
	case *rl.AclChange:
		return applyAclChange(im, rec)
	case *rl.BrokerConfig:
		return applyBrokerConfig(im, rec)
	case *rl.FeatureLevel:
		return applyFeatureLevel(im, idx, rec)
	case *rl.ClusterID:
		return applyClusterID(im, rec)
	case *rl.StateChangeCause:
		// Nothing in the image: it names the cause of the records after
		// it for the state-change history.
		if len(rec.Text) > rl.MaxCauseBytes {
			return fmt.Errorf("%w: a cause of %d bytes, the limit is %d", ErrInvalidRecord, len(rec.Text), rl.MaxCauseBytes)
		}
		return nil
	}
	// The codec only produces the types above; a new type added there
	// without an apply function must not be skipped silently.
	panic(fmt.Sprintf("fsm: no apply function for record type %s", r.Type()))
}

func applyControllerEpoch(im store, r *rl.ControllerEpoch) error {
	if cur, _ := im.controller(); r.Epoch != cur+1 {
		return fmt.Errorf("%w: epoch %d proposed by node %d, current is %d", ErrStaleControllerEpoch, r.Epoch, r.NodeID, cur)
	}
	im.setController(r.Epoch, r.NodeID)
	return nil
}

func applyRegisterBroker(im store, idx uint64, r *rl.RegisterBroker) error {
	if r.BrokerID < 0 {
		return fmt.Errorf("%w: broker id %d is negative", ErrInvalidRecord, r.BrokerID)
	}
	// A new registration replaces the previous incarnation: the new broker
	// epoch fences every request that carries the old one.
	im.putBroker(&Broker{
		ID:          r.BrokerID,
		Incarnation: r.IncarnationID,
		Epoch:       int64(idx),
		Endpoints:   append([]rl.Endpoint(nil), r.Endpoints...),
		Rack:        r.Rack,
		Features:    append([]rl.FeatureRange(nil), r.Features...),
		Fenced:      true,
	})
	return nil
}

// applyBrokerChange applies fn to a copy of the broker, so a snapshot that
// holds the old *Broker keeps seeing the old value.
func applyBrokerChange(im store, id int32, epoch int64, fn func(*Broker)) error {
	b := im.broker(id)
	if b == nil {
		return fmt.Errorf("%w: %d", ErrUnknownBroker, id)
	}
	if b.Epoch != epoch {
		return fmt.Errorf("%w: broker %d has epoch %d, record carries %d", ErrStaleBrokerEpoch, id, b.Epoch, epoch)
	}
	c := *b
	fn(&c)
	im.putBroker(&c)
	return nil
}

func applyUnregisterBroker(im store, r *rl.UnregisterBroker) error {
	if err := applyBrokerChange(im, r.BrokerID, r.BrokerEpoch, func(*Broker) {}); err != nil {
		return err
	}
	im.deleteBroker(r.BrokerID)
	return nil
}

func applyTopic(im store, r *rl.Topic) error {
	if r.TopicID.IsZero() || r.Name == "" {
		return fmt.Errorf("%w: topic needs an id and a name", ErrInvalidRecord)
	}
	if im.topic(r.TopicID) != nil {
		return fmt.Errorf("%w: id %s", ErrTopicExists, r.TopicID)
	}
	if _, ok := im.topicIDByName(r.Name); ok {
		return fmt.Errorf("%w: %q", ErrTopicExists, r.Name)
	}
	configs := append([]rl.ConfigEntry(nil), r.Configs...)
	if len(configs) > 1 {
		slices.SortStableFunc(configs, func(a, b rl.ConfigEntry) int { return strings.Compare(a.Key, b.Key) })
	}
	for i := 1; i < len(configs); i++ {
		if configs[i].Key == configs[i-1].Key {
			return fmt.Errorf("%w: config %q given twice", ErrInvalidRecord, configs[i].Key)
		}
	}
	im.putTopic(&Topic{ID: r.TopicID, Name: r.Name, Configs: configs})
	return nil
}

func applyTopicConfig(im store, r *rl.TopicConfig) error {
	if im.topic(r.TopicID) == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, r.TopicID)
	}
	if r.Key == "" {
		return fmt.Errorf("%w: empty config key", ErrInvalidRecord)
	}
	t := im.writableTopic(r.TopicID)
	cfg := make([]rl.ConfigEntry, 0, len(t.Configs)+1)
	for _, e := range t.Configs {
		if e.Key != r.Key {
			cfg = append(cfg, e)
		}
	}
	if !r.Delete {
		cfg = append(cfg, rl.ConfigEntry{Key: r.Key, Value: r.Value})
		sort.SliceStable(cfg, func(i, j int) bool { return cfg[i].Key < cfg[j].Key })
	}
	t.Configs = cfg
	return nil
}

func applyPartition(im store, idx uint64, r *rl.Partition) error {
	t := im.topic(r.TopicID)
	if t == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, r.TopicID)
	}
	if t.Deleting {
		return fmt.Errorf("%w: %q", ErrTopicDeleting, t.Name)
	}
	if next := im.partitionSlots(r.TopicID); r.Partition != next {
		return fmt.Errorf("%w: partition %d of %q, next is %d", ErrInvalidRecord, r.Partition, t.Name, next)
	}
	if err := checkReplicaList("replicas", r.Replicas, false); err != nil {
		return err
	}
	im.appendPartition(r.TopicID, Partition{
		Replicas:      append([]int32(nil), r.Replicas...),
		ReplicaStates: sharedStates(make([]rl.ReplicaState, len(r.Replicas))),
		Leader:        rl.NoLeader,
		State:         rl.NewPartition,
		ChangedAt:     idx,
	})
	im.addPartitionCount(1)
	return nil
}

func checkReplicaList(field string, s []int32, emptyOK bool) error {
	if len(s) == 0 && !emptyOK {
		return fmt.Errorf("%w: %s is empty", ErrInvalidRecord, field)
	}
	for i, b := range s {
		if b < 0 {
			return fmt.Errorf("%w: %s has negative broker id %d", ErrInvalidRecord, field, b)
		}
		if slices.Index(s[:i], b) >= 0 {
			return fmt.Errorf("%w: %s lists broker %d twice", ErrInvalidRecord, field, b)
		}
	}
	return nil
}

func subset(sub, of []int32) bool {
	for _, b := range sub {
		if slices.Index(of, b) < 0 {
			return false
		}
	}
	return true
}

func partitionOf(im store, id rl.TopicID, p int32) (*Topic, *Partition, error) {
	t := im.topic(id)
	if t == nil {
		return nil, nil, fmt.Errorf("%w: %s", ErrUnknownTopic, id)
	}
	part := im.partition(id, p)
	if part == nil {
		return t, nil, fmt.Errorf("%w: %q partition %d", ErrUnknownPartition, t.Name, p)
	}
	return t, part, nil
}

func applyPartitionChange(im store, idx uint64, r *rl.PartitionChange) error {
	t := im.topic(r.TopicID)
	if t == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, r.TopicID)
	}
	d := r.Delta()
	cur, err := checkPartitionChange(im, t, &d)
	if err != nil {
		return err
	}
	commitPartitionChange(im, t.ID, idx, cur, &d)
	return nil
}

// applyPartitionChanges applies changes to distinct partitions of one
// topic, each as a PartitionChange would, all or none.
func applyPartitionChanges(im store, idx uint64, r *rl.PartitionChanges) error {
	t := im.topic(r.TopicID)
	if t == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, r.TopicID)
	}
	if len(r.Changes) == 0 {
		return fmt.Errorf("%w: no partition changes", ErrInvalidRecord)
	}
	if err := distinctPartitions(r.Changes); err != nil {
		return err
	}
	// Each change reads and writes only its own partition (and that
	// partition's reassignment), so checking them all against the image
	// before writing any is the same as applying them one by one.
	for i := range r.Changes {
		if _, err := checkPartitionChange(im, t, &r.Changes[i]); err != nil {
			return fmt.Errorf("change %d: %w", i, err)
		}
	}
	for i := range r.Changes {
		d := &r.Changes[i]
		commitPartitionChange(im, t.ID, idx, im.partition(t.ID, d.Partition), d)
	}
	return nil
}

func distinctPartitions(changes []rl.PartitionDelta) error {
	seen := map[int32]struct{}(nil)
	for i := range changes {
		p := changes[i].Partition
		if seen == nil {
			if i == 0 || p > changes[i-1].Partition {
				continue // in order so far
			}
			seen = make(map[int32]struct{}, len(changes))
			for j := range changes[:i] {
				seen[changes[j].Partition] = struct{}{}
			}
		}
		if _, dup := seen[p]; dup {
			return fmt.Errorf("%w: partition %d changed twice", ErrInvalidRecord, p)
		}
		seen[p] = struct{}{}
	}
	return nil
}

// refsOrdered reports whether refs are strictly ascending by (broker,
// partition) or by (partition, broker): then none repeats.
func refsOrdered(refs []rl.ReplicaRef) bool {
	byBroker, byPartition := true, true
	for i := 1; i < len(refs) && (byBroker || byPartition); i++ {
		a, b := refs[i-1], refs[i]
		byBroker = byBroker && (a.Broker < b.Broker || a.Broker == b.Broker && a.Partition < b.Partition)
		byPartition = byPartition && (a.Partition < b.Partition || a.Partition == b.Partition && a.Broker < b.Broker)
	}
	return byBroker || byPartition
}

// checkPartitionChange checks a change of a partition of topic t against
// the image, without writing anything, and returns the partition.
func checkPartitionChange(im store, t *Topic, r *rl.PartitionDelta) (*Partition, error) {
	cur := im.partitionIn(t, r.Partition)
	if cur == nil {
		return nil, fmt.Errorf("%w: %q partition %d", ErrUnknownPartition, t.Name, r.Partition)
	}
	if r.PartitionEpoch != cur.PartitionEpoch {
		return nil, fmt.Errorf("%w: %q partition %d is at epoch %d, change computed from %d", ErrStalePartitionEpoch, t.Name, r.Partition, cur.PartitionEpoch, r.PartitionEpoch)
	}
	replicas, isr, leader := cur.Replicas, cur.ISR, cur.Leader
	if r.Has(rl.ChangeReplicas) {
		if err := checkReplicaList("replicas", r.Replicas, false); err != nil {
			return nil, err
		}
		replicas = r.Replicas
	}
	if r.Has(rl.ChangeISR) {
		if err := checkReplicaList("isr", r.ISR, true); err != nil {
			return nil, err
		}
		isr = r.ISR
	}
	if r.Has(rl.ChangeLeader) {
		leader = r.Leader
	}
	if !subset(isr, replicas) {
		return nil, fmt.Errorf("%w: isr %v is not within replicas %v", ErrInvalidRecord, isr, replicas)
	}
	if leader < rl.NoLeader {
		return nil, fmt.Errorf("%w: leader %d", ErrInvalidRecord, leader)
	}
	if leader != rl.NoLeader && slices.Index(replicas, leader) < 0 {
		return nil, fmt.Errorf("%w: leader %d is not a replica of %v", ErrInvalidRecord, leader, replicas)
	}
	if r.Has(rl.ChangeReassignment) {
		if err := checkReplicaList("adding", r.Adding, true); err != nil {
			return nil, err
		}
		if err := checkReplicaList("removing", r.Removing, true); err != nil {
			return nil, err
		}
		if !subset(r.Adding, replicas) || !subset(r.Removing, replicas) {
			return nil, fmt.Errorf("%w: adding %v / removing %v not within replicas %v", ErrInvalidRecord, r.Adding, r.Removing, replicas)
		}
	}
	return cur, nil
}

// commitPartitionChange writes a change that checkPartitionChange
// accepted to cur, partition r.Partition of topic id.
func commitPartitionChange(im store, id rl.TopicID, idx uint64, cur *Partition, r *rl.PartitionDelta) {
	next := *cur
	if r.Has(rl.ChangeReplicas) {
		next.Replicas = append([]int32(nil), r.Replicas...)
		var buf [8]rl.ReplicaState
		states := buf[:0]
		for _, b := range r.Replicas {
			states = append(states, cur.ReplicaState(b))
		}
		next.ReplicaStates = sharedStates(states)
	}
	if r.Has(rl.ChangeISR) {
		next.ISR = isrList(r.ISR, next.Replicas)
	}
	if r.Has(rl.ChangeLeader) {
		next.Leader = r.Leader
	}
	if next.Leader != cur.Leader {
		next.LeaderEpoch++
	}
	next.PartitionEpoch++
	next.ChangedAt = idx
	im.setPartition(id, r.Partition, next)
	if r.Has(rl.ChangeReassignment) {
		setReassignment(im.writableTopic(id), r.Partition, Reassignment{Adding: append([]int32(nil), r.Adding...), Removing: append([]int32(nil), r.Removing...)})
	}
}

func setReassignment(t *Topic, p int32, r Reassignment) {
	if len(r.Adding) == 0 && len(r.Removing) == 0 {
		delete(t.Reassignments, p)
		return
	}
	if t.Reassignments == nil {
		t.Reassignments = map[int32]Reassignment{}
	}
	t.Reassignments[p] = r
}

func applyReplicaStates(im store, idx uint64, r *rl.ReplicaStateChange) error {
	t := im.topic(r.TopicID)
	if t == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, r.TopicID)
	}
	// A list in order has no repeats; the controller writes them so.
	var seen map[rl.ReplicaRef]struct{}
	if !refsOrdered(r.Replicas) {
		seen = make(map[rl.ReplicaRef]struct{}, len(r.Replicas))
	}
	for _, ref := range r.Replicas {
		p := im.partitionIn(t, ref.Partition)
		if p == nil {
			return fmt.Errorf("%w: %q partition %d", ErrUnknownPartition, t.Name, ref.Partition)
		}
		if seen != nil {
			if _, dup := seen[ref]; dup {
				return fmt.Errorf("%w: replica %d/%d listed twice", ErrInvalidRecord, ref.Partition, ref.Broker)
			}
			seen[ref] = struct{}{}
		}
		if slices.Index(p.Replicas, ref.Broker) < 0 {
			return fmt.Errorf("%w: broker %d is not in the assignment of %q partition %d", ErrInvalidTransition, ref.Broker, t.Name, ref.Partition)
		}
		from := p.ReplicaState(ref.Broker)
		if !ValidReplicaTransition(from, r.State) {
			return fmt.Errorf("%w: replica of %q partition %d on broker %d: %s -> %s", ErrInvalidTransition, t.Name, ref.Partition, ref.Broker, from, r.State)
		}
		if r.State == rl.NewReplica && p.Leader == ref.Broker {
			return fmt.Errorf("%w: replica of %q partition %d on broker %d leads the partition and cannot become %s", ErrInvalidTransition, t.Name, ref.Partition, ref.Broker, r.State)
		}
		if r.State == rl.NonExistentReplica && p.Leader == ref.Broker {
			return fmt.Errorf("%w: replica of %q partition %d on broker %d still leads it", ErrInvalidTransition, t.Name, ref.Partition, ref.Broker)
		}
	}
	for _, ref := range r.Replicas {
		p := *im.partition(r.TopicID, ref.Partition)
		i := slices.Index(p.Replicas, ref.Broker)
		if r.State == rl.NonExistentReplica {
			p.Replicas = without(p.Replicas, i)
			var buf [8]rl.ReplicaState
			states := append(append(buf[:0], p.ReplicaStates[:i]...), p.ReplicaStates[i+1:]...)
			p.ReplicaStates = sharedStates(states)
			if j := slices.Index(p.ISR, ref.Broker); j >= 0 {
				p.ISR = without(p.ISR, j)
			}
			p.PartitionEpoch++
			p.ChangedAt = idx
		} else {
			var buf [8]rl.ReplicaState
			states := append(buf[:0], p.ReplicaStates...)
			states[i] = r.State
			p.ReplicaStates = sharedStates(states)
		}
		im.setPartition(r.TopicID, ref.Partition, p)
	}
	return nil
}

// isrList returns a copy of isr of the partition's own, or the replica
// list itself when the two are equal, as they are for a partition whose
// replicas are all in sync: slices are never changed in place, and one
// list instead of two halves what a large image asks of the collector.
func isrList(isr, replicas []int32) []int32 {
	if len(isr) == len(replicas) && len(isr) > 0 && slices.Equal(isr, replicas) {
		return replicas
	}
	return append([]int32(nil), isr...)
}

func without(s []int32, i int) []int32 {
	out := make([]int32, 0, len(s)-1)
	return append(append(out, s[:i]...), s[i+1:]...)
}

func applyPartitionStates(im store, r *rl.PartitionStateChange) error {
	t := im.topic(r.TopicID)
	if t == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, r.TopicID)
	}
	var seen map[int32]struct{}
	if !slices.IsSorted(r.Partitions) {
		seen = make(map[int32]struct{}, len(r.Partitions))
	}
	for i, pid := range r.Partitions {
		p := im.partitionIn(t, pid)
		if p == nil {
			return fmt.Errorf("%w: %q partition %d", ErrUnknownPartition, t.Name, pid)
		}
		if seen != nil {
			if _, dup := seen[pid]; dup {
				return fmt.Errorf("%w: partition %d listed twice", ErrInvalidRecord, pid)
			}
			seen[pid] = struct{}{}
		} else if i > 0 && pid == r.Partitions[i-1] {
			return fmt.Errorf("%w: partition %d listed twice", ErrInvalidRecord, pid)
		}
		if !ValidPartitionTransition(p.State, r.State) {
			return fmt.Errorf("%w: %q partition %d: %s -> %s", ErrInvalidTransition, t.Name, pid, p.State, r.State)
		}
	}
	for _, pid := range r.Partitions {
		p := *im.partition(r.TopicID, pid)
		p.State = r.State
		im.setPartition(r.TopicID, pid, p)
		if r.State == rl.NonExistentPartition {
			im.addPartitionCount(-1)
		}
	}
	return nil
}

func applyBeginDeleteTopic(im store, r *rl.BeginDeleteTopic) error {
	t := im.topic(r.TopicID)
	if t == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, r.TopicID)
	}
	if t.Deleting {
		return fmt.Errorf("%w: %q", ErrTopicDeleting, t.Name)
	}
	im.writableTopic(r.TopicID).Deleting = true
	return nil
}

func applyRemoveTopic(im store, r *rl.RemoveTopic) error {
	t := im.topic(r.TopicID)
	if t == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, r.TopicID)
	}
	if !t.Deleting {
		return fmt.Errorf("%w: %q is not queued for deletion", ErrInvalidTransition, t.Name)
	}
	slots := im.partitionSlots(r.TopicID)
	existing := 0
	for i := int32(0); i < slots; i++ {
		p := im.partition(r.TopicID, i)
		if p == nil {
			continue
		}
		if n := len(p.Replicas); n > 0 {
			return fmt.Errorf("%w: %q partition %d still has %d replica(s)", ErrInvalidTransition, t.Name, i, n)
		}
		existing++
	}
	im.addPartitionCount(-existing)
	im.deleteTopic(t)
	return nil
}
