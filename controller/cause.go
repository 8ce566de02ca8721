package controller

import (
	"strings"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Every event that stages records stages, ahead of them, a
// StateChangeCause naming what it handled, so that the state-change
// history every voter writes can say why each transition happened. The
// loop stages it with the event's default cause (eventCauses) before the
// handler runs, the handler refines it with work.because, and the loop
// drops it again when the event staged nothing else. A cluster below the
// level that has the record writes none.

// eventCauses are the causes of events whose handlers name none more
// precise; an event not listed is named by its own name.
var eventCauses = map[string]string{
	"activate":                      "controller activated",
	"resume":                        "work a previous controller left unfinished",
	"session-check":                 "broker session check",
	"listener-refused":              "a broker's listener refused a connection after its connection reset",
	"heartbeat":                     "broker heartbeat",
	"register-broker":               "broker registration",
	"unregister-broker":             "broker unregistration",
	"alter-partition":               "ISR change reported by a partition leader (AlterPartition)",
	"alter-partition-reassignments": "reassignment requested",
	"check-reassignments":           "reassignment progress check",
	"elect-leaders":                 "leader election requested",
	"rebalance-leaders":             "preferred-leader rebalance",
	"create-topic":                  "topic creation",
	"create-partitions":             "partitions added",
	"delete-topic":                  "topic deletion",
	"stop-replica-response":         "replica deletion answered (StopReplica)",
	"update-features":               "feature level update",
	"alter-topic-configs":           "topic config change",
}

func eventCause(name string) string {
	if c, ok := eventCauses[name]; ok {
		return c
	}
	return name
}

// because names what the event is handling, for the state-change
// history: "broker 2 fenced: session expired". Several calls in one event
// are joined with "; ", up to rl.MaxCauseBytes.
func (w *work) because(text string) {
	if w.cause == nil {
		return
	}
	if !w.causeSet {
		w.cause.Text, w.causeSet = "", true
	}
	if strings.Contains(w.cause.Text, text) {
		return
	}
	next := text
	if w.cause.Text != "" {
		next = w.cause.Text + "; " + text
	}
	if len(next) > rl.MaxCauseBytes {
		return
	}
	w.cause.Text = next
}

// stageCause stages the event's cause ahead of whatever the handler
// stages, when the finalized level allows the record.
func (w *work) stageCause(event string) {
	c := &rl.StateChangeCause{Text: eventCause(event)}
	if rl.RecordLevel(c) > w.txn.Features().MetadataLevel() {
		return
	}
	if err := w.txn.Stage(c); err != nil {
		return
	}
	w.cause = c
}

// onlyCause reports whether the event staged nothing but its cause.
func (w *work) onlyCause(before int) bool {
	return w.cause != nil && w.txn.Len() == before+1
}
