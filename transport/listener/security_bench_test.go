package listener

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	"github.com/ctrlquorum/ctrlquorum/transport/sasl"
)

// BenchmarkSecurityOverhead measures, in the same run, b.N one-partition
// CreateTopics from 64 concurrent kgo clients on an open cluster (dev
// mode: no SASL, no rules) and on one that requires SCRAM-SHA-512 logins
// and authorizes every topic against rules: 1,000 rules for other
// principals plus two prefixed rules that allow the loading principal.
// Logins happen before the clock starts (as the TLS handshakes do in
// BenchmarkTLSOverhead), so the secured figure is the cost of
// authorization per request.
//
//	go test -run '^$' -bench SecurityOverhead -benchtime 2000x ./transport/listener
func BenchmarkSecurityOverhead(b *testing.B) {
	type result struct {
		p50, p99 time.Duration
		rate     float64
	}
	measure := func(secure bool) result {
		opts := clusterOpts{session: 30 * time.Second, steady: true}
		var login []kgo.Opt
		if secure {
			opts.security = SecurityConfig{
				SASLMechanisms: []string{sasl.ScramSHA512},
				SuperUsers:     []string{"User:admin"},
				BootstrapUsers: []BootstrapUser{{Name: "admin", Password: "admin-secret", Mechanism: sasl.ScramSHA512}},
				PeerSASL:       scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism(),
			}
			opts.clientOpts = []kgo.Opt{scram512("admin", "admin-secret")}
			login = []kgo.Opt{scram512("loader", "loader-secret")}
		}
		c := newTestCluster(b, opts)
		defer c.shutdown()
		if secure {
			waitFor(b, 30*time.Second, "the bootstrap user", func() bool {
				n := 0
				c.view(c.active(20*time.Second), func(im *fsm.Image) { n = len(im.Security().Users()) })
				return n > 0
			})
		}
		c.startBrokers(3)
		c.active(20 * time.Second)
		if secure {
			ctx := context.Background()
			_, admin := c.admin()
			if res, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "loader", Mechanism: kadm.ScramSha512, Password: "loader-secret"}}); err != nil || res.Error() != nil {
				b.Fatalf("loader: %v %v", err, res.Error())
			}
			acl := kadm.NewACLs().AllowHosts().ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpCreate, kadm.OpDescribe)
			for i := 0; i < 1000; i += 100 {
				var principals []string
				for j := i; j < i+100; j++ {
					principals = append(principals, fmt.Sprintf("User:other-%d", j))
				}
				if res, err := admin.CreateACLs(ctx, acl.Allow(principals...).Topics(fmt.Sprintf("other-%d-", i))); err != nil || res[0].Err != nil {
					b.Fatalf("rules: %v %+v", err, res)
				}
			}
			if res, err := admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:loader").AllowHosts().Topics("load-", "warmup-").
				ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAll)); err != nil || res[0].Err != nil {
				b.Fatalf("loader rule: %v %+v", err, res)
			}
			c.converged(30 * time.Second)
		}
		lat, elapsed := createTopicsLoad(b, c, 64, b.N, login...)
		return result{p50: percentile(lat, 0.5), p99: percentile(lat, 0.99), rate: float64(b.N) / elapsed.Seconds()}
	}
	b.ResetTimer()
	open := measure(false)
	secured := measure(true)
	b.StopTimer()
	b.ReportMetric(open.rate, "open-topics/s")
	b.ReportMetric(secured.rate, "secured-topics/s")
	b.Logf("open: %d CreateTopics at %.0f topics/s, p50 %v p99 %v", b.N, open.rate, open.p50.Round(10*time.Microsecond), open.p99.Round(10*time.Microsecond))
	b.Logf("SCRAM + 1,002 rules: %d CreateTopics at %.0f topics/s, p50 %v p99 %v", b.N, secured.rate, secured.p50.Round(10*time.Microsecond), secured.p99.Round(10*time.Microsecond))
	b.Logf("secured/open throughput %.2fx", secured.rate/open.rate)
}
