package broker_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkCreateTopicsForwarded measures topic creation (one topic of
// one partition, three replicas, per request) by clients that know only
// the voters beside clients that know only the brokers, whose requests
// the brokers forward to the active controller in an Envelope, on one
// cluster in one run. 16 clients create topics concurrently; topics/s is
// the rate.
func BenchmarkCreateTopicsForwarded(b *testing.B) {
	c := newE2ECluster(b, 30*time.Second)
	c.active()
	c.startBrokers(3)
	var brokers []string
	for _, a := range c.agents {
		brokers = append(brokers, a.Addr())
	}
	for _, via := range []struct {
		name  string
		seeds []string
	}{{"voter", c.addrs}, {"broker", brokers}} {
		b.Run(via.name, func(b *testing.B) {
			benchCreateTopics(b, via.seeds, 16)
		})
	}
}

func benchCreateTopics(b *testing.B, seeds []string, clients int) {
	adms := make([]*kadm.Client, clients)
	for i := range adms {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RetryTimeout(2*time.Minute))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cl.Close)
		// Connect and learn the controller before the clock starts.
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), cl); err != nil {
			b.Fatal(err)
		}
		adms[i] = kadm.NewClient(cl)
	}
	prefix := fmt.Sprintf("bench-%s-%d-", strings.ReplaceAll(b.Name(), "/", "."), time.Now().UnixNano())
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for _, adm := range adms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				name := fmt.Sprintf("%s%07d", prefix, i)
				res, err := adm.CreateTopics(context.Background(), 1, 3, nil, name)
				if err == nil {
					err = res.Error()
				}
				if err != nil {
					failed.CompareAndSwap(nil, fmt.Errorf("%s: %w", name, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "topics/s")
}
