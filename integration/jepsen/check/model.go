package check

import (
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

// The per-topic model: what the calls on one topic name may see, given
// what the calls before them did. Every rule is something the controller
// guarantees whatever the faults; what faults may legitimately change
// (leaders move when brokers fail, a reassignment completes once its new
// replicas catch up, a deletion finishes once every replica confirmed)
// the model leaves open, and says only what a later read can still rely
// on.
//
// Existence. A topic is absent, present (with its topic id, once a call
// reported it, and its partition count) or being deleted.
//
//   - An acknowledged create needs the name free (absent) and makes the
//     topic present with the id it returned and its partition count.
//     TOPIC_ALREADY_EXISTS needs the name taken (present or being deleted).
//   - An acknowledged delete needs the topic to exist and starts its
//     deletion: the topic disappears from reads at once, but its name stays
//     taken until every replica confirmed, which may happen before any
//     later step (a deleting topic may become absent at any moment).
//     UNKNOWN_TOPIC_OR_PARTITION needs it not present.
//   - A describe or a list sees the topic present, with the id and
//     partition count the model has, or not present.
//
// Partition count. An acknowledged add-partitions to N needs a present
// topic with fewer than N partitions and makes it N: every later describe
// and list shows N until the topic is deleted. INVALID_PARTITIONS needs a
// present topic of N or more partitions (the workload never asks for more
// than the per-request limit), UNKNOWN_TOPIC_OR_PARTITION one not present.
//
// Replicas, per partition, as Metadata lists them. The controller keeps a
// partition's replica list as the target of its last reassignment (or its
// assignment, or its original replicas after a cancel), in that order,
// followed by replicas on their way out (original replicas still leaving
// and replicas being deleted); replicas on their way out only ever
// disappear (once their broker confirmed the deletion), in any order, and
// nothing else changes the list. So:
//
//   - A partition as created (or added) has a list no call reported: the
//     first describe fixes it, and it does not change until a reassignment
//     or a cancel.
//   - After an acknowledged reassignment to T, every describe shows T
//     first, in T's order, then a subset of the replicas the partition had
//     before (in the order the last describe showed them, once one did);
//     once the reassignment completed and the old replicas are deleted, T
//     alone.
//   - A reassignment is in progress until it completes, which may happen at
//     any moment (the model does not know when). An acknowledged cancel
//     needs one in progress; NO_REASSIGNMENT_IN_PROGRESS needs none (it
//     completed). After an acknowledged cancel the list is the original
//     replicas first, in the order they had in the list (the model knows
//     them when the reassignment started from a list it knew: then T's
//     members that were original, in T's order, then the other originals),
//     then replicas being deleted, which disappear.
//   - A describe's list is never empty and never names a broker twice.
//
// Leaders, per partition. Every change of a partition's leader (to another
// broker, or to none) raises its leader epoch by one, and nothing lowers
// it; faults move leaders at any time. So the model keeps the highest
// leader epoch a call has shown and the leader at that epoch:
//
//   - A describe never shows a lower leader epoch than an earlier call
//     established, and at the same epoch never a different leader. A
//     leader the client cannot reach is shown as none (-1, with the same
//     epoch): that says nothing about who leads.
//   - A describe's leader is one of its replicas.
//   - An acknowledged preferred election made the first replica the
//     leader, at a higher epoch: until a later describe, the epoch is at
//     least one above the last known one, and at exactly that epoch the
//     leader is the preferred replica (a describe showing another leader
//     must show a later epoch: a fault moved it since). ELECTION_NOT_NEEDED
//     to a preferred election says the preferred replica leads: at the same
//     epoch, or a higher one if a different leader was known at it. An
//     acknowledged unclean election raised the epoch.
//
// Outcomes. A call answered with success did what it says, once, at a
// single point between its invocation and its answer. A refusal whose code
// says nothing was done (TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS,
// UNKNOWN_TOPIC_OR_PARTITION, ELECTION_NOT_NEEDED, REASSIGNMENT_IN_PROGRESS,
// …; see noEffect; and any NOT_CONTROLLER a standby voter sent before any
// proposal, history.Op.Refused) did nothing, and the codes that depend on
// the topic's state constrain it at a point within the call as above. A
// call with no answer, or with a code that does not say (NOT_CONTROLLER
// from a controller that may have proposed, REQUEST_TIMED_OUT, …), may
// take effect once at any point after its invocation, or never, including
// after later calls on the same name: the model keeps it as pending from
// its invocation and lets it take effect before any later step. A call
// answered on a later write of its request may also have taken effect on
// an earlier write, within the call's interval. Elections need no pending
// entry: leaders may move at any time anyway. A reassignment with no
// definite outcome that takes effect while another may have completed or
// not leaves the original replicas unknown (a later cancel then says only
// that the list holds replicas the partition had).
//
// Left open, because faults legitimately decide them: when a deletion or a
// reassignment completes, when a replica on its way out is deleted, who
// leads after a fault, a completed reassignment or an unclean election, and
// the ISR. A deletion that never finishes is caught after the run, by a
// probe for topics still being deleted, not by this model.

type status uint8

const (
	absent status = iota
	present
	deleting
	// unset is the state before a segment's start call (see segments in
	// linearizability.go) sets the states the segment starts from.
	unset
)

// tailKind says what the model knows of the replicas after a partition's
// head (the fixed prefix of its list).
type tailKind uint8

const (
	// tailNone: nothing follows the head. With no head known, the list
	// is one no call reported yet, and the first describe fixes it.
	tailNone tailKind = iota
	// tailSeq: a subsequence of Tail follows, in Tail's order.
	tailSeq
	// tailSet: distinct members of Tail follow, in any order.
	tailSet
	// tailAny: distinct brokers not in the head follow.
	tailAny
)

// raState says whether a partition may have a reassignment in progress.
type raState uint8

const (
	// raNone: no reassignment in progress; the original replicas of the
	// next one are the head.
	raNone raState = iota
	// raMaybe: one was started and may have completed since.
	raMaybe
)

// partState is what the model knows of one partition. Slices are never
// changed in place: states share them.
type partState struct {
	// HeadOK says Head is known: the list starts with Head, and the
	// members of Head are the replicas that stay.
	HeadOK bool
	Head   []int32
	Tail   tailKind
	Tails  []int32
	RA     raState
	// OrigOK says Orig is known: the original replicas of the
	// reassignment in progress, in the order they have in the list.
	OrigOK bool
	Orig   []int32
	// Epoch is the highest leader epoch known (-1: none); Leader the
	// leader at that epoch (-1: not known).
	Epoch  int32
	Leader int32
}

func freshPart() partState { return partState{Epoch: -1, Leader: -1} }

// effect is a pending call: one with no definite outcome that may still
// take effect.
type effect struct {
	Kind       history.Kind
	Partitions int32   // create: its count; create-partitions: the new count
	Partition  int32   // reassign, cancel-reassign
	Replicas   []int32 // reassign
}

func compareEffects(a, b effect) int {
	if c := strings.Compare(string(a.Kind), string(b.Kind)); c != 0 {
		return c
	}
	if a.Partitions != b.Partitions {
		return int(a.Partitions) - int(b.Partitions)
	}
	if a.Partition != b.Partition {
		return int(a.Partition) - int(b.Partition)
	}
	return slices.Compare(a.Replicas, b.Replicas)
}

// topicState is one state of the model. It is immutable once built (see
// seal); key identifies it.
type topicState struct {
	St status
	// ID is the topic id (hex), "" when no call has reported it yet.
	ID string
	// Partitions is the partition count of a present topic.
	Partitions int32
	// Parts has one entry per partition of a present topic.
	Parts []partState
	// Pending are the calls that may still take effect, sorted.
	Pending []effect
	// key identifies the state; core is its part without Pending.
	key, core string
}

// seal computes the state's key and returns it.
func (s *topicState) seal() *topicState {
	b := make([]byte, 0, 64)
	b = append(b, byte('0'+s.St))
	b = append(b, s.ID...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(s.Partitions), 10)
	ids := func(l []int32) {
		b = append(b, '[')
		for _, x := range l {
			b = strconv.AppendInt(b, int64(x), 10)
			b = append(b, ',')
		}
		b = append(b, ']')
	}
	for _, p := range s.Parts {
		b = append(b, '|')
		if p.HeadOK {
			ids(p.Head)
		}
		b = append(b, byte('a'+p.Tail))
		ids(p.Tails)
		b = append(b, byte('r'+p.RA))
		if p.OrigOK {
			ids(p.Orig)
		}
		b = strconv.AppendInt(b, int64(p.Epoch), 10)
		b = append(b, '@')
		b = strconv.AppendInt(b, int64(p.Leader), 10)
	}
	s.core = string(b)
	for _, e := range s.Pending {
		b = append(b, '+')
		b = append(b, e.Kind...)
		b = strconv.AppendInt(b, int64(e.Partitions), 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(e.Partition), 10)
		ids(e.Replicas)
	}
	s.key = string(b)
	return s
}

// clone is a shallow copy to change and seal.
func (s *topicState) clone() *topicState {
	c := *s
	c.key = ""
	return &c
}

// withPart is s with partition i replaced.
func (s *topicState) withPart(i int32, p partState) *topicState {
	c := s.clone()
	c.Parts = slices.Clone(s.Parts)
	c.Parts[i] = p
	return c.seal()
}

func (s *topicState) String() string {
	var b strings.Builder
	switch s.St {
	case absent:
		b.WriteString("absent")
	case deleting:
		b.WriteString("deleting")
	case unset:
		b.WriteString("(segment not started)")
	default:
		fmt.Fprintf(&b, "present id=%s p=%d", shortHex(s.ID), s.Partitions)
		for i, p := range s.Parts {
			fmt.Fprintf(&b, " %d:%s", i, p)
		}
	}
	for _, e := range s.Pending {
		fmt.Fprintf(&b, " +pending %s", e)
	}
	return b.String()
}

func (p partState) String() string {
	var b strings.Builder
	if p.HeadOK {
		fmt.Fprintf(&b, "%v", p.Head)
	} else if p.Tail == tailNone {
		b.WriteString("[?]")
	}
	switch p.Tail {
	case tailSeq:
		fmt.Fprintf(&b, "+seq%v", p.Tails)
	case tailSet:
		fmt.Fprintf(&b, "+set%v", p.Tails)
	case tailAny:
		b.WriteString("+any")
	}
	if p.RA == raMaybe {
		b.WriteString(" reassigning")
		if p.OrigOK {
			fmt.Fprintf(&b, " from %v", p.Orig)
		}
	}
	fmt.Fprintf(&b, " leader %d@%d", p.Leader, p.Epoch)
	return b.String()
}

func (e effect) String() string {
	switch e.Kind {
	case history.Create:
		return fmt.Sprintf("create(p=%d)", e.Partitions)
	case history.CreatePartitions:
		return fmt.Sprintf("create-partitions(p=%d)", e.Partitions)
	case history.Reassign:
		return fmt.Sprintf("reassign(%d to %v)", e.Partition, e.Replicas)
	case history.CancelReassign:
		return fmt.Sprintf("cancel-reassign(%d)", e.Partition)
	}
	return string(e.Kind)
}

func shortHex(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	if id == "" {
		return "?"
	}
	return id
}

// linInput is one call as the model sees it: a history op, one topic's
// share of a list, or the start of a segment.
type linInput struct {
	Op         int64
	Kind       history.Kind
	Topic      string
	Partitions int32 // create, create-partitions
	Partition  int32 // elect, reassign, cancel-reassign
	Replicas   []int32
	Election   string
	// FromList marks a list's observation of one topic.
	FromList bool
	// Register marks a call with no definite outcome: it adds its effect
	// to the pending ones at its invocation.
	Register bool
	// Earlier marks the earlier write of a call answered on a later one.
	Earlier bool
	// Forget marks a call that comes after every call of its topic that
	// looks at partitions (see forgetParts).
	Forget bool
	// Seg is the segment the call belongs to; Start, for a segment's
	// first call, the states the segment starts from.
	Seg   int
	Start []*topicState
}

type linOutput struct {
	// Outcome is OK, Fail (a code that says whether the call took effect)
	// or Unknown.
	Outcome history.Outcome
	Code    int16
	// Read outcomes: Present with what was seen, or Absent.
	Present    bool
	Absent     bool
	ID         string
	Partitions int32
	Parts      []history.PartitionInfo
	// Original is the op's outcome as recorded, for the visualization.
	Original string
}

var (
	codeAlreadyExists     = kerr.TopicAlreadyExists.Code
	codeUnknownTopic      = kerr.UnknownTopicOrPartition.Code
	codeInvalidPartitions = kerr.InvalidPartitions.Code
	codeNotNeeded         = kerr.ElectionNotNeeded.Code
	codeNoReassignment    = kerr.NoReassignmentInProgress.Code
	codeInvalidAssignment = kerr.InvalidReplicaAssignment.Code
)

// noEffect lists, per kind, the error codes that say the call did nothing:
// the controller answers them from its checks, before it stages anything.
// Any other error code (NOT_CONTROLLER from a controller that lost its
// leadership with the call's entry proposed, REQUEST_TIMED_OUT, an unknown
// server error…) leaves the outcome open: the entry may still commit
// under the next controller.
var noEffect = map[history.Kind][]*kerr.Error{
	history.Create: {kerr.TopicAlreadyExists, kerr.InvalidReplicationFactor, kerr.InvalidPartitions,
		kerr.InvalidTopicException, kerr.InvalidRequest, kerr.InvalidConfig, kerr.PolicyViolation,
		kerr.InvalidReplicaAssignment, kerr.UnsupportedVersion, kerr.TopicAuthorizationFailed,
		kerr.ClusterAuthorizationFailed},
	history.Delete: {kerr.UnknownTopicOrPartition, kerr.UnknownTopicID, kerr.InvalidRequest,
		kerr.InvalidTopicException, kerr.TopicDeletionDisabled, kerr.UnsupportedVersion,
		kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed},
	history.CreatePartitions: {kerr.UnknownTopicOrPartition, kerr.InvalidPartitions, kerr.InvalidReplicaAssignment,
		kerr.InvalidReplicationFactor, kerr.InvalidRequest, kerr.InvalidTopicException, kerr.UnsupportedVersion,
		kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed},
	history.Elect: {kerr.UnknownTopicOrPartition, kerr.ElectionNotNeeded, kerr.PreferredLeaderNotAvailable,
		kerr.EligibleLeadersNotAvailable, kerr.InvalidRequest, kerr.UnsupportedVersion,
		kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed},
	history.Reassign: {kerr.UnknownTopicOrPartition, kerr.InvalidReplicaAssignment, kerr.ReassignmentInProgress,
		kerr.NoReassignmentInProgress, kerr.InvalidRequest, kerr.UnsupportedVersion,
		kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed},
	history.CancelReassign: {kerr.UnknownTopicOrPartition, kerr.InvalidReplicaAssignment, kerr.ReassignmentInProgress,
		kerr.NoReassignmentInProgress, kerr.InvalidRequest, kerr.UnsupportedVersion,
		kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed},
}

// impliesPresent lists, per kind, the refusals the controller makes only
// for a topic that exists (not being deleted) and has the partition named:
// it checks existence first.
var impliesPresent = map[history.Kind][]*kerr.Error{
	history.CreatePartitions: {kerr.InvalidPartitions, kerr.InvalidReplicationFactor, kerr.InvalidReplicaAssignment},
	history.Elect:            {kerr.ElectionNotNeeded, kerr.PreferredLeaderNotAvailable, kerr.EligibleLeadersNotAvailable},
	history.Reassign:         {kerr.ReassignmentInProgress, kerr.InvalidReplicaAssignment},
	history.CancelReassign:   {kerr.NoReassignmentInProgress, kerr.InvalidReplicaAssignment},
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
// took effect: OK does, Unknown does not, and a Fail does when it was
// refused before any proposal (Op.Refused) or its code is one that a call
// of its kind gets only when nothing was done (TOPIC_ALREADY_EXISTS for a
// create, …). Reads (describe, list) are always definite.
func Definite(op history.Op) bool {
	switch op.Outcome {
	case history.OK:
		return true
	case history.Unknown:
		return false
	}
	if op.Refused {
		return true
	}
	list, ok := noEffect[op.Kind]
	if !ok {
		return true
	}
	return codeIn(op.Code, list)
}

// constrains reports whether a definite refusal says something about the
// topic's state (as opposed to its arguments: an invalid replication
// factor says nothing).
func constrains(op history.Op) bool {
	if op.Refused {
		return false
	}
	if op.Code == codeUnknownTopic {
		return op.Kind != history.Create
	}
	if op.Kind == history.Create {
		return op.Code == codeAlreadyExists
	}
	return codeIn(op.Code, impliesPresent[op.Kind])
}

// linOps turns the history into porcupine operations. Calls that can
// neither change the model nor constrain it (a describe that timed out, a
// refusal for a reason unrelated to the topic, an election with no answer)
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
		ret := call
		if !op.Complete.IsZero() {
			ret = max(op.Complete.UnixNano(), call)
		}
		in := linInput{Op: op.ID, Kind: op.Kind, Topic: op.Topic, Partitions: op.Args.Partitions, Partition: op.Args.Partition,
			Replicas: op.Args.Replicas, Election: op.Args.Election}
		outv := linOutput{Outcome: op.Outcome, Code: op.Code, Original: describeOutcome(op)}
		meta := op.String()
		add := func(in linInput, o linOutput, ret int64) {
			out = append(out, porcupine.Operation{ClientId: op.Client, Input: in, Call: call, Output: o, Return: ret, Metadata: meta})
		}
		switch op.Kind {
		case history.Create, history.Delete, history.CreatePartitions, history.Elect, history.Reassign, history.CancelReassign:
			if op.Topic == "" {
				skipped++
				continue
			}
			if !Definite(op) || op.Complete.IsZero() {
				if op.Kind == history.Elect {
					skipped++
					continue
				}
				// It may take effect at any point after its invocation:
				// it registers as pending there.
				in.Register = true
				add(in, linOutput{Outcome: history.Unknown, Original: describeOutcome(op)}, call)
				continue
			}
			if op.Outcome == history.Fail && !constrains(op) {
				skipped++
				continue
			}
			if op.Outcome == history.OK && op.Result != nil {
				outv.ID, outv.Partitions = op.Result.TopicID, op.Result.Partitions
			}
			if op.Writes > 1 && op.Outcome == history.OK && op.Kind != history.Elect {
				// A retried call answered on a later write: an earlier
				// write may have taken effect as well (a create that a
				// deposed controller committed, then someone's delete,
				// then the retry creating the topic again). That write
				// is a call of unknown outcome within the same interval.
				e := in
				e.Earlier = true
				add(e, linOutput{Outcome: history.Unknown, Original: "an earlier write of a retried call"}, ret)
			}
			add(in, outv, ret)
		case history.Describe:
			switch {
			case op.Outcome == history.OK && op.Result != nil && op.Result.Absent:
				outv.Absent = true
			case op.Outcome == history.OK:
				outv.Present = true
				if op.Result != nil {
					outv.ID, outv.Partitions, outv.Parts = op.Result.TopicID, op.Result.Partitions, op.Result.Parts
				}
			case op.Outcome == history.Fail && op.Code == codeUnknownTopic:
				outv.Absent = true
			default:
				skipped++
				continue
			}
			add(in, outv, ret)
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
				add(linInput{Op: op.ID, Kind: history.Describe, Topic: topic, FromList: true}, o, ret)
			}
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
		if op.Refused {
			return op.ErrorName() + " (refused)"
		}
		return op.ErrorName()
	}
	return "unknown"
}

// int32 list helpers; lists are small.

func idsHas(l []int32, x int32) bool { return slices.Contains(l, x) }

// idsMinus is the members of a not in b, in a's order.
func idsMinus(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if !idsHas(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// idsIn is the members of a in b, in a's order.
func idsIn(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if idsHas(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// idsSubseq reports whether a is a subsequence of b.
func idsSubseq(a, b []int32) bool {
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] != x {
			j++
		}
		if j == len(b) {
			return false
		}
		j++
	}
	return true
}

func idsSubset(a, b []int32) bool {
	for _, x := range a {
		if !idsHas(b, x) {
			return false
		}
	}
	return true
}

func idsDistinct(l []int32) bool {
	for i, x := range l {
		if idsHas(l[:i], x) {
			return false
		}
	}
	return true
}

// members is every broker the partition's list may hold, or false when
// that is not known.
func (p partState) members() ([]int32, bool) {
	switch {
	case p.Tail == tailAny, !p.HeadOK && p.Tail == tailNone:
		return nil, false
	case p.HeadOK:
		return append(slices.Clone(p.Head), p.Tails...), true
	}
	return slices.Clone(p.Tails), true
}

// preferred is the partition's first replica, -1 when not known.
func (p partState) preferred() int32 {
	if p.HeadOK && len(p.Head) > 0 {
		return p.Head[0]
	}
	return -1
}

// withTail sets the tail to the members of rest that may follow the head,
// in any order.
func (p partState) withTail(rest []int32, known bool) partState {
	switch {
	case !known:
		p.Tail, p.Tails = tailAny, nil
	case len(rest) == 0:
		p.Tail, p.Tails = tailNone, nil
	default:
		p.Tail, p.Tails = tailSet, rest
	}
	return p
}

// observe checks one partition of a describe against the model and
// returns what the model knows after it.
func (p partState) observe(pi history.PartitionInfo) (partState, bool) {
	r := pi.Replicas
	if len(r) == 0 || !idsDistinct(r) {
		return p, false
	}
	if pi.Leader >= 0 && !idsHas(r, pi.Leader) {
		return p, false
	}
	rest := r
	if p.HeadOK {
		if len(r) < len(p.Head) || !slices.Equal(r[:len(p.Head)], p.Head) {
			return p, false
		}
		rest = r[len(p.Head):]
	}
	switch p.Tail {
	case tailNone:
		if p.HeadOK && len(rest) > 0 {
			return p, false
		}
	case tailSeq:
		if !idsSubseq(rest, p.Tails) {
			return p, false
		}
	case tailSet:
		if !idsSubset(rest, p.Tails) {
			return p, false
		}
	}
	// The leader epoch never goes back, and one epoch has one leader.
	if pi.LeaderEpoch < p.Epoch {
		return p, false
	}
	if pi.LeaderEpoch == p.Epoch && p.Leader >= 0 && pi.Leader >= 0 && pi.Leader != p.Leader {
		return p, false
	}
	n := p
	switch {
	case p.HeadOK && len(rest) == 0:
		n.Tail, n.Tails = tailNone, nil
	case p.HeadOK:
		n.Tail, n.Tails = tailSeq, slices.Clone(rest)
	case p.Tail == tailNone:
		// The first describe of a list no call reported fixes it.
		n.HeadOK, n.Head = true, slices.Clone(r)
	default:
		n.Tail, n.Tails = tailSeq, slices.Clone(r)
	}
	if pi.Leader >= 0 || pi.LeaderEpoch != p.Epoch {
		n.Leader = pi.Leader
	}
	n.Epoch = pi.LeaderEpoch
	return n, true
}

// reassigned is the partition after a reassignment to target took effect:
// one state, or two when a reassignment in progress may or may not have
// completed (its original replicas are then either its own or its target).
func (p partState) reassigned(target []int32) []partState {
	mem, known := p.members()
	base := p
	base.HeadOK, base.Head = true, slices.Clone(target)
	base = base.withTail(idsMinus(mem, target), known)
	base.RA = raMaybe
	type orig struct {
		o  []int32
		ok bool
	}
	origs := []orig{{p.Head, p.HeadOK}}
	if p.RA == raMaybe {
		origs = []orig{{p.Orig, p.OrigOK}, {p.Head, p.HeadOK}}
	}
	var out []partState
	for _, o := range origs {
		n := base
		n.OrigOK, n.Orig = o.ok, nil
		if o.ok {
			// The original replicas keep the order they get in the
			// new list: target first, then the others.
			n.Orig = append(idsIn(target, o.o), idsMinus(o.o, target)...)
		}
		out = append(out, n)
	}
	return out
}

// cancelled is the partition after a cancel took effect (a reassignment
// was in progress): its original replicas first, then replicas being
// deleted.
func (p partState) cancelled() partState {
	mem, known := p.members()
	n := p
	n.RA, n.OrigOK, n.Orig = raNone, false, nil
	if p.OrigOK {
		n.HeadOK, n.Head = true, p.Orig
		return n.withTail(idsMinus(mem, p.Orig), known)
	}
	n.HeadOK, n.Head = false, nil
	if !known {
		n.Tail, n.Tails = tailAny, nil
		return n
	}
	n.Tail, n.Tails = tailSet, mem
	return n
}

// electedPreferred is the partition after a preferred election made its
// first replica the leader.
func (p partState) electedPreferred() partState {
	p.Leader, p.Epoch = p.preferred(), p.Epoch+1
	return p
}

// preferredLeads is the partition after ELECTION_NOT_NEEDED to a preferred
// election: the first replica leads.
func (p partState) preferredLeads() partState {
	pref := p.preferred()
	if pref < 0 {
		return p
	}
	if p.Leader >= 0 && p.Leader != pref {
		p.Epoch++
	}
	p.Leader = pref
	return p
}

func freshParts(n int32) []partState {
	out := make([]partState, n)
	for i := range out {
		out[i] = freshPart()
	}
	return out
}

// applies reports whether pending effect e can take effect in s.
func applies(s *topicState, e effect) bool {
	switch e.Kind {
	case history.Create:
		return s.St == absent
	case history.Delete:
		return s.St == present
	case history.CreatePartitions:
		return s.St == present && e.Partitions > s.Partitions
	case history.Reassign:
		return s.St == present && e.Partition >= 0 && e.Partition < s.Partitions && len(e.Replicas) > 0
	case history.CancelReassign:
		return s.St == present && e.Partition >= 0 && e.Partition < s.Partitions && s.Parts[e.Partition].RA == raMaybe
	}
	return false
}

// apply is what pending effect e does to s (with e already removed from
// s.Pending) if it takes effect now; nothing when it cannot.
func apply(s *topicState, e effect) []*topicState {
	if !applies(s, e) {
		return nil
	}
	switch e.Kind {
	case history.Create:
		if s.St != absent {
			return nil
		}
		return []*topicState{created(s, "", e.Partitions)}
	case history.Delete:
		if s.St != present {
			return nil
		}
		return []*topicState{startDeleting(s)}
	case history.CreatePartitions:
		if s.St != present || e.Partitions <= s.Partitions {
			return nil
		}
		return []*topicState{grown(s, e.Partitions)}
	case history.Reassign:
		if s.St != present || e.Partition >= s.Partitions || e.Partition < 0 || len(e.Replicas) == 0 {
			return nil
		}
		// One state, not one per way the reassignment in progress may
		// have gone: with the original replicas not known when those
		// ways differ (a call with no outcome already blurs what the
		// model knows; following each way would multiply the states by
		// every such call).
		ps := s.Parts[e.Partition].reassigned(e.Replicas)
		p := ps[0]
		if len(ps) > 1 && (ps[0].OrigOK != ps[1].OrigOK || !slices.Equal(ps[0].Orig, ps[1].Orig)) {
			p.OrigOK, p.Orig = false, nil
		}
		return []*topicState{s.withPart(e.Partition, p)}
	case history.CancelReassign:
		if s.St != present || e.Partition >= s.Partitions || e.Partition < 0 || s.Parts[e.Partition].RA != raMaybe {
			return nil
		}
		return []*topicState{s.withPart(e.Partition, s.Parts[e.Partition].cancelled())}
	}
	return nil
}

func created(s *topicState, id string, n int32) *topicState {
	c := s.clone()
	c.St, c.ID, c.Partitions, c.Parts = present, id, n, freshParts(n)
	return c.seal()
}

func startDeleting(s *topicState) *topicState {
	c := s.clone()
	c.St, c.Partitions, c.Parts = deleting, 0, nil
	return c.seal()
}

func grown(s *topicState, n int32) *topicState {
	c := s.clone()
	c.Parts = append(slices.Clone(s.Parts), freshParts(n-s.Partitions)...)
	c.Partitions = n
	return c.seal()
}

func withPending(s *topicState, e effect) *topicState {
	c := s.clone()
	i, _ := slices.BinarySearchFunc(s.Pending, e, compareEffects)
	c.Pending = slices.Insert(slices.Clone(s.Pending), i, e)
	return c.seal()
}

func withoutPending(s *topicState, i int) *topicState {
	c := s.clone()
	c.Pending = slices.Delete(slices.Clone(s.Pending), i, i+1)
	return c.seal()
}

// closure is every state one of states can be in by the time of a call:
// a deletion finished, pending calls took effect.
func closure(states ...*topicState) []*topicState {
	if len(states) == 1 && states[0].St != deleting && len(states[0].Pending) == 0 {
		return states
	}
	out := slices.Clone(states)
	seen := map[string]bool{}
	for _, s := range states {
		seen[s.key] = true
	}
	addAll := func(l ...*topicState) {
		for _, n := range l {
			if !seen[n.key] {
				seen[n.key] = true
				out = append(out, n)
			}
		}
	}
	for i := 0; i < len(out); i++ {
		c := out[i]
		if c.St == deleting {
			a := c.clone()
			a.St, a.ID = absent, ""
			addAll(a.seal())
		}
		for j, e := range c.Pending {
			if j > 0 && compareEffects(e, c.Pending[j-1]) == 0 {
				continue // the same call twice: one is enough to try
			}
			if applies(c, e) {
				addAll(apply(withoutPending(c, j), e)...)
			}
		}
	}
	return out
}

// stepCore applies one call to one state (after closure) and returns the
// states it can lead to (none: the call could not have had this outcome in
// this state).
func stepCore(s *topicState, in linInput, out linOutput) []*topicState {
	one := func(t *topicState) []*topicState { return []*topicState{t} }
	if in.Register {
		e := effect{Kind: in.Kind}
		switch in.Kind {
		case history.Create, history.CreatePartitions:
			e.Partitions = in.Partitions
		case history.Reassign:
			e.Partition, e.Replicas = in.Partition, in.Replicas
		case history.CancelReassign:
			e.Partition = in.Partition
		}
		return one(withPending(s, e))
	}
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
			return one(created(s, out.ID, n))
		case history.Fail:
			if out.Code == codeAlreadyExists && s.St == absent {
				return nil
			}
			return one(s)
		default:
			if s.St == absent {
				return []*topicState{s, created(s, "", in.Partitions)}
			}
			return one(s)
		}
	case history.Delete:
		switch out.Outcome {
		case history.OK:
			if s.St == absent {
				return nil
			}
			return one(startDeleting(s))
		case history.Fail:
			if out.Code == codeUnknownTopic && s.St == present {
				return nil
			}
			return one(s)
		default:
			if s.St == present {
				return []*topicState{s, startDeleting(s)}
			}
			return one(s)
		}
	case history.CreatePartitions:
		canGrow := s.St == present && in.Partitions > s.Partitions
		switch out.Outcome {
		case history.OK:
			if !canGrow {
				return nil
			}
			return one(grown(s, in.Partitions))
		case history.Fail:
			switch {
			case out.Code == codeUnknownTopic:
				if s.St == present {
					return nil
				}
			case s.St != present:
				return nil // the other refusals are about a topic that exists
			case out.Code == codeInvalidPartitions && in.Partitions > s.Partitions:
				return nil
			}
			return one(s)
		default:
			if canGrow {
				return []*topicState{s, grown(s, in.Partitions)}
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
		if out.ID != "" && s.ID != "" && s.ID != out.ID {
			return nil
		}
		if out.Partitions != 0 && out.Partitions != s.Partitions {
			return nil
		}
		n := s
		if out.ID != "" && s.ID == "" {
			n = s.clone()
			n.ID = out.ID
			n.seal()
		}
		if out.Parts == nil {
			return one(n)
		}
		if int32(len(out.Parts)) != s.Partitions {
			return nil
		}
		parts := slices.Clone(n.Parts)
		for i, pi := range out.Parts {
			if pi.Partition != int32(i) {
				return nil
			}
			p, ok := parts[i].observe(pi)
			if !ok {
				return nil
			}
			parts[i] = p
		}
		c := n.clone()
		c.Parts = parts
		return one(c.seal())
	case history.Elect, history.Reassign, history.CancelReassign:
		inRange := s.St == present && in.Partition >= 0 && in.Partition < s.Partitions
		definite := out.Outcome == history.OK || (out.Outcome == history.Fail && codeIn(out.Code, impliesPresent[in.Kind]))
		switch {
		case definite && !inRange:
			return nil
		case out.Outcome == history.Fail && out.Code == codeUnknownTopic:
			if inRange {
				return nil
			}
			return one(s)
		case out.Outcome == history.Unknown:
			// An earlier write of a retried call: it may have taken
			// effect within the call.
			if !inRange {
				return one(s)
			}
			return append(one(s), apply(s, effect{Kind: in.Kind, Partition: in.Partition, Replicas: in.Replicas})...)
		}
		p := s.Parts[in.Partition]
		switch in.Kind {
		case history.Elect:
			switch {
			case out.Outcome == history.OK && in.Election == "unclean":
				p.Leader, p.Epoch = -1, p.Epoch+1
			case out.Outcome == history.OK:
				p = p.electedPreferred()
			case out.Code == codeNotNeeded && in.Election != "unclean":
				p = p.preferredLeads()
			default:
				return one(s)
			}
			return one(s.withPart(in.Partition, p))
		case history.Reassign:
			if out.Outcome != history.OK {
				return one(s)
			}
			var next []*topicState
			for _, n := range p.reassigned(in.Replicas) {
				next = append(next, s.withPart(in.Partition, n))
			}
			return next
		default:
			switch {
			case out.Outcome == history.OK:
				if p.RA != raMaybe {
					return nil
				}
				return one(s.withPart(in.Partition, p.cancelled()))
			case out.Code == codeNoReassignment:
				// None in progress: the last one completed.
				p.RA, p.OrigOK, p.Orig = raNone, false, nil
				return one(s.withPart(in.Partition, p))
			case out.Code == codeInvalidAssignment:
				// Refused for the ISR it would leave: one is in
				// progress.
				if p.RA != raMaybe {
					return nil
				}
			}
			return one(s)
		}
	}
	return one(s)
}

// forgetParts is s without what no later call can tell: once every call
// of a topic that looks at partitions (a describe of them, an election, a
// reassignment or its cancellation) has returned, the calls left see only
// existence, topic id and partition count, so the partitions' replicas and
// leaders and the pending reassignments no longer matter. Forgetting them
// merges states that differ only there.
func forgetParts(s *topicState) *topicState {
	keep := true
	for _, p := range s.Parts {
		if !p.fresh() {
			keep = false
		}
	}
	for _, e := range s.Pending {
		if e.Kind == history.Reassign || e.Kind == history.CancelReassign {
			keep = false
		}
	}
	if keep {
		return s
	}
	c := s.clone()
	if s.Parts != nil {
		c.Parts = freshParts(s.Partitions)
	}
	c.Pending = nil
	for _, e := range s.Pending {
		if e.Kind != history.Reassign && e.Kind != history.CancelReassign {
			c.Pending = append(c.Pending, e)
		}
	}
	return c.seal()
}

func (p partState) fresh() bool {
	return !p.HeadOK && p.Tail == tailNone && p.Tails == nil && p.RA == raNone && !p.OrigOK && p.Epoch == -1 && p.Leader == -1
}

// stepAll is every state one call can lead to from any of states, sorted
// by key, without repeats and without states another one covers (see
// covers).
func stepAll(states []*topicState, in linInput, out linOutput) []*topicState {
	m := map[string]*topicState{}
	if in.Start != nil {
		for _, s := range states {
			if s.St == unset {
				for _, n := range in.Start {
					m[n.key] = n
				}
			}
		}
		return prune(m)
	}
	if !in.Register {
		// Before a registration nothing needs to happen: what may
		// happen before it may as well happen after it, and the next
		// call's closure covers that.
		states = closure(states...)
	}
	for _, s := range states {
		if s.St == unset {
			continue
		}
		for _, n := range stepCore(s, in, out) {
			if in.Forget {
				n = forgetParts(n)
			}
			m[n.key] = n
		}
	}
	return prune(m)
}

// prune sorts the states by key and drops the covered ones.
func prune(m map[string]*topicState) []*topicState {
	all := make([]*topicState, 0, len(m))
	for _, s := range m {
		all = append(all, s)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].key < all[j].key })
	if len(all) < 2 {
		return all
	}
	out := all[:0:0]
	for i, s := range all {
		dropped := false
		for j, t := range all {
			if i != j && covers(t, s) && (!covers(s, t) || j < i) {
				dropped = true
				break
			}
		}
		if !dropped {
			out = append(out, s)
		}
	}
	return out
}

// covers reports whether state t allows everything state s allows, so
// that s can be dropped from a set holding t: the same state with at
// least the same pending calls (a pending call may also never take
// effect), or a topic being deleted where s has it absent (the deletion
// may finish before any step) with at least s's pending calls.
func covers(t, s *topicState) bool {
	switch {
	case t.core == s.core:
	case t.St == deleting && s.St == absent:
	default:
		return false
	}
	return subMultiset(s.Pending, t.Pending)
}

// subMultiset reports whether sorted a is contained in sorted b.
func subMultiset(a, b []effect) bool {
	j := 0
	for _, e := range a {
		for j < len(b) && compareEffects(b[j], e) < 0 {
			j++
		}
		if j == len(b) || compareEffects(b[j], e) != 0 {
			return false
		}
		j++
	}
	return true
}

// stateSet is porcupine's state: every state the model may be in.
type stateSet struct {
	states []*topicState
	key    string
	hash   uint64
}

func newStateSet(states []*topicState) *stateSet {
	var b strings.Builder
	for _, s := range states {
		b.WriteString(s.key)
		b.WriteByte(0)
	}
	h := fnv.New64a()
	h.Write([]byte(b.String()))
	return &stateSet{states: states, key: b.String(), hash: h.Sum64()}
}

func describeCall(input, output any) string {
	in, out := input.(linInput), output.(linOutput)
	if in.Start != nil {
		var st []string
		for _, s := range in.Start {
			st = append(st, s.String())
		}
		return fmt.Sprintf("segment start: %s", strings.Join(st, " or "))
	}
	var call string
	switch in.Kind {
	case history.Create:
		call = fmt.Sprintf("create(p=%d)", in.Partitions)
	case history.CreatePartitions:
		call = fmt.Sprintf("create-partitions(p=%d)", in.Partitions)
	case history.Elect:
		call = fmt.Sprintf("elect(%d, %s)", in.Partition, in.Election)
	case history.Reassign:
		call = fmt.Sprintf("reassign(%d to %v)", in.Partition, in.Replicas)
	case history.CancelReassign:
		call = fmt.Sprintf("cancel-reassign(%d)", in.Partition)
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
	case in.Register:
		res = "no definite outcome: pending from here on"
	case out.Present:
		res = fmt.Sprintf("present id=%s p=%d", shortHex(out.ID), out.Partitions)
		for _, p := range out.Parts {
			res += " " + p.String()
		}
	case out.Absent:
		res = "absent"
	case out.Outcome == history.OK && out.ID != "":
		res = "ok id=" + shortHex(out.ID)
	}
	return fmt.Sprintf("#%d %s → %s", in.Op, call, res)
}

// topicModel is the model porcupine checks, one partition per segment of
// a topic's history (see segments). Its state is the set of states the
// model may be in.
func topicModel() porcupine.Model {
	return porcupine.Model{
		Partition: partitionBySegment,
		Init:      func() any { return newStateSet([]*topicState{(&topicState{St: unset}).seal()}) },
		Step: func(state, input, output any) (bool, any) {
			next := stepAll(state.(*stateSet).states, input.(linInput), output.(linOutput))
			return len(next) > 0, newStateSet(next)
		},
		Equal:             func(a, b any) bool { return a.(*stateSet).key == b.(*stateSet).key },
		Hash:              func(state any) uint64 { return state.(*stateSet).hash },
		DescribeOperation: describeCall,
		DescribeState: func(state any) string {
			var st []string
			for _, s := range state.(*stateSet).states {
				st = append(st, s.String())
			}
			return strings.Join(st, " or ")
		},
		DescribeOperationMetadata: func(info any) string {
			if info == nil {
				return ""
			}
			return info.(string)
		},
	}
}

// partitionBySegment splits the history by segment, in segment order.
func partitionBySegment(ops []porcupine.Operation) [][]porcupine.Operation {
	segs, by := groupOps(ops, func(in linInput) int { return in.Seg })
	out := make([][]porcupine.Operation, len(segs))
	for i, s := range segs {
		out[i] = by[s]
	}
	return out
}
