package jepsen

import (
	"context"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/check"
)

// brokerAgents are every broker agent's listener, by broker id: brokers
// 1..hosts in the voter processes, then the broker-only ones.
func (l layout) brokerAgents() map[int32]string {
	out := map[int32]string{}
	for h := 1; h <= l.hosts; h++ {
		out[int32(h)] = l.addr(h, offBroker)
		out[soloBroker(h)] = l.addr(h, offSoloBroker)
	}
	return out
}

// metadataView turns a Metadata answer into the checker's form.
func metadataView(node int32, addr string, at time.Time, resp *kmsg.MetadataResponse) check.MetadataView {
	v := check.MetadataView{Node: node, Addr: addr, Time: at, Brokers: []int32{}, Topics: []check.MetaTopic{}}
	for _, b := range resp.Brokers {
		v.Brokers = append(v.Brokers, b.NodeID)
	}
	slices.Sort(v.Brokers)
	for _, t := range resp.Topics {
		mt := check.MetaTopic{ID: topicID(t.TopicID), ErrorCode: t.ErrorCode, Partitions: []check.MetaPartition{}}
		if t.Topic != nil {
			mt.Name = *t.Topic
		}
		for _, p := range t.Partitions {
			mt.Partitions = append(mt.Partitions, check.MetaPartition{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: slices.Clone(p.Replicas), ISR: slices.Clone(p.ISR), ErrorCode: p.ErrorCode})
		}
		v.Topics = append(v.Topics, mt)
	}
	return v
}

// metaReader reads Metadata, every topic, from each broker agent over the
// Kafka wire as a client does (one franz-go client per agent, the request
// sent to the agent itself), and from the active controller.
type metaReader struct {
	agents  map[int32]string
	clients map[int32]*kgo.Client
	// ctrl is seeded with the voters' listeners, in host order.
	ctrl      *kgo.Client
	listeners []string
	rng       func(int) int
}

func newMetaReader(agents map[int32]string, ctrl *kgo.Client, listeners []string, rng func(int) int) (*metaReader, error) {
	m := &metaReader{agents: agents, clients: map[int32]*kgo.Client{}, ctrl: ctrl, listeners: listeners, rng: rng}
	for id, addr := range agents {
		cl, err := newClient([]string{addr}, fmt.Sprintf("jepsen-broker-meta-%d", id))
		if err != nil {
			m.close()
			return nil, err
		}
		m.clients[id] = cl
	}
	return m, nil
}

func (m *metaReader) close() {
	for _, cl := range m.clients {
		cl.Close()
	}
}

// read reads the controller, then every agent at once.
func (m *metaReader) read(ctx context.Context) *check.BrokerMetadataRead {
	out := &check.BrokerMetadataRead{}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	resp, id, err := controllerMetadata(cctx, m.ctrl, nil, m.rng)
	cancel()
	if err != nil {
		out.Controller = check.MetadataView{Node: -1, Time: time.Now(), Error: err.Error()}
	} else {
		out.Controller = metadataView(id, m.listeners[hostOfVoter(id)-1], time.Now(), resp)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for id, cl := range m.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			r, err := cl.SeedBrokers()[0].Request(rctx, kmsg.NewPtrMetadataRequest())
			v := check.MetadataView{Node: id, Addr: m.agents[id], Time: time.Now()}
			if err == nil {
				v = metadataView(id, m.agents[id], v.Time, r.(*kmsg.MetadataResponse))
			} else {
				v.Error = err.Error()
			}
			mu.Lock()
			out.Brokers = append(out.Brokers, v)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.SortFunc(out.Brokers, func(a, b check.MetadataView) int { return int(a.Node - b.Node) })
	return out
}

// settle reads until every agent agrees with the controller, or timeout
// passes: an agent's cache follows the controller's UpdateMetadata
// requests, which may still be on their way when the voters reach one
// index. It returns the last read.
func (m *metaReader) settle(timeout time.Duration) *check.BrokerMetadataRead {
	start := time.Now()
	var last *check.BrokerMetadataRead
	reads := 0
	waitUntil(timeout, func() string {
		reads++
		last = m.read(context.Background())
		if r := check.BrokerMetadata(last); !r.Valid {
			return r.String()
		}
		return ""
	})
	last.Reads, last.Waited = reads, time.Since(start)
	return last
}

// voterSnapshots counts each voter's raft snapshots in its log.
func voterSnapshots(ps *procs) ([]check.VoterSnapshots, []string) {
	var out []check.VoterSnapshots
	var errs []string
	for _, p := range ps.all {
		if p.spec.voter == 0 {
			continue
		}
		f, err := os.Open(ps.logPath(p.spec.name))
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		c, err := check.CountSnapshots(strconv.Itoa(int(p.spec.voter)), f)
		f.Close()
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", ps.logPath(p.spec.name), err))
		}
		out = append(out, c)
	}
	return out, errs
}

func TestBrokerAgents(t *testing.T) {
	l := layout{hosts: 3, base: 20000}
	got := l.brokerAgents()
	if len(got) != 6 || got[1] != "127.0.0.1:20003" || got[3] != "127.0.0.3:20003" || got[4] != "127.0.0.1:20004" || got[6] != "127.0.0.3:20004" {
		t.Fatalf("broker agents %v", got)
	}
	if ids := slices.Sorted(maps.Keys(got)); !slices.Equal(ids, l.brokerIDs()) {
		t.Errorf("agents %v, brokers %v", got, l.brokerIDs())
	}
}

func TestMetadataView(t *testing.T) {
	resp := kmsg.NewPtrMetadataResponse()
	for _, id := range []int32{4, 1} {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID = id
		resp.Brokers = append(resp.Brokers, b)
	}
	tp := kmsg.NewMetadataResponseTopic()
	tp.Topic, tp.TopicID = kmsg.StringPtr("jt-0001"), [16]byte{15: 0xab}
	p := kmsg.NewMetadataResponseTopicPartition()
	p.Partition, p.Leader, p.LeaderEpoch, p.Replicas, p.ISR = 2, 4, 9, []int32{4, 1}, []int32{4}
	tp.Partitions = append(tp.Partitions, p)
	resp.Topics = append(resp.Topics, tp)
	at := time.Unix(100, 0)
	v := metadataView(4, "127.0.0.1:1", at, resp)
	want := check.MetadataView{Node: 4, Addr: "127.0.0.1:1", Time: at, Brokers: []int32{1, 4}, Topics: []check.MetaTopic{{
		Name: "jt-0001", ID: "AAAAAAAAAAAAAAAAAAAAqw",
		Partitions: []check.MetaPartition{{Partition: 2, Leader: 4, LeaderEpoch: 9, Replicas: []int32{4, 1}, ISR: []int32{4}}},
	}}}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("got  %+v\nwant %+v", v, want)
	}
	p.ISR[0] = 7
	if v.Topics[0].Partitions[0].ISR[0] != 4 {
		t.Error("the view shares the answer's ISR slice")
	}
}
