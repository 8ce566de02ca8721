package controller

import (
	"testing"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

func (e *managerEnv) clusterID() string {
	var id string
	e.image(func(im *fsm.Image) { id = im.ClusterID() })
	return id
}

// TestRecordClusterID: the node's cluster id is recorded once the level
// allows it (a new cluster at once; a log of the release before, at level
// 1, not until its level is raised) and never again, and a node without
// one records nothing.
func TestRecordClusterID(t *testing.T) {
	const id = "MkU3OEVBNTcwNTJENDM2Qg"
	record := func(e *managerEnv) *work {
		return e.run(func(w *work) error { return e.m.quorum.recordClusterID(w) })
	}

	fresh := newManagerEnv(t)
	fresh.m.quorum.clusterID = id
	fresh.atLatestLevel()
	if w := record(fresh); len(w.records()) != 1 || fresh.clusterID() != id {
		t.Fatalf("new cluster: staged %s, image has %q", recordTypes(w), fresh.clusterID())
	}
	if w := record(fresh); len(w.records()) != 0 {
		t.Fatalf("recorded twice: %s", recordTypes(w))
	}
	// A node formatted for another cluster leaves the recorded id alone
	// (and says so at ERROR).
	fresh.m.quorum.clusterID = "Xl9rEOEoRkSAi3lxfHTvIQ"
	if w := record(fresh); len(w.records()) != 0 || fresh.clusterID() != id {
		t.Fatalf("a node of another cluster staged %s; the image has %q", recordTypes(w), fresh.clusterID())
	}

	old := newManagerEnv(t)
	old.m.quorum.clusterID = id
	old.run(func(w *work) error { _, err := old.m.quorum.activate(w); return err })
	if w := record(old); len(w.records()) != 0 || old.clusterID() != "" {
		t.Fatalf("level 1: staged %s", recordTypes(w))
	}
	old.run(func(w *work) error {
		return w.stageEach(&rl.FeatureLevel{Name: rl.FeatureMetadataVersion, Level: rl.Level2})
	})
	if w := record(old); len(w.records()) != 1 || old.clusterID() != id {
		t.Fatalf("after the upgrade: staged %s, image has %q", recordTypes(w), old.clusterID())
	}

	none := newManagerEnv(t)
	none.atLatestLevel()
	if w := record(none); len(w.records()) != 0 {
		t.Fatalf("a node without a cluster id staged %s", recordTypes(w))
	}
}
