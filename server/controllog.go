package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/ctrlquorum/ctrlquorum/broker"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// ControlLogEntry is one line of /control-log: one decision of this
// node's broker agent about a control request (broker.ControlRecord),
// with the agent's broker id and incarnation.
type ControlLogEntry struct {
	Broker int32 `json:"broker"`
	// Incarnation is the agent's incarnation id (hex): it changes at
	// every start of the process, and Seq starts again from 1.
	Incarnation     string    `json:"incarnation"`
	Seq             uint64    `json:"seq"`
	At              time.Time `json:"at"`
	Key             int16     `json:"key"`
	ControllerID    int32     `json:"controller_id"`
	ControllerEpoch int32     `json:"controller_epoch"`
	BrokerEpoch     int64     `json:"broker_epoch"`
	MetadataOffset  uint64    `json:"metadata_offset"`
	Partition       int32     `json:"partition"`
	Topic           string    `json:"topic,omitempty"`
	// TopicID is hex, "" for none.
	TopicID        string  `json:"topic_id,omitempty"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	PartitionEpoch int32   `json:"partition_epoch"`
	ISR            []int32 `json:"isr,omitempty"`
	Deleted        bool    `json:"deleted,omitempty"`
	Accepted       bool    `json:"accepted"`
	ErrorCode      int16   `json:"error_code,omitempty"`
}

// Record is the entry as the agent keeps it.
func (e ControlLogEntry) Record() broker.ControlRecord {
	r := broker.ControlRecord{
		Seq: e.Seq, At: e.At, Key: e.Key, ControllerID: e.ControllerID, ControllerEpoch: e.ControllerEpoch,
		BrokerEpoch: e.BrokerEpoch, MetadataOffset: e.MetadataOffset, Partition: e.Partition, Topic: e.Topic,
		Leader: e.Leader, LeaderEpoch: e.LeaderEpoch, PartitionEpoch: e.PartitionEpoch,
		ISR: append([]int32(nil), e.ISR...), Deleted: e.Deleted, Accepted: e.Accepted, ErrorCode: e.ErrorCode,
	}
	if e.TopicID != "" {
		if id, err := rl.ParseTopicID(e.TopicID); err == nil {
			r.TopicID = id
		}
	}
	return r
}

func controlLogEntry(brokerID int32, incarnation string, r broker.ControlRecord) ControlLogEntry {
	e := ControlLogEntry{
		Broker: brokerID, Incarnation: incarnation, Seq: r.Seq, At: r.At, Key: r.Key,
		ControllerID: r.ControllerID, ControllerEpoch: r.ControllerEpoch, BrokerEpoch: r.BrokerEpoch,
		MetadataOffset: r.MetadataOffset, Partition: r.Partition, Topic: r.Topic, Leader: r.Leader,
		LeaderEpoch: r.LeaderEpoch, PartitionEpoch: r.PartitionEpoch, ISR: r.ISR, Deleted: r.Deleted,
		Accepted: r.Accepted, ErrorCode: r.ErrorCode,
	}
	if !r.TopicID.IsZero() {
		e.TopicID = r.TopicID.String()
	}
	return e
}

// controlLogHandler serves GET /control-log: the agent's retained
// control-request records (broker.Agent.ControlLog), oldest first, as
// JSON lines (ControlLogEntry). It only reads.
//
// ?after=N leaves out the records with Seq ≤ N, so a reader can poll for
// what is new; with ?incarnation=ID as well, after applies only while the
// agent is still that incarnation (a restarted agent numbers its records
// from 1 again, and then every record is returned).
func controlLogHandler(brokerID int32, incarnation string, records func() []broker.ControlRecord) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var after uint64
		if s := q.Get("after"); s != "" {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				http.Error(w, "after: "+strconv.Quote(s)+" is not a record number", http.StatusBadRequest)
				return
			}
			after = n
		}
		if inc := q.Get("incarnation"); inc != "" && inc != incarnation {
			after = 0
		}
		w.Header().Set("Content-Type", "application/jsonl")
		w.Header().Set("X-Broker-Id", strconv.Itoa(int(brokerID)))
		w.Header().Set("X-Incarnation", incarnation)
		bw := bufio.NewWriter(w)
		enc := json.NewEncoder(bw)
		for _, rec := range records() {
			if rec.Seq <= after {
				continue
			}
			if err := enc.Encode(controlLogEntry(brokerID, incarnation, rec)); err != nil {
				return
			}
		}
		_ = bw.Flush()
	})
}

// withControlLog adds GET /control-log for the node's broker agent in
// front of h; a node without the broker role serves h alone.
func (s *Server) withControlLog(h http.Handler) http.Handler {
	a := s.Agent
	if a == nil {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle("GET /control-log", controlLogHandler(a.BrokerID(), a.IncarnationID().String(), a.ControlLog))
	mux.Handle("/", h)
	return mux
}
