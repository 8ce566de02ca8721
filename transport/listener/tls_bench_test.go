package listener

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkTLSOverhead measures, on a plaintext cluster and then on a
// mutual-TLS one (raft, listeners and clients), in the same run: the raw
// commit latency (sequential 100-byte entries through the active voter's
// raft.Apply, 200 of them) and the throughput of b.N one-partition
// CreateTopics (replication factor 3) from 64 concurrent kgo clients
// through the listeners, each connected to the active controller (TLS
// handshake done) before the clock starts. Each cluster runs alone; the
// voters, brokers and clients share this machine's cores.
//
//	go test -run '^$' -bench TLSOverhead -benchtime 2000x ./transport/listener
func BenchmarkTLSOverhead(b *testing.B) {
	type result struct {
		commitP50, commitP99, createP50, createP99 time.Duration
		rate                                       float64
	}
	measure := func(withTLS bool) result {
		c := newTestCluster(b, clusterOpts{session: 30 * time.Second, steady: true, tls: withTLS})
		defer c.shutdown()
		c.startBrokers(3)
		active := c.active(20 * time.Second)
		commit := rawRaftLatencies(b, c, active, 200)
		lat, elapsed := createTopicsLoad(b, c, 64, b.N)
		return result{
			commitP50: percentile(commit, 0.5), commitP99: percentile(commit, 0.99),
			createP50: percentile(lat, 0.5), createP99: percentile(lat, 0.99),
			rate: float64(b.N) / elapsed.Seconds(),
		}
	}
	b.ResetTimer()
	plain := measure(false)
	mtls := measure(true)
	b.StopTimer()
	b.ReportMetric(ms(plain.commitP50), "plain-commit-p50-ms")
	b.ReportMetric(ms(mtls.commitP50), "tls-commit-p50-ms")
	b.ReportMetric(plain.rate, "plain-topics/s")
	b.ReportMetric(mtls.rate, "tls-topics/s")
	b.Logf("plaintext: commit p50 %v p99 %v; %d CreateTopics at %.0f topics/s, p50 %v p99 %v",
		plain.commitP50.Round(10*time.Microsecond), plain.commitP99.Round(10*time.Microsecond), b.N, plain.rate,
		plain.createP50.Round(10*time.Microsecond), plain.createP99.Round(10*time.Microsecond))
	b.Logf("mutual TLS: commit p50 %v p99 %v; %d CreateTopics at %.0f topics/s, p50 %v p99 %v",
		mtls.commitP50.Round(10*time.Microsecond), mtls.commitP99.Round(10*time.Microsecond), b.N, mtls.rate,
		mtls.createP50.Round(10*time.Microsecond), mtls.createP99.Round(10*time.Microsecond))
	b.Logf("TLS/plaintext: commit p50 %.2fx, throughput %.2fx", float64(mtls.commitP50)/float64(plain.commitP50), mtls.rate/plain.rate)
}

// createTopicsLoad creates n one-partition topics (replication factor 3)
// from the given number of kgo clients, each with its own connections,
// and returns each call's latency and the total time.
//
// With login set, each client is made with only the seeds, the cluster's
// TLS and login (not the harness's own client options), so that it acts
// as that principal.
func createTopicsLoad(b *testing.B, c *testCluster, clients, n int, login ...kgo.Opt) ([]time.Duration, time.Duration) {
	adms := make([]*kadm.Client, clients)
	for i := range adms {
		var cl *kgo.Client
		if len(login) > 0 {
			var err error
			opts := append([]kgo.Opt{kgo.SeedBrokers(c.addrs()...), kgo.RetryTimeout(2 * time.Minute)}, c.clientTLS()...)
			if cl, err = kgo.NewClient(append(opts, login...)...); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(cl.Close)
		} else {
			cl = c.client(kgo.RetryTimeout(2 * time.Minute))
		}
		adms[i] = kadm.NewClient(cl)
		// Connect to the controller (and complete the TLS handshake) before
		// the clock starts: a validate-only creation goes where a creation
		// goes, on the same connection.
		if res, err := adms[i].ValidateCreateTopics(context.Background(), 1, 3, nil, fmt.Sprintf("warmup-%d", i)); err != nil || res.Error() != nil {
			b.Fatalf("warm-up: %v %v", err, res.Error())
		}
	}
	prefix := fmt.Sprintf("load-%d-", time.Now().UnixNano())
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for _, adm := range adms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				res, err := adm.CreateTopics(context.Background(), 1, 3, nil, fmt.Sprintf("%s%07d", prefix, i))
				lat[i] = time.Since(t0)
				if err == nil {
					err = res.Error()
				}
				if err != nil {
					failed.Store(err)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return lat, elapsed
}
