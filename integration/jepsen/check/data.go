package check

import (
	"fmt"
	"slices"
	"sort"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

// The data checkers read the data workload's history: the produces (each
// record's value unique in the run), the records the consumers read
// during the run, and the end of every data partition (the final read
// through its leader up to the high watermark, and each replica's log).
//
//   - DataAcknowledged: every acknowledged record is in the final read at
//     the offset it was acknowledged at.
//   - DataReplicasAgree: no replica's log differs from the final read (or
//     from another replica's) below the high watermark, and every replica
//     in the ISR holds the log up to it.
//   - DataNoPhantoms: every record read anywhere was sent, to that
//     partition, and not refused; no value is at two offsets unless its
//     producer wrote it more than once.
//   - DataReadsStable: a record a consumer read during the run (below the
//     high watermark then: committed) is still at its offset at the end.

// maxDataViolations bounds the violations one data checker lists one by
// one: a bug that loses every record would otherwise bury the report.
const maxDataViolations = 50

// DataFigures are the data workload's numbers for the summary.
type DataFigures struct {
	Produces int `json:"produces"`
	// Acknowledged records; ReadBack of them found at their offset in the
	// final read; Lost the others (target 0).
	Acknowledged int `json:"acknowledged"`
	ReadBack     int `json:"read_back"`
	Lost         int `json:"lost"`
	// Unverified acknowledged records are in partitions whose final read
	// is incomplete, past what it read: neither read back nor lost.
	Unverified int `json:"unverified,omitempty"`
	// Unknown produces may or may not be in the log; Failed ones are not.
	Unknown int `json:"unknown"`
	Failed  int `json:"failed"`
	// Consumed is how many records the consumers read during the run;
	// Final how many the final read got.
	Consumed   int `json:"consumed"`
	Final      int `json:"final"`
	Partitions int `json:"partitions"`
	// Retried counts records at two offsets whose producer wrote them
	// more than once (no idempotence: allowed).
	Retried int `json:"retried"`
}

func (f DataFigures) String() string {
	return fmt.Sprintf("%d produces to %d partitions: %d acknowledged, %d read back at their offset, %d lost, %d unverified; %d unknown outcome, %d failed; %d records consumed during the run, %d in the final read; %d duplicated by a producer's retry",
		f.Produces, f.Partitions, f.Acknowledged, f.ReadBack, f.Lost, f.Unverified, f.Unknown, f.Failed, f.Consumed, f.Final, f.Retried)
}

type tp struct {
	topic string
	part  int32
}

// capped adds violations up to maxDataViolations, then counts the rest
// into one last violation.
type capped struct {
	res  *Result
	more int
}

func (c *capped) add(v Violation) {
	if len(c.res.Violations) < maxDataViolations {
		c.res.add(v)
		return
	}
	c.more++
}

func (c *capped) done() {
	if c.more > 0 {
		c.res.add(Violation{Partition: -1, Description: fmt.Sprintf("and %d more violations of this kind", c.more)})
	}
}

// finalIndex is the final read by partition: offset → value.
func finalIndex(final history.DataFinal) map[tp]map[int64]string {
	out := map[tp]map[int64]string{}
	for _, p := range final.Partitions {
		m := map[int64]string{}
		for _, r := range p.Read {
			m[r.Offset] = r.Value
		}
		out[tp{p.Topic, p.Partition}] = m
	}
	return out
}

func finalParts(final history.DataFinal) map[tp]history.DataPartition {
	out := map[tp]history.DataPartition{}
	for _, p := range final.Partitions {
		out[tp{p.Topic, p.Partition}] = p
	}
	return out
}

// incomplete reports whether a partition's final read did not get
// everything below its high watermark.
func incomplete(p history.DataPartition) bool { return p.HighWatermark < 0 || p.ReadError != "" }

// Figures counts the data workload's numbers (see DataFigures).
func Figures(produces []history.Produce, consumed []history.Record, final history.DataFinal) DataFigures {
	f := DataFigures{Produces: len(produces), Consumed: len(consumed), Partitions: len(final.Partitions)}
	idx, parts := finalIndex(final), finalParts(final)
	for _, p := range final.Partitions {
		f.Final += len(p.Read)
	}
	for _, p := range produces {
		switch p.Outcome {
		case history.OK:
			f.Acknowledged++
			k := tp{p.Topic, p.Partition}
			v, ok := idx[k][p.Offset]
			switch {
			case ok && v == p.Value:
				f.ReadBack++
			case !ok && incomplete(parts[k]):
				f.Unverified++
			default:
				f.Lost++
			}
		case history.Fail:
			f.Failed++
		default:
			f.Unknown++
		}
	}
	sent := sentByValue(produces)
	for value, n := range valueCounts(final) {
		if p, ok := sent[value]; ok && n > 1 && p.Writes > 1 {
			f.Retried++
		}
	}
	return f
}

// DataAcknowledged checks that every acknowledged record is in the final
// read at the offset it was acknowledged at: below the partition's high
// watermark, with that value. A partition whose final read is incomplete
// is one violation (the check cannot decide there), naming how many
// acknowledged records past what it read went unchecked.
func DataAcknowledged(produces []history.Produce, final history.DataFinal) Result {
	res := newResult("data-acknowledged")
	c := &capped{res: &res}
	idx, parts := finalIndex(final), finalParts(final)
	unchecked := map[tp]int{}
	acked, back := 0, 0
	for _, p := range produces {
		if p.Outcome != history.OK {
			continue
		}
		acked++
		k := tp{p.Topic, p.Partition}
		fp, ok := parts[k]
		var why string
		switch v, at := idx[k][p.Offset]; {
		case ok && !at && incomplete(fp):
			unchecked[k]++
			continue
		case !ok:
			why = "the partition is not in the final read"
		case at && v == p.Value:
			back++
			continue
		case at:
			why = fmt.Sprintf("the final read has %q there", v)
		case p.Offset >= fp.HighWatermark:
			why = fmt.Sprintf("the final high watermark is %d", fp.HighWatermark)
		default:
			why = "the final read has no record there"
		}
		c.add(Violation{Topic: p.Topic, Partition: p.Partition, Time: p.Complete, Ops: []int64{p.ID},
			Description: fmt.Sprintf("lost: %s-%d %q was acknowledged at offset %d (produce #%d, %s) but %s",
				p.Topic, p.Partition, p.Value, p.Offset, p.ID, p.Complete.Format("15:04:05.000"), why)})
	}
	for _, p := range final.Partitions {
		if incomplete(p) {
			c.add(Violation{Topic: p.Topic, Partition: p.Partition, Time: final.Time,
				Description: fmt.Sprintf("%s-%d: the final read is incomplete (high watermark %d, %d records read): %s; %d acknowledged records past them unchecked",
					p.Topic, p.Partition, p.HighWatermark, len(p.Read), p.ReadError, unchecked[tp{p.Topic, p.Partition}])})
		}
	}
	c.done()
	res.Checked = fmt.Sprintf("%d acknowledged records, %d read back at their offset, in %d partitions", acked, back, len(final.Partitions))
	return res
}

// DataReplicasAgree checks each partition's replicas against the final
// read below its high watermark: at every offset below it that a replica
// holds, the replica holds the record the final read has there (where the
// final read has none, what the first replica holding it has); a replica
// in the final ISR holds every offset below the high watermark. A
// replica outside the final ISR that differs is a note, not a violation:
// it may not have fetched (and truncated) since it came back.
func DataReplicasAgree(final history.DataFinal) Result {
	res := newResult("data-replicas-agree")
	c := &capped{res: &res}
	if final.Replicas == nil {
		res.add(Violation{Partition: -1, Description: "the replicas' logs were not read"})
		return res
	}
	idx := finalIndex(final)
	byPart := map[tp][]history.ReplicaLog{}
	for _, l := range final.Replicas {
		k := tp{l.Topic, l.Partition}
		byPart[k] = append(byPart[k], l)
	}
	compared := 0
	for _, p := range final.Partitions {
		k := tp{p.Topic, p.Partition}
		hw := p.HighWatermark
		ref := map[int64]string{}
		refFrom := map[int64]string{}
		for o, v := range idx[k] {
			ref[o], refFrom[o] = v, "the final read"
		}
		logs := byPart[k]
		slices.SortFunc(logs, func(a, b history.ReplicaLog) int { return int(a.Broker - b.Broker) })
		for _, l := range logs {
			if l.Error != "" {
				c.add(Violation{Topic: p.Topic, Partition: p.Partition, Brokers: []int32{l.Broker},
					Description: fmt.Sprintf("%s-%d: broker %d's log could not be read: %s", p.Topic, p.Partition, l.Broker, l.Error)})
				continue
			}
			// A replica outside the ISR may not have truncated yet (it
			// has not fetched since it came back): only the ISR is held
			// to the leader's log.
			inISR := slices.Contains(p.ISR, l.Broker)
			outside := 0
			held := map[int64]bool{}
			for _, r := range l.Records {
				held[r.Offset] = true
				if r.Offset >= hw {
					continue
				}
				compared++
				v, ok := ref[r.Offset]
				if !ok {
					ref[r.Offset], refFrom[r.Offset] = r.Value, fmt.Sprintf("broker %d", l.Broker)
					continue
				}
				if v != r.Value && !inISR {
					outside++
				} else if v != r.Value {
					c.add(Violation{Topic: p.Topic, Partition: p.Partition, Brokers: []int32{l.Broker},
						Description: fmt.Sprintf("diverged: %s-%d offset %d (below the high watermark %d): broker %d holds %q, %s %q",
							p.Topic, p.Partition, r.Offset, hw, l.Broker, r.Value, refFrom[r.Offset], v)})
				}
			}
			if outside > 0 {
				res.Notes = append(res.Notes, fmt.Sprintf("%s-%d: broker %d, outside the ISR %v, differs at %d offsets below the high watermark %d",
					p.Topic, p.Partition, l.Broker, p.ISR, outside, hw))
			}
			if !inISR {
				continue
			}
			var missing []int64
			for o := l.Start; o < hw; o++ {
				if !held[o] {
					missing = append(missing, o)
				}
			}
			if len(missing) > 0 {
				c.add(Violation{Topic: p.Topic, Partition: p.Partition, Brokers: []int32{l.Broker},
					Description: fmt.Sprintf("%s-%d: broker %d is in the ISR %v but lacks %d offsets below the high watermark %d (first %d; its log ends at %d)",
						p.Topic, p.Partition, l.Broker, p.ISR, len(missing), hw, missing[0], l.End)})
			}
		}
		for _, r := range p.Replicas {
			if !slices.ContainsFunc(logs, func(l history.ReplicaLog) bool { return l.Broker == r }) && slices.Contains(p.ISR, r) && hw > 0 {
				c.add(Violation{Topic: p.Topic, Partition: p.Partition, Brokers: []int32{r},
					Description: fmt.Sprintf("%s-%d: broker %d is in the ISR %v but has no log of it", p.Topic, p.Partition, r, p.ISR)})
			}
		}
	}
	c.done()
	res.Checked = fmt.Sprintf("%d records below the high watermark on %d replica logs of %d partitions", compared, len(final.Replicas), len(final.Partitions))
	return res
}

func sentByValue(produces []history.Produce) map[string]history.Produce {
	out := make(map[string]history.Produce, len(produces))
	for _, p := range produces {
		out[p.Value] = p
	}
	return out
}

// valueCounts is how many offsets each value is at in the final read.
func valueCounts(final history.DataFinal) map[string]int {
	out := map[string]int{}
	for _, p := range final.Partitions {
		for _, r := range p.Read {
			out[r.Value]++
		}
	}
	return out
}

// DataNoPhantoms checks every record read anywhere (by the consumers
// during the run, by the final read, in every replica's log) against the
// produces: its value was sent, to that partition, and not refused (a
// produce that failed certainly never reached a log). It also checks that
// no value is at two offsets of the final read or of one replica's log
// unless its producer wrote it more than once (there is no idempotence:
// a retry after a lost answer may append it again).
func DataNoPhantoms(produces []history.Produce, consumed []history.Record, final history.DataFinal) Result {
	res := newResult("data-no-phantoms")
	c := &capped{res: &res}
	sent := sentByValue(produces)
	type seen struct {
		where  string
		offset int64
	}
	check := func(r history.Record, where string) {
		p, ok := sent[r.Value]
		switch {
		case !ok:
			c.add(Violation{Topic: r.Topic, Partition: r.Partition, Time: r.Time,
				Description: fmt.Sprintf("never sent: %s read %s", where, r)})
		case p.Topic != r.Topic || p.Partition != r.Partition:
			c.add(Violation{Topic: r.Topic, Partition: r.Partition, Time: r.Time, Ops: []int64{p.ID},
				Description: fmt.Sprintf("misplaced: %s read %s, which produce #%d sent to %s-%d", where, r, p.ID, p.Topic, p.Partition)})
		case p.Outcome == history.Fail:
			c.add(Violation{Topic: r.Topic, Partition: r.Partition, Time: r.Time, Ops: []int64{p.ID},
				Description: fmt.Sprintf("refused yet present: %s read %s, which produce #%d was refused (%s)", where, r, p.ID, p.Error)})
		}
	}
	dups := func(recs []history.Record, where string) {
		at := map[string]int64{}
		for _, r := range recs {
			first, ok := at[r.Value]
			if !ok {
				at[r.Value] = r.Offset
				continue
			}
			if p, sentOK := sent[r.Value]; sentOK && p.Writes <= 1 {
				c.add(Violation{Topic: r.Topic, Partition: r.Partition, Ops: []int64{p.ID},
					Description: fmt.Sprintf("duplicated: %s has %q at offsets %d and %d of %s-%d, but produce #%d wrote it once",
						where, r.Value, first, r.Offset, r.Topic, r.Partition, p.ID)})
			}
		}
	}
	n := 0
	for _, r := range consumed {
		n++
		check(r, "a consumer")
	}
	for _, p := range final.Partitions {
		for _, r := range p.Read {
			n++
			check(r, "the final read")
		}
		dups(p.Read, "the final read")
	}
	for _, l := range final.Replicas {
		where := fmt.Sprintf("broker %d's log", l.Broker)
		for _, r := range l.Records {
			n++
			check(r, where)
		}
		dups(l.Records, where)
	}
	c.done()
	res.Checked = fmt.Sprintf("%d records read against %d produces", n, len(produces))
	return res
}

// DataReadsStable checks that every record a consumer read during the run
// is at its offset in the final read: consumers read below the high
// watermark only, and a committed record never changes or goes.
func DataReadsStable(consumed []history.Record, final history.DataFinal) Result {
	res := newResult("data-reads-stable")
	c := &capped{res: &res}
	idx, parts := finalIndex(final), finalParts(final)
	sorted := slices.Clone(consumed)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Time.Before(sorted[j].Time) })
	for _, r := range sorted {
		k := tp{r.Topic, r.Partition}
		fp, ok := parts[k]
		if !ok {
			c.add(Violation{Topic: r.Topic, Partition: r.Partition, Time: r.Time,
				Description: fmt.Sprintf("a consumer read %s at %s, a partition the final read lacks", r, r.Time.Format("15:04:05.000"))})
			continue
		}
		v, at := idx[k][r.Offset]
		switch {
		case at && v == r.Value:
		case at:
			c.add(Violation{Topic: r.Topic, Partition: r.Partition, Time: r.Time,
				Description: fmt.Sprintf("changed: a consumer read %s at %s; the final read has %q there", r, r.Time.Format("15:04:05.000"), v)})
		case r.Offset >= fp.HighWatermark && fp.HighWatermark >= 0:
			c.add(Violation{Topic: r.Topic, Partition: r.Partition, Time: r.Time,
				Description: fmt.Sprintf("gone: a consumer read %s at %s; the final high watermark is %d", r, r.Time.Format("15:04:05.000"), fp.HighWatermark)})
		case fp.ReadError == "":
			c.add(Violation{Topic: r.Topic, Partition: r.Partition, Time: r.Time,
				Description: fmt.Sprintf("gone: a consumer read %s at %s; the final read has no record there", r, r.Time.Format("15:04:05.000"))})
		}
	}
	c.done()
	res.Checked = fmt.Sprintf("%d records consumed during the run", len(consumed))
	return res
}
