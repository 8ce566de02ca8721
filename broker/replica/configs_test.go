package replica_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/server"
)

// min.insync.replicas is the topic's, then the broker's dynamic config,
// the cluster default, the broker's setting: a change through
// IncrementalAlterConfigs is in force on the leaders once it is answered.
func TestMinInsyncReplicasPerTopic(t *testing.T) {
	c := newClusterSession(t, 3, server.BrokerData{ReplicaLagTime: time.Second}, 8*time.Second)
	cl := c.client(kgo.RecordRetries(0), kgo.RequestRetries(0))
	// The admin requests go to the voter: a client of the brokers may
	// pick the killed one, which the metadata lists until it is fenced.
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.peers[0].Listener))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	three := "3"
	if _, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": &three}, "strict"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "lenient"); err != nil {
		t.Fatal(err)
	}
	leaders := []int32{c.leaderOf("strict", 0), c.leaderOf("lenient", 0)}
	for _, topic := range []string{"strict", "lenient"} {
		if _, err := produce(ctx, cl, topic, 0, "whole ISR"); err != nil {
			t.Fatalf("%s with its whole ISR: %v", topic, err)
		}
	}
	victim := int32(1)
	for slices.Contains(leaders, victim) {
		victim++
	}
	c.kill(victim)
	testkit.WaitFor(t, 30*time.Second, "both leaders' ISRs without the killed broker", func() bool {
		for _, l := range leaders {
			for _, r := range c.broker(l).Replicas.Replicas() {
				if r.Leader && len(r.ISR) != 2 {
					return false
				}
			}
		}
		return true
	})

	check := func(step, topic string, want error) {
		t.Helper()
		_, err := produce(ctx, cl, topic, 0, step)
		if (want == nil && err != nil) || (want != nil && !errors.Is(err, want)) {
			t.Fatalf("%s: acks=all to %s with an ISR of 2: %v, want %v", step, topic, err, want)
		}
	}
	check("topic config 3", "strict", kerr.NotEnoughReplicas)
	check("default 1", "lenient", nil)

	alter := func(set func() (kadm.AlterConfigsResponses, error)) {
		t.Helper()
		rs, err := set()
		if err == nil {
			for _, r := range rs {
				err = errors.Join(err, r.Err)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	alter(func() (kadm.AlterConfigsResponses, error) {
		return adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: &three}})
	})
	check("cluster default 3", "lenient", kerr.NotEnoughReplicas)
	two := "2"
	alter(func() (kadm.AlterConfigsResponses, error) {
		return adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: &two}}, "strict")
	})
	check("topic config 2 over the cluster default 3", "strict", nil)
	alter(func() (kadm.AlterConfigsResponses, error) {
		return adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "min.insync.replicas"}}, "strict")
	})
	check("topic config deleted: cluster default 3", "strict", kerr.NotEnoughReplicas)
	alter(func() (kadm.AlterConfigsResponses, error) {
		return adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: &two}}, leaders[1])
	})
	check("the leader's own broker config 2 over the cluster default 3", "lenient", nil)
}
