package voter_test

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/voter/votertest"
)

// discardFSM accepts any entry and keeps nothing: the floor against which
// the controller's FSM is compared.
type discardFSM struct{}

func (discardFSM) Apply(*raft.Log) any                 { return nil }
func (discardFSM) ApplyBatch(logs []*raft.Log) []any   { return make([]any, len(logs)) }
func (discardFSM) Snapshot() (raft.FSMSnapshot, error) { return discardSnapshot{}, nil }
func (discardFSM) Restore(rc io.ReadCloser) error {
	_, err := io.Copy(io.Discard, rc)
	return errors.Join(err, rc.Close())
}

type discardSnapshot struct{}

func (discardSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (discardSnapshot) Release()                             {}

const (
	benchTopics       = 100
	benchPerTopic     = 100
	benchPartitions   = benchTopics * benchPerTopic
	benchBrokers      = 10
	benchApplyTimeout = 30 * time.Second
	benchRounds       = 4
)

// benchPartition is the benchmark's own record of a partition: what it
// needs to write the next PartitionChange the FSM will accept.
type benchPartition struct {
	topic    rl.TopicID
	part     int32
	replicas []int32
	leader   int // index into replicas
	epoch    int32
}

// next returns a change that moves leadership to the next replica, computed
// from the current partition epoch, and advances the epoch the change will
// leave behind. Leader, leader epoch and partition epoch all change, so the
// FSM does a leader change's full work.
func (p *benchPartition) next() *rl.PartitionChange {
	p.leader = (p.leader + 1) % len(p.replicas)
	c := &rl.PartitionChange{TopicID: p.topic, Partition: p.part, PartitionEpoch: p.epoch,
		Set: rl.ChangeLeader | rl.ChangeISR, Leader: p.replicas[p.leader], ISR: p.replicas}
	p.epoch++
	return c
}

// benchImage registers brokers and creates benchPartitions online
// partitions of replication factor 3 on the cluster, in large batches, and
// returns the partitions with their epochs.
func benchImage(b *testing.B, c *votertest.Cluster) []*benchPartition {
	b.Helper()
	leader := c.Leader(imgWaitTimeout)
	commit := func(recs []rl.Record) uint64 {
		b.Helper()
		data, err := rl.EncodeBatch(recs)
		if err != nil {
			b.Fatal(err)
		}
		f := leader.Apply(data, benchApplyTimeout)
		if err := f.Error(); err != nil {
			b.Fatal(err)
		}
		if err := f.Response().(*fsm.ApplyResult).Err(); err != nil {
			b.Fatal(err)
		}
		return f.Index()
	}
	var recs []rl.Record
	for id := int32(0); id < benchBrokers; id++ {
		recs = append(recs, &rl.RegisterBroker{BrokerID: id, Rack: "r"})
	}
	epoch := int64(commit(recs))
	recs = recs[:0]
	for id := int32(0); id < benchBrokers; id++ {
		recs = append(recs, &rl.UnfenceBroker{BrokerID: id, BrokerEpoch: epoch})
	}
	commit(recs)

	parts := make([]*benchPartition, 0, benchPartitions)
	const topicsPerEntry = 10
	for first := 0; first < benchTopics; first += topicsPerEntry {
		recs = recs[:0]
		for tn := first; tn < first+topicsPerEntry; tn++ {
			id := imgTopicID(tn + 1)
			recs = append(recs, &rl.Topic{TopicID: id, Name: fmt.Sprintf("bench-%03d", tn)})
			var refs []rl.ReplicaRef
			var pids []int32
			var changes []rl.Record
			for p := int32(0); p < benchPerTopic; p++ {
				b0 := int32(tn*benchPerTopic+int(p)) % benchBrokers
				reps := []int32{b0, (b0 + 1) % benchBrokers, (b0 + 2) % benchBrokers}
				recs = append(recs, &rl.Partition{TopicID: id, Partition: p, Replicas: reps})
				for _, r := range reps {
					refs = append(refs, rl.ReplicaRef{Partition: p, Broker: r})
				}
				pids = append(pids, p)
				changes = append(changes, &rl.PartitionChange{TopicID: id, Partition: p,
					Set: rl.ChangeLeader | rl.ChangeISR, Leader: reps[0], ISR: reps})
				parts = append(parts, &benchPartition{topic: id, part: p, replicas: reps, epoch: 1})
			}
			recs = append(recs, &rl.ReplicaStateChange{TopicID: id, State: rl.NewReplica, Replicas: refs})
			recs = append(recs, changes...)
			recs = append(recs,
				&rl.PartitionStateChange{TopicID: id, State: rl.OnlinePartition, Partitions: pids},
				&rl.ReplicaStateChange{TopicID: id, State: rl.OnlineReplica, Replicas: refs})
		}
		commit(recs)
	}
	return parts
}

// benchLoad is one measured workload: workers goroutines each propose
// entries log entries of batch records, keeping up to window of them in
// flight. window 1 is a caller that waits for each commit before the next.
type benchLoad struct {
	batch, workers, window, entries int
}

// runOurs proposes PartitionChange batches through the leader and checks
// that the FSM accepted every record. Worker w owns partitions w,
// w+workers, ...: no two workers touch one partition, so each worker can
// compute epochs on its own, and because one goroutine's proposals reach
// the log in the order it made them, it may compute a batch's epochs
// before the previous batch commits.
func runOurs(leader interface {
	Apply([]byte, time.Duration) raft.ApplyFuture
}, parts []*benchPartition, l benchLoad) (time.Duration, error) {
	owned := make([][]*benchPartition, l.workers)
	for i, p := range parts {
		owned[i%l.workers] = append(owned[i%l.workers], p)
	}
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	for w := range l.workers {
		wg.Add(1)
		go func(mine []*benchPartition) {
			defer wg.Done()
			fail := func(err error) { failed.CompareAndSwap(nil, &err) }
			var inflight []raft.ApplyFuture
			wait := func(f raft.ApplyFuture) bool {
				if err := f.Error(); err != nil {
					fail(err)
					return false
				}
				res, ok := f.Response().(*fsm.ApplyResult)
				if !ok {
					fail(fmt.Errorf("FSM answered %v", f.Response()))
					return false
				}
				if err := res.Err(); err != nil {
					fail(err)
					return false
				}
				return true
			}
			recs := make([]rl.Record, l.batch)
			cursor := 0
			for range l.entries {
				for k := range recs {
					recs[k] = mine[cursor].next()
					cursor = (cursor + 1) % len(mine)
				}
				data, err := rl.EncodeBatch(recs)
				if err != nil {
					fail(err)
					return
				}
				if len(inflight) == l.window {
					if !wait(inflight[0]) {
						return
					}
					inflight = inflight[1:]
				}
				inflight = append(inflight, leader.Apply(data, benchApplyTimeout))
			}
			for _, f := range inflight {
				if !wait(f) {
					return
				}
			}
		}(owned[w])
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return 0, *err
	}
	return time.Since(start), nil
}

// runRaw proposes the same number of entries of payload, shaped like
// runOurs, through a cluster whose FSM discards them.
func runRaw(leader interface {
	Apply([]byte, time.Duration) raft.ApplyFuture
}, payload []byte, l benchLoad) (time.Duration, error) {
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	for range l.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var inflight []raft.ApplyFuture
			for range l.entries {
				if len(inflight) == l.window {
					if err := inflight[0].Error(); err != nil {
						failed.CompareAndSwap(nil, &err)
						return
					}
					inflight = inflight[1:]
				}
				inflight = append(inflight, leader.Apply(payload, benchApplyTimeout))
			}
			for _, f := range inflight {
				if err := f.Error(); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return 0, *err
	}
	return time.Since(start), nil
}

// BenchmarkFSMCommit measures commit throughput of PartitionChange batches
// through three voters running the controller's FSM, against raw raft
// commits of payloads of the same size and count through three voters
// whose FSM does nothing, in the same run. Both clusters are real raft with
// bolt logs in temp dirs and TCP on 127.0.0.1, in this one process: all six
// voters and the load generator share this host's cores, so the absolute
// figures are a floor; the ratio ours/raw is what compares across hosts.
//
// The FSM's cluster holds 10,000 online partitions (100 topics, RF 3) over
// 10 brokers; every record is a leader change computed from the partition's
// current epoch, so each is checked and applied for real on every voter.
//
// Per sub-benchmark: ours-records/s, ours-entries/s, raw-records/s,
// raw-entries/s and ours/raw. ns/op is suppressed because an iteration runs
// both workloads and its duration means neither.
func BenchmarkFSMCommit(b *testing.B) {
	var halted atomic.Pointer[error]
	ours := votertest.NewCluster(b, 3, func(string) raft.FSM {
		return fsm.New(fsm.Options{Halt: func(err error) { halted.CompareAndSwap(nil, &err) }})
	})
	raw := votertest.NewCluster(b, 3, func(string) raft.FSM { return discardFSM{} })
	parts := benchImage(b, ours)
	oursLeader := ours.Leader(imgWaitTimeout)
	rawLeader := raw.Leader(imgWaitTimeout)

	loads := []benchLoad{
		// One record per entry: raft's own batching of concurrent
		// proposals is all there is, so many callers.
		{batch: 1, workers: 64, window: 1, entries: 200},
		{batch: 100, workers: 16, window: 1, entries: 240},
		// A batch covers every partition, so a single worker owns them
		// all and pipelines a few entries.
		{batch: benchPartitions, workers: 1, window: 4, entries: 120},
	}
	for _, l := range loads {
		b.Run(fmt.Sprintf("batch=%d", l.batch), func(b *testing.B) {
			// The raw payload is a real batch of this size, never
			// committed to our cluster: same bytes on the wire and on disk.
			probe := make([]rl.Record, l.batch)
			for k := range probe {
				cp := *parts[k]
				probe[k] = cp.next()
			}
			payload, err := rl.EncodeBatch(probe)
			if err != nil {
				b.Fatal(err)
			}
			// Ours and raw alternate in rounds, each going first in turn,
			// so that load from elsewhere on the host drifting during the
			// run weighs on both sides alike.
			round := l
			round.entries = l.entries / benchRounds
			var oursTime, rawTime time.Duration
			for range b.N {
				for r := range benchRounds {
					for side := range 2 {
						if (r+side)%2 == 0 {
							d, err := runOurs(oursLeader, parts, round)
							if err != nil {
								b.Fatalf("ours: %v", err)
							}
							oursTime += d
						} else {
							d, err := runRaw(rawLeader, payload, round)
							if err != nil {
								b.Fatalf("raw: %v", err)
							}
							rawTime += d
						}
					}
				}
			}
			if err := halted.Load(); err != nil {
				b.Fatalf("FSM halted: %v", *err)
			}
			entries := float64(b.N * benchRounds * l.workers * round.entries)
			records := entries * float64(l.batch)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(records/oursTime.Seconds(), "ours-records/s")
			b.ReportMetric(entries/oursTime.Seconds(), "ours-entries/s")
			b.ReportMetric(records/rawTime.Seconds(), "raw-records/s")
			b.ReportMetric(entries/rawTime.Seconds(), "raw-entries/s")
			b.ReportMetric(rawTime.Seconds()/oursTime.Seconds(), "ours/raw")
			b.ReportMetric(float64(len(payload)), "entry-bytes")
		})
	}
}
