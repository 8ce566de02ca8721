package raftlog

import "fmt"

// Feature levels (Kafka's metadata.version, KIP-584 and KIP-778).
//
// The finalized level of the metadata.version feature is in the image (a
// FeatureLevel record sets it) and says which record kinds and record
// versions may be written: a record is staged only when the level its
// version needs (the table below) is at most the finalized level. An
// operator raises the level once every voter and every broker runs a build
// that reads it, so a voter never meets a record it cannot decode: a
// rolling upgrade replaces the nodes one by one at the old level, then
// raises it.
//
// A cluster whose log has no FeatureLevel record is at Level1: it was
// written by the release before feature levels, and stays at that level
// until it is upgraded. A new cluster starts at LatestLevel: its first
// active controller writes it with its first controller epoch.

// Level is a level of the metadata.version feature.
type Level uint16

// FeatureMetadataVersion is the feature whose level gates the records.
const FeatureMetadataVersion = "metadata.version"

// The levels of metadata.version. A level, once released, never changes
// what it allows.
const (
	// Level1 is the records of the release before feature levels: types 1
	// to 18, each at version 1.
	Level1 Level = 1
	// Level2 adds FeatureLevel (19) and RegisterBroker version 2 (the
	// broker's supported feature levels); the record types added with
	// them are at this level too (recordLevels).
	Level2 Level = 2

	// MinLevel and LatestLevel bound the levels this build reads and
	// writes: the range it reports as supported.
	MinLevel    = Level1
	LatestLevel = Level2
)

// recordLevels gives, for each record type, the level each of its versions
// needs: recordLevels[t][v-1] is the lowest finalized level at which
// version v of type t may be written. One line per type; a new type adds
// its line (and its newest version in recordVersions), a new version of a
// type appends its level to the type's line.
var recordLevels = map[RecordType][]Level{
	TypeControllerEpoch:       {Level1},
	TypeRegisterBroker:        {Level1, Level2}, // v2: Features
	TypeFenceBroker:           {Level1},
	TypeUnfenceBroker:         {Level1},
	TypeBrokerShutdown:        {Level1},
	TypeUnregisterBroker:      {Level1},
	TypeTopic:                 {Level1},
	TypeTopicConfig:           {Level1},
	TypePartition:             {Level1},
	TypePartitionChange:       {Level1},
	TypeReplicaState:          {Level1},
	TypePartitionState:        {Level1},
	TypeBeginDeleteTopic:      {Level1},
	TypeRemoveTopic:           {Level1},
	TypeScramCredential:       {Level1},
	TypeDeleteScramCredential: {Level1},
	TypeAclChange:             {Level1},
	TypePartitionChanges:      {Level1},
	TypeFeatureLevel:          {Level2},
	TypeBrokerConfig:          {Level2},
	TypeStateChangeCause:      {Level2},
	TypeClusterID:             {Level2},
}

// levelChanges says whether a level changed what is written (records, or
// the snapshot format): a downgrade below such a level could leave records
// or snapshots that the lower level's builds cannot read, so it is
// refused. Every level so far did.
var levelChanges = map[Level]string{
	Level2: "FeatureLevel, BrokerConfig, StateChangeCause and ClusterID records, RegisterBroker version 2 and snapshot formats 3 and 4",
}

// LevelChanges returns what level l added to the log, or "" when it added
// nothing a build of the level below could not read.
func LevelChanges(l Level) string { return levelChanges[l] }

// versionedRecord is a record type with more than one version, whose
// version follows from its contents: the fields a version adds are set.
type versionedRecord interface {
	recordVersion() uint8
}

// levelByType and newestByType are recordLevels and recordVersions as
// arrays, for the apply path, which looks up every record.
var (
	levelByType  [256][]Level
	newestByType [256]uint8
)

func init() {
	for t, ls := range recordLevels {
		levelByType[t] = ls
	}
	for t, v := range recordVersions {
		newestByType[t] = v
	}
}

// RecordVersion returns the version r is written at: the one its contents
// need for a type with several versions, the type's newest otherwise.
func RecordVersion(r Record) uint8 {
	if vr, ok := r.(versionedRecord); ok {
		return vr.recordVersion()
	}
	return newestByType[r.Type()]
}

// RecordLevel returns the metadata.version level that r, at the version
// it is written at, needs.
func RecordLevel(r Record) Level {
	ls := levelByType[r.Type()]
	v := int(RecordVersion(r))
	if v < 1 || v > len(ls) {
		// Not in the table: no level allows it. (A test checks the
		// table covers every type and version.)
		return ^Level(0)
	}
	return ls[v-1]
}

// FeatureRange is the range of levels of a feature that a node supports.
type FeatureRange struct {
	_msgpack struct{} `msgpack:",as_array"`
	Name     string
	Min      Level
	Max      Level
}

func (r FeatureRange) String() string { return fmt.Sprintf("%s %d-%d", r.Name, r.Min, r.Max) }

// SupportedFeatures returns the feature levels this build reads, as it
// reports them in ApiVersions and broker registrations.
func SupportedFeatures() []FeatureRange {
	return []FeatureRange{{Name: FeatureMetadataVersion, Min: MinLevel, Max: LatestLevel}}
}

// FeatureLevel finalizes the level of a cluster-wide feature: the
// metadata.version level the cluster runs at. It is written by the first
// active controller of a new cluster and by UpdateFeatures. Level 0 would
// remove the feature; metadata.version cannot be removed.
type FeatureLevel struct {
	_msgpack struct{} `msgpack:",as_array"`
	Name     string
	Level    Level
}
