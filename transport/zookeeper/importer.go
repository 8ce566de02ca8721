package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Plan is what an import does (or, in a dry run, would do).
type Plan struct {
	DryRun bool
	// Found is what ZooKeeper holds.
	Found struct {
		Brokers, Topics, Partitions int
		ControllerEpoch             int32
	}
	// The controller epoch goes from EpochFrom to EpochTo (equal: no
	// change). It must end above ZooKeeper's, or brokers that saw the old
	// controller would refuse the new one's requests.
	EpochFrom, EpochTo int32
	// Counts of what is imported.
	Brokers, Topics, Partitions int
	PendingDeletions            int
	Reassignments               int
	// LeaderlessPartitions had leader -1 in ZooKeeper; Unelected had no
	// state znode at all and are brought online like new partitions.
	LeaderlessPartitions, Unelected int
	// EpochRaised counts partitions whose leader epoch could not be
	// reproduced exactly and is imported one higher (see leaderWalk).
	EpochRaised int
	// Skipped: already in the image.
	SkippedBrokers, SkippedTopics int
	Records                       int
	// Items is the readable list, brokers then topics.
	Items []PlanItem
	// Problems stop the import before anything is committed.
	Problems []string
	// Index is the last committed index (0 in a dry run).
	Index uint64
	// ReadTime is how long reading ZooKeeper took; CommitTime how long
	// committing took.
	ReadTime, CommitTime time.Duration
}

// PlanItem is one line of a plan.
type PlanItem struct {
	Kind   string // "broker", "topic", "controller-epoch"
	Name   string
	Action string // "import", "skip", "conflict", "raise"
	Detail string
}

// String prints the plan for a person.
func (p Plan) String() string {
	var sb strings.Builder
	verb := "imported"
	if p.DryRun {
		verb = "would import"
	}
	fmt.Fprintf(&sb, "ZooKeeper holds %d broker(s), %d topic(s), %d partition(s), controller epoch %d\n",
		p.Found.Brokers, p.Found.Topics, p.Found.Partitions, p.Found.ControllerEpoch)
	fmt.Fprintf(&sb, "%s: %d broker(s), %d topic(s), %d partition(s) in %d record(s); %d pending deletion(s), %d reassignment(s), %d leaderless, %d unelected, %d leader epoch(s) raised by one\n",
		verb, p.Brokers, p.Topics, p.Partitions, p.Records, p.PendingDeletions, p.Reassignments, p.LeaderlessPartitions, p.Unelected, p.EpochRaised)
	fmt.Fprintf(&sb, "already here: %d broker(s), %d topic(s)\n", p.SkippedBrokers, p.SkippedTopics)
	if p.EpochTo != p.EpochFrom {
		fmt.Fprintf(&sb, "controller epoch: %d -> %d\n", p.EpochFrom, p.EpochTo)
	}
	for _, it := range p.Items {
		fmt.Fprintf(&sb, "  %-8s %-6s %s", it.Action, it.Kind, it.Name)
		if it.Detail != "" {
			fmt.Fprintf(&sb, " (%s)", it.Detail)
		}
		sb.WriteByte('\n')
	}
	for _, pr := range p.Problems {
		fmt.Fprintf(&sb, "  problem: %s\n", pr)
	}
	if p.Index > 0 {
		fmt.Fprintf(&sb, "committed through index %d\n", p.Index)
	}
	return sb.String()
}

// Migrate reads the ZooKeeper-mode Kafka cluster at zkAddr (Kafka's
// zookeeper.connect form, "host:port[,host:port][/chroot]") and imports it
// through node, which must be the active controller. With dryRun it only
// returns the plan. Running it again imports nothing new.
func Migrate(ctx context.Context, zkAddr string, node *controller.Node, dryRun bool, logger hclog.Logger) (Plan, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	logger = logger.Named("zk-import")
	c, err := dial(zkAddr, 10*time.Second, logger, nil)
	if err != nil {
		return Plan{DryRun: dryRun}, err
	}
	defer c.close()
	if err := c.waitSession(ctx); err != nil {
		return Plan{DryRun: dryRun}, err
	}
	start := time.Now()
	cl, err := readCluster(c)
	if err != nil {
		return Plan{DryRun: dryRun}, fmt.Errorf("read %s: %w", zkAddr, err)
	}
	read := time.Since(start)
	plan, err := ImportCluster(ctx, cl, node, dryRun)
	plan.ReadTime = read
	if err == nil {
		logger.Info("zookeeper import", "dry_run", dryRun, "brokers", plan.Brokers, "topics", plan.Topics,
			"partitions", plan.Partitions, "records", plan.Records, "read", read.String(), "commit", plan.CommitTime.String())
	}
	return plan, err
}

// ImportCluster imports what ReadCluster read (see Migrate).
func ImportCluster(ctx context.Context, cl *Cluster, node *controller.Node, dryRun bool) (Plan, error) {
	p := Plan{DryRun: dryRun}
	p.Found.Brokers, p.Found.Topics, p.Found.ControllerEpoch = len(cl.Brokers), len(cl.Topics), cl.ControllerEpoch
	for _, t := range cl.Topics {
		p.Found.Partitions += len(t.Partitions)
	}
	ctl := node.Controller
	if ok, _ := ctl.Active(); !ok {
		return p, controller.ErrNotController
	}
	live := map[int32]bool{}
	for _, b := range cl.Brokers {
		live[b.ID] = true
	}

	var records []rl.Record
	// Controller epoch and brokers.
	var brokerRecs []rl.Record
	var cur int32
	node.FSM.View(func(im *fsm.Image) {
		cur, _ = im.ControllerEpoch()
		for _, b := range cl.Brokers {
			name := fmt.Sprint(b.ID)
			if have := im.Broker(b.ID); have != nil {
				p.SkippedBrokers++
				detail := "already imported"
				if have.Incarnation != b.Incarnation() {
					detail = "registered here with another incarnation: kept"
				}
				p.Items = append(p.Items, PlanItem{Kind: "broker", Name: name, Action: "skip", Detail: detail})
				continue
			}
			p.Brokers++
			brokerRecs = append(brokerRecs, &rl.RegisterBroker{BrokerID: b.ID, IncarnationID: b.Incarnation(), Endpoints: b.Endpoints, Rack: b.Rack})
			p.Items = append(p.Items, PlanItem{Kind: "broker", Name: name, Action: "import", Detail: brokerKey(b.Endpoints, b.Rack)})
		}
	})
	p.EpochFrom, p.EpochTo = cur, cur
	if want := cl.ControllerEpoch + 1; want > cur {
		p.EpochTo = want
		records = append(records, &rl.ControllerEpoch{Epoch: want, NodeID: ctl.NodeID()})
		p.Items = append([]PlanItem{{Kind: "epoch", Name: "controller", Action: "raise", Detail: fmt.Sprintf("%d -> %d", cur, want)}}, p.Items...)
	}
	records = append(records, brokerRecs...)

	// Topics: each unit is checked against the image and staged on a Txn
	// of its own, so a dry run finds what the FSM would refuse.
	for i := range cl.Topics {
		t := &cl.Topics[i]
		recs, st, err := TopicRecords(t, live)
		if err != nil {
			p.Problems = append(p.Problems, fmt.Sprintf("topic %q: %v", t.Name, err))
			continue
		}
		var problem, skip string
		node.FSM.View(func(im *fsm.Image) {
			if have := im.Topic(t.ID); have != nil {
				skip = "already imported"
				if have.Name != t.Name {
					problem = fmt.Sprintf("topic id %s is %q here and %q in ZooKeeper", t.ID, have.Name, t.Name)
				} else if n := int(im.PartitionCount(t.ID)); n != len(t.Partitions) {
					skip = fmt.Sprintf("already imported; %d partition(s) here, %d in ZooKeeper", n, len(t.Partitions))
				}
				return
			}
			if have := im.TopicByName(t.Name); have != nil {
				if !t.IDFromZK {
					skip = "already here (ZooKeeper has no topic id)"
					return
				}
				problem = fmt.Sprintf("topic %q has id %s here and %s in ZooKeeper", t.Name, have.ID, t.ID)
				return
			}
			if err := fsm.NewTxn(im, im.AppliedIndex()+1).Apply(recs...); err != nil {
				problem = fmt.Sprintf("topic %q would be refused: %v", t.Name, err)
			}
		})
		switch {
		case problem != "":
			p.Problems = append(p.Problems, problem)
			p.Items = append(p.Items, PlanItem{Kind: "topic", Name: t.Name, Action: "conflict", Detail: problem})
			continue
		case skip != "":
			p.SkippedTopics++
			p.Items = append(p.Items, PlanItem{Kind: "topic", Name: t.Name, Action: "skip", Detail: skip})
			continue
		}
		p.Topics++
		p.Partitions += len(t.Partitions)
		p.LeaderlessPartitions += st.leaderless
		p.Unelected += st.unelected
		p.Reassignments += st.reassigning
		p.EpochRaised += st.epochRaised
		detail := fmt.Sprintf("id %s, %d partition(s)", EncodeKafkaUUID(t.ID), len(t.Partitions))
		if !t.IDFromZK {
			detail += ", new topic id"
		}
		if t.Deleting {
			p.PendingDeletions++
			detail += ", pending deletion"
		}
		if st.reassigning > 0 {
			detail += fmt.Sprintf(", %d reassigning", st.reassigning)
		}
		p.Items = append(p.Items, PlanItem{Kind: "topic", Name: t.Name, Action: "import", Detail: detail})
		records = append(records, recs...)
	}
	p.Records = len(records)
	if len(p.Problems) > 0 {
		return p, fmt.Errorf("zookeeper import refused: %s", strings.Join(p.Problems, "; "))
	}
	if dryRun || len(records) == 0 {
		if !dryRun {
			p.Index = node.FSM.AppliedIndex()
		}
		return p, nil
	}
	start := time.Now()
	idx, err := ctl.Import(ctx, records)
	p.CommitTime = time.Since(start)
	p.Index = idx
	return p, err
}

type topicStats struct {
	leaderless, unelected, reassigning, epochRaised int
}

// TopicRecords returns the records that create topic t as ZooKeeper shows
// it: Topic (with its configs); a Partition per partition with the full
// assignment; its replicas NewReplica; per partition, PartitionChange
// steps that reproduce leader, leader epoch, ISR and reassignment (see
// leaderWalk); the partitions OnlinePartition (with a leader) or
// OfflinePartition; replicas on live brokers OnlineReplica and the others
// OfflineReplica; BeginDeleteTopic when a deletion is pending. Partitions
// with no state znode stay NewPartition for the controller to elect, and
// replicas a pre-2.4 reassignment adds stay NewReplica for the
// reassignment to start.
func TopicRecords(t *Topic, live map[int32]bool) ([]rl.Record, topicStats, error) {
	var st topicStats
	keys := make([]string, 0, len(t.Configs))
	for k := range t.Configs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	cfg := make([]rl.ConfigEntry, 0, len(keys))
	for _, k := range keys {
		cfg = append(cfg, rl.ConfigEntry{Key: k, Value: t.Configs[k]})
	}
	recs := []rl.Record{&rl.Topic{TopicID: t.ID, Name: t.Name, Configs: cfg}}
	var newRefs, onRefs, offRefs []rl.ReplicaRef
	var online, offline []int32
	var changes []rl.Record
	for i, part := range t.Partitions {
		p := int32(i)
		replicas, adding, removing := part.Replicas, part.Adding, part.Removing
		if part.LegacyReassign != nil {
			// As Kafka starts it: the union, target first.
			replicas = union(part.LegacyReassign, part.Replicas)
			adding, removing = minus(part.LegacyReassign, part.Replicas), minus(part.Replicas, part.LegacyReassign)
		}
		recs = append(recs, &rl.Partition{TopicID: t.ID, Partition: p, Replicas: replicas})
		if !part.HasState {
			st.unelected++
			continue
		}
		s := part.State
		if s.Leader != rl.NoLeader && !contains(replicas, s.Leader) {
			return nil, st, fmt.Errorf("partition %d: leader %d is not a replica of %v", p, s.Leader, replicas)
		}
		walk, reached := leaderWalk(replicas, s.Leader, s.LeaderEpoch)
		if reached != s.LeaderEpoch {
			st.epochRaised++
		}
		reassign := len(adding) > 0 || len(removing) > 0
		if reassign {
			st.reassigning++
		}
		pe := int32(0)
		for j, l := range walk {
			c := &rl.PartitionChange{TopicID: t.ID, Partition: p, PartitionEpoch: pe, Set: rl.ChangeLeader, Leader: l}
			if j == len(walk)-1 {
				c.Set |= rl.ChangeISR
				c.ISR = s.ISR
			}
			changes = append(changes, c)
			pe++
		}
		last := &rl.PartitionChange{TopicID: t.ID, Partition: p, PartitionEpoch: pe, Set: rl.ChangeISR, ISR: s.ISR}
		if len(walk) > 0 {
			last = changes[len(changes)-1].(*rl.PartitionChange)
		}
		if reassign {
			last.Set |= rl.ChangeReassignment
			last.Adding, last.Removing = adding, removing
		}
		if len(walk) == 0 && (len(s.ISR) > 0 || reassign) {
			changes = append(changes, last)
		}
		for _, b := range replicas {
			ref := rl.ReplicaRef{Partition: p, Broker: b}
			newRefs = append(newRefs, ref)
			switch {
			case part.LegacyReassign != nil && contains(adding, b):
			case live[b]:
				onRefs = append(onRefs, ref)
			default:
				offRefs = append(offRefs, ref)
			}
		}
		if s.Leader == rl.NoLeader {
			st.leaderless++
			offline = append(offline, p)
		} else {
			online = append(online, p)
		}
	}
	if len(newRefs) > 0 {
		recs = append(recs, &rl.ReplicaStateChange{TopicID: t.ID, State: rl.NewReplica, Replicas: newRefs})
	}
	recs = append(recs, changes...)
	if len(online) > 0 {
		recs = append(recs, &rl.PartitionStateChange{TopicID: t.ID, State: rl.OnlinePartition, Partitions: online})
	}
	if len(offline) > 0 {
		recs = append(recs, &rl.PartitionStateChange{TopicID: t.ID, State: rl.OfflinePartition, Partitions: offline})
	}
	if len(onRefs) > 0 {
		recs = append(recs, &rl.ReplicaStateChange{TopicID: t.ID, State: rl.OnlineReplica, Replicas: onRefs})
	}
	if len(offRefs) > 0 {
		recs = append(recs, &rl.ReplicaStateChange{TopicID: t.ID, State: rl.OfflineReplica, Replicas: offRefs})
	}
	if t.Deleting {
		recs = append(recs, &rl.BeginDeleteTopic{TopicID: t.ID})
	}
	return recs, st, nil
}

// leaderWalk returns the leaders of the PartitionChange steps that take a
// new partition (no leader, leader epoch 0) to leader at leaderEpoch: the
// FSM bumps the leader epoch by one on every change of leader and on
// nothing else, so the epoch is reproduced by that many changes, each to
// a different leader (a replica or none), ending at leader.
//
// Two targets cannot be reached that way, and are imported one higher
// (reached = leaderEpoch+1), never lower, since brokers refuse a lower
// leader epoch than one they have seen: leader epoch 0 with a leader
// (Kafka's first leader has epoch 0, ours 1), and, with a single replica,
// the wrong parity (leader and no-leader alternate).
func leaderWalk(replicas []int32, leader, leaderEpoch int32) (walk []int32, reached int32) {
	for e := max(leaderEpoch, 0); ; e++ {
		if w, ok := tryWalk(replicas, leader, e); ok {
			return w, e
		}
	}
}

func tryWalk(replicas []int32, leader, e int32) ([]int32, bool) {
	if e == 0 {
		return nil, leader == rl.NoLeader
	}
	walk := make([]int32, 0, e)
	if leader != rl.NoLeader {
		if e%2 == 0 {
			other := rl.NoLeader
			for _, r := range replicas {
				if r != leader {
					other = r
					break
				}
			}
			if other == rl.NoLeader {
				return nil, false
			}
			walk = append(walk, other, leader)
		} else {
			walk = append(walk, leader)
		}
		for int32(len(walk)) < e {
			walk = append(walk, rl.NoLeader, leader)
		}
		return walk, true
	}
	if len(replicas) == 0 {
		return nil, false
	}
	a := replicas[0]
	if e%2 == 1 {
		if e < 3 || len(replicas) < 2 {
			return nil, false
		}
		walk = append(walk, a, replicas[1], rl.NoLeader)
	}
	for int32(len(walk)) < e {
		walk = append(walk, a, rl.NoLeader)
	}
	return walk, true
}

func union(a, b []int32) []int32 {
	out := append([]int32(nil), a...)
	for _, x := range b {
		if !contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func minus(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if !contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// ErrFenced is returned by a mirror write refused because another
// controller has claimed ZooKeeper since (the check on /controller_epoch
// failed).
var ErrFenced = errors.New("zookeeper: write fenced: /controller_epoch has moved on")
