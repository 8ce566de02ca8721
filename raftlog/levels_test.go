package raftlog

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestLevelTableCoversEveryVersion checks that every record type has a
// level for each of its versions, and that no version needs a level this
// build does not support or runs below the level of an earlier version.
func TestLevelTableCoversEveryVersion(t *testing.T) {
	for typ, newest := range recordVersions {
		ls, ok := recordLevels[typ]
		if !ok {
			t.Errorf("%s has no line in recordLevels", typ)
			continue
		}
		if len(ls) != int(newest) {
			t.Errorf("%s: recordLevels has %d versions, recordVersions says %d", typ, len(ls), newest)
		}
		for i, l := range ls {
			if l < MinLevel || l > LatestLevel {
				t.Errorf("%s version %d needs level %d, outside %d-%d", typ, i+1, l, MinLevel, LatestLevel)
			}
			if i > 0 && l < ls[i-1] {
				t.Errorf("%s version %d needs level %d, below version %d's %d", typ, i+1, l, i, ls[i-1])
			}
		}
	}
	for typ := range recordLevels {
		if _, ok := recordVersions[typ]; !ok {
			t.Errorf("recordLevels has %s, which recordVersions does not know", typ)
		}
	}
}

// TestLevelOneIsThePreviousRelease pins level 1 to what the release before
// feature levels wrote: types 1-18 at version 1.
func TestLevelOneIsThePreviousRelease(t *testing.T) {
	for typ := RecordType(1); typ <= TypePartitionChanges; typ++ {
		if got := recordLevels[typ][0]; got != Level1 {
			t.Errorf("%s version 1 needs level %d, want 1", typ, got)
		}
	}
	for typ, ls := range recordLevels {
		if typ > TypePartitionChanges && ls[0] == Level1 {
			t.Errorf("%s is new since the previous release but allowed at level 1", typ)
		}
	}
}

func TestRecordLevel(t *testing.T) {
	cases := []struct {
		r    Record
		v    uint8
		want Level
	}{
		{&RegisterBroker{BrokerID: 1}, 1, Level1},
		{&RegisterBroker{BrokerID: 1, Features: SupportedFeatures()}, 2, Level2},
		{&FeatureLevel{Name: FeatureMetadataVersion, Level: 2}, 1, Level2},
		{&TopicConfig{}, 1, Level1},
	}
	for _, c := range cases {
		if v := RecordVersion(c.r); v != c.v {
			t.Errorf("%s: version %d, want %d", c.r.Type(), v, c.v)
		}
		if l := RecordLevel(c.r); l != c.want {
			t.Errorf("%s: level %d, want %d", c.r.Type(), l, c.want)
		}
	}
}

// legacyRegisterBroker is RegisterBroker as the release before feature
// levels declared it: its version 1 bytes must not change.
type legacyRegisterBroker struct {
	_msgpack      struct{} `msgpack:",as_array"`
	BrokerID      int32
	IncarnationID IncarnationID
	Endpoints     []Endpoint
	Rack          string
}

func TestRegisterBrokerVersionOneBytesUnchanged(t *testing.T) {
	r := &RegisterBroker{BrokerID: 300, IncarnationID: IncarnationID{1, 2, 3}, Rack: "rack-a",
		Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "10.0.0.1", Port: 9092}}}
	got, err := EncodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(&legacyRegisterBroker{BrokerID: r.BrokerID, IncarnationID: r.IncarnationID, Endpoints: r.Endpoints, Rack: r.Rack}); err != nil {
		t.Fatal(err)
	}
	want := append([]byte{byte(TypeRegisterBroker), 1}, buf.Bytes()...)
	if !bytes.Equal(got, want) {
		t.Fatalf("version 1 bytes changed:\n got %x\nwant %x", got, want)
	}
	// A version 2 header on a version 1 body, and the reverse, are refused.
	bad := append([]byte{byte(TypeRegisterBroker), 2}, buf.Bytes()...)
	if _, err := DecodeRecord(bad); err == nil {
		t.Fatal("version 2 header on a version 1 body decoded")
	}
	v2, _ := EncodeRecord(&RegisterBroker{BrokerID: 1, Features: SupportedFeatures()})
	v2[1] = 1
	if _, err := DecodeRecord(v2); err == nil {
		t.Fatal("version 1 header on a version 2 body decoded")
	}
	// A build that knew only version 1 refuses version 2 as newer.
	old := recordVersions[TypeRegisterBroker]
	recordVersions[TypeRegisterBroker] = 1
	defer func() { recordVersions[TypeRegisterBroker] = old }()
	v2[1] = 2
	if _, err := DecodeRecord(v2); !errors.Is(err, ErrNewerVersion) {
		t.Fatalf("version 2 at a version 1 reader: %v, want ErrNewerVersion", err)
	}
}
