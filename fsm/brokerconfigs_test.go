package fsm

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

func TestBrokerConfigApply(t *testing.T) {
	tf := atLatestLevel(newTestFSM(t))
	tf.mustCommit(&rl.BrokerConfig{Broker: "1", Key: "min.insync.replicas", Value: "2"},
		&rl.BrokerConfig{Broker: "1", Key: "log.retention.ms", Value: "1000"},
		&rl.BrokerConfig{Broker: "", Key: "min.insync.replicas", Value: "1"})
	// A broker that never registered may be configured, as in Kafka.
	tf.mustCommit(&rl.BrokerConfig{Broker: "77", Key: "min.insync.replicas", Value: "3"})
	tf.mustCommit(&rl.BrokerConfig{Broker: "1", Key: "min.insync.replicas", Value: "3"})
	tf.View(func(im *Image) {
		bc := im.BrokerConfigs()
		if got := bc.Configs("1"); !slices.Equal(got, []rl.ConfigEntry{{Key: "log.retention.ms", Value: "1000"}, {Key: "min.insync.replicas", Value: "3"}}) {
			t.Fatalf("broker 1: %v", got)
		}
		if v, ok := bc.Config(ClusterDefault, "min.insync.replicas"); !ok || v != "1" {
			t.Fatalf("cluster default: %q %v", v, ok)
		}
		if got := bc.Resources(); !slices.Equal(got, []string{"", "1", "77"}) {
			t.Fatalf("resources: %q", got)
		}
	})
	tf.mustCommit(&rl.BrokerConfig{Broker: "77", Key: "min.insync.replicas", Delete: true},
		&rl.BrokerConfig{Broker: "1", Key: "no.such.key", Delete: true})
	tf.View(func(im *Image) {
		if got := im.BrokerConfigs().Resources(); !slices.Equal(got, []string{"", "1"}) {
			t.Fatalf("a resource whose last key was deleted is still listed: %q", got)
		}
	})
}

func TestBrokerConfigRejected(t *testing.T) {
	tf := atLatestLevel(newTestFSM(t))
	tf.mustCommit(&rl.BrokerConfig{Broker: "1", Key: "min.insync.replicas", Value: "2"})
	before, _ := tf.StateHash()
	for _, r := range []*rl.BrokerConfig{
		{Broker: "01", Key: "k", Value: "v"},
		{Broker: "-1", Key: "k", Value: "v"},
		{Broker: "one", Key: "k", Value: "v"},
		{Broker: "2147483648", Key: "k", Value: "v"},
		{Broker: "1", Key: "", Value: "v"},
	} {
		res := tf.commit(r)
		if len(res.Rejected) != 1 || !errors.Is(res.Rejected[0].Err, ErrInvalidRecord) {
			t.Fatalf("%+v: rejected %v", r, res.Rejected)
		}
	}
	if after, _ := tf.StateHash(); after != before {
		t.Fatal("refused broker configs changed the image")
	}
}

// A Txn stages broker configs over the image without changing it, and a
// child's changes reach the parent only when merged.
func TestBrokerConfigTxn(t *testing.T) {
	tf := atLatestLevel(newTestFSM(t))
	tf.mustCommit(&rl.BrokerConfig{Broker: "", Key: "a", Value: "1"})
	tf.View(func(im *Image) {
		tx := NewTxn(im, 10)
		child := tx.Child()
		if err := child.Stage(&rl.BrokerConfig{Broker: "", Key: "b", Value: "2"}); err != nil {
			t.Fatal(err)
		}
		if len(tx.BrokerConfigs().Configs("")) != 1 || len(child.BrokerConfigs().Configs("")) != 2 {
			t.Fatal("the child's staged config leaked into its parent before the merge")
		}
		tx.Merge(child)
		if tx.Empty() || len(tx.BrokerConfigs().Configs("")) != 2 {
			t.Fatal("merge lost the staged config")
		}
		if len(im.BrokerConfigs().Configs("")) != 1 {
			t.Fatal("a Txn changed the image")
		}
	})
}

// An image at level 1 has no broker configs and is written in format 2
// (which the release before feature levels reads), and restores as it was.
func TestRestoreFormat2Snapshot(t *testing.T) {
	src := newTestFSM(t)
	src.seed(2, 1, 2)
	src.mustCommit(scramRecord("alice", rl.ScramSHA256), &rl.AclChange{Add: []rl.AclRule{rule("User:alice", rl.OpRead)}})
	var buf bytes.Buffer
	if err := src.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	old := buf.Bytes()
	if old[len(snapshotMagic)] != 2 {
		t.Fatalf("snapshot of a level 1 image in format %d, want 2", old[len(snapshotMagic)])
	}
	dst := newTestFSM(t)
	if err := dst.Restore(io.NopCloser(bytes.NewReader(old))); err != nil {
		t.Fatal(err)
	}
	hs, _ := src.StateHash()
	hd, _ := dst.StateHash()
	if hs != hd {
		t.Fatal("format-2 snapshot restored to another state")
	}
	dst.View(func(im *Image) {
		if len(im.Security().Rules()) != 1 || len(im.BrokerConfigs().Resources()) != 0 {
			t.Fatalf("restored: %d rules, broker configs %q", len(im.Security().Rules()), im.BrokerConfigs().Resources())
		}
	})
}
