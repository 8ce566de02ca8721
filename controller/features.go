package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// featuresManager owns the finalized feature levels (Kafka's
// FeatureControlManager): the metadata.version the cluster runs at, which
// decides the record kinds and versions that may be written (see
// raftlog/levels.go), set by the first active controller of a new cluster
// and raised by UpdateFeatures once every voter and broker reads the new
// level. Everything it decides from is in the image or in the request.
type featuresManager struct {
	// bootstrapLevel is the level a new cluster starts at, 0 for the
	// latest.
	bootstrapLevel rl.Level
}

// bootstrap finalizes metadata.version at the bootstrap level (the latest
// this build knows unless configured) when the image is that of a new
// cluster: no controller has been active yet, no level is set and nothing
// else is there. A cluster whose log was written by the release before
// feature levels has had a controller, and stays at level 1 (no
// FeatureLevel record) until an operator raises it.
func (m *featuresManager) bootstrap(w *work) error {
	im := w.img()
	if epoch, _ := im.ControllerEpoch(); epoch != 0 || im.Features().Recorded() || !emptyImage(im) {
		return nil
	}
	level := m.bootstrapLevel
	if level == 0 {
		level = rl.LatestLevel
	}
	// Level 1 is a log without FeatureLevel records, as the release
	// before feature levels wrote it.
	if level > rl.Level1 {
		if err := w.stageEach(&rl.FeatureLevel{Name: rl.FeatureMetadataVersion, Level: level}); err != nil {
			return err
		}
	}
	w.log.Info("new cluster: metadata.version finalized", "level", level)
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

// UpgradeType is how an UpdateFeatures request may move a level, with
// Kafka's wire values (UpdateFeatures v1+; v0's AllowDowngrade is a safe
// downgrade).
type UpgradeType int8

const (
	Upgrade         UpgradeType = 1
	SafeDowngrade   UpgradeType = 2
	UnsafeDowngrade UpgradeType = 3
)

// FeatureUpdate is one feature of an UpdateFeatures request.
type FeatureUpdate struct {
	Feature string
	// Level is the level asked for (the request's MaxVersionLevel).
	Level int16
	Type  UpgradeType
}

// FeatureUpdateResult is the outcome of one FeatureUpdate.
type FeatureUpdateResult struct {
	Feature string
	Err     error
}

// NodeFeatures is what one voter or broker said it supports, as the
// caller of UpdateFeatures learned it (the listener asks each voter's
// listener, and each broker whose registration does not carry its
// features, with ApiVersions). A node that reported no range for a
// feature supports only its level 1: it is a build from before feature
// levels.
type NodeFeatures struct {
	Voter     bool
	ID        int32
	Supported []rl.FeatureRange
	// Err says why the node could not be asked.
	Err error
}

func (n NodeFeatures) String() string {
	if n.Voter {
		return "voter " + strconv.Itoa(int(n.ID))
	}
	return "broker " + strconv.Itoa(int(n.ID))
}

// SupportedRange returns the range of feature name in supported, or 1-1 —
// what a build from before feature levels reads — when it is not listed.
func SupportedRange(supported []rl.FeatureRange, name string) rl.FeatureRange {
	for _, r := range supported {
		if r.Name == name {
			return r
		}
	}
	return rl.FeatureRange{Name: name, Min: rl.Level1, Max: rl.Level1}
}

// UpdateFeatures changes finalized feature levels. Each update is decided
// on its own and answered in its result; with validateOnly nothing is
// written. voters must list every voter of the quorum, and brokers the
// registered brokers whose registration carries no features (a broker
// left out counts as supporting level 1 only).
func (c *Controller) UpdateFeatures(ctx context.Context, updates []FeatureUpdate, validateOnly bool, nodes []NodeFeatures) ([]FeatureUpdateResult, error) {
	seen := map[string]bool{}
	for _, u := range updates {
		if seen[u.Feature] {
			return nil, kafkaErr(kerr.InvalidRequest, "feature %q appears twice", u.Feature)
		}
		seen[u.Feature] = true
	}
	v, _, err := c.submit(ctx, "update-features", func(m *managers, w *work) (eventOutcome, error) {
		res, err := m.features.update(w, updates, validateOnly, nodes)
		if err == nil {
			// A level raised to where ClusterID may be written records
			// the cluster id at once, not at the next activation.
			err = m.quorum.recordClusterID(w)
		}
		return answer(res, err)
	}, nil)
	if err != nil {
		return nil, err
	}
	return v.([]FeatureUpdateResult), nil
}

// update decides each feature update against the view and the nodes'
// supported ranges, and stages a FeatureLevel record for each accepted
// change.
func (m *featuresManager) update(w *work, updates []FeatureUpdate, validateOnly bool, nodes []NodeFeatures) ([]FeatureUpdateResult, error) {
	out := make([]FeatureUpdateResult, len(updates))
	for i, u := range updates {
		out[i].Feature = u.Feature
		rec, err := m.decide(w.img(), u, nodes)
		if err != nil {
			out[i].Err = err
			w.log.Info("feature update refused", "feature", u.Feature, "level", u.Level, "reason", err)
			continue
		}
		if rec == nil || validateOnly {
			continue
		}
		from := w.img().Features().MetadataLevel()
		if err := w.stageEach(rec); err != nil {
			return nil, err
		}
		w.log.Info("feature level finalized", "feature", rec.Name, "from", from, "to", rec.Level)
		// Brokers report the finalized levels in ApiVersions and read
		// them from the active controller after a full UpdateMetadata
		// (broker/features.go); the change's answer waits for the live
		// brokers to acknowledge it.
		w.plan.updateMetadataToAll, w.plan.fullUpdateMetadata = true, true
	}
	return out, nil
}

// decide returns the record that makes the update, nil when the feature
// is at the level already, or the error Kafka gives for it.
func (m *featuresManager) decide(im fsm.Reader, u FeatureUpdate, nodes []NodeFeatures) (*rl.FeatureLevel, error) {
	invalid := func(format string, args ...any) error {
		return kafkaErr(kerr.InvalidUpdateVersion, "invalid update version %d for feature %s: %s", u.Level, u.Feature, fmt.Sprintf(format, args...))
	}
	if u.Feature != rl.FeatureMetadataVersion {
		return nil, invalid("the controller does not support the given feature (it supports %s)", rl.FeatureMetadataVersion)
	}
	switch u.Type {
	case Upgrade, SafeDowngrade, UnsafeDowngrade:
	default:
		return nil, invalid("upgrade type %d is not 1 (upgrade), 2 (safe downgrade) or 3 (unsafe downgrade)", u.Type)
	}
	if u.Level < int16(rl.MinLevel) {
		return nil, invalid("%s cannot be removed or set below %d", rl.FeatureMetadataVersion, rl.MinLevel)
	}
	if u.Level > int16(rl.LatestLevel) {
		return nil, invalid("the controller supports %s %d to %d", rl.FeatureMetadataVersion, rl.MinLevel, rl.LatestLevel)
	}
	to := rl.Level(u.Level)
	cur := im.Features().MetadataLevel()
	switch {
	case to == cur:
		return nil, nil
	case to < cur:
		if u.Type == Upgrade {
			return nil, invalid("it is below the finalized level %d: a downgrade needs the safe or unsafe downgrade type", cur)
		}
		if u.Type == UnsafeDowngrade {
			return nil, invalid("unsafe %s downgrades are not supported", rl.FeatureMetadataVersion)
		}
		for l := cur; l > to; l-- {
			if what := rl.LevelChanges(l); what != "" {
				return nil, invalid("refusing to downgrade from %d: level %d added %s, which may be in the log and snapshots and which a node at level %d cannot read", cur, l, what, to)
			}
		}
	case u.Type != Upgrade:
		return nil, invalid("it is above the finalized level %d: a downgrade type cannot raise it", cur)
	default:
		if err := supportAll(im, nodes, to); err != nil {
			return nil, invalid("%v", err)
		}
	}
	return &rl.FeatureLevel{Name: rl.FeatureMetadataVersion, Level: to}, nil
}

// supportAll checks that every voter and every registered broker reads
// metadata.version at level to.
func supportAll(im fsm.Reader, nodes []NodeFeatures, to rl.Level) error {
	voters := 0
	probed := map[int32]NodeFeatures{}
	for _, n := range nodes {
		if n.Voter {
			voters++
			if err := supports(n, n.Supported, to); err != nil {
				return err
			}
			continue
		}
		probed[n.ID] = n
	}
	if voters == 0 {
		return errors.New("no voter reported the levels it supports")
	}
	for _, b := range im.Brokers() {
		if len(b.Features) > 0 {
			if err := supports(NodeFeatures{ID: b.ID}, b.Features, to); err != nil {
				return err
			}
			continue
		}
		n, ok := probed[b.ID]
		if !ok {
			n = NodeFeatures{ID: b.ID}
		}
		if err := supports(n, n.Supported, to); err != nil {
			return err
		}
	}
	return nil
}

func supports(n NodeFeatures, supported []rl.FeatureRange, to rl.Level) error {
	if n.Err != nil {
		return fmt.Errorf("%s could not be asked which levels it supports: %v", n, n.Err)
	}
	r := SupportedRange(supported, rl.FeatureMetadataVersion)
	if to < r.Min || to > r.Max {
		return fmt.Errorf("%s supports %s %d to %d: upgrade it first", n, rl.FeatureMetadataVersion, r.Min, r.Max)
	}
	return nil
}

// DescribeFeatures is the finalized and supported levels, for
// `ctrlnode features describe` and ApiVersions.
type DescribeFeatures struct {
	Finalized []rl.FeatureLevel
	Epoch     uint64
}

// FinalizedFeatures reads the finalized levels from r (hold the FSM's view
// when r is the committed image). A log with no FeatureLevel reports
// metadata.version 1.
func FinalizedFeatures(r fsm.Reader) DescribeFeatures {
	f := r.Features()
	out := DescribeFeatures{Epoch: f.Epoch()}
	out.Finalized = append(out.Finalized, f.Finalized()...)
	if _, ok := f.Level(rl.FeatureMetadataVersion); !ok {
		out.Finalized = append([]rl.FeatureLevel{{Name: rl.FeatureMetadataVersion, Level: rl.Level1}}, out.Finalized...)
		sort.Slice(out.Finalized, func(i, j int) bool { return out.Finalized[i].Name < out.Finalized[j].Name })
	}
	return out
}
