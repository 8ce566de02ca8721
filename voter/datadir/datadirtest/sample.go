// Package datadirtest writes sample voter data directories: a one-voter
// cluster, formatted, that commits a fixed run of records of every kind,
// takes a snapshot part way and stops, for the tests of what reads a data
// directory.
package datadirtest

import (
	"errors"
	"fmt"
	"time"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
	"github.com/ctrlquorum/ctrlquorum/voter"
	"github.com/ctrlquorum/ctrlquorum/voter/meta"
)

// Sample is what Write left in a directory.
type Sample struct {
	Hash      fsm.StateHash // the image's state hash at LastIndex
	LastIndex uint64        // the last index applied
	Snapshot  uint64        // the index of the snapshot taken part way
}

// Write formats dir as a cluster of one voter (node 1) and runs that voter
// with its log in store until it has committed the sample records, with a
// snapshot after the first half; then it stops the voter. The records are
// the same every time; indexes and terms are whatever raft gives them.
func Write(dir string, store rl.LogStore) (Sample, error) {
	// The stream layer listens from here on: a port closed and bound
	// again later could be taken in between by another process.
	stream, err := raftnet.NewTCPStreamLayer("127.0.0.1:0", "")
	if err != nil {
		return Sample{}, err
	}
	addr := stream.Addr().String()
	if _, err := meta.Format(dir, meta.FormatOptions{NodeID: 1, Standalone: addr, ClusterID: clusterID}); err != nil {
		_ = stream.Close()
		return Sample{}, err
	}
	f := fsm.New(fsm.Options{})
	cfg := voter.Config{NodeID: "1", BindAddr: addr, DataDir: dir, FSM: f, Stream: stream,
		Store: rl.StoreOptions{LogStore: store, WALSegmentBytes: 64 << 10}}
	voter.FastTimeouts(&cfg)
	v, err := voter.Start(cfg)
	if err != nil {
		return Sample{}, err
	}
	s, err := run(v, f)
	if err := v.Shutdown(); err != nil && s.LastIndex != 0 {
		return s, err
	}
	return s, err
}

func run(v *voter.Voter, f *fsm.FSM) (Sample, error) {
	deadline := time.Now().Add(30 * time.Second)
	for !v.IsLeader() {
		if time.Now().After(deadline) {
			return Sample{}, errors.New("datadirtest: no leader after 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	apply := func(recs ...rl.Record) (uint64, error) {
		data, err := rl.EncodeBatch(recs)
		if err != nil {
			return 0, err
		}
		fut := v.Apply(data, 10*time.Second)
		if err := fut.Error(); err != nil {
			return 0, err
		}
		switch res := fut.Response().(type) {
		case *fsm.ApplyResult:
			if res.Err() != nil {
				return 0, fmt.Errorf("datadirtest: entry %d refused: %w", fut.Index(), res.Err())
			}
		case error:
			return 0, fmt.Errorf("datadirtest: entry %d: %w", fut.Index(), res)
		}
		return fut.Index(), nil
	}
	var s Sample
	for i, step := range steps() {
		if i == snapshotAt {
			fut := v.Raft().Snapshot()
			if err := fut.Error(); err != nil {
				return s, fmt.Errorf("datadirtest: snapshot: %w", err)
			}
			meta, _, err := fut.Open()
			if err != nil {
				return s, err
			}
			s.Snapshot = meta.Index
		}
		if _, err := step(apply); err != nil {
			return s, err
		}
	}
	s.Hash, s.LastIndex = f.StateHash()
	return s, nil
}

// snapshotAt is the step before which the snapshot is taken.
const snapshotAt = 14

type applyFunc func(recs ...rl.Record) (uint64, error)

// clusterID is the sample cluster's id.
const clusterID = "c2FtcGxlLWNsdXN0ZXItaQ"

var (
	orders = rl.TopicID{0x6f, 0x72, 0x64, 0x65, 0x72, 0x73, 0x40, 0x01, 0x80, 1, 2, 3, 4, 5, 6, 7}
	events = rl.TopicID{0x65, 0x76, 0x65, 0x6e, 0x74, 0x73, 0x40, 0x02, 0x80, 1, 2, 3, 4, 5, 6, 8}
)

// steps are the sample's entries, in order; each returns its index.
func steps() []func(applyFunc) (uint64, error) {
	var epochs [4]int64
	register := func(id int32) func(applyFunc) (uint64, error) {
		return func(apply applyFunc) (uint64, error) {
			idx, err := apply(&rl.RegisterBroker{BrokerID: id, IncarnationID: rl.IncarnationID{byte(id), 1},
				Endpoints: []rl.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: uint16(9091 + id)}}, Rack: fmt.Sprintf("rack-%d", id)})
			epochs[id] = int64(idx)
			return idx, err
		}
	}
	replicas := func(t rl.TopicID, parts ...int32) []rl.ReplicaRef {
		var out []rl.ReplicaRef
		for _, p := range parts {
			for b := int32(1); b <= 3; b++ {
				out = append(out, rl.ReplicaRef{Partition: p, Broker: b})
			}
		}
		return out
	}
	newTopic := func(id rl.TopicID, name string) func(applyFunc) (uint64, error) {
		return func(apply applyFunc) (uint64, error) {
			return apply(
				&rl.Topic{TopicID: id, Name: name, Configs: []rl.ConfigEntry{{Key: "retention.ms", Value: "3600000"}}},
				&rl.Partition{TopicID: id, Partition: 0, Replicas: []int32{1, 2, 3}},
				&rl.Partition{TopicID: id, Partition: 1, Replicas: []int32{2, 3, 1}},
				&rl.ReplicaStateChange{TopicID: id, State: rl.NewReplica, Replicas: replicas(id, 0, 1)},
				&rl.PartitionChanges{TopicID: id, Changes: []rl.PartitionDelta{
					{Partition: 0, Set: rl.ChangeLeader | rl.ChangeISR, Leader: 1, ISR: []int32{1, 2, 3}},
					{Partition: 1, Set: rl.ChangeLeader | rl.ChangeISR, Leader: 2, ISR: []int32{2, 3, 1}},
				}},
				&rl.ReplicaStateChange{TopicID: id, State: rl.OnlineReplica, Replicas: replicas(id, 0, 1)},
				&rl.PartitionStateChange{TopicID: id, State: rl.OnlinePartition, Partitions: []int32{0, 1}},
			)
		}
	}
	one := func(r func() rl.Record) func(applyFunc) (uint64, error) {
		return func(apply applyFunc) (uint64, error) { return apply(r()) }
	}
	key := func(n int, b byte) []byte {
		out := make([]byte, n)
		for i := range out {
			out[i] = b + byte(i)
		}
		return out
	}
	return []func(applyFunc) (uint64, error){
		// A new cluster's first activation: its level, its epoch, its id.
		one(func() rl.Record { return &rl.FeatureLevel{Name: rl.FeatureMetadataVersion, Level: rl.LatestLevel} }),
		one(func() rl.Record { return &rl.ControllerEpoch{Epoch: 1, NodeID: 1} }),
		one(func() rl.Record { return &rl.ClusterID{ID: clusterID} }),
		register(1), register(2), register(3),
		one(func() rl.Record { return &rl.UnfenceBroker{BrokerID: 1, BrokerEpoch: epochs[1]} }),
		one(func() rl.Record { return &rl.UnfenceBroker{BrokerID: 2, BrokerEpoch: epochs[2]} }),
		one(func() rl.Record { return &rl.UnfenceBroker{BrokerID: 3, BrokerEpoch: epochs[3]} }),
		newTopic(orders, "orders"),
		one(func() rl.Record { return &rl.TopicConfig{TopicID: orders, Key: "cleanup.policy", Value: "compact"} }),
		one(func() rl.Record {
			return &rl.ScramCredential{User: "admin", Mechanism: rl.ScramSHA512, Iterations: 4096,
				Salt: key(16, 1), StoredKey: key(64, 2), ServerKey: key(64, 3)}
		}),
		one(func() rl.Record {
			return &rl.AclChange{Add: []rl.AclRule{{Principal: "User:app", Host: "*", ResourceType: rl.ResourceTopic,
				ResourceName: "orders", PatternType: rl.PatternLiteral, Operation: rl.OpRead, Permission: rl.PermissionAllow}}}
		}),
		one(func() rl.Record { return &rl.BrokerConfig{Broker: "", Key: "min.insync.replicas", Value: "2"} }),
		// the snapshot is taken here (snapshotAt)
		newTopic(events, "events"),
		one(func() rl.Record {
			return &rl.PartitionChange{TopicID: events, Partition: 0, PartitionEpoch: 1, Set: rl.ChangeISR, ISR: []int32{1, 2}}
		}),
		one(func() rl.Record { return &rl.FenceBroker{BrokerID: 3, BrokerEpoch: epochs[3]} }),
		one(func() rl.Record { return &rl.TopicConfig{TopicID: orders, Key: "retention.ms", Delete: true} }),
		one(func() rl.Record { return &rl.ControllerEpoch{Epoch: 2, NodeID: 1} }),
		one(func() rl.Record { return &rl.DeleteScramCredential{User: "admin", Mechanism: rl.ScramSHA512} }),
		one(func() rl.Record { return &rl.BeginDeleteTopic{TopicID: events} }),
	}
}
