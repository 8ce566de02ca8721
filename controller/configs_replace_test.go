package controller

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

func TestReplaceTopicConfigs(t *testing.T) {
	cases := []struct {
		name    string
		configs []rl.ConfigEntry
		err     *kerr.Error
		want    map[string]string
	}{
		{name: "replace", configs: []rl.ConfigEntry{{Key: "min.insync.replicas", Value: "2"}, {Key: "retention.ms", Value: "5"}},
			want: map[string]string{"min.insync.replicas": "2", "retention.ms": "5"}},
		{name: "empty set deletes all", configs: []rl.ConfigEntry{}, want: map[string]string{}},
		{name: "key given twice", configs: []rl.ConfigEntry{{Key: "retention.ms", Value: "5"}, {Key: "retention.ms", Value: "6"}},
			err: kerr.InvalidRequest},
		{name: "unknown key", configs: []rl.ConfigEntry{{Key: "no.such.key", Value: "1"}}, err: kerr.InvalidConfig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := cfgSetup(t)
			before := cfgMap(h, "t")
			err := h.c.ReplaceTopicConfigs(h.ctx, "t", tc.configs, false)
			if tc.err != nil {
				if ErrorCode(err) != tc.err.Code {
					t.Fatalf("error %v, want %s", err, tc.err.Message)
				}
				if got := cfgMap(h, "t"); !mapsEqual(got, before) {
					t.Fatalf("a refused replace changed the configs: %v, was %v", got, before)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfgMap(h, "t"); !mapsEqual(got, tc.want) {
				t.Fatalf("configs %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("unknown topic", func(t *testing.T) {
		h := cfgSetup(t)
		if err := h.c.ReplaceTopicConfigs(h.ctx, "nope", nil, false); ErrorCode(err) != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("error %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
		}
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestReplaceTopicConfigsDeletesAKeySetConcurrently: a legacy
// AlterConfigs (a complete config set) whose event is computed while a
// change setting another key is still committing deletes that key too, so
// the topic ends with exactly the set given. Working out the deletions
// from the committed image before the event, as the listener once did,
// misses the key: the image does not have it yet.
func TestReplaceTopicConfigsDeletesAKeySetConcurrently(t *testing.T) {
	e := newPipelineEnv(t, nil)
	res := e.c.CreateTopics(e.ctx, []CreateTopic{{Name: "t", NumPartitions: 1, ReplicationFactor: 3,
		Configs: []rl.ConfigEntry{{Key: "cleanup.policy", Value: "compact"}}}}, false)
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	for len(e.computed) > 0 {
		<-e.computed
	}

	e.log.hold()
	set := make(chan error, 1)
	go func() {
		set <- e.c.IncrementalAlterTopicConfigs(e.ctx, "t", []AlterConfig{{Key: "retention.ms", Value: "1000", Op: ConfigSet}}, false)
	}()
	e.awaitComputed(1, false)
	held := e.log.next(t)

	replace := make(chan error, 1)
	go func() {
		replace <- e.c.ReplaceTopicConfigs(e.ctx, "t", []rl.ConfigEntry{{Key: "cleanup.policy", Value: "delete"}}, false)
	}()
	e.awaitComputed(1, true) // over the round that sets retention.ms
	e.log.commit(held)
	if err := outcome(t, set); err != nil {
		t.Fatal(err)
	}
	e.log.commit(e.log.next(t))
	if err := outcome(t, replace); err != nil {
		t.Fatal(err)
	}
	var got []rl.ConfigEntry
	e.fsm.View(func(im *fsm.Image) { got, _ = DescribeTopicConfigs(im, "t") })
	if want := []rl.ConfigEntry{{Key: "cleanup.policy", Value: "delete"}}; !slices.Equal(got, want) {
		t.Fatalf("configs %v after the replace, want exactly %v", got, want)
	}
}
