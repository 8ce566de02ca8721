package history

import (
	"fmt"
	"time"
)

// The data workload's record: every produce a producer made, every record
// a consumer read, and the end of the run's partitions as the final read
// and each replica's log saw them.

// Produce is one produce of one record (acks=all) to one partition. Its
// Value is unique in the run.
type Produce struct {
	// ID numbers the produces of a run from 1.
	ID       int64  `json:"id"`
	Producer int    `json:"producer"`
	Topic    string `json:"topic"`
	// Partition is the partition the record was sent to.
	Partition int32  `json:"partition"`
	Value     string `json:"value"`

	Invoke time.Time `json:"invoke"`
	// Complete is when the answer came; zero for Unknown.
	Complete time.Time `json:"complete,omitzero"`
	// Outcome: OK (acknowledged at Offset), Fail (certainly not in the
	// log: refused before the append), or
	// Unknown (it may be in the log or not).
	Outcome Outcome `json:"outcome"`
	// Offset is where an acknowledged record is, -1 otherwise.
	Offset int64 `json:"offset"`
	// Code is the Kafka error code the last answer carried, if any.
	Code  int16  `json:"code,omitempty"`
	Error string `json:"error,omitempty"`
	// Writes is how many produce requests carrying the record the client
	// wrote (its own retries): each may have appended it.
	Writes int `json:"writes"`
}

func (p Produce) String() string {
	s := fmt.Sprintf("produce #%d p%d %s-%d %q → %s", p.ID, p.Producer, p.Topic, p.Partition, p.Value, p.Outcome)
	switch p.Outcome {
	case OK:
		s += fmt.Sprintf(" at offset %d", p.Offset)
	default:
		if p.Error != "" {
			s += " (" + p.Error + ")"
		}
	}
	return s + fmt.Sprintf(" after %d writes [%s]", p.Writes, p.Invoke.Format("15:04:05.000"))
}

// Record is one record of a partition as some reader saw it.
type Record struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Value     string `json:"value"`
	// Time is when a consumer read it (zero for the final reads).
	Time time.Time `json:"time,omitzero"`
}

func (r Record) String() string {
	return fmt.Sprintf("%s-%d@%d %q", r.Topic, r.Partition, r.Offset, r.Value)
}

// DataPartition is one data partition at the end of the run: the
// controller's view of it after the heal, the high watermark its leader
// reported, and every record up to it as read through the leader.
type DataPartition struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr"`
	// HighWatermark is the leader's at the final read; -1 when it could
	// not be read.
	HighWatermark int64 `json:"high_watermark"`
	// Read are the records below the high watermark, in offset order, as
	// a consumer reading through the leader got them.
	Read []Record `json:"read"`
	// ReadError says why the final read is incomplete, if it is.
	ReadError string `json:"read_error,omitempty"`
}

// ReplicaLog is one replica's whole log of a partition, read from the
// broker's data directory once every process had stopped.
type ReplicaLog struct {
	Broker    int32    `json:"broker"`
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Start     int64    `json:"start"`
	End       int64    `json:"end"`
	Records   []Record `json:"records"`
	// Error says why the log could not be read whole.
	Error string `json:"error,omitempty"`
}

// DataFinal is the end of the data workload.
type DataFinal struct {
	Time       time.Time       `json:"time"`
	Partitions []DataPartition `json:"partitions"`
	// Replicas are the replicas' logs, nil when they were not read.
	Replicas []ReplicaLog `json:"replicas,omitempty"`
}
