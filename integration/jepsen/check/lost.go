package check

import (
	"fmt"
	"sort"
	"time"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

// FinalRead is the cluster's topics as read after the cluster healed and
// every client stopped: every topic present, by name. Topics the caller
// does not care about (internal ones) should be left out.
type FinalRead struct {
	Time   time.Time                    `json:"time"`
	Topics map[string]history.TopicInfo `json:"topics"`
	// Deleting are the topics the last deletion probe found still being
	// deleted: names still taken (a validate-only create was answered
	// TOPIC_ALREADY_EXISTS) that a list right after did not show.
	Deleting []string `json:"deleting,omitempty"`
	// Probed is when that probe was answered; zero when no probe was.
	Probed time.Time `json:"probed,omitzero"`
}

// LostWrites checks that every acknowledged creation and deletion survived:
// for each topic, the last acknowledged create or delete must decide the
// final read, unless some later or concurrent call that may have taken
// effect (acknowledged, failed with a code that leaves the outcome open,
// or unanswered) explains the final state instead. A topic present at the
// end that no call ever tried to create is reported too, as is one whose
// topic id is not the one its acknowledged creation returned.
func LostWrites(ops []history.Op, final FinalRead) Result {
	res := newResult("lost-writes")
	byTopic := map[string][]history.Op{}
	for _, op := range ops {
		if op.Topic == "" || op.Kind == history.List {
			continue
		}
		if !final.Time.IsZero() && op.Invoke.After(final.Time) {
			continue
		}
		byTopic[op.Topic] = append(byTopic[op.Topic], op)
	}
	for name := range final.Topics {
		if _, ok := byTopic[name]; !ok {
			byTopic[name] = nil
		}
	}
	topics := make([]string, 0, len(byTopic))
	for t := range byTopic {
		topics = append(topics, t)
	}
	sort.Strings(topics)

	acked := 0
	for _, topic := range topics {
		info, isPresent := final.Topics[topic]
		var muts []history.Op // creates and deletes that may have taken effect
		tried := false
		for _, op := range byTopic[topic] {
			if op.Kind != history.Create && op.Kind != history.Delete {
				continue
			}
			if op.Kind == history.Create {
				tried = true
			}
			if op.Outcome == history.OK || !Definite(op) {
				muts = append(muts, op)
			}
		}
		if isPresent && !tried {
			res.add(Violation{Topic: topic, Partition: -1, Time: final.Time,
				Description: fmt.Sprintf("topic %q is present in the final read but no call ever tried to create it", topic)})
			continue
		}
		// The acknowledged mutation that completed last.
		var last *history.Op
		for i := range muts {
			op := &muts[i]
			if op.Outcome != history.OK {
				continue
			}
			acked++
			if last == nil || op.Complete.After(last.Complete) {
				last = op
			}
		}
		if last == nil {
			continue
		}
		// Every mutation not known to have finished before last began may
		// be the one linearized last.
		var candidates []history.Op
		for _, op := range muts {
			if op.ID == last.ID {
				continue
			}
			if op.Outcome == history.OK && op.Complete.Before(last.Invoke) {
				continue
			}
			candidates = append(candidates, op)
		}
		explained := func(op history.Op) bool {
			if op.Kind == history.Delete {
				return !isPresent
			}
			if !isPresent {
				return false
			}
			// A create explains a present topic only with its own id.
			id := ""
			if op.Outcome == history.OK && op.Result != nil {
				id = op.Result.TopicID
			}
			return id == "" || info.TopicID == "" || id == info.TopicID
		}
		if explained(*last) {
			continue
		}
		ok := false
		for _, c := range candidates {
			if explained(c) {
				ok = true
				break
			}
		}
		if ok {
			continue
		}
		v := Violation{Topic: topic, Partition: -1, Time: last.Complete, Ops: []int64{last.ID}}
		switch {
		case last.Kind == history.Create && !isPresent:
			v.Description = fmt.Sprintf("acknowledged creation of %q lost: %s, but the final read has no such topic and no later call deleted it", topic, last)
		case last.Kind == history.Create:
			v.Description = fmt.Sprintf("acknowledged creation of %q replaced: %s returned id %s, the final read shows id %s and no later call created it again",
				topic, last, last.Result.TopicID, info.TopicID)
		default:
			v.Description = fmt.Sprintf("acknowledged deletion of %q lost: %s, but the final read still has the topic (id %s) and no later call created it",
				topic, last, info.TopicID)
		}
		res.add(v)
	}
	res.Checked = fmt.Sprintf("%d acknowledged creations and deletions over %d topics; final read has %d topics", acked, len(topics), len(final.Topics))
	return res
}
