package jepsen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker/partlog"
	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

// The data workload: producers with acks=all and no idempotence write
// records with unique values to the data topics, a consumer reads every
// partition from the start, and at the end the partitions are read whole
// through their leaders and, once every process has stopped, from each
// replica's data directory. The admin workload touches only topics named
// jt-*, so it never deletes, reassigns or elects the data topics.
const (
	dataTopicPrefix = "jd-"
	numDataTopics   = 2
	dataPartitions  = 3
	dataRF          = 3
	// dataMinISR is min.insync.replicas of the data topics (and the
	// brokers' default): an acks=all record is acknowledged once two
	// replicas have it.
	dataMinISR    = 2
	numProducers  = 3
	produceWithin = 6 * time.Second
)

func dataTopics() []string {
	out := make([]string, numDataTopics)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", dataTopicPrefix, i)
	}
	return out
}

// brokerListeners are every broker's listener, for the data clients.
func (l layout) brokerListeners() []string {
	var out []string
	for _, id := range l.brokerIDs() {
		out = append(out, l.brokerAgents()[id])
	}
	return out
}

// createDataTopics creates the data topics (RF 3, min.insync.replicas 2)
// at the active controller, retrying until each exists.
func createDataTopics(ctx context.Context, cl *kgo.Client) error {
	adm := kadm.NewClient(cl)
	minISR := fmt.Sprint(dataMinISR)
	for _, name := range dataTopics() {
		for {
			resps, err := adm.CreateTopics(ctx, dataPartitions, dataRF, map[string]*string{"min.insync.replicas": &minISR}, name)
			if err == nil {
				r := resps[name]
				if err = r.Err; errors.Is(err, kerr.TopicAlreadyExists) {
					err = nil
				}
			}
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("creating data topic %s: %w (%v)", name, ctx.Err(), err)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// dataRecorder keeps the produces and the consumed records, writing
// each produce to a sink as it completes.
type dataRecorder struct {
	now func() time.Time

	mu       sync.Mutex
	produces []*history.Produce
	consumed []history.Record
	sink     io.Writer
	sinkErr  error
}

func (r *dataRecorder) invoke(producer int, topic string, part int32, value string) *history.Produce {
	p := &history.Produce{Producer: producer, Topic: topic, Partition: part, Value: value, Invoke: r.now(), Outcome: history.Unknown, Offset: -1}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.produces = append(r.produces, p)
	p.ID = int64(len(r.produces))
	return p
}

// notAppended are the produce errors a leader answers before it appends
// anything (NOT_ENOUGH_REPLICAS) or that no leader answers at all: the
// record is certainly not in the log when the request was written once.
// Every other error (a timeout, NOT_LEADER_OR_FOLLOWER answered to a
// record appended before the leader changed, …) leaves it open.
var notAppended = []int16{kerr.NotEnoughReplicas.Code, kerr.UnknownTopicOrPartition.Code}

// finish completes p: acknowledged at offset when err is nil; failed when
// the only request carrying it was refused before the append; unknown
// otherwise. A failure with no write counted is unknown too: franz-go
// fails a partition's buffered records when its metadata goes bad (a
// topic without all its partitions, say), including a batch that a
// produce request is writing at that moment, and the write hook runs
// after the write; such a record was read back at an offset by every
// reader in one run.
func (r *dataRecorder) finish(p *history.Produce, offset int64, err error, writes int) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	p.Writes = writes
	var ke *kerr.Error
	switch {
	case err == nil:
		p.Outcome, p.Offset, p.Complete = history.OK, offset, now
	case errors.As(err, &ke) && writes <= 1 && slices.Contains(notAppended, ke.Code):
		p.Outcome, p.Complete, p.Code, p.Error = history.Fail, now, ke.Code, err.Error()
	default:
		p.Error = err.Error()
		if errors.As(err, &ke) {
			p.Code = ke.Code
		}
	}
	if r.sink != nil && r.sinkErr == nil {
		r.sinkErr = history.WriteJSONL(r.sink, []history.Produce{*p})
	}
}

func (r *dataRecorder) consume(recs []history.Record) {
	r.mu.Lock()
	r.consumed = append(r.consumed, recs...)
	r.mu.Unlock()
}

func (r *dataRecorder) all() ([]history.Produce, []history.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ps := make([]history.Produce, len(r.produces))
	for i, p := range r.produces {
		ps[i] = *p
	}
	return ps, slices.Clone(r.consumed)
}

// ackedSince reports whether a record was acknowledged after t.
func (r *dataRecorder) ackedSince(t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range slices.Backward(r.produces) {
		if p.Outcome == history.OK && p.Complete.After(t) {
			return true
		}
	}
	return false
}

func (r *dataRecorder) counts() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	by := map[history.Outcome]int{}
	for _, p := range r.produces {
		by[p.Outcome]++
	}
	return fmt.Sprintf("%d produces (ok %d, fail %d, unknown %d), %d records consumed", len(r.produces), by[history.OK], by[history.Fail], by[history.Unknown], len(r.consumed))
}

// dataClient is a franz-go client of the data workload, bootstrapped at
// the brokers.
func dataClient(seeds []string, id string, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.Dialer(clientDialer.DialContext),
		kgo.ClientID(id),
		kgo.RequestTimeoutOverhead(2 * time.Second),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.MetadataMaxAge(2 * time.Second),
	}, opts...)...)
}

// producer sends one record at a time, so that every produce request its
// client writes carries that record: the write count says how many times
// it may have been appended.
type producer struct {
	id    int
	cl    *kgo.Client
	hook  *attempts
	rng   *rand.Rand
	seq   int
	parts []kgo.Record
}

func newProducer(id int, seeds []string, seed uint64) (*producer, error) {
	hook := &attempts{}
	cl, err := dataClient(seeds, fmt.Sprintf("jepsen-producer-%d", id),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordDeliveryTimeout(produceWithin), kgo.ProduceRequestTimeout(4*time.Second),
		kgo.WithHooks(hook))
	if err != nil {
		return nil, err
	}
	p := &producer{id: id, cl: cl, hook: hook, rng: rand.New(rand.NewPCG(seed, uint64(1000+id)))}
	for _, t := range dataTopics() {
		for i := int32(0); i < dataPartitions; i++ {
			p.parts = append(p.parts, kgo.Record{Topic: t, Partition: i})
		}
	}
	return p, nil
}

func (p *producer) one(dr *dataRecorder) {
	r := p.parts[p.rng.IntN(len(p.parts))]
	p.seq++
	r.Value = fmt.Appendf(nil, "p%d-%d", p.id, p.seq)
	p.hook.watch(0) // Produce
	pr := dr.invoke(p.id, r.Topic, r.Partition, string(r.Value))
	ctx, cancel := context.WithTimeout(context.Background(), produceWithin+2*time.Second)
	err := p.cl.ProduceSync(ctx, &r).FirstErr()
	cancel()
	writes, _ := p.hook.result()
	dr.finish(pr, r.Offset, err, writes)
}

// consumer reads every data partition from the start, as a consumer
// without a group does (direct partition assignment).
func newConsumer(seeds []string, id string) (*kgo.Client, error) {
	parts := map[string]map[int32]kgo.Offset{}
	for _, t := range dataTopics() {
		parts[t] = map[int32]kgo.Offset{}
		for i := int32(0); i < dataPartitions; i++ {
			parts[t][i] = kgo.NewOffset().AtStart()
		}
	}
	return dataClient(seeds, id, kgo.ConsumePartitions(parts), kgo.FetchMaxWait(500*time.Millisecond))
}

func recordOf(r *kgo.Record, at time.Time) history.Record {
	return history.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value), Time: at}
}

// dataLoad runs the producers and the consumer.
type dataLoad struct {
	rec       *dataRecorder
	producers []*producer
	consumer  *kgo.Client
	stop      chan struct{}
	wg        sync.WaitGroup
	once      sync.Once
}

func startDataLoad(seeds []string, dr *dataRecorder, seed uint64) (*dataLoad, error) {
	dl := &dataLoad{rec: dr, stop: make(chan struct{})}
	for i := 0; i < numProducers; i++ {
		p, err := newProducer(i, seeds, seed)
		if err != nil {
			dl.halt()
			return nil, err
		}
		dl.producers = append(dl.producers, p)
	}
	c, err := newConsumer(seeds, "jepsen-consumer")
	if err != nil {
		dl.halt()
		return nil, err
	}
	dl.consumer = c
	for _, p := range dl.producers {
		dl.wg.Add(1)
		go func() {
			defer dl.wg.Done()
			for {
				select {
				case <-dl.stop:
					return
				default:
				}
				p.one(dr)
				t := time.NewTimer(time.Duration(5+p.rng.IntN(20)) * time.Millisecond)
				select {
				case <-dl.stop:
					t.Stop()
					return
				case <-t.C:
				}
			}
		}()
	}
	dl.wg.Add(1)
	go func() {
		defer dl.wg.Done()
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-dl.stop
			cancel()
		}()
		for ctx.Err() == nil {
			fs := c.PollFetches(ctx)
			now := dr.now()
			var recs []history.Record
			fs.EachRecord(func(r *kgo.Record) { recs = append(recs, recordOf(r, now)) })
			dr.consume(recs)
		}
	}()
	return dl, nil
}

// halt stops the producers once their produce in flight has ended, and
// the consumer, and closes their clients.
func (dl *dataLoad) halt() {
	dl.once.Do(func() {
		close(dl.stop)
		dl.wg.Wait()
		for _, p := range dl.producers {
			p.cl.Close()
		}
		if dl.consumer != nil {
			dl.consumer.Close()
		}
	})
}

// dataPartitionStates reads the data partitions' leader, replicas and ISR
// from the active controller.
func dataPartitionStates(ctx context.Context, cl *kgo.Client, intN func(int) int) ([]history.DataPartition, error) {
	resp, _, err := controllerMetadata(ctx, cl, dataTopics(), intN)
	if err != nil {
		return nil, err
	}
	var out []history.DataPartition
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		if t.ErrorCode != 0 {
			return nil, fmt.Errorf("%s: %v", *t.Topic, kerr.ErrorForCode(t.ErrorCode))
		}
		for _, p := range t.Partitions {
			isr := slices.Clone(p.ISR)
			slices.Sort(isr)
			out = append(out, history.DataPartition{Topic: *t.Topic, Partition: p.Partition, Leader: p.Leader,
				Replicas: slices.Clone(p.Replicas), ISR: isr, HighWatermark: -1})
		}
	}
	sortDataPartitions(out)
	if len(out) != numDataTopics*dataPartitions {
		return out, fmt.Errorf("%d data partitions in the controller's metadata, want %d", len(out), numDataTopics*dataPartitions)
	}
	return out, nil
}

func sortDataPartitions(ps []history.DataPartition) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Topic != ps[j].Topic {
			return ps[i].Topic < ps[j].Topic
		}
		return ps[i].Partition < ps[j].Partition
	})
}

// awaitFullISR waits until every data partition is led with every
// replica in its ISR (the followers caught up after the heal), and returns
// the last states read, with why they are not so if the wait ran out.
func awaitFullISR(cl *kgo.Client, intN func(int) int, timeout time.Duration) ([]history.DataPartition, string) {
	var states []history.DataPartition
	why := waitUntil(timeout, func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		defer cancel()
		var err error
		if states, err = dataPartitionStates(ctx, cl, intN); err != nil {
			return err.Error()
		}
		for _, p := range states {
			if p.Leader < 0 || len(p.ISR) != len(p.Replicas) {
				return fmt.Sprintf("%s-%d: leader %d, ISR %v of replicas %v", p.Topic, p.Partition, p.Leader, p.ISR, p.Replicas)
			}
		}
		return ""
	})
	return states, why
}

// finalDataRead reads every data partition whole through its leader: its
// high watermark (ListOffsets, latest), then every record below it, from
// the start.
func finalDataRead(seeds []string, states []history.DataPartition, timeout time.Duration) []history.DataPartition {
	out := slices.Clone(states)
	cl, err := dataClient(seeds, "jepsen-final-read")
	if err != nil {
		for i := range out {
			out[i].ReadError = err.Error()
		}
		return out
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ends := listEnds(ctx, cl)
	parts := map[string]map[int32]kgo.Offset{}
	want := map[tp]int64{}
	for i := range out {
		p := &out[i]
		o, ok := ends[tp{p.Topic, p.Partition}]
		switch {
		case !ok:
			p.ReadError = "no high watermark listed"
		case o.Err != nil:
			p.ReadError = "listing the high watermark: " + o.Err.Error()
		default:
			p.HighWatermark = o.Offset
			p.Read = []history.Record{}
			if o.Offset > 0 {
				if parts[p.Topic] == nil {
					parts[p.Topic] = map[int32]kgo.Offset{}
				}
				parts[p.Topic][p.Partition] = kgo.NewOffset().AtStart()
				want[tp{p.Topic, p.Partition}] = o.Offset
			}
		}
	}
	if len(want) == 0 {
		return out
	}
	cons, err := dataClient(seeds, "jepsen-final-consumer", kgo.ConsumePartitions(parts), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		for i := range out {
			out[i].ReadError = err.Error()
		}
		return out
	}
	defer cons.Close()
	got := map[tp][]history.Record{}
	next := map[tp]int64{}
	for len(want) > 0 && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			k := tp{r.Topic, r.Partition}
			end, ok := want[k]
			if !ok || r.Offset >= end {
				return
			}
			got[k] = append(got[k], recordOf(r, time.Time{}))
			next[k] = r.Offset + 1
			if next[k] >= end {
				delete(want, k)
			}
		})
	}
	for i := range out {
		p := &out[i]
		k := tp{p.Topic, p.Partition}
		p.Read = append(p.Read, got[k]...)
		if end, ok := want[k]; ok {
			p.ReadError = fmt.Sprintf("read up to offset %d of %d in %s: %v", next[k], end, timeout, ctx.Err())
		}
	}
	return out
}

type tp struct {
	topic string
	part  int32
}

// listEnds lists every data partition's high watermark at its leader
// (ListOffsets, latest), asking again for the partitions not listed yet
// until each is or ctx ends: a broker's Metadata answer may trail the
// controller's, and a leader may not answer at once.
func listEnds(ctx context.Context, cl *kgo.Client) map[tp]kadm.ListedOffset {
	adm := kadm.NewClient(cl)
	out := map[tp]kadm.ListedOffset{}
	for {
		listed, err := adm.ListEndOffsets(ctx, dataTopics()...)
		if err == nil || listed != nil {
			listed.Each(func(o kadm.ListedOffset) {
				if prev, ok := out[tp{o.Topic, o.Partition}]; !ok || prev.Err != nil {
					out[tp{o.Topic, o.Partition}] = o
				}
			})
		}
		done := len(out) == numDataTopics*dataPartitions
		for _, o := range out {
			done = done && o.Err == nil
		}
		if done {
			return out
		}
		cl.ForceMetadataRefresh()
		select {
		case <-ctx.Done():
			return out
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// readReplicaLogs reads every data partition's log from each broker's
// data directory. The brokers must have stopped.
func readReplicaLogs(dataDir string, brokers []int32) []history.ReplicaLog {
	out := []history.ReplicaLog{}
	for _, b := range brokers {
		for _, t := range dataTopics() {
			for i := int32(0); i < dataPartitions; i++ {
				dir := filepath.Join(brokerDataDir(dataDir, b), fmt.Sprintf("%s-%d", t, i))
				if _, err := os.Stat(dir); err != nil {
					continue // not a replica of it
				}
				l := history.ReplicaLog{Broker: b, Topic: t, Partition: i, Records: []history.Record{}}
				if err := readReplicaLog(dir, &l); err != nil {
					l.Error = err.Error()
				}
				out = append(out, l)
			}
		}
	}
	return out
}

func readReplicaLog(dir string, out *history.ReplicaLog) error {
	id, err := partlog.TopicID(dir)
	if err != nil {
		return err
	}
	l, err := partlog.Open(dir, partlog.Config{TopicID: id})
	if err != nil {
		return err
	}
	defer l.Close()
	out.Start, out.End = l.StartOffset(), l.EndOffset()
	for o := l.StartOffset(); o < l.EndOffset(); {
		b, err := l.Read(o, l.EndOffset(), 1<<20)
		if err != nil {
			return fmt.Errorf("reading at offset %d: %w", o, err)
		}
		batches, err := partlog.ParseBatches(b)
		if err != nil || len(batches) == 0 {
			return fmt.Errorf("reading at offset %d: %d batches, %v", o, len(batches), err)
		}
		for _, bt := range batches {
			recs, err := batchRecords(bt.Bytes)
			if err != nil {
				return fmt.Errorf("batch at offset %d: %w", bt.BaseOffset, err)
			}
			for _, r := range recs {
				out.Records = append(out.Records, history.Record{Topic: out.Topic, Partition: out.Partition, Offset: r.offset, Value: r.value})
			}
		}
		o = batches[len(batches)-1].NextOffset()
	}
	return nil
}

type offsetValue struct {
	offset int64
	value  string
}

// batchRecords decodes an uncompressed record batch's records (the
// producers send them uncompressed).
func batchRecords(b []byte) ([]offsetValue, error) {
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		return nil, err
	}
	if rb.Attributes&0x07 != 0 {
		return nil, fmt.Errorf("compressed batch (attributes %#x)", rb.Attributes)
	}
	in := rb.Records
	var out []offsetValue
	for i := int32(0); i < rb.NumRecords; i++ {
		length, used := kbin.Varint(in)
		total := used + int(length)
		if used == 0 || length < 0 || len(in) < total {
			return out, fmt.Errorf("record %d of %d cut short", i, rb.NumRecords)
		}
		var r kmsg.Record
		if err := r.ReadFrom(in[:total]); err != nil {
			return out, fmt.Errorf("record %d: %w", i, err)
		}
		out = append(out, offsetValue{offset: rb.FirstOffset + int64(r.OffsetDelta), value: string(r.Value)})
		in = in[total:]
	}
	return out, nil
}
