package fsm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// TestClusterIDRecord: the first ClusterID applied stays (the same one
// again changes nothing, another or an empty one is refused, at level 2
// only), a Txn sees what it staged, and the id travels in snapshots (format
// 4, only once there is one) and in the state hash.
func TestClusterIDRecord(t *testing.T) {
	tf := newTestFSM(t)
	if err := tf.commit(&rl.ClusterID{ID: "MkU3OEVBNTcwNTJENDM2Qg"}).Err(); err == nil || !strings.Contains(err.Error(), "metadata.version") {
		t.Fatalf("ClusterID at level 1: %v, want a refusal", err)
	}
	tf.mustCommit(&rl.FeatureLevel{Name: rl.FeatureMetadataVersion, Level: rl.Level2})
	var before bytes.Buffer
	if err := tf.WriteSnapshot(&before); err != nil {
		t.Fatal(err)
	}
	hashBefore, _ := tf.StateHash()

	var tx *Txn
	tf.View(func(im *Image) { tx = NewTxn(im, im.AppliedIndex()+1) })
	if err := tx.Stage(&rl.ClusterID{ID: "MkU3OEVBNTcwNTJENDM2Qg"}); err != nil || tx.ClusterID() != "MkU3OEVBNTcwNTJENDM2Qg" {
		t.Fatalf("staged: %v, Txn sees %q", err, tx.ClusterID())
	}
	tf.mustCommit(&rl.ClusterID{ID: "MkU3OEVBNTcwNTJENDM2Qg"})
	tf.mustCommit(&rl.ClusterID{ID: "MkU3OEVBNTcwNTJENDM2Qg"})
	for _, bad := range []string{"", "Xl9rEOEoRkSAi3lxfHTvIQ", strings.Repeat("x", rl.MaxClusterIDBytes+1)} {
		if err := tf.commit(&rl.ClusterID{ID: bad}).Err(); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("ClusterID %q after one: %v, want ErrInvalidRecord", bad, err)
		}
	}
	tf.View(func(im *Image) {
		if im.ClusterID() != "MkU3OEVBNTcwNTJENDM2Qg" {
			t.Fatalf("image cluster id %q", im.ClusterID())
		}
	})
	if h, _ := tf.StateHash(); h == hashBefore {
		t.Fatal("the state hash does not cover the cluster id")
	}

	var after bytes.Buffer
	if err := tf.WriteSnapshot(&after); err != nil {
		t.Fatal(err)
	}
	if v := before.Bytes()[len(snapshotMagic)]; v != 3 {
		t.Fatalf("a snapshot without a cluster id is format %d, want 3", v)
	}
	if v := after.Bytes()[len(snapshotMagic)]; v != 4 {
		t.Fatalf("a snapshot with a cluster id is format %d, want 4", v)
	}
	back := New(Options{})
	if err := back.Restore(io.NopCloser(bytes.NewReader(after.Bytes()))); err != nil {
		t.Fatal(err)
	}
	back.View(func(im *Image) {
		if im.ClusterID() != "MkU3OEVBNTcwNTJENDM2Qg" {
			t.Fatalf("restored cluster id %q", im.ClusterID())
		}
	})
	if h1, _ := tf.StateHash(); func() bool { h2, _ := back.StateHash(); return h1 != h2 }() {
		t.Fatal("the restored image hashes differently")
	}
}
