package ops

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	"github.com/ctrlquorum/ctrlquorum/fsm/statelog"
)

// HistoryStartHeader names the header of /state-changes that gives the
// index of the first line the voter retains (0: none yet).
const HistoryStartHeader = "X-History-Start"

// Partitions is the answer of /partitions.
type Partitions struct {
	Node       int32       `json:"node"`
	Index      uint64      `json:"index"`
	Partitions []Partition `json:"partitions"`
}

// Partition is a partition's state as the voter's image has it.
type Partition struct {
	Topic       string    `json:"topic"`
	Partition   int32     `json:"partition"`
	State       string    `json:"state"`
	Leader      int32     `json:"leader"`
	LeaderEpoch int32     `json:"leader_epoch"`
	ISR         []int32   `json:"isr"`
	Replicas    []Replica `json:"replicas"`
}

// Replica is one replica's state.
type Replica struct {
	Broker int32  `json:"broker"`
	State  string `json:"state"`
}

// ReadPartitions lists the partitions of f's image, of one topic if topic
// is not empty, in topic and partition order.
func ReadPartitions(node int32, f *fsm.FSM, topic string) Partitions {
	out := Partitions{Node: node, Partitions: []Partition{}}
	f.View(func(im *fsm.Image) {
		out.Index = im.AppliedIndex()
		for _, t := range im.Topics() {
			if topic != "" && t.Name != topic {
				continue
			}
			im.EachPartition(t.ID, func(i int32, p *fsm.Partition) bool {
				op := Partition{Topic: t.Name, Partition: i, State: p.State.String(), Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
					ISR: append([]int32{}, p.ISR...), Replicas: make([]Replica, len(p.Replicas))}
				for j, b := range p.Replicas {
					op.Replicas[j] = Replica{Broker: b, State: p.ReplicaStates[j].String()}
				}
				out.Partitions = append(out.Partitions, op)
				return true
			})
		}
	})
	return out
}

// serveStateChanges answers /state-changes: the lines the filter selects,
// one JSON object each, and with follow=1 the new ones as they are
// written, until the client goes away.
func serveStateChanges(w http.ResponseWriter, r *http.Request, l *statelog.Log) {
	if l == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "this node keeps no state-change log (a voter with state.change.log.enable)"})
		return
	}
	q := r.URL.Query()
	f := statelog.All
	f.Topic = q.Get("topic")
	for name, dst := range map[string]*int32{"partition": &f.Partition, "broker": &f.Broker} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 0 {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": name + " must be a non-negative number, not " + strconv.Quote(v)})
				return
			}
			*dst = int32(n)
		}
	}
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "since must be a log index, not " + strconv.Quote(v)})
			return
		}
		f.Since = n
	}
	start, err := l.Start()
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set(HistoryStartHeader, strconv.FormatUint(start, 10))
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	write := func(line statelog.Line) bool { return enc.Encode(line) == nil }
	if q.Get("follow") != "1" {
		_, _ = l.Read(f, write)
		return
	}
	if flusher != nil {
		flusher.Flush()
	}
	_ = l.Follow(r.Context().Done(), f, func(line statelog.Line) bool {
		if !write(line) {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	})
}
