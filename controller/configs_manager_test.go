package controller

import (
	"slices"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/controller/configmodel"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

func cmConfigs(e *managerEnv, topic string) []rl.ConfigEntry {
	var out []rl.ConfigEntry
	e.image(func(im *fsm.Image) { out, _ = DescribeTopicConfigs(im, topic) })
	return out
}

// TestConfigManagerReplaceAgainstTheRound: the legacy AlterConfigs'
// replacement works out its deletions against the view, which holds what
// the round's earlier events staged: a key an earlier event of the same
// round set is deleted too, so the topic ends with exactly the set given.
func TestConfigManagerReplaceAgainstTheRound(t *testing.T) {
	e := newManagerEnv(t)
	e.addBroker(1, "")
	e.run(func(w *work) error {
		_, err := e.m.replication.createTopic(w, CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 1,
			Configs: []rl.ConfigEntry{{Key: "retention.ms", Value: "1000"}, {Key: "cleanup.policy", Value: "compact"}}}, false)
		return err
	})
	cm := e.m.configs

	var replace *work
	round := e.run(func(round *work) error {
		// An earlier event of the round sets a key the image does not have.
		if err := cm.alterTopicConfigs(round, "t", []AlterConfig{{Key: "min.insync.replicas", Value: "1", Op: ConfigSet}}, false); err != nil {
			return err
		}
		// The replacement, computed next in the same round, as the loop
		// computes an event: in a work of its own over the round's Txn.
		replace = newWork(round.txn.Child(), e.now, hclog.NewNullLogger())
		if err := cm.replaceTopicConfigs(replace, "t", []rl.ConfigEntry{{Key: "cleanup.policy", Value: "delete"}}, false); err != nil {
			return err
		}
		round.txn.Merge(replace.txn)
		return nil
	})
	want := []rl.Record{
		&rl.TopicConfig{Key: "cleanup.policy", Value: "delete"},
		&rl.TopicConfig{Key: "min.insync.replicas", Delete: true},
		&rl.TopicConfig{Key: "retention.ms", Delete: true},
	}
	got := replace.records()
	if len(got) != len(want) {
		t.Fatalf("the replacement staged %s", recordTypes(replace))
	}
	for i, r := range got {
		tc, w := *r.(*rl.TopicConfig), *want[i].(*rl.TopicConfig)
		if tc.Key != w.Key || tc.Value != w.Value || tc.Delete != w.Delete {
			t.Fatalf("record %d: %+v, want %+v", i, tc, w)
		}
	}
	if n := len(round.records()); n != 4 {
		t.Fatalf("the round holds %d records, want 4", n)
	}
	if got, want := cmConfigs(e, "t"), []rl.ConfigEntry{{Key: "cleanup.policy", Value: "delete"}}; !slices.Equal(got, want) {
		t.Fatalf("configs %v after the replay, want exactly %v", got, want)
	}
}

// TestConfigManagerIncremental: the operations, validateOnly, and a
// refused request that stages nothing.
func TestConfigManagerIncremental(t *testing.T) {
	e := newManagerEnv(t)
	e.addBroker(1, "")
	e.run(func(w *work) error {
		_, err := e.m.replication.createTopic(w, CreateTopic{Name: "t", NumPartitions: 1, ReplicationFactor: 1,
			Configs: []rl.ConfigEntry{{Key: "retention.ms", Value: "1000"}}}, false)
		return err
	})
	cm := e.m.configs
	ops := []AlterConfig{{Key: "cleanup.policy", Value: "compact", Op: ConfigAppend}, {Key: "retention.ms", Op: ConfigDelete}}
	if w, err := e.call(func(w *work) error { return cm.alterTopicConfigs(w, "t", ops, true) }); err != nil || len(w.records()) != 0 {
		t.Fatalf("validate only: %v, staged %s", err, recordTypes(w))
	}
	e.run(func(w *work) error { return cm.alterTopicConfigs(w, "t", ops, false) })
	if got, want := cmConfigs(e, "t"), []rl.ConfigEntry{{Key: "cleanup.policy", Value: "delete,compact"}}; !slices.Equal(got, want) {
		t.Fatalf("configs %v, want %v", got, want)
	}
	w, err := e.call(func(w *work) error {
		return cm.alterTopicConfigs(w, "t", []AlterConfig{{Key: "retention.ms", Value: "5"}, {Key: "no.such.key", Value: "1"}}, false)
	})
	if ErrorCode(err) != kerr.InvalidConfig.Code || len(w.records()) != 0 {
		t.Fatalf("an unknown key: %v, staged %s", err, recordTypes(w))
	}
}

// TestConfigManagerEnableUnclean: turning unclean election on elects a
// leader for the topic's leaderless partitions in the same work, through
// the replication manager.
func TestConfigManagerEnableUnclean(t *testing.T) {
	e := newManagerEnv(t)
	e.addBroker(1, "")
	epoch2 := e.addBroker(2, "")
	e.run(func(w *work) error {
		_, err := e.m.replication.createTopic(w, CreateTopic{Name: "t", Assignment: [][]int32{{1, 2}}, NumPartitions: -1, ReplicationFactor: -1}, false)
		return err
	})
	// 2 leaves the ISR, then 1, the last ISR member, goes: no leader.
	e.run(func(w *work) error { return e.m.cluster.fence(w, w.img().Broker(2)) })
	e.run(func(w *work) error { return e.m.cluster.fence(w, w.img().Broker(1)) })
	e.run(func(w *work) error {
		_, err := e.m.cluster.heartbeat(w, Heartbeat{BrokerID: 2, BrokerEpoch: epoch2, MetadataOffset: e.fsm.AppliedIndex()})
		return err
	})
	if p := e.partition("t", 0); p.Leader != rl.NoLeader || !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("setup: %+v", p)
	}
	w := e.run(func(w *work) error {
		return e.m.configs.alterTopicConfigs(w, "t", []AlterConfig{{Key: configmodel.KeyUncleanLeaderElection, Value: "true"}}, false)
	})
	if p := e.partition("t", 0); p.Leader != 2 || !slices.Equal(p.ISR, []int32{2}) {
		t.Fatalf("after enabling unclean election (staged %s): %+v", recordTypes(w), p)
	}
}
