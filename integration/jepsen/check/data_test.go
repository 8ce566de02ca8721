package check

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

// dataRun builds a data history on partition d-0 (replicas 1, 2, 3, all
// in the ISR): produces acknowledged at offsets 0..n-1 with values
// v0..v(n-1), every replica holding them all, the final read too, and a
// consumer that read them.
type dataRun struct {
	produces []history.Produce
	consumed []history.Record
	final    history.DataFinal
}

func rec(offset int64, value string) history.Record {
	return history.Record{Topic: "d", Partition: 0, Offset: offset, Value: value, Time: at(int(100 + offset))}
}

func goodData(n int) *dataRun {
	d := &dataRun{}
	var recs []history.Record
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("v%d", i)
		d.produces = append(d.produces, history.Produce{ID: int64(i + 1), Topic: "d", Partition: 0, Value: v,
			Invoke: at(i), Complete: at(i + 1), Outcome: history.OK, Offset: int64(i), Writes: 1})
		recs = append(recs, rec(int64(i), v))
	}
	d.consumed = append(d.consumed, recs...)
	final := make([]history.Record, len(recs))
	for i, r := range recs {
		r.Time = at(0).AddDate(-1, 0, 0)
		final[i] = r
	}
	d.final = history.DataFinal{Time: at(1000), Partitions: []history.DataPartition{{Topic: "d", Partition: 0, Leader: 1,
		Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, HighWatermark: int64(n), Read: final}}}
	for b := int32(1); b <= 3; b++ {
		d.final.Replicas = append(d.final.Replicas, history.ReplicaLog{Broker: b, Topic: "d", Partition: 0, Start: 0, End: int64(n),
			Records: append([]history.Record(nil), final...)})
	}
	return d
}

func (d *dataRun) all() []Result {
	return []Result{DataAcknowledged(d.produces, d.final), DataReplicasAgree(d.final),
		DataNoPhantoms(d.produces, d.consumed, d.final), DataReadsStable(d.consumed, d.final)}
}

// expectOnly checks that the named checker fails with a violation saying
// want, and the others pass.
func expectOnly(t *testing.T, d *dataRun, checker, want string) {
	t.Helper()
	for _, r := range d.all() {
		if r.Checker != checker {
			if !r.Valid {
				t.Errorf("%s failed too:\n%s", r.Checker, r)
			}
			continue
		}
		if r.Valid {
			t.Errorf("%s passed a bad history", checker)
			continue
		}
		if !strings.Contains(r.Violations[0].Description, want) {
			t.Errorf("%s: violation %q does not say %q", checker, r.Violations[0].Description, want)
		}
	}
}

func TestDataCheckersPassAGoodHistory(t *testing.T) {
	d := goodData(5)
	// An unknown produce that did reach the log, one that did not, and
	// one refused before the append are all fine.
	d.produces = append(d.produces,
		history.Produce{ID: 6, Topic: "d", Value: "u1", Invoke: at(9), Outcome: history.Unknown, Offset: -1, Writes: 1},
		history.Produce{ID: 7, Topic: "d", Value: "u2", Invoke: at(9), Outcome: history.Unknown, Offset: -1, Writes: 1},
		history.Produce{ID: 8, Topic: "d", Value: "f1", Invoke: at(9), Complete: at(10), Outcome: history.Fail, Offset: -1, Writes: 1, Code: 19})
	u := rec(5, "u1")
	d.final.Partitions[0].Read = append(d.final.Partitions[0].Read, u)
	d.final.Partitions[0].HighWatermark = 6
	for i := range d.final.Replicas {
		d.final.Replicas[i].Records = append(d.final.Replicas[i].Records, u)
		d.final.Replicas[i].End = 6
	}
	// A follower's log may run past the high watermark.
	d.final.Replicas[2].Records = append(d.final.Replicas[2].Records, rec(6, "u2"))
	for _, r := range d.all() {
		if !r.Valid {
			t.Errorf("%s", r)
		}
	}
	f := Figures(d.produces, d.consumed, d.final)
	if f.Acknowledged != 5 || f.ReadBack != 5 || f.Lost != 0 || f.Unknown != 2 || f.Failed != 1 || f.Final != 6 || f.Consumed != 5 {
		t.Errorf("figures: %s", f)
	}
}

func TestDataAcknowledgedFindsLostRecords(t *testing.T) {
	// The final read ends before an acknowledged record (a leader that
	// acknowledged before its followers had it, then lost the tail).
	d := goodData(5)
	d.final.Partitions[0].Read = d.final.Partitions[0].Read[:3]
	d.final.Partitions[0].HighWatermark = 3
	for i := range d.final.Replicas {
		d.final.Replicas[i].Records = d.final.Replicas[i].Records[:3]
		d.final.Replicas[i].End = 3
	}
	d.consumed = d.consumed[:3]
	expectOnly(t, d, "data-acknowledged", `lost: d-0 "v3" was acknowledged at offset 3`)
	if f := Figures(d.produces, d.consumed, d.final); f.Lost != 2 || f.ReadBack != 3 {
		t.Errorf("figures: %s", f)
	}

	// Another record at the acknowledged offset (an unclean leader's).
	d = goodData(3)
	d.produces = append(d.produces, history.Produce{ID: 9, Topic: "d", Value: "w", Invoke: at(5), Outcome: history.Unknown, Offset: -1, Writes: 1})
	d.final.Partitions[0].Read[2].Value = "w"
	for i := range d.final.Replicas {
		d.final.Replicas[i].Records[2].Value = "w"
	}
	d.consumed = d.consumed[:2]
	expectOnly(t, d, "data-acknowledged", `the final read has "w" there`)
}

func TestDataReplicasAgreeFindsDivergence(t *testing.T) {
	// Broker 3 kept a record the leader does not have at offset 2 (its
	// truncation was skipped).
	d := goodData(4)
	d.produces = append(d.produces, history.Produce{ID: 9, Topic: "d", Value: "stale", Invoke: at(1), Outcome: history.Unknown, Offset: -1, Writes: 1})
	d.final.Replicas[2].Records[2].Value = "stale"
	expectOnly(t, d, "data-replicas-agree", `diverged: d-0 offset 2 (below the high watermark 4): broker 3 holds "stale", the final read "v2"`)

	// The same replica outside the ISR (it has not come back yet) is a
	// note only.
	d.final.Partitions[0].ISR = []int32{1, 2}
	r := DataReplicasAgree(d.final)
	if !r.Valid || len(r.Notes) != 1 {
		t.Errorf("outside the ISR: %s", r)
	}

	// A replica in the ISR that lacks records below the high watermark.
	d = goodData(4)
	d.final.Replicas[1].Records = d.final.Replicas[1].Records[:2]
	d.final.Replicas[1].End = 2
	expectOnly(t, d, "data-replicas-agree", "broker 2 is in the ISR [1 2 3] but lacks 2 offsets below the high watermark 4")
}

func TestDataNoPhantomsFindsRecordsNeverSent(t *testing.T) {
	d := goodData(3)
	d.consumed = append(d.consumed, rec(3, "ghost"))
	d.final.Partitions[0].Read = append(d.final.Partitions[0].Read, rec(3, "ghost"))
	d.final.Partitions[0].HighWatermark = 4
	for i := range d.final.Replicas {
		d.final.Replicas[i].Records = append(d.final.Replicas[i].Records, rec(3, "ghost"))
	}
	expectOnly(t, d, "data-no-phantoms", `never sent: a consumer read d-0@3 "ghost"`)

	// A value at two offsets that its producer wrote once.
	d = goodData(3)
	dup := rec(3, "v1")
	d.final.Partitions[0].Read = append(d.final.Partitions[0].Read, dup)
	d.final.Partitions[0].HighWatermark = 4
	for i := range d.final.Replicas {
		d.final.Replicas[i].Records = append(d.final.Replicas[i].Records, dup)
	}
	expectOnly(t, d, "data-no-phantoms", `duplicated: the final read has "v1" at offsets 1 and 3 of d-0, but produce #2 wrote it once`)
	// Written twice (the producer's retry): allowed, and counted.
	d.produces[1].Writes = 2
	for _, r := range d.all() {
		if !r.Valid {
			t.Errorf("a retried duplicate: %s", r)
		}
	}
	if f := Figures(d.produces, d.consumed, d.final); f.Retried != 1 {
		t.Errorf("figures: %s", f)
	}

	// A record whose produce was refused before the append.
	d = goodData(3)
	d.produces[2].Outcome, d.produces[2].Code, d.produces[2].Error, d.produces[2].Offset = history.Fail, 19, "NOT_ENOUGH_REPLICAS", -1
	expectOnly(t, d, "data-no-phantoms", `refused yet present: a consumer read d-0@2 "v2"`)
}

func TestDataReadsStableFindsChangedCommittedRecords(t *testing.T) {
	// A consumer read v2 at offset 2; at the end offset 2 holds another
	// record (a follower without truncation led, and its stale record
	// became the partition's).
	d := goodData(3)
	d.produces = append(d.produces, history.Produce{ID: 9, Topic: "d", Value: "x", Invoke: at(1), Outcome: history.Unknown, Offset: -1, Writes: 1})
	d.produces[2].Outcome, d.produces[2].Offset = history.Unknown, -1
	d.final.Partitions[0].Read[2].Value = "x"
	for i := range d.final.Replicas {
		d.final.Replicas[i].Records[2].Value = "x"
	}
	expectOnly(t, d, "data-reads-stable", `changed: a consumer read d-0@2 "v2"`)

	// The high watermark went back below what a consumer read.
	d = goodData(3)
	d.produces[2].Outcome, d.produces[2].Offset = history.Unknown, -1
	d.final.Partitions[0].Read = d.final.Partitions[0].Read[:2]
	d.final.Partitions[0].HighWatermark = 2
	for i := range d.final.Replicas {
		d.final.Replicas[i].Records = d.final.Replicas[i].Records[:2]
		d.final.Replicas[i].End = 2
	}
	expectOnly(t, d, "data-reads-stable", "gone: a consumer read d-0@2")
}

func TestDataViolationsCapped(t *testing.T) {
	d := goodData(maxDataViolations + 10)
	d.final.Partitions[0].Read = nil
	d.final.Partitions[0].HighWatermark = 0
	r := DataAcknowledged(d.produces, d.final)
	if len(r.Violations) != maxDataViolations+1 || !strings.Contains(r.Violations[maxDataViolations].Description, "and 10 more") {
		t.Errorf("%d violations, last %v", len(r.Violations), r.Violations[len(r.Violations)-1])
	}
}

// TestDataAcknowledgedIncompleteRead: a partition whose final read could
// not get its high watermark is one violation, and its acknowledged
// records are unverified, not lost.
func TestDataAcknowledgedIncompleteRead(t *testing.T) {
	d := goodData(4)
	d.final.Partitions[0].Read = d.final.Partitions[0].Read[:1]
	d.final.Partitions[0].ReadError = "no high watermark listed"
	r := DataAcknowledged(d.produces, d.final)
	if r.Valid || len(r.Violations) != 1 || !strings.Contains(r.Violations[0].Description, "the final read is incomplete") ||
		!strings.Contains(r.Violations[0].Description, "3 acknowledged records past them unchecked") {
		t.Errorf("%s", r)
	}
	if f := Figures(d.produces, d.consumed, d.final); f.ReadBack != 1 || f.Lost != 0 || f.Unverified != 3 {
		t.Errorf("figures: %s", f)
	}
}
