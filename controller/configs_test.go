package controller

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// cfgSetup is two live brokers and topic "t" created with
// retention.ms=1000 and cleanup.policy=compact.
func cfgSetup(t *testing.T) *harness {
	h := newHarness(t)
	h.register(1, "")
	h.register(2, "")
	res := h.c.CreateTopics(h.ctx, []CreateTopic{{Name: "t", NumPartitions: 2, ReplicationFactor: 2,
		Configs: []rl.ConfigEntry{{Key: "retention.ms", Value: "1000"}, {Key: "cleanup.policy", Value: "compact"}}}}, false)
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	return h
}

func cfgDescribe(h *harness, topic string) (out []rl.ConfigEntry, err error) {
	h.fsm.View(func(im *fsm.Image) { out, err = DescribeTopicConfigs(im, topic) })
	return out, err
}

func cfgMap(h *harness, topic string) map[string]string {
	h.t.Helper()
	entries, err := cfgDescribe(h, topic)
	if err != nil {
		h.t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range entries {
		m[e.Key] = e.Value
	}
	return m
}

func TestIncrementalAlterTopicConfigs(t *testing.T) {
	cases := []struct {
		name     string
		topic    string
		ops      []AlterConfig
		validate bool
		err      *kerr.Error
		msg      string
		// want is the topic's configs afterwards; nil for a refused
		// request, which must change nothing.
		want map[string]string
	}{
		{name: "set", ops: []AlterConfig{{Key: "min.insync.replicas", Value: "2"}, {Key: "retention.ms", Value: "5"}},
			want: map[string]string{"min.insync.replicas": "2", "retention.ms": "5", "cleanup.policy": "compact"}},
		{name: "delete", ops: []AlterConfig{{Key: "retention.ms", Op: ConfigDelete}},
			want: map[string]string{"cleanup.policy": "compact"}},
		{name: "append", ops: []AlterConfig{{Key: "cleanup.policy", Value: "delete", Op: ConfigAppend}},
			want: map[string]string{"retention.ms": "1000", "cleanup.policy": "compact,delete"}},
		{name: "append a value already there", ops: []AlterConfig{{Key: "cleanup.policy", Value: "compact", Op: ConfigAppend}},
			want: map[string]string{"retention.ms": "1000", "cleanup.policy": "compact"}},
		{name: "subtract a value that is not there", ops: []AlterConfig{{Key: "cleanup.policy", Value: "delete", Op: ConfigSubtract}}},
		{name: "subtract everything", ops: []AlterConfig{{Key: "cleanup.policy", Value: "compact", Op: ConfigSubtract}},
			err: kerr.InvalidConfig, msg: "cleanup.policy"},
		{name: "append to a key that is not a list", ops: []AlterConfig{{Key: "retention.ms", Value: "5", Op: ConfigAppend}},
			err: kerr.InvalidConfig, msg: "retention.ms"},
		{name: "subtract from a key that is not a list", ops: []AlterConfig{{Key: "min.insync.replicas", Value: "1", Op: ConfigSubtract}},
			err: kerr.InvalidConfig, msg: "min.insync.replicas"},
		{name: "unknown key", ops: []AlterConfig{{Key: "retention.ms", Value: "5"}, {Key: "no.such.key", Value: "1"}},
			err: kerr.InvalidConfig, msg: "no.such.key"},
		{name: "unknown key deleted", ops: []AlterConfig{{Key: "no.such.key", Op: ConfigDelete}},
			err: kerr.InvalidConfig, msg: "no.such.key"},
		{name: "bad value", ops: []AlterConfig{{Key: "retention.ms", Value: "5"}, {Key: "min.insync.replicas", Value: "0"}},
			err: kerr.InvalidConfig, msg: "min.insync.replicas"},
		{name: "key twice", ops: []AlterConfig{{Key: "retention.ms", Value: "5"}, {Key: "retention.ms", Op: ConfigDelete}},
			err: kerr.InvalidRequest, msg: "retention.ms"},
		{name: "unknown operation", ops: []AlterConfig{{Key: "retention.ms", Value: "5", Op: 9}},
			err: kerr.InvalidRequest, msg: "retention.ms"},
		{name: "unknown topic", topic: "nope", ops: []AlterConfig{{Key: "retention.ms", Value: "5"}},
			err: kerr.UnknownTopicOrPartition, msg: "nope"},
		{name: "validate only", validate: true, ops: []AlterConfig{{Key: "retention.ms", Value: "5"}}},
		{name: "validate only still checks", validate: true, ops: []AlterConfig{{Key: "retention.ms", Value: "x"}},
			err: kerr.InvalidConfig, msg: "retention.ms"},
		{name: "nothing to change", ops: []AlterConfig{{Key: "retention.ms", Value: "1000"}, {Key: "segment.ms", Op: ConfigDelete}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := cfgSetup(t)
			topic := tc.topic
			if topic == "" {
				topic = "t"
			}
			before := admSnap(h)
			err := h.c.IncrementalAlterTopicConfigs(h.ctx, topic, tc.ops, tc.validate)
			admCode(t, tc.name, err, tc.err)
			if err != nil && !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("message %q does not mention %q", err, tc.msg)
			}
			if tc.want == nil {
				admUnchanged(t, h, before)
				return
			}
			got := cfgMap(h, "t")
			if len(got) != len(tc.want) {
				t.Fatalf("configs %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Fatalf("configs %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestAlterConfigsListDefaults(t *testing.T) {
	h := newHarness(t)
	h.register(1, "")
	admTopic(h, "t", []int32{1})
	// cleanup.policy is unset: APPEND starts from the default, delete.
	if err := h.c.IncrementalAlterTopicConfigs(h.ctx, "t", []AlterConfig{{Key: "cleanup.policy", Value: "compact", Op: ConfigAppend}}, false); err != nil {
		t.Fatal(err)
	}
	if got := cfgMap(h, "t")["cleanup.policy"]; got != "delete,compact" {
		t.Fatalf("cleanup.policy %q", got)
	}
	if err := h.c.IncrementalAlterTopicConfigs(h.ctx, "t", []AlterConfig{{Key: "cleanup.policy", Value: "delete", Op: ConfigSubtract}}, false); err != nil {
		t.Fatal(err)
	}
	if got := cfgMap(h, "t")["cleanup.policy"]; got != "compact" {
		t.Fatalf("cleanup.policy %q", got)
	}
}

// Enabling unclean election brings leaderless partitions back in the same
// log entry as the config change.
func TestAlterConfigsEnableUnclean(t *testing.T) {
	h := newHarness(t)
	h.register(1, "")
	h.register(2, "")
	admTopic(h, "u", []int32{1, 2}, []int32{2, 1})
	admFence(h, 2)
	admFence(h, 1)
	h.heartbeat(2)
	p := h.partition("u", 0)
	if p.Leader != rl.NoLeader || h.partition("u", 1).Leader != rl.NoLeader {
		t.Fatalf("setup: %+v", p)
	}
	// Turning it off, or validating only, elects nothing.
	for _, tc := range []struct {
		value    string
		validate bool
	}{{"false", false}, {"true", true}} {
		if err := h.c.IncrementalAlterTopicConfigs(h.ctx, "u", []AlterConfig{{Key: "unclean.leader.election.enable", Value: tc.value}}, tc.validate); err != nil {
			t.Fatal(err)
		}
		if q := h.partition("u", 0); q.Leader != rl.NoLeader {
			t.Fatalf("value %s validate %v elected %d", tc.value, tc.validate, q.Leader)
		}
	}
	idx := h.log.Index()
	if err := h.c.IncrementalAlterTopicConfigs(h.ctx, "u", []AlterConfig{{Key: "unclean.leader.election.enable", Value: "true"}}, false); err != nil {
		t.Fatal(err)
	}
	if n := h.log.Index() - idx; n != 1 {
		t.Fatalf("config change and election took %d log entries", n)
	}
	for part := int32(0); part < 2; part++ {
		q := h.partition("u", part)
		if q.Leader != 2 || !slices.Equal(q.ISR, []int32{2}) || q.State != rl.OnlinePartition {
			t.Fatalf("u-%d after enabling unclean election: %+v", part, q)
		}
	}
	if got := cfgMap(h, "u")["unclean.leader.election.enable"]; got != "true" {
		t.Fatalf("config %q", got)
	}
}

func TestDescribeTopicConfigs(t *testing.T) {
	h := cfgSetup(t)
	got, err := cfgDescribe(h, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Key != "cleanup.policy" || got[1].Key != "retention.ms" || got[1].Value != "1000" {
		t.Fatalf("configs %+v", got)
	}
	got[1].Value = "changed"
	if again, _ := cfgDescribe(h, "t"); again[1].Value != "1000" {
		t.Fatal("the returned slice aliases the image")
	}
	_, err = cfgDescribe(h, "nope")
	admCode(t, "unknown topic", err, kerr.UnknownTopicOrPartition)
	admRun(h, func(m *managers, w *work) error {
		return w.stageEach(&rl.BeginDeleteTopic{TopicID: w.img().TopicByName("t").ID})
	})
	_, err = cfgDescribe(h, "t")
	admCode(t, "topic being deleted", err, kerr.UnknownTopicOrPartition)
	before := admSnap(h)
	err = h.c.IncrementalAlterTopicConfigs(h.ctx, "t", []AlterConfig{{Key: "retention.ms", Value: "5"}}, false)
	admCode(t, "alter a topic being deleted", err, kerr.UnknownTopicOrPartition)
	admUnchanged(t, h, before)
}

func TestAlterConfigsNotController(t *testing.T) {
	h := cfgSetup(t)
	h.c.Deactivate()
	before := admSnap(h)
	err := h.c.IncrementalAlterTopicConfigs(h.ctx, "t", []AlterConfig{{Key: "retention.ms", Value: "5"}}, false)
	admCode(t, "inactive", err, kerr.NotController)
	admUnchanged(t, h, before)
	// Describe reads the image and works on any node.
	if _, err := cfgDescribe(h, "t"); err != nil {
		t.Fatal(err)
	}
}
