package fsm

import (
	"errors"
	"fmt"
	"sort"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// ErrFeatureLevel rejects a record that the finalized metadata.version
// does not allow yet: a voter or broker of the cluster may not read it.
var ErrFeatureLevel = errors.New("record not allowed at the finalized metadata.version")

// Features is the image's finalized feature levels, set by FeatureLevel
// records. Like Security it is never changed once installed: apply builds
// a new one.
type Features struct {
	// levels are sorted by name; a removed feature is not listed.
	levels []rl.FeatureLevel
	// epoch is the raft index of the last FeatureLevel record applied, 0
	// when there was none.
	epoch uint64
}

var emptyFeatures = &Features{}

// Level returns the finalized level of a feature.
func (f *Features) Level(name string) (rl.Level, bool) {
	i := sort.Search(len(f.levels), func(i int) bool { return f.levels[i].Name >= name })
	if i < len(f.levels) && f.levels[i].Name == name {
		return f.levels[i].Level, true
	}
	return 0, false
}

// MetadataLevel is the finalized metadata.version: Level1 for a log that
// has never set it, which was written by the release before feature
// levels.
func (f *Features) MetadataLevel() rl.Level {
	if l, ok := f.Level(rl.FeatureMetadataVersion); ok {
		return l
	}
	return rl.Level1
}

// Finalized returns the finalized levels, sorted by name. The slice must
// not be changed.
func (f *Features) Finalized() []rl.FeatureLevel { return f.levels }

// Epoch is the raft index of the last FeatureLevel record, 0 if none.
func (f *Features) Epoch() uint64 { return f.epoch }

// Recorded reports whether any FeatureLevel record has applied.
func (f *Features) Recorded() bool { return f.epoch != 0 || len(f.levels) > 0 }

// with returns a copy of f with the feature at level (level 0 removes it).
func (f *Features) with(name string, level rl.Level, idx uint64) *Features {
	out := &Features{epoch: idx, levels: make([]rl.FeatureLevel, 0, len(f.levels)+1)}
	for _, l := range f.levels {
		if l.Name != name {
			out.levels = append(out.levels, l)
		}
	}
	if level != 0 {
		out.levels = append(out.levels, rl.FeatureLevel{Name: name, Level: level})
	}
	sort.Slice(out.levels, func(i, j int) bool { return out.levels[i].Name < out.levels[j].Name })
	return out
}

// Features returns the finalized feature levels.
func (im *Image) Features() *Features { return im.feats }

func (im *Image) features() *Features     { return im.feats }
func (im *Image) setFeatures(f *Features) { im.feats = f }

// Features returns the finalized feature levels with what the Txn staged.
func (tx *Txn) Features() *Features { return tx.features() }

func (tx *Txn) features() *Features {
	if tx.feats != nil {
		return tx.feats
	}
	return tx.base.features()
}

func (tx *Txn) setFeatures(f *Features) { tx.feats = f }

// checkLevel refuses a record whose version needs a higher metadata.version
// than the finalized one. A FeatureLevel record that raises the level is
// checked against the level it sets: it is the record that allows it.
func checkLevel(im store, r rl.Record) error {
	need := rl.RecordLevel(r)
	if need <= rl.Level1 {
		return nil
	}
	have := im.features().MetadataLevel()
	if fl, ok := r.(*rl.FeatureLevel); ok && fl.Name == rl.FeatureMetadataVersion && fl.Level > have {
		have = fl.Level
	}
	if need > have {
		return fmt.Errorf("%w: %s version %d needs %s %d, the cluster is at %d (raise it with UpdateFeatures, ctrlnode features upgrade)",
			ErrFeatureLevel, r.Type(), rl.RecordVersion(r), rl.FeatureMetadataVersion, need, have)
	}
	return nil
}

func applyFeatureLevel(im store, idx uint64, r *rl.FeatureLevel) error {
	if r.Name == "" {
		return fmt.Errorf("%w: feature level with no feature name", ErrInvalidRecord)
	}
	if r.Name == rl.FeatureMetadataVersion && r.Level < rl.MinLevel {
		return fmt.Errorf("%w: %s cannot be set to %d", ErrInvalidRecord, r.Name, r.Level)
	}
	im.setFeatures(im.features().with(r.Name, r.Level, idx))
	return nil
}
