package sender_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/controller"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/sender"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// nopHost applies nothing: the benchmark measures the control plane
// (encode, send, decode, fence, cache), not a broker's own work.
type nopHost struct{}

func (nopHost) BecomeLeader(broker.PartitionState)                {}
func (nopHost) BecomeFollower(broker.PartitionState)              {}
func (nopHost) StopReplica(string, rl.TopicID, int32, bool) error { return nil }

// BenchmarkFanOut sends one committed batch touching every partition of a
// large image to 9 brokers over TCP — each broker an UpdateMetadata with
// every partition and a LeaderAndIsr with the partitions it hosts
// (replication factor 3) — and measures the time until every broker's
// agent has applied it (its reported metadata offset reached the batch's).
// Brokers, senders and the benchmark share the machine's cores.
func BenchmarkFanOut(b *testing.B) {
	for _, n := range []int{30_000, 300_000} {
		b.Run(fmt.Sprintf("partitions=%d/brokers=9", n), func(b *testing.B) { benchFanOut(b, n, 9) })
	}
}

func benchFanOut(b *testing.B, partitions, brokers int) {
	const perTopic = 100
	bk := newBook()
	var agents []*broker.Agent
	var live []controller.LiveBroker
	for i := 1; i <= brokers; i++ {
		a := startAgent(b, broker.Config{BrokerID: int32(i), Host: nopHost{}, ControlLogLimit: 64})
		agents = append(agents, a)
		bk.set(int32(i), a.Addr())
		live = append(live, controller.LiveBroker{ID: int32(i), Epoch: -1, Endpoints: endpoint(a.Addr())})
	}
	p := newPool(b, bk, sender.Config{RequestTimeout: 5 * time.Minute})

	// The image: topics of 100 partitions, replicas on consecutive
	// brokers, leaders spread evenly.
	type ref struct {
		topic string
		id    rl.TopicID
	}
	var topics []ref
	for t := 0; t < partitions/perTopic; t++ {
		var id rl.TopicID
		id[0], id[1], id[2] = byte(t>>16), byte(t>>8), byte(t)
		topics = append(topics, ref{fmt.Sprintf("topic-%05d", t), id})
	}
	build := func(le int32) []controller.Requests {
		states := make([]controller.PartitionState, 0, partitions)
		hosted := make([][]*controller.PartitionState, brokers+1)
		k := 0
		for _, t := range topics {
			for part := int32(0); part < perTopic; part++ {
				reps := []int32{int32(k%brokers + 1), int32((k+1)%brokers + 1), int32((k+2)%brokers + 1)}
				st := controller.PartitionState{Topic: t.topic, TopicID: t.id, Partition: part, Leader: reps[0], LeaderEpoch: le,
					PartitionEpoch: le, ISR: reps, Replicas: reps}
				states = append(states, st) // within capacity: the address stays
				for _, r := range reps {
					hosted[r] = append(hosted[r], &states[len(states)-1])
				}
				k++
			}
		}
		h := controller.Header{ControllerID: 1, ControllerEpoch: 1, BrokerEpoch: -1, MetadataOffset: uint64(le)}
		var out []controller.Requests
		for id := 1; id <= brokers; id++ {
			out = append(out, controller.Requests{Broker: int32(id),
				LeaderAndIsr:   &controller.LeaderAndIsr{Header: h, Partitions: hosted[id], Leaders: live},
				UpdateMetadata: &controller.UpdateMetadata{Header: h, Partitions: states, LiveBrokers: live}})
		}
		return out
	}

	b.ResetTimer()
	var total, cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		le := int32(i + 1)
		reqs := build(le)
		b.StartTimer()
		start, cpu0 := time.Now(), cpuTime()
		for _, r := range reqs {
			p.Send(r)
		}
		for _, a := range agents {
			for a.Status().MetadataOffset < uint64(le) {
				time.Sleep(time.Millisecond)
			}
		}
		total += time.Since(start)
		cpu += cpuTime() - cpu0
	}
	b.StopTimer()
	for _, a := range agents {
		if n := a.NumPartitions(); n != partitions {
			b.Fatalf("broker %d caches %d partitions, want %d", a.BrokerID(), n, partitions)
		}
	}
	if s := p.Stats(); s.Total.Dropped != 0 || s.Total.Refused != 0 || s.Total.Retries != 0 {
		b.Fatalf("stats %+v", s.Total)
	}
	per := total / time.Duration(b.N)
	b.ReportMetric(float64(per.Milliseconds()), "ms/fanout")
	// CPU time of the whole process (senders, agents, GC): on a shared
	// machine it says more than the wall time.
	b.ReportMetric(float64((cpu / time.Duration(b.N)).Milliseconds()), "cpu-ms/fanout")
	b.ReportMetric(float64(partitions*brokers)/per.Seconds(), "partition-states/s")
}
