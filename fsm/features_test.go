package fsm

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// atLatestLevel finalizes the latest metadata.version, which the records
// added since the release before feature levels need.
func atLatestLevel(tf *testFSM) *testFSM {
	tf.t.Helper()
	tf.mustCommit(&rl.FeatureLevel{Name: rl.FeatureMetadataVersion, Level: rl.LatestLevel})
	return tf
}

var brokerWithFeatures = &rl.RegisterBroker{BrokerID: 1, IncarnationID: rl.IncarnationID{1},
	Features: []rl.FeatureRange{{Name: rl.FeatureMetadataVersion, Min: 1, Max: 2}}}

// TestLevelGatesRecords: a log with no FeatureLevel is at level 1, where a
// level 2 record is refused by the Txn and by every voter alike; raising
// the level allows it.
func TestLevelGatesRecords(t *testing.T) {
	tf := newTestFSM(t)
	tf.mustCommit(&rl.ControllerEpoch{Epoch: 1, NodeID: 1})
	var lvl rl.Level
	tf.View(func(im *Image) { lvl = im.Features().MetadataLevel() })
	if lvl != rl.Level1 {
		t.Fatalf("level of a log without FeatureLevel = %d, want 1", lvl)
	}
	tf.View(func(im *Image) {
		tx := NewTxn(im, 2)
		if err := tx.Stage(brokerWithFeatures); !errors.Is(err, ErrFeatureLevel) {
			t.Errorf("Txn staged RegisterBroker v2 at level 1: %v", err)
		}
		if err := tx.Stage(&rl.RegisterBroker{BrokerID: 1}); err != nil {
			t.Errorf("Txn refused RegisterBroker v1: %v", err)
		}
	})
	res := tf.commit(brokerWithFeatures)
	if len(res.Rejected) != 1 || !errors.Is(res.Rejected[0].Err, ErrFeatureLevel) {
		t.Fatalf("FSM applied RegisterBroker v2 at level 1: %+v", res.Rejected)
	}
	// A FeatureLevel record for another feature needs level 2 too.
	if res := tf.commit(&rl.FeatureLevel{Name: "group.version", Level: 1}); len(res.Rejected) != 1 {
		t.Fatal("FeatureLevel of another feature applied at level 1")
	}
	// The record that raises the level is allowed by the level it sets.
	tf.mustCommit(&rl.FeatureLevel{Name: rl.FeatureMetadataVersion, Level: rl.Level2}, brokerWithFeatures)
	tf.View(func(im *Image) {
		if l := im.Features().MetadataLevel(); l != rl.Level2 {
			t.Errorf("level = %d, want 2", l)
		}
		if e := im.Features().Epoch(); e != tf.index {
			t.Errorf("features epoch = %d, want %d", e, tf.index)
		}
		if f := im.Broker(1).Features; !reflect.DeepEqual(f, brokerWithFeatures.Features) {
			t.Errorf("broker features = %v", f)
		}
	})
	if res := tf.commit(&rl.FeatureLevel{Name: rl.FeatureMetadataVersion, Level: 0}); len(res.Rejected) != 1 {
		t.Fatal("metadata.version removed")
	}
	if res := tf.commit(&rl.FeatureLevel{Level: 2}); len(res.Rejected) != 1 {
		t.Fatal("FeatureLevel with no name applied")
	}
}

// TestTxnSeesStagedLevel: a round that raises the level may stage level 2
// records after it; a child that is discarded leaves the level as it was.
func TestTxnSeesStagedLevel(t *testing.T) {
	tf := newTestFSM(t)
	tf.View(func(im *Image) {
		tx := NewTxn(im, 1)
		child := tx.Child()
		if err := child.Stage(&rl.FeatureLevel{Name: rl.FeatureMetadataVersion, Level: 2}); err != nil {
			t.Fatal(err)
		}
		if tx.Features().MetadataLevel() != rl.Level1 {
			t.Fatal("parent sees the child's level before the merge")
		}
		tx.Merge(child)
		if err := tx.Stage(brokerWithFeatures); err != nil {
			t.Fatalf("after the merge: %v", err)
		}
		if im.Features().MetadataLevel() != rl.Level1 {
			t.Fatal("the image changed")
		}
	})
}

// TestSnapshotFormatFollowsLevel: an image at level 1 is written in
// format 2, which the release before feature levels reads; once it holds
// feature levels it is written in format 3, and both read back whole.
func TestSnapshotFormatFollowsLevel(t *testing.T) {
	tf := newTestFSM(t)
	tf.mustCommit(&rl.ControllerEpoch{Epoch: 1, NodeID: 1}, &rl.RegisterBroker{BrokerID: 2, IncarnationID: rl.IncarnationID{2}})
	var b2 bytes.Buffer
	if err := tf.WriteSnapshot(&b2); err != nil {
		t.Fatal(err)
	}
	if v := b2.Bytes()[len(snapshotMagic)]; v != 2 {
		t.Fatalf("snapshot of a level 1 image in format %d, want 2", v)
	}
	h2, _ := tf.StateHash()
	tf.mustCommit(&rl.FeatureLevel{Name: rl.FeatureMetadataVersion, Level: 2}, brokerWithFeatures)
	var b3 bytes.Buffer
	if err := tf.WriteSnapshot(&b3); err != nil {
		t.Fatal(err)
	}
	if v := b3.Bytes()[len(snapshotMagic)]; v != 3 {
		t.Fatalf("snapshot of a level 2 image in format %d, want 3", v)
	}
	h3, idx := tf.StateHash()
	if h3 == h2 {
		t.Fatal("state hash did not change with the level")
	}
	back := newTestFSM(t)
	if err := back.Restore(io.NopCloser(bytes.NewReader(b3.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if h, i := back.StateHash(); h != h3 || i != idx {
		t.Fatalf("restored hash %s at %d, want %s at %d", h, i, h3, idx)
	}
	back.View(func(im *Image) {
		if im.Features().MetadataLevel() != rl.Level2 || im.Features().Epoch() != idx {
			t.Errorf("restored level %d epoch %d", im.Features().MetadataLevel(), im.Features().Epoch())
		}
		if !reflect.DeepEqual(im.Broker(1).Features, brokerWithFeatures.Features) {
			t.Errorf("restored broker features %v", im.Broker(1).Features)
		}
	})
	old := newTestFSM(t)
	if err := old.Restore(io.NopCloser(bytes.NewReader(b2.Bytes()))); err != nil {
		t.Fatal(err)
	}
	old.View(func(im *Image) {
		if im.Features().Recorded() || im.Features().MetadataLevel() != rl.Level1 {
			t.Errorf("format 2 snapshot restored with features %v", im.Features().Finalized())
		}
	})
}
