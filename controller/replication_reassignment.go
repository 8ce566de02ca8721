package controller

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Reassign is one partition of an AlterPartitionReassignments request: the
// replicas it should end with, preferred leader first, or nil to cancel
// the reassignment in progress.
type Reassign struct {
	Topic     string
	Partition int32
	Replicas  []int32
}

// ReassignResult is the outcome for one partition.
type ReassignResult struct {
	Topic     string
	Partition int32
	Err       error
}

// ReassignmentStatus is a reassignment in progress, as
// ListPartitionReassignments reports it: Replicas is the full set during
// the move (target replicas first, then the original ones that will leave),
// Adding the replicas that join, Removing those that leave at completion.
type ReassignmentStatus struct {
	Topic     string
	TopicID   rl.TopicID
	Partition int32
	Replicas  []int32
	Adding    []int32
	Removing  []int32
}

// AlterPartitionReassignments starts, changes or cancels partition
// reassignments (KIP-455), all partitions of the request in one event.
//
// Starting one commits the union of the target and the current replicas
// (target order first, as Kafka does) with the replicas being added and
// removed; the new replicas are created (NewReplica, LeaderAndIsr with
// isNew, then OnlineReplica) and the current ones told of the new replica
// set. The reassignment completes, in the event that brings it there, once
// every target replica is in the ISR: the leader moves into the target set
// if it is being removed (Reassigned strategy), the assignment becomes the
// target set, the ISR loses the replicas that leave, and those replicas are
// stopped and deleted (OfflineReplica, ReplicaDeletionStarted with
// StopReplica delete=true, and NonExistentReplica once their broker
// confirms). The completion check runs whenever a partition leader
// reports an ISR change, when a broker comes back, on CheckReassignments,
// and when a new controller takes over.
//
// A request for a partition with a reassignment in progress replaces it:
// replicas that were being added and are not in the new target are
// deleted. Replicas nil cancels it: the partition returns to its original
// replicas and those that were being added are deleted. As in Kafka's
// KRaft controller, the original replicas keep the order they have in the
// full set, which may differ from the order they had before.
//
// Errors per partition: UNKNOWN_TOPIC_OR_PARTITION (topics being deleted
// included), NO_REASSIGNMENT_IN_PROGRESS (cancel with none in progress),
// INVALID_REPLICA_ASSIGNMENT (an empty list, a broker listed twice or not
// registered, or a change that would leave the partition no in-sync
// replica), REASSIGNMENT_IN_PROGRESS (the target names a broker whose
// replica of the partition is still being deleted; retry once it is gone),
// INVALID_REQUEST (the partition named twice in the request).
func (c *Controller) AlterPartitionReassignments(ctx context.Context, reqs []Reassign) []ReassignResult {
	out := make([]ReassignResult, len(reqs))
	count := map[TopicPartition]int{}
	for i, r := range reqs {
		out[i] = ReassignResult{Topic: r.Topic, Partition: r.Partition}
		count[TopicPartition{r.Topic, r.Partition}]++
	}
	var todo []int
	for i, r := range reqs {
		if count[TopicPartition{r.Topic, r.Partition}] > 1 {
			out[i].Err = kafkaErr(kerr.InvalidRequest, "%s-%d appears more than once in the request", r.Topic, r.Partition)
			continue
		}
		todo = append(todo, i)
	}
	if len(todo) == 0 {
		return out
	}
	v, _, err := c.submit(ctx, "alter-partition-reassignments", func(m *managers, w *work) (eventOutcome, error) {
		return answer(m.replication.alterReassignments(w, reqs, todo))
	}, nil)
	for k, i := range todo {
		if err != nil {
			out[i].Err = err
		} else {
			out[i].Err = v.([]ReassignResult)[k].Err
		}
	}
	return out
}

// alterReassignments handles the partitions of a request at todo, in
// one event, and answers each.
func (m *replicationManager) alterReassignments(w *work, reqs []Reassign, todo []int) ([]ReassignResult, error) {
	results := make([]ReassignResult, len(todo))
	for k, i := range todo {
		res, err := m.alterReassignment(w, reqs[i])
		if err != nil {
			return nil, err
		}
		results[k] = res
	}
	return results, nil
}

// alterReassignment handles one partition of a request: the result is
// the partition's answer (Err set if it is refused); an error fails the
// event.
func (m *replicationManager) alterReassignment(w *work, r Reassign) (ReassignResult, error) {
	refuse := func(err error) (ReassignResult, error) {
		return ReassignResult{Topic: r.Topic, Partition: r.Partition, Err: err}, nil
	}
	t := w.img().TopicByName(r.Topic)
	if t == nil || t.Deleting || w.img().Partition(t.ID, r.Partition) == nil {
		return refuse(kafkaErr(kerr.UnknownTopicOrPartition, "%s-%d", r.Topic, r.Partition))
	}
	if r.Replicas == nil {
		w.because(fmt.Sprintf("reassignment of %s-%d cancelled", r.Topic, r.Partition))
	} else {
		w.because(fmt.Sprintf("reassignment of %s-%d to %v", r.Topic, r.Partition, r.Replicas))
	}
	v := newReassignView(w.img(), t, r.Partition)
	if r.Replicas == nil {
		if !v.inProgress() {
			return refuse(kafkaErr(kerr.NoReassignmentInProgress, "%s-%d", r.Topic, r.Partition))
		}
		w.log.Info("reassignment cancelled", "topic", t.Name, "partition", r.Partition, "back_to", v.original)
		return m.setReassignmentTarget(w, &v, slices.Clone(v.original))
	}
	if len(r.Replicas) == 0 {
		return refuse(kafkaErr(kerr.InvalidReplicaAssignment, "%s-%d: the replica list is empty", r.Topic, r.Partition))
	}
	for i, b := range r.Replicas {
		switch {
		case b < 0:
			return refuse(kafkaErr(kerr.InvalidReplicaAssignment, "%s-%d: broker id %d is negative", r.Topic, r.Partition, b))
		case slices.Index(r.Replicas[:i], b) >= 0:
			return refuse(kafkaErr(kerr.InvalidReplicaAssignment, "%s-%d: broker %d is listed twice in %v", r.Topic, r.Partition, b, r.Replicas))
		case w.img().Broker(b) == nil:
			return refuse(kafkaErr(kerr.InvalidReplicaAssignment, "%s-%d: broker %d is not registered", r.Topic, r.Partition, b))
		case slices.Index(v.doomed, b) >= 0:
			return refuse(kafkaErr(kerr.ReassignmentInProgress, "%s-%d: the replica on broker %d is still being deleted", r.Topic, r.Partition, b))
		}
	}
	return m.setReassignmentTarget(w, &v, slices.Clone(r.Replicas))
}

// reassignView is a partition's reassignment as the image shows it. The
// image records the full replica set R and, while a reassignment runs, the
// replicas being added and removed; replicas being deleted are recognised
// by their replica state (only a deletion puts a replica there). From
// these:
//
//	doomed   D = replicas of R in a deletion state
//	adding   A = (Adding ∩ R) − D
//	original O = R − Adding − D
//	target   T = R − Removing − D
//
// and a reassignment is in progress while it has replicas to add or
// original replicas to remove. A partition whose reassignment completed
// (or was cancelled) keeps its record until the replicas it dropped are
// deleted: then only D is left in Removing.
type reassignView struct {
	ref      partRef
	p        *fsm.Partition
	marked   bool
	ra       fsm.Reassignment
	doomed   []int32
	adding   []int32
	original []int32
	target   []int32
}

func newReassignView(r fsm.Reader, t *fsm.Topic, part int32) reassignView {
	p := r.Partition(t.ID, part)
	v := reassignView{ref: partRef{id: t.ID, name: t.Name, part: part}, p: p}
	if p == nil {
		return v
	}
	v.ra, v.marked = t.Reassignments[part]
	for j, b := range p.Replicas {
		if isDeletionState(p.ReplicaStates[j]) {
			v.doomed = append(v.doomed, b)
			continue
		}
		if slices.Index(v.ra.Adding, b) >= 0 {
			v.adding = append(v.adding, b)
		} else {
			v.original = append(v.original, b)
		}
		if slices.Index(v.ra.Removing, b) < 0 {
			v.target = append(v.target, b)
		}
	}
	return v
}

func (v *reassignView) inProgress() bool {
	return v.p != nil && v.marked && (len(v.adding) > 0 || len(minus(v.original, v.target)) > 0)
}

// kept is T ++ (O − T): the replicas that are not being deleted, target
// first.
func (v *reassignView) kept() []int32 {
	return append(slices.Clone(v.target), minus(v.original, v.target)...)
}

// minus returns the members of a that are not in b, in a's order.
func minus(a, b []int32) []int32 {
	out := make([]int32, 0, len(a))
	for _, x := range a {
		if slices.Index(b, x) < 0 {
			out = append(out, x)
		}
	}
	return out
}

// intersect returns the members of a that are in b, in a's order.
func intersect(a, b []int32) []int32 {
	out := make([]int32, 0, len(a))
	for _, x := range a {
		if slices.Index(b, x) >= 0 {
			out = append(out, x)
		}
	}
	return out
}

// setReassignmentTarget moves a partition towards target, from no
// reassignment, one in progress or one whose dropped replicas are still
// being deleted. The result is the partition's answer (Err set if the
// change is refused); an error fails the event.
//
// Records are staged so that a failover between any two log entries of
// the event leaves a state the view reads correctly: replicas that leave
// are taken down the deletion path before the record that changes the
// replica set, so they are never read as original replicas.
func (m *replicationManager) setReassignmentTarget(w *work, v *reassignView, target []int32) (ReassignResult, error) {
	p := v.p
	ref := v.ref
	res := ReassignResult{Topic: ref.name, Partition: ref.part}
	dropped := minus(v.adding, target)
	kept := append(slices.Clone(target), minus(v.original, target)...)
	doomed := append(slices.Clone(v.doomed), dropped...)
	replicas := append(slices.Clone(kept), doomed...)
	adding := minus(target, v.original)
	removing := append(minus(v.original, target), doomed...)
	if slices.Equal(replicas, p.Replicas) && slices.Equal(adding, v.ra.Adding) && slices.Equal(removing, v.ra.Removing) {
		return res, nil
	}
	isr := minus(p.ISR, dropped)
	if len(p.ISR) > 0 && len(isr) == 0 {
		res.Err = kafkaErr(kerr.InvalidReplicaAssignment, "%s-%d: dropping %v would leave no in-sync replica (ISR %v)", ref.name, ref.part, dropped, p.ISR)
		return res, nil
	}
	if p.Leader != rl.NoLeader && slices.Index(dropped, p.Leader) >= 0 {
		el, err := Elect(ReassignedElection, ElectionInput{
			Partition: PartitionView{Replicas: p.Replicas, ISR: isr, Leader: p.Leader, Target: kept},
			Live:      w.electableLive(),
		})
		leader := el.Leader
		if err != nil {
			leader = rl.NoLeader
		}
		if err := w.stageEach(&rl.PartitionChange{TopicID: ref.id, Partition: ref.part, PartitionEpoch: p.PartitionEpoch,
			Set: rl.ChangeLeader | rl.ChangeISR, Leader: leader, ISR: isr}); err != nil {
			return res, err
		}
		if leader == rl.NoLeader {
			w.log.Warn("leader dropped by a reassignment change and no kept replica can lead: partition offline", "topic", ref.name, "partition", ref.part)
			w.plan.updateMetadata(ref)
			if _, err := m.handlePartitionStateChanges(w, []partRef{ref}, rl.OfflinePartition, 0, nil); err != nil {
				return res, err
			}
		}
	}
	var drop []replica
	for _, b := range dropped {
		drop = append(drop, replica{ref: ref, broker: b})
	}
	if err := m.driveReplicaDeletions(w, drop, false); err != nil {
		return res, err
	}
	p = w.img().Partition(ref.id, ref.part)
	// Whatever the deletions staged above, the replica set is the one
	// computed: only states and the ISR changed.
	if err := w.stageEach(&rl.PartitionChange{TopicID: ref.id, Partition: ref.part, PartitionEpoch: p.PartitionEpoch,
		Set: rl.ChangeReplicas | rl.ChangeReassignment, Replicas: replicas, Adding: adding, Removing: removing}); err != nil {
		return res, err
	}
	if len(adding) > 0 || len(removing) > 0 {
		w.log.Info("reassignment set", "topic", ref.name, "partition", ref.part, "target", target, "adding", adding, "removing", removing)
	}
	if err := m.createNewcomers(w, ref); err != nil {
		return res, err
	}
	live, _ := w.liveSet()
	w.plan.leaderAndIsr(ref, liveOf(kept, live), false)
	nv := newReassignView(w.img(), w.img().Topic(ref.id), ref.part)
	if _, err := m.maybeCompleteReassignment(w, &nv); err != nil {
		return res, err
	}
	return res, nil
}

// createNewcomers creates the replicas of a partition's assignment that
// do not exist yet (NewReplica, with LeaderAndIsr isNew when the partition
// has a leader) and brings new replicas on live brokers online (a replica
// on a fenced broker comes online when its broker returns). Replicas
// being deleted are left alone.
func (m *replicationManager) createNewcomers(w *work, ref partRef) error {
	p := w.img().Partition(ref.id, ref.part)
	live, _ := w.liveSet()
	var fresh, online []replica
	for j, b := range p.Replicas {
		r := replica{ref: ref, broker: b}
		switch s := p.ReplicaStates[j]; {
		case s == rl.NonExistentReplica && b != p.Leader:
			fresh = append(fresh, r)
			if live.Has(b) {
				online = append(online, r)
			}
		case s == rl.NewReplica && live.Has(b):
			online = append(online, r)
		}
	}
	if len(fresh) > 0 {
		if _, err := m.handleReplicaStateChanges(w, fresh, rl.NewReplica); err != nil {
			return err
		}
	}
	if len(online) > 0 {
		if _, err := m.handleReplicaStateChanges(w, online, rl.OnlineReplica); err != nil {
			return err
		}
	}
	return nil
}

// maybeCompleteReassignment completes a reassignment in progress whose
// target replicas are all in the ISR, if a target replica can lead: the
// leader moves into the target set if needed (Reassigned strategy), the
// ISR keeps only target replicas, the adding and removing lists give way
// to the list of replicas still to delete, and the original replicas that
// leave go down the deletion path. It reports whether it completed.
func (m *replicationManager) maybeCompleteReassignment(w *work, v *reassignView) (bool, error) {
	if !v.inProgress() {
		return false, nil
	}
	p, ref := v.p, v.ref
	for _, b := range v.target {
		if !p.InISR(b) {
			return false, nil
		}
	}
	leader := p.Leader
	if leader == rl.NoLeader || slices.Index(v.target, leader) < 0 {
		el, err := Elect(ReassignedElection, ElectionInput{
			Partition: PartitionView{Replicas: p.Replicas, ISR: p.ISR, Leader: p.Leader, Target: v.target},
			Live:      w.electableLive(),
		})
		if err != nil {
			w.log.Info("reassignment waits for a target replica that can lead", "topic", ref.name, "partition", ref.part, "target", v.target, "error", err)
			return false, nil
		}
		leader = el.Leader
	}
	leaving := minus(v.original, v.target)
	var removing []int32
	for _, b := range p.Replicas {
		if slices.Index(leaving, b) >= 0 || slices.Index(v.doomed, b) >= 0 {
			removing = append(removing, b)
		}
	}
	change := &rl.PartitionChange{TopicID: ref.id, Partition: ref.part, PartitionEpoch: p.PartitionEpoch,
		Set: rl.ChangeISR | rl.ChangeReassignment, ISR: intersect(p.ISR, v.target), Removing: removing}
	if leader != p.Leader {
		change.Set |= rl.ChangeLeader
		change.Leader = leader
	}
	if err := w.stageEach(change); err != nil {
		return false, err
	}
	if p.State != rl.OnlinePartition {
		if err := w.stageEach(&rl.PartitionStateChange{TopicID: ref.id, State: rl.OnlinePartition, Partitions: []int32{ref.part}}); err != nil {
			return false, err
		}
	}
	live, _ := w.liveSet()
	w.plan.leaderAndIsr(ref, liveOf(v.target, live), false)
	// A new replica is in the ISR but may not be online yet: a failover
	// can cut the event that created it short after NewReplica.
	if err := m.createNewcomers(w, ref); err != nil {
		return false, err
	}
	var out []replica
	for _, b := range leaving {
		out = append(out, replica{ref: ref, broker: b})
	}
	if err := m.driveReplicaDeletions(w, out, false); err != nil {
		return false, err
	}
	w.log.Info("reassignment completed", "topic", ref.name, "partition", ref.part, "replicas", v.target, "leader", leader, "deleting", leaving)
	return true, nil
}

// finishReplicaRemovals takes the replicas of a partition (of a topic not
// being deleted) whose deletion its broker confirmed out of the
// assignment (NonExistentReplica), and brings the partition's
// reassignment record in line: once nothing is left to add or delete, the
// record goes.
func (m *replicationManager) finishReplicaRemovals(w *work, ref partRef) error {
	t := w.img().Topic(ref.id)
	if t == nil || t.Deleting {
		return nil
	}
	p := w.img().Partition(ref.id, ref.part)
	if p == nil {
		return nil
	}
	var gone []replica
	for j, b := range p.Replicas {
		if p.ReplicaStates[j] == rl.ReplicaDeletionSuccessful {
			gone = append(gone, replica{ref: ref, broker: b})
		}
	}
	if len(gone) > 0 {
		if _, err := m.handleReplicaStateChanges(w, gone, rl.NonExistentReplica); err != nil {
			return err
		}
	}
	t = w.img().Topic(ref.id)
	v := newReassignView(w.img(), t, ref.part)
	if v.marked {
		leaving := minus(v.original, v.target)
		var removing []int32
		for _, b := range v.p.Replicas {
			if slices.Index(leaving, b) >= 0 || slices.Index(v.doomed, b) >= 0 {
				removing = append(removing, b)
			}
		}
		if !slices.Equal(v.adding, v.ra.Adding) || !slices.Equal(removing, v.ra.Removing) {
			if err := w.stageEach(&rl.PartitionChange{TopicID: ref.id, Partition: ref.part, PartitionEpoch: v.p.PartitionEpoch,
				Set: rl.ChangeReassignment, Adding: v.adding, Removing: removing}); err != nil {
				return err
			}
			if len(v.adding) == 0 && len(removing) == 0 {
				w.log.Info("reassignment finished: the replicas it dropped are deleted", "topic", ref.name, "partition", ref.part)
			}
		}
	}
	if len(gone) > 0 {
		live, _ := w.liveSet()
		w.plan.leaderAndIsr(ref, liveOf(v.kept(), live), false)
	}
	return nil
}

// driveReassignment carries a partition's reassignment on from whatever
// the image shows: replicas being deleted go on down the deletion path
// (with resend, those already started are sent StopReplica delete=true
// again), confirmed ones leave, replicas to add that were never created
// are, and a reassignment whose target replicas are all in the ISR
// completes. With resend, the replicas that stay are sent the partition's
// state again, new ones with isNew: a previous controller's requests may
// never have gone out.
func (m *replicationManager) driveReassignment(w *work, t *fsm.Topic, part int32, resend bool) error {
	v := newReassignView(w.img(), t, part)
	if v.p == nil {
		return nil
	}
	var doomed []replica
	for _, b := range v.doomed {
		doomed = append(doomed, replica{ref: v.ref, broker: b})
	}
	if err := m.driveReplicaDeletions(w, doomed, resend); err != nil {
		return err
	}
	if err := m.finishReplicaRemovals(w, v.ref); err != nil {
		return err
	}
	t = w.img().Topic(t.ID)
	v = newReassignView(w.img(), t, part)
	if !v.inProgress() {
		return nil
	}
	if err := m.createNewcomers(w, v.ref); err != nil {
		return err
	}
	v = newReassignView(w.img(), w.img().Topic(t.ID), part)
	if resend {
		live, _ := w.liveSet()
		if add := liveOf(v.adding, live); len(add) > 0 && v.p.Leader != rl.NoLeader {
			w.plan.leaderAndIsr(v.ref, add, true)
		}
		w.plan.leaderAndIsr(v.ref, liveOf(minus(v.kept(), v.adding), live), false)
	}
	_, err := m.maybeCompleteReassignment(w, &v)
	return err
}

// reassigningTopics returns the topics, not being deleted, that have a
// reassignment record, in id order.
func reassigningTopics(im fsm.Reader) []*fsm.Topic {
	var out []*fsm.Topic
	im.ForEachTopic(func(t *fsm.Topic) bool {
		if !t.Deleting && len(t.Reassignments) > 0 {
			out = append(out, t)
		}
		return true
	})
	slices.SortFunc(out, func(a, b *fsm.Topic) int { return compareIDs(a.ID, b.ID) })
	return out
}

// resumeReassignments carries on every reassignment the log shows (part
// of resume: it runs first thing after activation).
func (m *replicationManager) resumeReassignments(w *work) error {
	topics := reassigningTopics(w.img())
	if len(topics) > 0 {
		w.log.Info("resuming reassignments", "topics", len(topics))
	}
	for _, t := range topics {
		for _, part := range t.ReassigningPartitions() {
			if err := m.driveReassignment(w, w.img().Topic(t.ID), part, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckReassignments runs the completion check of every reassignment in
// progress now, and carries on the deletion of replicas that
// reassignments dropped. Completion is otherwise checked when an ISR
// changes, when a broker returns and after a failover; the automatic
// balancer (SetBalance) also runs this check at every interval.
func (c *Controller) CheckReassignments(ctx context.Context) error {
	_, _, err := c.submit(ctx, "check-reassignments", computeCheckReassignments, nil)
	return err
}

// computeCheckReassignments is the compute of a reassignment check, the
// API's and the loop's balance ticks'.
func computeCheckReassignments(m *managers, w *work) (eventOutcome, error) {
	return answer(nil, m.replication.checkReassignments(w))
}

// checkReassignments drives every reassignment the view shows.
func (m *replicationManager) checkReassignments(w *work) error {
	for _, t := range reassigningTopics(w.img()) {
		for _, part := range t.ReassigningPartitions() {
			if err := m.driveReassignment(w, w.img().Topic(t.ID), part, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// reassignmentISRChanged is called when a partition leader's ISR change
// was staged: a reassignment whose target replicas are now all in the ISR
// completes in the same event, so the leader's answer already carries the
// completed partition.
func (m *replicationManager) reassignmentISRChanged(w *work, ref partRef) {
	t := w.img().Topic(ref.id)
	if t == nil || t.Deleting {
		return
	}
	if _, ok := t.Reassignments[ref.part]; !ok {
		return
	}
	w.atomically("reassignment completion check", func(sub *work) error {
		v := newReassignView(sub.img(), sub.img().Topic(ref.id), ref.part)
		_, err := m.maybeCompleteReassignment(sub, &v)
		return err
	})
}

// ListReassignments returns the reassignments in progress, by topic name
// and then partition: of every partition when filter is nil, otherwise of
// the partitions named (a partition that does not exist or has no
// reassignment in progress is left out, as Kafka does). It reads r as
// given (hold the FSM's view when r is the committed image), so it also
// works on a node that is not active.
func ListReassignments(r fsm.Reader, filter []TopicPartition) []ReassignmentStatus {
	var out []ReassignmentStatus
	add := func(t *fsm.Topic, part int32) {
		v := newReassignView(r, t, part)
		if !v.inProgress() {
			return
		}
		out = append(out, ReassignmentStatus{Topic: t.Name, TopicID: t.ID, Partition: part,
			Replicas: v.kept(), Adding: slices.Clone(v.adding), Removing: minus(v.original, v.target)})
	}
	if filter == nil {
		r.ForEachTopic(func(t *fsm.Topic) bool {
			if !t.Deleting {
				for _, part := range t.ReassigningPartitions() {
					add(t, part)
				}
			}
			return true
		})
	} else {
		seen := map[TopicPartition]bool{}
		for _, tp := range filter {
			if seen[tp] {
				continue
			}
			seen[tp] = true
			if t := r.TopicByName(tp.Topic); t != nil && !t.Deleting {
				if _, ok := t.Reassignments[tp.Partition]; ok {
					add(t, tp.Partition)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}
