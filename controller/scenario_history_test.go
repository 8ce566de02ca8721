package controller

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ctrlquorum/ctrlquorum/fsm"
)

// history [T | T/P] [broker=B]
//
//	Prints the transitions committed since the previous history command
//	(the state-change history every voter writes and `ctrlnode
//	state-changes` shows), one per line as "~ @INDEX (controller
//	NODE/EPOCH) [CAUSE] CHANGE", optionally only those of a topic, a partition or a
//	broker's replicas (and the broker's own).
func init() {
	scenarioCommands["history"] = (*scenario).showHistory
}

func (s *scenario) showHistory(a *scenarioArgs) ([]string, error) {
	topic, part := "", int32(-1)
	if len(a.positional) > 0 {
		topic = a.positional[0]
		if t, p, ok := strings.Cut(topic, "/"); ok {
			n, err := strconv.ParseInt(p, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("partition of %q: %v", topic, err)
			}
			topic, part = t, int32(n)
		}
		a.positional = a.positional[1:]
	}
	broker := int32(-1)
	if b, ok := a.intArg("broker"); ok {
		broker = int32(b)
	}
	if err := a.done(); err != nil {
		return nil, err
	}
	s.historyMu.Lock()
	entries := s.history[s.printedHistory:]
	s.printedHistory = len(s.history)
	s.historyMu.Unlock()
	out := []string{}
	for _, e := range entries {
		for _, ch := range e.Changes {
			if !historyMatch(ch, topic, part, broker) {
				continue
			}
			out = append(out, fmt.Sprintf("~ @%d (controller %d/%d) [%s] %s", e.Index, e.ControllerNode, e.ControllerEpoch, ch.Cause, ch.Describe()))
		}
	}
	return out, nil
}

func historyMatch(ch fsm.StateChange, topic string, part, broker int32) bool {
	switch {
	case topic != "" && ch.Topic != topic:
		return false
	case part >= 0 && ch.Partition != part:
		return false
	case broker >= 0 && ch.Broker != broker:
		return false
	}
	return true
}
