package check

import (
	"fmt"
	"hash/fnv"
	"math"

	"github.com/anishathalye/porcupine"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

// The per-topic model. A topic is absent, present (with its topic id and
// partition count, each possibly not known yet) or being deleted. A
// deletion is answered once it has started; the topic then disappears
// from reads at once but its name stays taken (a create gets
// TOPIC_ALREADY_EXISTS) until every replica confirmed, which can happen at
// any moment: the model lets a deleting topic become absent before any
// step.

type status uint8

const (
	absent status = iota
	present
	deleting
)

type topicState struct {
	St status
	// ID is the topic id (hex), "" when no call has reported it yet.
	ID string
	// Partitions is the partition count, 0 when not known.
	Partitions int32
}

func (s topicState) String() string {
	switch s.St {
	case absent:
		return "absent"
	case deleting:
		return "deleting"
	}
	id := s.ID
	if len(id) > 8 {
		id = id[:8]
	}
	if id == "" {
		id = "?"
	}
	if s.Partitions == 0 {
		return fmt.Sprintf("present id=%s", id)
	}
	return fmt.Sprintf("present id=%s p=%d", id, s.Partitions)
}

// linInput is one call as the model sees it: a history op, or one topic's
// share of a list.
type linInput struct {
	Op         int64
	Kind       history.Kind
	Topic      string
	Partitions int32 // create, create-partitions
	Partition  int32 // elect, reassign
	// FromList marks a list's observation of one topic.
	FromList bool
}

type linOutput struct {
	// Outcome is OK, Fail (a code that says whether the call took effect)
	// or Unknown (no answer, or a code that does not say).
	Outcome history.Outcome
	Code    int16
	// Read outcomes: Present with what was seen, or Absent.
	Present    bool
	Absent     bool
	ID         string
	Partitions int32
	// Original is the op's outcome as recorded, for the visualization.
	Original string
}

var (
	codeAlreadyExists = kerr.TopicAlreadyExists.Code
	codeUnknownTopic  = kerr.UnknownTopicOrPartition.Code
)

// noEffect lists, per kind, the error codes that say the call did nothing.
// Any other error code (NOT_CONTROLLER, REQUEST_TIMED_OUT, an unknown
// server error…) leaves the outcome open: a deposed controller's entry may
// still commit under its successor, so the call is treated as Unknown.
var noEffect = map[history.Kind][]*kerr.Error{
	history.Create: {kerr.TopicAlreadyExists, kerr.InvalidReplicationFactor, kerr.InvalidPartitions,
		kerr.InvalidTopicException, kerr.InvalidRequest, kerr.InvalidConfig, kerr.PolicyViolation,
		kerr.InvalidReplicaAssignment, kerr.UnsupportedVersion, kerr.TopicAuthorizationFailed,
		kerr.ClusterAuthorizationFailed},
	history.Delete: {kerr.UnknownTopicOrPartition, kerr.UnknownTopicID, kerr.InvalidRequest,
		kerr.InvalidTopicException, kerr.TopicDeletionDisabled, kerr.UnsupportedVersion,
		kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed},
	history.CreatePartitions: {kerr.UnknownTopicOrPartition, kerr.InvalidPartitions, kerr.InvalidReplicaAssignment,
		kerr.InvalidRequest, kerr.InvalidTopicException, kerr.UnsupportedVersion, kerr.TopicAuthorizationFailed,
		kerr.ClusterAuthorizationFailed},
}

// impliesPresent lists, per kind of call that does not change a topic's
// existence, the error codes only a topic that exists (and is not being
// deleted) can produce.
var impliesPresent = map[history.Kind][]*kerr.Error{
	history.Elect:          {kerr.ElectionNotNeeded, kerr.PreferredLeaderNotAvailable, kerr.EligibleLeadersNotAvailable},
	history.Reassign:       {kerr.ReassignmentInProgress, kerr.NoReassignmentInProgress},
	history.CancelReassign: {kerr.NoReassignmentInProgress, kerr.ReassignmentInProgress},
}

func codeIn(code int16, list []*kerr.Error) bool {
	for _, e := range list {
		if e.Code == code {
			return true
		}
	}
	return false
}

// Definite reports whether an op's outcome says for certain whether it
// took effect: OK does, Unknown does not, and a Fail does when its code is
// one that a call of its kind gets only when nothing was done
// (TOPIC_ALREADY_EXISTS for a create, …). Calls that never change a
// topic's existence (describe, list, elect, reassign) are always definite
// for this model.
func Definite(op history.Op) bool {
	switch op.Outcome {
	case history.OK:
		return true
	case history.Unknown:
		return false
	}
	list, ok := noEffect[op.Kind]
	if !ok {
		return true
	}
	return codeIn(op.Code, list)
}

// never is the return time of a call with no definite outcome: it may take
// effect at any time after it was invoked.
const never = math.MaxInt64

// linOps turns the history into porcupine operations. Calls that can
// neither change the model nor constrain it (a describe that timed out, an
// election that failed for a reason unrelated to the topic's existence)
// are left out; skipped counts them.
func linOps(ops []history.Op) (out []porcupine.Operation, skipped int) {
	universe := map[string]bool{}
	for _, op := range ops {
		if op.Topic != "" && op.Kind != history.List {
			universe[op.Topic] = true
		}
	}
	for _, op := range ops {
		call := op.Invoke.UnixNano()
		ret := int64(never)
		if Definite(op) && !op.Complete.IsZero() {
			ret = max(op.Complete.UnixNano(), call)
		}
		in := linInput{Op: op.ID, Kind: op.Kind, Topic: op.Topic, Partitions: op.Args.Partitions, Partition: op.Args.Partition}
		outv := linOutput{Outcome: op.Outcome, Code: op.Code, Original: describeOutcome(op)}
		if ret == never {
			outv.Outcome = history.Unknown
		}
		add := func(in linInput, o linOutput) {
			out = append(out, porcupine.Operation{ClientId: op.Client, Input: in, Call: call, Output: o, Return: ret, Metadata: op.String()})
		}
		switch op.Kind {
		case history.Create, history.Delete, history.CreatePartitions:
			constraining := codeUnknownTopic
			if op.Kind == history.Create {
				constraining = codeAlreadyExists
			}
			// A refusal that says nothing about the topic (an invalid
			// replication factor, say) neither changes nor constrains it.
			if op.Topic == "" || (ret != never && op.Outcome == history.Fail && op.Code != constraining) {
				skipped++
				continue
			}
			if op.Outcome == history.OK && op.Result != nil {
				outv.ID, outv.Partitions = op.Result.TopicID, op.Result.Partitions
			}
			if op.Writes > 1 && op.Outcome == history.OK {
				// A retried call answered on a later write: an earlier
				// write may have taken effect as well (a create that a
				// deposed controller committed, then someone's delete,
				// then the retry creating the topic again). That write
				// is a call of unknown outcome within the same interval.
				add(in, linOutput{Outcome: history.Unknown, Original: "an earlier write of a retried call"})
			}
			add(in, outv)
		case history.Describe:
			switch {
			case op.Outcome == history.OK && op.Result != nil && op.Result.Absent:
				outv.Absent = true
			case op.Outcome == history.OK:
				outv.Present = true
				if op.Result != nil {
					outv.ID, outv.Partitions = op.Result.TopicID, op.Result.Partitions
				}
			case op.Outcome == history.Fail && op.Code == codeUnknownTopic:
				outv.Absent = true
			default:
				skipped++
				continue
			}
			add(in, outv)
		case history.List:
			if op.Outcome != history.OK || op.Result == nil {
				skipped++
				continue
			}
			seen := map[string]history.TopicInfo{}
			for _, t := range op.Result.Topics {
				seen[t.Name] = t
			}
			for topic := range universe {
				o := outv
				if t, ok := seen[topic]; ok {
					o.Present, o.ID, o.Partitions = true, t.TopicID, t.Partitions
				} else {
					o.Absent = true
				}
				add(linInput{Op: op.ID, Kind: history.Describe, Topic: topic, FromList: true}, o)
			}
		case history.Elect, history.Reassign, history.CancelReassign:
			if op.Outcome == history.Unknown || op.Topic == "" ||
				(op.Outcome == history.Fail && op.Code != codeUnknownTopic && !codeIn(op.Code, impliesPresent[op.Kind])) {
				skipped++
				continue
			}
			add(in, outv)
		default:
			skipped++
		}
	}
	return out, skipped
}

func describeOutcome(op history.Op) string {
	switch op.Outcome {
	case history.OK:
		return "ok"
	case history.Fail:
		return op.ErrorName()
	}
	return "unknown"
}

// stepOne applies one call to one state and returns the states it can
// lead to (none: the call could not have had this outcome in this state).
func stepOne(s topicState, in linInput, out linOutput) []topicState {
	one := func(t topicState) []topicState { return []topicState{t} }
	switch in.Kind {
	case history.Create:
		switch out.Outcome {
		case history.OK:
			if s.St != absent {
				return nil
			}
			n := in.Partitions
			if out.Partitions != 0 {
				n = out.Partitions
			}
			return one(topicState{St: present, ID: out.ID, Partitions: n})
		case history.Fail:
			if out.Code == codeAlreadyExists && s.St == absent {
				return nil
			}
			return one(s)
		default:
			if s.St == absent {
				return []topicState{s, {St: present, Partitions: in.Partitions}}
			}
			return one(s)
		}
	case history.Delete:
		switch out.Outcome {
		case history.OK:
			if s.St == absent {
				return nil
			}
			return one(topicState{St: deleting, ID: s.ID})
		case history.Fail:
			if out.Code == codeUnknownTopic && s.St != absent {
				return nil
			}
			return one(s)
		default:
			if s.St == present {
				return []topicState{s, {St: deleting, ID: s.ID}}
			}
			return one(s)
		}
	case history.CreatePartitions:
		grown := s
		grown.Partitions = in.Partitions
		canGrow := s.St == present && (s.Partitions == 0 || in.Partitions > s.Partitions)
		switch out.Outcome {
		case history.OK:
			if !canGrow {
				return nil
			}
			return one(grown)
		case history.Fail:
			if out.Code == codeUnknownTopic && s.St == present {
				return nil
			}
			return one(s)
		default:
			if canGrow {
				return []topicState{s, grown}
			}
			return one(s)
		}
	case history.Describe:
		if out.Absent {
			if s.St == present {
				return nil
			}
			return one(s)
		}
		if s.St != present {
			return nil
		}
		if out.ID != "" {
			if s.ID != "" && s.ID != out.ID {
				return nil
			}
			s.ID = out.ID
		}
		if out.Partitions != 0 {
			if s.Partitions != 0 && s.Partitions != out.Partitions {
				return nil
			}
			s.Partitions = out.Partitions
		}
		return one(s)
	case history.Elect, history.Reassign, history.CancelReassign:
		inRange := s.Partitions == 0 || in.Partition < s.Partitions
		switch {
		case out.Outcome == history.OK || codeIn(out.Code, impliesPresent[in.Kind]):
			if s.St != present || !inRange {
				return nil
			}
		case out.Code == codeUnknownTopic:
			// A partition past the topic's count is unknown too.
			if s.St == present && inRange && s.Partitions != 0 {
				return nil
			}
		}
		return one(s)
	}
	return one(s)
}

func step(state, input, output any) []any {
	s, in, out := state.(topicState), input.(linInput), output.(linOutput)
	pre := []topicState{s}
	if s.St == deleting {
		pre = append(pre, topicState{St: absent})
	}
	var next []any
	for _, p := range pre {
		for _, n := range stepOne(p, in, out) {
			next = append(next, n)
		}
	}
	return next
}

func describeCall(input, output any) string {
	in, out := input.(linInput), output.(linOutput)
	var call string
	switch in.Kind {
	case history.Create:
		call = fmt.Sprintf("create(p=%d)", in.Partitions)
	case history.CreatePartitions:
		call = fmt.Sprintf("create-partitions(p=%d)", in.Partitions)
	case history.Elect, history.Reassign, history.CancelReassign:
		call = fmt.Sprintf("%s(%d)", in.Kind, in.Partition)
	case history.Describe:
		call = "describe"
		if in.FromList {
			call = "list"
		}
	default:
		call = string(in.Kind)
	}
	res := out.Original
	switch {
	case out.Present:
		res = topicState{St: present, ID: out.ID, Partitions: out.Partitions}.String()
	case out.Absent:
		res = "absent"
	case out.Outcome == history.OK && out.ID != "":
		res = "ok " + topicState{St: present, ID: out.ID}.String()[len("present "):]
	}
	return fmt.Sprintf("#%d %s → %s", in.Op, call, res)
}

// topicModel is the model porcupine checks, partitioned by topic.
func topicModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: partitionByTopic,
		Init:      func() []any { return []any{topicState{St: absent}} },
		Step:      step,
		Hash: func(state any) uint64 {
			s := state.(topicState)
			h := fnv.New64a()
			fmt.Fprintf(h, "%d/%s/%d", s.St, s.ID, s.Partitions)
			return h.Sum64()
		},
		DescribeOperation: describeCall,
		DescribeState:     func(state any) string { return state.(topicState).String() },
		DescribeOperationMetadata: func(info any) string {
			if info == nil {
				return ""
			}
			return info.(string)
		},
	}
	return nm.ToModel()
}

// partitionByTopic splits the history by topic, in topic-name order.
func partitionByTopic(ops []porcupine.Operation) [][]porcupine.Operation {
	topics, by := splitByTopic(ops)
	out := make([][]porcupine.Operation, len(topics))
	for i, t := range topics {
		out[i] = by[t]
	}
	return out
}
