package fsm

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// buildLargeImage fills an image with `partitions` partitions of
// replication factor 3 over 10 brokers, in topics of 100 partitions, every
// partition online with a leader and a full ISR, as a cluster in steady
// state looks. Records go straight to apply: this measures the image, not
// the codec.
func buildLargeImage(tb testing.TB, partitions int) *FSM {
	f := New(Options{})
	im := f.img
	idx := uint64(0)
	apply := func(recs ...rl.Record) {
		idx++
		if res := im.applyBatch(idx, recs, nil); res.Err() != nil {
			tb.Fatal(res.Err())
		}
	}
	for b := int32(0); b < 10; b++ {
		apply(&rl.RegisterBroker{BrokerID: b, Rack: "r"})
		apply(&rl.UnfenceBroker{BrokerID: b, BrokerEpoch: int64(idx)})
	}
	const perTopic = 100
	for tn := 0; tn*perTopic < partitions; tn++ {
		id := topicID(tn)
		recs := []rl.Record{&rl.Topic{TopicID: id, Name: "topic-" + id.String()[:8]}}
		var refs []rl.ReplicaRef
		var pids []int32
		var changes []rl.Record
		for p := int32(0); p < perTopic; p++ {
			b := int32(tn*perTopic+int(p)) % 10
			reps := []int32{b, (b + 1) % 10, (b + 2) % 10}
			recs = append(recs, &rl.Partition{TopicID: id, Partition: p, Replicas: reps})
			for _, r := range reps {
				refs = append(refs, rl.ReplicaRef{Partition: p, Broker: r})
			}
			pids = append(pids, p)
			changes = append(changes, &rl.PartitionChange{TopicID: id, Partition: p, Set: rl.ChangeLeader | rl.ChangeISR, Leader: reps[0], ISR: reps})
		}
		recs = append(recs, &rl.ReplicaStateChange{TopicID: id, State: rl.NewReplica, Replicas: refs})
		recs = append(recs, changes...)
		recs = append(recs, &rl.PartitionStateChange{TopicID: id, State: rl.OnlinePartition, Partitions: pids},
			&rl.ReplicaStateChange{TopicID: id, State: rl.OnlineReplica, Replicas: refs})
		apply(recs...)
	}
	return f
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkImage1M reports, for a 1M-partition image at replication factor
// 3: heap bytes per partition, snapshot bytes per partition, and the time
// to write a snapshot to a file and to restore it.
func BenchmarkImage1M(b *testing.B) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	for i := 0; i < b.N; i++ {
		before := heapInUse()
		f := buildLargeImage(b, n)
		after := heapInUse()
		b.ReportMetric(float64(after-before)/float64(n), "heap-B/partition")

		path := filepath.Join(b.TempDir(), "snap")
		file, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		snap, _ := f.Snapshot()
		if err := snap.(*snapshot).fr.writeTo(file); err != nil {
			b.Fatal(err)
		}
		if err := file.Sync(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "snapshot-write-ms")
		file.Close()
		st, _ := os.Stat(path)
		b.ReportMetric(float64(st.Size())/float64(n), "snapshot-B/partition")

		start = time.Now()
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		g := New(Options{})
		if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "restore-ms")

		start = time.Now()
		h1, _ := f.StateHash()
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "state-hash-ms")
		if h2, _ := g.StateHash(); h1 != h2 {
			b.Fatal("restored image hashes differently")
		}
		runtime.KeepAlive(f)
	}
}

// BenchmarkApplyPartitionChanges applies, to a 100k-partition image, an
// ISR change of every partition (one PartitionChanges record per topic),
// a partition state change and a replica state change (every replica)
// per topic, as a broker event's entries look to a voter.
func BenchmarkApplyPartitionChanges(b *testing.B) {
	const partitions, perTopic = 100_000, 100
	f := buildLargeImage(b, partitions)
	im := f.img
	idx := im.appliedIndex
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		var recs []rl.Record
		for tn := 0; tn*perTopic < partitions; tn++ {
			rec := &rl.PartitionChanges{TopicID: topicID(tn)}
			pids := make([]int32, perTopic)
			var refs []rl.ReplicaRef
			for p := int32(0); p < perTopic; p++ {
				b0 := int32(tn*perTopic+int(p)) % 10
				reps := []int32{b0, (b0 + 1) % 10, (b0 + 2) % 10}
				rec.Changes = append(rec.Changes, rl.PartitionDelta{Partition: p, PartitionEpoch: int32(1 + i), Set: rl.ChangeISR, ISR: reps[:2+i%2]})
				pids[p] = p
				for _, b := range slices.Sorted(slices.Values(reps)) {
					refs = append(refs, rl.ReplicaRef{Partition: p, Broker: b}) // in order, as the controller writes them
				}
			}
			recs = append(recs, rec, &rl.PartitionStateChange{TopicID: topicID(tn), State: rl.OnlinePartition, Partitions: pids},
				&rl.ReplicaStateChange{TopicID: topicID(tn), State: rl.OnlineReplica, Replicas: refs})
		}
		idx++
		b.StartTimer()
		if res := im.applyBatch(idx, recs, nil); res.Err() != nil {
			b.Fatal(res.Err())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*partitions), "ns/partition")
}
