package controller

// Scenario commands for topic deletion, reassignment and elections (see
// scenario_test.go for the script format):
//
//	delete T [T...] [by-id] [id=#N]
//	    DeleteTopics. With by-id the topics are named by their current
//	    topic id (a topic that does not exist gets an id no topic has);
//	    id=#N names one topic by an id topic-id printed as #N.
//	    Prints "ok T" or "T error NAME" per topic.
//	stop-replica-response B T[/P][,T[/P]...] ok|error
//	    Broker B answers StopReplica delete=true for the partitions named
//	    (T alone: every partition of T that B holds a replica of), without
//	    error or with KAFKA_STORAGE_ERROR. The answer is queued like the
//	    sender's; the printout shows what the controller made of it.
//	reassign T/P replicas=1,2,4
//	    AlterPartitionReassignments for one partition.
//	cancel T/P [T/P...]
//	    AlterPartitionReassignments with no replicas: cancels.
//	list-reassignments [T/P...]
//	    ListReassignments over the committed image.
//	check-reassignments
//	    CheckReassignments.
//	elect preferred|unclean [T/P...]
//	    ElectLeaders; without partitions, all of them.
//	alter-config T key=value [key=value...]
//	    IncrementalAlterTopicConfigs with SET operations.
//	balance [percent=N] [max=N]
//	    A preferred-leader rebalance (RebalanceLeaders) with the given
//	    imbalance percentage (default 10) and bound per run.
//	imbalance
//	    PreferredReplicaImbalance of the committed image.
//	topic-id T
//	    Prints T's topic id as a label, #1 for the first id the script
//	    printed, #2 for the next new one, and so on: ids are random, the
//	    labels say whether two are the same.

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

func init() {
	scenarioCommands["delete"] = (*scenario).deleteTopics
	scenarioCommands["stop-replica-response"] = (*scenario).stopReplicaResponse
	scenarioCommands["reassign"] = (*scenario).reassign
	scenarioCommands["cancel"] = (*scenario).cancelReassignments
	scenarioCommands["list-reassignments"] = (*scenario).listReassignments
	scenarioCommands["check-reassignments"] = func(s *scenario, a *scenarioArgs) ([]string, error) {
		if err := a.done(); err != nil {
			return nil, err
		}
		return []string{okOrError(s.c.CheckReassignments(s.ctx), "ok")}, nil
	}
	scenarioCommands["elect"] = (*scenario).elect
	scenarioCommands["alter-config"] = (*scenario).alterConfig
	scenarioCommands["balance"] = (*scenario).balance
	scenarioCommands["topic-id"] = (*scenario).topicIDLabel
	scenarioCommands["imbalance"] = func(s *scenario, a *scenarioArgs) ([]string, error) {
		if err := a.done(); err != nil {
			return nil, err
		}
		var n int
		s.fsm.View(func(im *fsm.Image) { n = PreferredReplicaImbalance(im) })
		return []string{fmt.Sprintf("imbalance=%d", n)}, nil
	}
}

// idLabels numbers the topic ids each scenario printed.
var idLabels sync.Map // *scenario -> map[rl.TopicID]int

func (s *scenario) topicIDLabel(a *scenarioArgs) ([]string, error) {
	if len(a.positional) != 1 {
		return nil, errors.New("topic-id takes one topic")
	}
	name := a.positional[0]
	a.positional = nil
	if err := a.done(); err != nil {
		return nil, err
	}
	var id rl.TopicID
	s.fsm.View(func(im *fsm.Image) {
		if t := im.TopicByName(name); t != nil {
			id = t.ID
		}
	})
	if id.IsZero() {
		return []string{name + " does not exist"}, nil
	}
	v, _ := idLabels.LoadOrStore(s, map[rl.TopicID]int{})
	labels := v.(map[rl.TopicID]int)
	if _, ok := labels[id]; !ok {
		labels[id] = len(labels) + 1
	}
	return []string{fmt.Sprintf("%s id=#%d", name, labels[id])}, nil
}

// unknownTopicID is an id no scenario topic has.
var unknownTopicID = rl.TopicID{0xde, 0xad}

func (s *scenario) deleteTopics(a *scenarioArgs) ([]string, error) {
	byID := a.flag("by-id")
	label := a.str("id", "")
	names := a.positional
	a.positional = nil
	if err := a.done(); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, errors.New("delete takes topic names")
	}
	req := make([]DeleteTopic, len(names))
	for i, n := range names {
		switch {
		case label != "":
			id, err := s.labelledID(label)
			if err != nil || len(names) != 1 {
				return nil, fmt.Errorf("id=%s: want one topic and a label #N printed before (%v)", label, err)
			}
			req[i].TopicID = id
		case byID:
			req[i].TopicID = unknownTopicID
			s.fsm.View(func(im *fsm.Image) {
				if t := im.TopicByName(n); t != nil {
					req[i].TopicID = t.ID
				}
			})
		default:
			req[i].Name = n
		}
	}
	var out []string
	for i, r := range s.c.DeleteTopics(s.ctx, req) {
		name := names[i]
		if r.Err != nil {
			out = append(out, fmt.Sprintf("%s error %s", name, kafkaErrorName(r.Err)))
			continue
		}
		out = append(out, "ok "+s.topicName(r.TopicID, r.Name))
	}
	return out, nil
}

// labelledID returns the topic id topic-id printed as label ("#N").
func (s *scenario) labelledID(label string) (rl.TopicID, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(label, "#"))
	if err != nil {
		return rl.TopicID{}, err
	}
	v, _ := idLabels.LoadOrStore(s, map[rl.TopicID]int{})
	for id, l := range v.(map[rl.TopicID]int) {
		if l == n {
			return id, nil
		}
	}
	return rl.TopicID{}, fmt.Errorf("no topic id was printed as %s", label)
}

func (s *scenario) stopReplicaResponse(a *scenarioArgs) ([]string, error) {
	b, err := a.broker()
	if err != nil {
		return nil, err
	}
	if len(a.positional) != 2 {
		return nil, errors.New("stop-replica-response takes a broker, partitions and ok|error")
	}
	list, outcome := a.positional[0], a.positional[1]
	a.positional = nil
	// epoch=N: the answer of the broker registration of epoch N (default:
	// the current one).
	epoch, _ := a.intArg("epoch")
	if err := a.done(); err != nil {
		return nil, err
	}
	var resErr error
	switch outcome {
	case "ok":
	case "error":
		resErr = kerr.KafkaStorageError
	default:
		return nil, fmt.Errorf("outcome %q: want ok or error", outcome)
	}
	var results []StopReplicaResult
	for _, item := range strings.Split(list, ",") {
		name, part, hasPart := item, int32(0), strings.Contains(item, "/")
		if hasPart {
			if name, part, err = parsePartitionName(item); err != nil {
				return nil, err
			}
		}
		s.fsm.View(func(im *fsm.Image) {
			t := im.TopicByName(name)
			if t == nil {
				results = append(results, StopReplicaResult{Topic: name, Partition: part, Err: resErr, BrokerEpoch: epoch})
				return
			}
			im.EachPartition(t.ID, func(i int32, p *fsm.Partition) bool {
				if (!hasPart || i == part) && slices.Index(p.Replicas, b) >= 0 {
					results = append(results, StopReplicaResult{TopicID: t.ID, Topic: t.Name, Partition: i, Err: resErr, BrokerEpoch: epoch})
				}
				return true
			})
		})
	}
	s.c.HandleStopReplicaResponse(b, results)
	return []string{"ok"}, nil
}

func (s *scenario) reassign(a *scenarioArgs) ([]string, error) {
	if len(a.positional) != 1 {
		return nil, errors.New("reassign takes one topic/partition")
	}
	name, part, err := parsePartitionName(a.positional[0])
	if err != nil {
		return nil, err
	}
	a.positional = nil
	v, ok := a.kv["replicas"]
	if !ok {
		return nil, errors.New("reassign needs replicas=...")
	}
	a.used["replicas"] = true
	reps, err := parseInts(v)
	if err != nil {
		return nil, err
	}
	if err := a.done(); err != nil {
		return nil, err
	}
	return s.formatReassign(s.c.AlterPartitionReassignments(s.ctx, []Reassign{{Topic: name, Partition: part, Replicas: reps}})), nil
}

func (s *scenario) cancelReassignments(a *scenarioArgs) ([]string, error) {
	var reqs []Reassign
	for _, p := range a.positional {
		name, part, err := parsePartitionName(p)
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, Reassign{Topic: name, Partition: part})
	}
	a.positional = nil
	if err := a.done(); err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return nil, errors.New("cancel takes topic/partitions")
	}
	return s.formatReassign(s.c.AlterPartitionReassignments(s.ctx, reqs)), nil
}

func (s *scenario) formatReassign(res []ReassignResult) []string {
	var out []string
	for _, r := range res {
		if r.Err != nil {
			out = append(out, fmt.Sprintf("%s/%d error %s", r.Topic, r.Partition, kafkaErrorName(r.Err)))
		} else {
			out = append(out, fmt.Sprintf("ok %s/%d", r.Topic, r.Partition))
		}
	}
	return out
}

func (s *scenario) partitionList(a *scenarioArgs) ([]TopicPartition, error) {
	var out []TopicPartition
	for _, p := range a.positional {
		name, part, err := parsePartitionName(p)
		if err != nil {
			return nil, err
		}
		out = append(out, TopicPartition{Topic: name, Partition: part})
	}
	a.positional = nil
	return out, nil
}

func (s *scenario) listReassignments(a *scenarioArgs) ([]string, error) {
	filter, err := s.partitionList(a)
	if err != nil {
		return nil, err
	}
	if err := a.done(); err != nil {
		return nil, err
	}
	var list []ReassignmentStatus
	s.fsm.View(func(im *fsm.Image) { list = ListReassignments(im, filter) })
	if len(list) == 0 {
		return []string{"no reassignment in progress"}, nil
	}
	var out []string
	for _, r := range list {
		out = append(out, fmt.Sprintf("%s/%d replicas=%s adding=%s removing=%s", r.Topic, r.Partition,
			formatInts(r.Replicas), formatInts(r.Adding), formatInts(r.Removing)))
	}
	return out, nil
}

func (s *scenario) elect(a *scenarioArgs) ([]string, error) {
	if len(a.positional) == 0 {
		return nil, errors.New("elect takes preferred or unclean")
	}
	var typ ElectionType
	switch a.positional[0] {
	case "preferred":
		typ = PreferredLeaderElection
	case "unclean":
		typ = UncleanLeaderElection
	default:
		return nil, fmt.Errorf("election type %q", a.positional[0])
	}
	a.positional = a.positional[1:]
	parts, err := s.partitionList(a)
	if err != nil {
		return nil, err
	}
	if err := a.done(); err != nil {
		return nil, err
	}
	res, err := s.c.ElectLeaders(s.ctx, typ, parts)
	if err != nil {
		return []string{"error " + kafkaErrorName(err)}, nil
	}
	if len(res) == 0 {
		return []string{"ok (nothing to elect)"}, nil
	}
	var out []string
	for _, r := range res {
		if r.Err != nil {
			out = append(out, fmt.Sprintf("%s/%d error %s", r.Topic, r.Partition, kafkaErrorName(r.Err)))
		} else {
			out = append(out, fmt.Sprintf("ok %s/%d", r.Topic, r.Partition))
		}
	}
	return out, nil
}

func (s *scenario) alterConfig(a *scenarioArgs) ([]string, error) {
	if len(a.positional) != 1 {
		return nil, errors.New("alter-config takes one topic and key=value pairs")
	}
	topic := a.positional[0]
	a.positional = nil
	var ops []AlterConfig
	for k, v := range a.kv {
		a.used[k] = true
		ops = append(ops, AlterConfig{Key: k, Value: v, Op: ConfigSet})
	}
	if err := a.done(); err != nil {
		return nil, err
	}
	return []string{okOrError(s.c.IncrementalAlterTopicConfigs(s.ctx, topic, ops, false), "ok")}, nil
}

func (s *scenario) balance(a *scenarioArgs) ([]string, error) {
	cfg := BalanceConfig{ImbalancePercent: 10}
	if v, ok := a.intArg("percent"); ok {
		cfg.ImbalancePercent = int(v)
	}
	if v, ok := a.intArg("max"); ok {
		cfg.MaxPerRun = int(v)
	}
	if err := a.done(); err != nil {
		return nil, err
	}
	res, err := s.c.rebalance(s.ctx, cfg)
	if err != nil {
		return []string{"error " + kafkaErrorName(err)}, nil
	}
	return []string{fmt.Sprintf("ok brokers=%s moved=%d failed=%d runs=%d", formatInts(res.Brokers), res.Moved, res.Failed, res.Runs)}, nil
}
