package check

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// MetadataView is one Metadata answer (every topic) as a client read it:
// from the active controller, or from a broker agent's cache.
type MetadataView struct {
	// Node is who was asked: the controller's voter id, or a broker id.
	Node int32     `json:"node"`
	Addr string    `json:"addr"`
	Time time.Time `json:"time"`
	// Error is why there is no answer; the rest is then empty.
	Error string `json:"error,omitempty"`
	// Brokers are the brokers the answer lists (the controller lists the
	// live ones only).
	Brokers []int32     `json:"brokers"`
	Topics  []MetaTopic `json:"topics"`
}

// MetaTopic is one topic of a Metadata answer.
type MetaTopic struct {
	Name       string          `json:"name"`
	ID         string          `json:"id,omitempty"`
	ErrorCode  int16           `json:"error_code,omitempty"`
	Partitions []MetaPartition `json:"partitions"`
}

// MetaPartition is one partition of a Metadata answer.
type MetaPartition struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	ErrorCode   int16   `json:"error_code,omitempty"`
}

// BrokerMetadataRead is the last read of the active controller's metadata
// and of every broker agent's, taken once the cluster settled after the
// final heal.
type BrokerMetadataRead struct {
	Controller MetadataView   `json:"controller"`
	Brokers    []MetadataView `json:"brokers"`
	// Reads is how many times both were read until they agreed or the
	// wait ended, Waited how long that took.
	Reads  int           `json:"reads"`
	Waited time.Duration `json:"waited"`
}

// BrokerMetadata checks that every broker agent serves clients what the
// active controller's image says: the same topics (a topic the controller
// no longer has is a ghost), each with the same id and partitions, and
// each partition with the same leader, leader epoch, replicas and ISR.
// The controller reports no leader for a partition whose leader is not
// live, where a broker's cache still names it: a leader the controller
// does not list as live is not a difference.
func BrokerMetadata(read *BrokerMetadataRead) Result {
	r := newResult("broker-metadata")
	if read == nil {
		r.Inconclusive = "the brokers' metadata was not read"
		return r
	}
	c := read.Controller
	if c.Error != "" {
		r.add(Violation{Partition: -1, Time: c.Time, Description: fmt.Sprintf("the active controller's metadata could not be read after the final heal: %s", c.Error)})
		return r
	}
	ctrl := metaTopics(c.Topics)
	live := map[int32]bool{}
	for _, b := range c.Brokers {
		live[b] = true
	}
	parts := 0
	for _, t := range ctrl {
		parts += len(t.Partitions)
	}
	brokers := slices.Clone(read.Brokers)
	sort.SliceStable(brokers, func(i, j int) bool { return brokers[i].Node < brokers[j].Node })
	compared := 0
	for _, b := range brokers {
		if b.Error != "" {
			r.add(Violation{Partition: -1, Time: b.Time, Brokers: []int32{b.Node},
				Description: fmt.Sprintf("broker %d (%s) did not answer Metadata after the final heal: %s", b.Node, b.Addr, b.Error)})
			continue
		}
		compared += compareBrokerMeta(&r, c, b, ctrl, live)
	}
	r.Checked = fmt.Sprintf("%d brokers read, %d topics and %d partitions of the active controller %d compared with each (%d partition states compared)",
		len(read.Brokers), len(ctrl), parts, c.Node, compared)
	if read.Reads > 0 {
		verdict := "until the brokers agreed with the controller"
		if !r.Valid {
			verdict = "and the differences remained"
		}
		r.Notes = append(r.Notes, fmt.Sprintf("read %d times over %s after the voters reached one index, %s", read.Reads, read.Waited.Round(time.Millisecond), verdict))
	}
	return r
}

// metaTopics keeps the topics answered without an error.
func metaTopics(ts []MetaTopic) map[string]MetaTopic {
	out := map[string]MetaTopic{}
	for _, t := range ts {
		if t.ErrorCode == 0 {
			out[t.Name] = t
		}
	}
	return out
}

// compareBrokerMeta adds a violation per difference between broker b's view
// and the controller's, and returns how many partitions it compared.
func compareBrokerMeta(r *Result, c, b MetadataView, ctrl map[string]MetaTopic, live map[int32]bool) int {
	mine := metaTopics(b.Topics)
	add := func(topic string, p int32, format string, args ...any) {
		r.add(Violation{Topic: topic, Partition: p, Time: b.Time, Brokers: []int32{b.Node},
			Description: fmt.Sprintf("broker %d: ", b.Node) + fmt.Sprintf(format, args...)})
	}
	compared := 0
	for _, name := range metaKeys(mine) {
		bt := mine[name]
		ct, ok := ctrl[name]
		if !ok {
			add(name, -1, "ghost topic %q (id %s, %d partitions): the active controller %d does not have it", name, bt.ID, len(bt.Partitions), c.Node)
			continue
		}
		if bt.ID != ct.ID {
			add(name, -1, "topic %q has id %s, the active controller's has id %s (a stale incarnation of the name)", name, bt.ID, ct.ID)
			continue
		}
		bp := metaPartitions(bt.Partitions)
		cp := metaPartitions(ct.Partitions)
		for _, id := range metaKeys(cp) {
			want := cp[id]
			got, ok := bp[id]
			if !ok {
				add(name, id, "missing partition %s-%d: the active controller has it (leader %d, leader epoch %d)", name, id, want.Leader, want.LeaderEpoch)
				continue
			}
			compared++
			if diffs := metaPartitionDiffs(got, want, live); len(diffs) > 0 {
				add(name, id, "partition %s-%d differs from the active controller's: %s", name, id, strings.Join(diffs, "; "))
			}
		}
		for _, id := range metaKeys(bp) {
			if _, ok := cp[id]; !ok {
				add(name, id, "partition %s-%d (leader %d, leader epoch %d) that the active controller's topic %q does not have", name, id, bp[id].Leader, bp[id].LeaderEpoch, name)
			}
		}
	}
	for _, name := range metaKeys(ctrl) {
		if _, ok := mine[name]; !ok {
			add(name, -1, "missing topic %q (id %s, %d partitions) that the active controller %d has", name, ctrl[name].ID, len(ctrl[name].Partitions), c.Node)
		}
	}
	return compared
}

// metaPartitionDiffs describes how a broker's partition state (got) differs
// from the controller's (want).
func metaPartitionDiffs(got, want MetaPartition, live map[int32]bool) []string {
	var out []string
	// The controller answers "no leader" for a leader that is not live.
	offline := want.Leader < 0 && got.Leader >= 0 && !live[got.Leader]
	if got.Leader != want.Leader && !offline {
		out = append(out, fmt.Sprintf("stale leader %d, the controller's is %d", got.Leader, want.Leader))
	}
	if got.LeaderEpoch != want.LeaderEpoch {
		out = append(out, fmt.Sprintf("stale leader epoch %d, the controller's is %d", got.LeaderEpoch, want.LeaderEpoch))
	}
	if !slices.Equal(got.Replicas, want.Replicas) {
		out = append(out, fmt.Sprintf("replicas %v, the controller's are %v", got.Replicas, want.Replicas))
	}
	if !slices.Equal(metaSorted(got.ISR), metaSorted(want.ISR)) {
		out = append(out, fmt.Sprintf("ISR %v, the controller's is %v", got.ISR, want.ISR))
	}
	return out
}

func metaPartitions(ps []MetaPartition) map[int32]MetaPartition {
	out := make(map[int32]MetaPartition, len(ps))
	for _, p := range ps {
		out[p.Partition] = p
	}
	return out
}

func metaSorted(s []int32) []int32 {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

func metaKeys[K int32 | string, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
