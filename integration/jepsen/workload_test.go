package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

// topicPrefix starts the name of every topic the workload touches.
const topicPrefix = "jt-"

func ours(name string) bool { return strings.HasPrefix(name, topicPrefix) }

// topicNames is a sliding window of topic names: every Every, Step new
// names come into use and the oldest Step go out, Width names in use at
// a time. Clients contend on a few names at once (the interesting case
// for the checkers) while each name's history stays short enough for the
// linearizability search.
type topicNames struct {
	Start       time.Time
	Every       time.Duration
	Width, Step int
}

func (n topicNames) pick(now time.Time, intN func(int) int) string {
	slot := 0
	if d := now.Sub(n.Start); d > 0 {
		slot = int(d / n.Every)
	}
	return fmt.Sprintf("%s%04d", topicPrefix, slot*n.Step+intN(n.Width))
}

// opMix is how often each kind of call is made, out of the total weight.
var opMix = []struct {
	kind   history.Kind
	weight int
}{
	{history.Create, 24}, {history.Delete, 18}, {history.Describe, 24}, {history.List, 6},
	{history.CreatePartitions, 8}, {history.Elect, 9}, {history.Reassign, 8}, {history.CancelReassign, 3},
}

func pickKind(intN func(int) int) history.Kind {
	total := 0
	for _, m := range opMix {
		total += m.weight
	}
	x := intN(total)
	for _, m := range opMix {
		if x < m.weight {
			return m.kind
		}
		x -= m.weight
	}
	return opMix[0].kind
}

// API keys of the mutating calls, for counting their attempts.
var apiKey = map[history.Kind]int16{
	history.Create: 19, history.Delete: 20, history.CreatePartitions: 37, history.Elect: 43,
	history.Reassign: 45, history.CancelReassign: 45,
}

// worker is one client: one franz-go client, one call at a time.
type worker struct {
	id      int
	cl      *kgo.Client
	adm     *kadm.Client
	hook    *attempts
	rec     *history.Recorder
	rng     *rand.Rand
	names   topicNames
	brokers []int32
	timeout time.Duration
}

func newWorker(id int, seeds []string, rec *history.Recorder, seed uint64, names topicNames, brokers []int32, timeout time.Duration) (*worker, error) {
	hook := &attempts{}
	cl, err := newClient(seeds, fmt.Sprintf("jepsen-%d", id), hook)
	if err != nil {
		return nil, err
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(timeout / time.Millisecond))
	return &worker{id: id, cl: cl, adm: adm, hook: hook, rec: rec, rng: rand.New(rand.NewPCG(seed, uint64(id))),
		names: names, brokers: brokers, timeout: timeout}, nil
}

// run makes calls until stop is closed, with a short random pause between
// them to pace the history.
func (w *worker) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		w.one()
		t := time.NewTimer(time.Duration(20+w.rng.IntN(80)) * time.Millisecond)
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (w *worker) close() { w.cl.Close() }

// standbyRefusal is in the message of the NOT_CONTROLLER a standby voter
// answers a mutation with before doing anything with it
// (transport/listener's notController). A NOT_CONTROLLER without it comes
// from a controller that lost its leadership, maybe with the call's entry
// proposed, which may still commit.
const standbyRefusal = "is a standby voter"

// finish completes a mutating call from what kadm returned; msg is the
// error message the cluster sent with its error code, if any. A refusal
// is recorded with its code (the checkers know which codes say the call
// did nothing), a standby's NOT_CONTROLLER to the only write as refused
// before any proposal; no answer, a lost connection, and any refusal
// answered to a retry (an earlier write may have taken effect) are
// unknown.
func (w *worker) finish(p *history.Pending, kind history.Kind, res *history.Result, err error, msg string) {
	n, node := w.hook.result()
	if node != "" {
		p.SetNode(node)
	}
	p.SetWrites(n)
	if ambiguous(kind, n, err) {
		p.Unknown(fmt.Errorf("%v, answered to write %d of the request: an earlier write may have taken effect", err, n))
		return
	}
	outcome, code := history.Classify(err)
	if outcome != history.Fail {
		p.Finish(res, err)
		return
	}
	text := err.Error()
	if msg != "" {
		text += ": " + msg
	}
	if code == kerr.NotController.Code && n == 1 && strings.Contains(msg, standbyRefusal) {
		p.Refuse(code, text)
		return
	}
	p.Fail(code, text)
}

var errNoResult = errors.New("the answer has no result for the topic")

func (w *worker) one() {
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	kind := pickKind(w.rng.IntN)
	topic := w.names.pick(w.rec.Now(), w.rng.IntN)
	if k, ok := apiKey[kind]; ok {
		w.hook.watch(k)
	}
	switch kind {
	case history.Create:
		p, rf := int32(1+w.rng.IntN(3)), int16(1+w.rng.IntN(3))
		pend := w.rec.Invoke(w.id, kind, topic, history.Args{Partitions: p, ReplicationFactor: rf})
		resps, err := w.adm.CreateTopics(ctx, p, rf, nil, topic)
		var res *history.Result
		var msg string
		if err == nil {
			r, ok := resps[topic]
			switch {
			case !ok:
				err = errNoResult
			case r.Err != nil:
				err, msg = r.Err, r.ErrMessage
			default:
				res = &history.Result{TopicID: topicID(r.ID), Partitions: r.NumPartitions}
			}
		}
		w.finish(pend, kind, res, err, msg)
	case history.Delete:
		pend := w.rec.Invoke(w.id, kind, topic, history.Args{})
		resps, err := w.adm.DeleteTopics(ctx, topic)
		var msg string
		if err == nil {
			if r, ok := resps[topic]; !ok {
				err = errNoResult
			} else {
				err, msg = r.Err, r.ErrMessage
			}
		}
		w.finish(pend, kind, nil, err, msg)
	case history.CreatePartitions:
		set := 2 + w.rng.IntN(4)
		pend := w.rec.Invoke(w.id, kind, topic, history.Args{Partitions: int32(set)})
		resps, err := w.adm.UpdatePartitions(ctx, set, topic)
		var msg string
		if err == nil {
			if r, ok := resps[topic]; !ok {
				err = errNoResult
			} else {
				err, msg = r.Err, r.ErrMessage
			}
		}
		w.finish(pend, kind, nil, err, msg)
	case history.Elect:
		part := int32(w.rng.IntN(3))
		how, name := kadm.ElectPreferredReplica, "preferred"
		if w.rng.IntN(4) == 0 {
			how, name = kadm.ElectLiveReplica, "unclean"
		}
		pend := w.rec.Invoke(w.id, kind, topic, history.Args{Partition: part, Election: name})
		resps, err := w.adm.ElectLeaders(ctx, how, kadm.TopicsSet{topic: {part: {}}})
		var msg string
		if err == nil {
			if r, ok := resps[topic][part]; !ok {
				err = errNoResult
			} else {
				err, msg = r.Err, r.ErrMessage
			}
		}
		w.finish(pend, kind, nil, err, msg)
	case history.Reassign, history.CancelReassign:
		part := int32(w.rng.IntN(3))
		var req kadm.AlterPartitionAssignmentsReq
		args := history.Args{Partition: part}
		if kind == history.Reassign {
			perm := w.rng.Perm(len(w.brokers))
			for _, i := range perm[:1+w.rng.IntN(3)] {
				args.Replicas = append(args.Replicas, w.brokers[i])
			}
			req.Assign(topic, part, args.Replicas)
		} else {
			req.CancelAssign(topic, part)
		}
		pend := w.rec.Invoke(w.id, kind, topic, args)
		resps, err := w.adm.AlterPartitionAssignments(ctx, req)
		var msg string
		if err == nil {
			if r, ok := resps[topic][part]; !ok {
				err = errNoResult
			} else {
				err, msg = r.Err, r.ErrMessage
			}
		}
		w.finish(pend, kind, nil, err, msg)
	case history.Describe:
		pend := w.rec.Invoke(w.id, kind, topic, history.Args{})
		read(ctx, w.cl, pend, []string{topic}, w.rng.IntN)
	case history.List:
		pend := w.rec.Invoke(w.id, kind, "", history.Args{})
		read(ctx, w.cl, pend, nil, w.rng.IntN)
	}
}

// read completes a describe (one topic) or a list (topics nil) with the
// active controller's answer. No answer is unknown: the checkers leave
// such reads out.
func read(ctx context.Context, cl *kgo.Client, pend *history.Pending, topics []string, intN func(int) int) *kmsg.MetadataResponse {
	resp, ctrl, err := controllerMetadata(ctx, cl, topics, intN)
	if err != nil {
		pend.Unknown(err)
		return nil
	}
	pend.SetNode(fmt.Sprintf("voter %d", ctrl))
	if topics == nil {
		res := &history.Result{Topics: []history.TopicInfo{}}
		for _, t := range resp.Topics {
			if t.Topic != nil && t.ErrorCode == 0 && ours(*t.Topic) {
				res.Topics = append(res.Topics, history.TopicInfo{Name: *t.Topic, TopicID: topicID(t.TopicID), Partitions: int32(len(t.Partitions))})
			}
		}
		pend.OK(res)
		return resp
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topics[0] {
			continue
		}
		if t.ErrorCode != 0 {
			pend.Fail(t.ErrorCode, history.CodeName(t.ErrorCode))
			return resp
		}
		pend.OK(&history.Result{TopicID: topicID(t.TopicID), Partitions: int32(len(t.Partitions)), Parts: partitionInfos(t.Partitions)})
		return resp
	}
	pend.Unknown(errNoResult)
	return resp
}

// partitionInfos is a topic's partitions as a describe records them, by
// number: the leader (-1 when none or not reachable), its epoch, and the
// replicas in the order Metadata lists them.
func partitionInfos(ps []kmsg.MetadataResponseTopicPartition) []history.PartitionInfo {
	out := make([]history.PartitionInfo, 0, len(ps))
	for _, p := range ps {
		out = append(out, history.PartitionInfo{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Replicas: append([]int32{}, p.Replicas...)})
	}
	slices.SortFunc(out, func(a, b history.PartitionInfo) int { return int(a.Partition) - int(b.Partition) })
	return out
}

// probeDeletions finds which of names are held by a topic being deleted:
// a validate-only CreateTopics (which creates nothing) to the active
// controller answers TOPIC_ALREADY_EXISTS for a name still taken, and a
// list right after tells the topics that exist from those being deleted
// (which no read shows). It returns them, with when the probe was
// answered.
func probeDeletions(ctx context.Context, adm *kadm.Client, cl *kgo.Client, names []string, now func() time.Time, intN func(int) int) ([]string, time.Time, error) {
	if len(names) == 0 {
		return nil, now(), nil
	}
	resps, err := adm.ValidateCreateTopics(ctx, 1, 1, nil, names...)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("validate-only create: %w", err)
	}
	at := now()
	var taken []string
	for _, name := range names {
		r, ok := resps[name]
		switch {
		case !ok:
			return nil, time.Time{}, fmt.Errorf("validate-only create: no answer for %s", name)
		case errors.Is(r.Err, kerr.TopicAlreadyExists):
			taken = append(taken, name)
		case r.Err != nil:
			return nil, time.Time{}, fmt.Errorf("validate-only create of %s: %w", name, r.Err)
		}
	}
	if len(taken) == 0 {
		return nil, at, nil
	}
	resp, _, err := controllerMetadata(ctx, cl, nil, intN)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("list after the validate-only create: %w", err)
	}
	listed := map[string]bool{}
	for _, t := range resp.Topics {
		if t.Topic != nil && t.ErrorCode == 0 {
			listed[*t.Topic] = true
		}
	}
	var deleting []string
	for _, name := range taken {
		if !listed[name] {
			deleting = append(deleting, name)
		}
	}
	return deleting, at, nil
}

// awaitDeletions probes (probeDeletions) every topic name the history
// used, once a second, until none is being deleted or every one that still
// is has had bound since lastHeal, or since the last call that deleted it
// when later (what check.DeletionsFinish allows), and returns the last
// probe that was answered (zero time if none was).
func awaitDeletions(cl *kgo.Client, ops []history.Op, lastHeal time.Time, bound time.Duration,
	now func() time.Time, intN func(int) int, logf func(string, ...any)) ([]string, time.Time) {
	adm := kadm.NewClient(cl)
	var names []string
	lastDelete := map[string]time.Time{}
	for _, op := range ops {
		if op.Topic == "" || op.Kind == history.List {
			continue
		}
		if _, ok := lastDelete[op.Topic]; !ok {
			names = append(names, op.Topic)
			lastDelete[op.Topic] = time.Time{}
		}
		if op.Kind == history.Delete && op.Invoke.After(lastDelete[op.Topic]) {
			lastDelete[op.Topic] = op.Invoke
		}
	}
	sort.Strings(names)
	giveUp := now().Add(bound + 30*time.Second)
	var deleting []string
	var probed time.Time
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		d, at, err := probeDeletions(ctx, adm, cl, names, now, intN)
		cancel()
		if err != nil {
			logf("deletion probe: %v", err)
		} else {
			deleting, probed = d, at
			due := time.Time{}
			for _, name := range d {
				from := lastHeal
				if lastDelete[name].After(from) {
					from = lastDelete[name]
				}
				if from.Add(bound).After(due) {
					due = from.Add(bound)
				}
			}
			if len(d) == 0 || at.After(due) {
				return deleting, probed
			}
		}
		if now().After(giveUp) {
			return deleting, probed
		}
		time.Sleep(time.Second)
	}
}

// workload runs the workers.
type workload struct {
	workers []*worker
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

func startWorkload(workers []*worker) *workload {
	wl := &workload{workers: workers, stop: make(chan struct{})}
	for _, w := range workers {
		wl.wg.Add(1)
		go func() {
			defer wl.wg.Done()
			w.run(wl.stop)
		}()
	}
	return wl
}

// halt stops the workers once their calls in flight have ended (each is
// bounded by its timeout) and closes their clients.
func (wl *workload) halt() {
	wl.once.Do(func() {
		close(wl.stop)
		wl.wg.Wait()
		for _, w := range wl.workers {
			w.close()
		}
	})
}

// TestFinishRecordsOutcomes: how a mutating call's answer is recorded. A
// refusal answered to the only write is a Fail with its code (the
// checkers know which codes say nothing was done), a standby's
// NOT_CONTROLLER one refused before any proposal; no answer, or a refusal
// answered to a retry, is unknown.
func TestFinishRecordsOutcomes(t *testing.T) {
	rec := history.NewRecorder(nil)
	w := &worker{hook: &attempts{}, rec: rec}
	standby := "node 1002 is a standby voter; the active controller is node 1001"
	cases := []struct {
		kind    history.Kind
		writes  int
		err     error
		msg     string
		outcome history.Outcome
		refused bool
	}{
		{history.Create, 1, nil, "", history.OK, false},
		{history.CreatePartitions, 1, kerr.InvalidPartitions, "topic has 3 partitions", history.Fail, false},
		{history.Create, 1, kerr.TopicAlreadyExists, "", history.Fail, false},
		{history.Delete, 1, kerr.UnknownTopicOrPartition, "", history.Fail, false},
		{history.Reassign, 1, kerr.NotController, standby, history.Fail, true},
		{history.Reassign, 1, kerr.NotController, "(leadership lost)", history.Fail, false},
		{history.Reassign, 2, kerr.NotController, standby, history.Unknown, false},
		{history.Elect, 2, kerr.ElectionNotNeeded, "", history.Unknown, false},
		{history.Create, 1, context.DeadlineExceeded, "", history.Unknown, false},
	}
	for i, c := range cases {
		w.hook.watch(apiKey[c.kind])
		for range c.writes {
			w.hook.OnBrokerWrite(kgo.BrokerMetadata{Host: "127.0.0.1", Port: 9092}, apiKey[c.kind], 10, 0, 0, nil)
		}
		p := rec.Invoke(0, c.kind, "t", history.Args{})
		w.finish(p, c.kind, nil, c.err, c.msg)
		op := rec.Ops()[i]
		if op.Outcome != c.outcome || op.Refused != c.refused {
			t.Errorf("%s after %d writes answered %v %q: recorded %s", c.kind, c.writes, c.err, c.msg, op)
		}
		if c.msg != "" && c.outcome == history.Fail && !strings.Contains(op.Error, c.msg) {
			t.Errorf("%s: error %q does not carry the cluster's message", op, op.Error)
		}
	}
}

func TestPartitionInfos(t *testing.T) {
	var ps []kmsg.MetadataResponseTopicPartition
	for _, i := range []int32{1, 0} {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition, p.Leader, p.LeaderEpoch, p.Replicas = i, 3-i, 7+i, []int32{3 - i, 4}
		ps = append(ps, p)
	}
	got := partitionInfos(ps)
	want := []history.PartitionInfo{{Partition: 0, Leader: 3, LeaderEpoch: 7, Replicas: []int32{3, 4}}, {Partition: 1, Leader: 2, LeaderEpoch: 8, Replicas: []int32{2, 4}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
