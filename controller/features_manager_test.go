package controller

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

var (
	newBuild = []rl.FeatureRange{{Name: rl.FeatureMetadataVersion, Min: 1, Max: rl.LatestLevel}}
	oldBuild []rl.FeatureRange // a build from before feature levels reports none
)

func voters(ranges ...[]rl.FeatureRange) []NodeFeatures {
	out := make([]NodeFeatures, len(ranges))
	for i, r := range ranges {
		out[i] = NodeFeatures{Voter: true, ID: int32(1001 + i), Supported: r}
	}
	return out
}

// atLatestLevel finalizes the latest metadata.version in the env's image,
// as a new cluster's first activation does: handlers that stage records
// added since the release before feature levels need it (a fresh image is
// at level 1).
func (e *managerEnv) atLatestLevel() {
	e.t.Helper()
	e.run(func(w *work) error { return e.m.features.bootstrap(w) })
}

func (e *managerEnv) level() rl.Level {
	var l rl.Level
	e.image(func(im *fsm.Image) { l = im.Features().MetadataLevel() })
	return l
}

// updateFeatures calls the handler and replays what it staged.
func (e *managerEnv) updateFeatures(u FeatureUpdate, nodes []NodeFeatures) error {
	e.t.Helper()
	var res []FeatureUpdateResult
	w := e.run(func(w *work) error {
		var err error
		res, err = e.m.features.update(w, []FeatureUpdate{u}, false, nodes)
		return err
	})
	if res[0].Err == nil && len(w.records()) > 1 {
		e.t.Fatalf("staged %s", recordTypes(w))
	}
	if res[0].Err != nil && len(w.records()) != 0 {
		e.t.Fatalf("refused update staged %s", recordTypes(w))
	}
	return res[0].Err
}

func wantKafka(t *testing.T, err error, code *kerr.Error, words string) {
	t.Helper()
	if !errors.Is(err, code) || !strings.Contains(err.Error(), words) {
		t.Fatalf("got %v, want %s mentioning %q", err, code.Message, words)
	}
}

// TestFeaturesBootstrapOnlyOnANewCluster: the first activation of an
// empty image finalizes the latest level; an image with a controller
// epoch and no level (a log of the release before) is left at level 1.
func TestFeaturesBootstrapOnlyOnANewCluster(t *testing.T) {
	fresh := newManagerEnv(t)
	fresh.atLatestLevel()
	if l := fresh.level(); l != rl.LatestLevel {
		t.Fatalf("new cluster at level %d, want %d", l, rl.LatestLevel)
	}
	w := fresh.run(func(w *work) error { return fresh.m.features.bootstrap(w) })
	if len(w.records()) != 0 {
		t.Fatal("bootstrap wrote the level twice")
	}

	old := newManagerEnv(t)
	old.run(func(w *work) error { _, err := old.m.quorum.activate(w); return err })
	old.run(func(w *work) error { return old.m.features.bootstrap(w) })
	if l := old.level(); l != rl.Level1 {
		t.Fatalf("upgraded cluster at level %d, want 1", l)
	}
}

func TestFeaturesUpgradeNeedsEveryNode(t *testing.T) {
	e := newManagerEnv(t)
	e.run(func(w *work) error { _, err := e.m.quorum.activate(w); return err })
	e.addBroker(1, "")
	up := FeatureUpdate{Feature: rl.FeatureMetadataVersion, Level: int16(rl.Level2), Type: Upgrade}

	// An old voter in the quorum: refused, naming it.
	wantKafka(t, e.updateFeatures(up, voters(newBuild, oldBuild, newBuild)), kerr.InvalidUpdateVersion, "voter 1002 supports metadata.version 1 to 1")
	// A voter that could not be asked: refused.
	nodes := voters(newBuild, newBuild, newBuild)
	nodes[2].Err = errors.New("connection refused")
	wantKafka(t, e.updateFeatures(up, nodes), kerr.InvalidUpdateVersion, "voter 1003 could not be asked")
	// The broker registered without features and was not asked: level 1 only.
	wantKafka(t, e.updateFeatures(up, voters(newBuild, newBuild, newBuild)), kerr.InvalidUpdateVersion, "broker 1 supports metadata.version 1 to 1")
	// No voter at all is a caller's mistake, refused too.
	wantKafka(t, e.updateFeatures(up, nil), kerr.InvalidUpdateVersion, "no voter")
	if e.level() != rl.Level1 {
		t.Fatal("a refused upgrade changed the level")
	}
	// Downgrade types cannot raise the level; unknown features and levels are refused.
	wantKafka(t, e.updateFeatures(FeatureUpdate{Feature: rl.FeatureMetadataVersion, Level: 2, Type: SafeDowngrade}, nil), kerr.InvalidUpdateVersion, "downgrade type")
	wantKafka(t, e.updateFeatures(FeatureUpdate{Feature: "group.version", Level: 1, Type: Upgrade}, nil), kerr.InvalidUpdateVersion, "does not support the given feature")
	wantKafka(t, e.updateFeatures(FeatureUpdate{Feature: rl.FeatureMetadataVersion, Level: 99, Type: Upgrade}, nil), kerr.InvalidUpdateVersion, "supports metadata.version 1 to 2")
	wantKafka(t, e.updateFeatures(FeatureUpdate{Feature: rl.FeatureMetadataVersion, Level: 0, Type: SafeDowngrade}, nil), kerr.InvalidUpdateVersion, "cannot be removed")

	// Every node reads level 2: the upgrade is one FeatureLevel record.
	nodes = append(voters(newBuild, newBuild, newBuild), NodeFeatures{ID: 1, Supported: newBuild})
	if err := e.updateFeatures(up, nodes); err != nil {
		t.Fatal(err)
	}
	if e.level() != rl.Level2 {
		t.Fatalf("level %d after the upgrade", e.level())
	}
	// Asking again for the same level changes nothing and succeeds.
	if err := e.updateFeatures(up, nodes); err != nil {
		t.Fatal(err)
	}
}

func TestFeaturesDowngradeRefused(t *testing.T) {
	e := newManagerEnv(t)
	e.atLatestLevel()
	down := FeatureUpdate{Feature: rl.FeatureMetadataVersion, Level: 1}
	down.Type = Upgrade
	wantKafka(t, e.updateFeatures(down, nil), kerr.InvalidUpdateVersion, "needs the safe or unsafe downgrade type")
	down.Type = UnsafeDowngrade
	wantKafka(t, e.updateFeatures(down, nil), kerr.InvalidUpdateVersion, "unsafe metadata.version downgrades are not supported")
	down.Type = SafeDowngrade
	wantKafka(t, e.updateFeatures(down, nil), kerr.InvalidUpdateVersion, "level 2 added FeatureLevel")
	if e.level() != rl.LatestLevel {
		t.Fatal("a refused downgrade changed the level")
	}
}

// TestRegistrationFeatures: at level 1 a broker's features stay out of
// its record (version 1, which the release before reads); at level 2 they
// are kept; a broker that cannot read the finalized level is refused.
func TestRegistrationFeatures(t *testing.T) {
	e := newManagerEnv(t)
	e.run(func(w *work) error { _, err := e.m.quorum.activate(w); return err })
	reg := BrokerRegistration{BrokerID: 5, IncarnationID: rl.IncarnationID{5}, Features: newBuild}
	e.run(func(w *work) error { _, err := e.m.cluster.register(w, reg); return err })
	if f := e.broker(5).Features; f != nil {
		t.Fatalf("features recorded at level 1: %v", f)
	}
	e.run(func(w *work) error {
		return w.stageEach(&rl.FeatureLevel{Name: rl.FeatureMetadataVersion, Level: rl.Level2})
	})
	reg.BrokerID, reg.IncarnationID = 6, rl.IncarnationID{6}
	e.run(func(w *work) error { _, err := e.m.cluster.register(w, reg); return err })
	if f := e.broker(6).Features; len(f) != 1 || f[0].Max != rl.LatestLevel {
		t.Fatalf("features at level 2: %v", f)
	}
	reg.BrokerID, reg.IncarnationID = 7, rl.IncarnationID{7}
	reg.Features = []rl.FeatureRange{{Name: rl.FeatureMetadataVersion, Min: 1, Max: 1}}
	_, err := e.call(func(w *work) error { _, err := e.m.cluster.register(w, reg); return err })
	wantKafka(t, err, kerr.UnsupportedVersion, "does not support finalized version 2")
}
