package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Every connection of the test leaves from clientIP.
var clientDialer = &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(clientIP)}, Timeout: 2 * time.Second}

// httpClient talks to the nodes' HTTP endpoints from clientIP. A stopped
// process accepts connections (the kernel does) but never answers: every
// call has a deadline.
var httpClient = &http.Client{
	Timeout:   3 * time.Second,
	Transport: &http.Transport{DialContext: clientDialer.DialContext, MaxIdleConnsPerHost: 2, IdleConnTimeout: 10 * time.Second},
}

// attempts counts the requests of one API key a client wrote to a broker.
// kgo retries an admin request on its own (NOT_CONTROLLER, a connection
// lost after the write): when a create is written twice and the last
// answer is TOPIC_ALREADY_EXISTS, the first may have created the topic,
// so the answer does not say the call did nothing.
type attempts struct {
	mu   sync.Mutex
	key  int16
	n    int
	last string
}

var _ kgo.HookBrokerWrite = (*attempts)(nil)

func (a *attempts) OnBrokerWrite(meta kgo.BrokerMetadata, key int16, bytes int, _, _ time.Duration, _ error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if key == a.key && bytes > 0 {
		a.n++
		a.last = net.JoinHostPort(meta.Host, fmt.Sprint(meta.Port))
	}
}

// watch starts counting writes of key.
func (a *attempts) watch(key int16) {
	a.mu.Lock()
	a.key, a.n, a.last = key, 0, ""
	a.mu.Unlock()
}

// result is the count since watch and the last broker written to.
func (a *attempts) result() (int, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n, a.last
}

// ambiguous reports whether a call of kind that ended with err after n
// writes must be recorded as unknown: a refusal of a mutation answered to
// a retry says nothing about what an earlier write did (a create answered
// TOPIC_ALREADY_EXISTS may have made the topic itself, an election answered
// ELECTION_NOT_NEEDED may have moved the leader, a cancel answered
// NO_REASSIGNMENT_IN_PROGRESS may have cancelled it).
func ambiguous(kind history.Kind, n int, err error) bool {
	if n <= 1 || err == nil || !kind.Mutating() {
		return false
	}
	outcome, _ := history.Classify(err)
	return outcome == history.Fail
}

// newClient is a franz-go client seeded with the voters' listeners, in
// host order (SeedBrokers()[h-1] is voter h).
func newClient(seeds []string, id string, hooks ...kgo.Hook) (*kgo.Client, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.Dialer(clientDialer.DialContext),
		kgo.ClientID(id),
		kgo.RequestTimeoutOverhead(2 * time.Second),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.MetadataMaxAge(5 * time.Second),
		kgo.ConnIdleTimeout(20 * time.Second),
	}
	if len(hooks) > 0 {
		opts = append(opts, kgo.WithHooks(hooks...))
	}
	return kgo.NewClient(opts...)
}

// topicID is a topic id as the history writes it (as Kafka prints a Uuid,
// like the brokers' observations), "" for none.
func topicID(id [16]byte) string {
	if id == [16]byte{} {
		return ""
	}
	return rl.TopicID(id).String()
}

var errNoController = errors.New("no voter answered as the active controller")

// controllerMetadata reads Metadata from the active controller. A voter's
// Metadata lists the brokers, not the voters, so the active one is found
// as Kafka's --bootstrap-controller finds it: DescribeCluster for the
// controllers (endpoint type 2), which names the active voter as that
// voter sees it. An answer is taken only from a voter that names itself
// before and after its Metadata answer, and a voter named by another is
// asked next. A standby's image trails the active controller's, and a
// broker agent's cache trails both: neither is a read of the committed
// state. topics nil reads every topic.
func controllerMetadata(ctx context.Context, cl *kgo.Client, topics []string, rng func(int) int) (*kmsg.MetadataResponse, int32, error) {
	seeds := cl.SeedBrokers()
	request := func(h int, req kmsg.Request) (kmsg.Response, error) {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return seeds[h-1].Request(rctx, req)
	}
	named := func(h int) (int32, error) {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.EndpointType = 2
		resp, err := request(h, req)
		if err != nil {
			return -1, err
		}
		dc := resp.(*kmsg.DescribeClusterResponse)
		if err := kerr.ErrorForCode(dc.ErrorCode); err != nil {
			return -1, err
		}
		return dc.ControllerID, nil
	}
	// fromActive returns h's Metadata if h names itself active before
	// and after answering it.
	fromActive := func(h int) (*kmsg.MetadataResponse, error) {
		req := kmsg.NewPtrMetadataRequest()
		if topics != nil {
			req.Topics = []kmsg.MetadataRequestTopic{}
			for _, t := range topics {
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(t)
				req.Topics = append(req.Topics, rt)
			}
		}
		resp, err := request(h, req)
		if err != nil {
			return nil, err
		}
		if id, err := named(h); err != nil || id != voterID(h) {
			return nil, fmt.Errorf("voter %d stopped being active (names %d, %v)", voterID(h), id, err)
		}
		return resp.(*kmsg.MetadataResponse), nil
	}
	var lastErr error = errNoController
	for ctx.Err() == nil {
		first := 1 + rng(len(seeds))
		for i := range seeds {
			h := 1 + (first-1+i)%len(seeds)
			id, err := named(h)
			if err != nil {
				lastErr = fmt.Errorf("voter %d: %w", voterID(h), err)
				continue
			}
			if id == voterID(h) {
				resp, err := fromActive(h)
				if err == nil {
					return resp, id, nil
				}
				lastErr = err
				continue
			}
			other := hostOfVoter(id)
			if other < 1 || other > len(seeds) || other == h {
				continue
			}
			if id2, err := named(other); err == nil && id2 == id {
				if resp, err := fromActive(other); err == nil {
					return resp, id, nil
				}
			}
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	return nil, -1, fmt.Errorf("%w (%v)", ctx.Err(), lastErr)
}

// clusterSample turns a Metadata answer into a leadership sample: the
// live brokers are the data brokers it lists (fenced ones are left out).
func clusterSample(at time.Time, resp *kmsg.MetadataResponse, keep func(string) bool) history.ClusterSample {
	s := history.ClusterSample{Time: at, Live: []int32{}, Partitions: []history.PartitionSample{}}
	for _, b := range resp.Brokers {
		if b.NodeID < 1000 {
			s.Live = append(s.Live, b.NodeID)
		}
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || t.ErrorCode != 0 || !keep(*t.Topic) {
			continue
		}
		for _, p := range t.Partitions {
			s.Partitions = append(s.Partitions, history.PartitionSample{Topic: *t.Topic, Partition: p.Partition, Leader: p.Leader,
				ISR: append([]int32(nil), p.ISR...)})
		}
	}
	return s
}

// lockedRand is a seeded source shared by goroutines.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newLockedRand(seed uint64) *lockedRand {
	return &lockedRand{r: rand.New(rand.NewPCG(seed, 0x6a657073))}
}

func (l *lockedRand) IntN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}
