package controller

import (
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// featuresManager owns the finalized feature levels (Kafka's
// FeatureControlManager): the metadata.version the cluster runs at, which
// decides the record kinds and versions that may be written (see
// raftlog/levels.go), set by the first active controller of a new cluster
// and raised by UpdateFeatures once every voter and broker reads the new
// level. Everything it decides from is in the image or in the request.
type featuresManager struct{}

// bootstrap finalizes metadata.version at the latest level this build
// knows when the image is that of a new cluster: no controller has been
// active yet and no level is set. A cluster whose log was written by the
// release before feature levels has had a controller, and stays at level
// 1 (no FeatureLevel record) until an operator raises it.
func (m *featuresManager) bootstrap(w *work) error {
	im := w.img()
	if epoch, _ := im.ControllerEpoch(); epoch != 0 || im.Features().Recorded() || !emptyImage(im) {
		return nil
	}
	if err := w.stageEach(&rl.FeatureLevel{Name: rl.FeatureMetadataVersion, Level: rl.LatestLevel}); err != nil {
		return err
	}
	w.log.Info("new cluster: metadata.version finalized", "level", rl.LatestLevel)
	return nil
}

// emptyImage reports whether the image holds no broker, topic, credential
// or rule.
func emptyImage(im fsm.Reader) bool {
	sec := im.Security()
	return len(im.Brokers()) == 0 && im.NumPartitions() == 0 && !anyTopic(im) &&
		len(sec.Users()) == 0 && len(sec.Rules()) == 0
}

func anyTopic(im fsm.Reader) bool {
	found := false
	im.ForEachTopic(func(*fsm.Topic) bool { found = true; return false })
	return found
}
