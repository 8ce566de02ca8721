package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"hash/crc32"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// richFSM builds an image that uses every part of the snapshot format.
func richFSM(t testing.TB) *testFSM {
	tf := newTestFSM(t)
	id := tf.seed(4, 1, 2, 3)
	// The level in the same entry as the epoch keeps the broker epochs
	// (entry indexes) below as they were.
	tf.mustCommit(&rl.ControllerEpoch{Epoch: 1, NodeID: 2}, &rl.FeatureLevel{Name: rl.FeatureMetadataVersion, Level: rl.LatestLevel})
	tf.mustCommit(&rl.RegisterBroker{BrokerID: 9, IncarnationID: rl.IncarnationID{7}, Rack: "rack-b",
		Endpoints: []rl.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.9", Port: 9092}},
		Features:  []rl.FeatureRange{{Name: rl.FeatureMetadataVersion, Min: 1, Max: 2}}})
	tf.mustCommit(&rl.BrokerShutdown{BrokerID: 4, BrokerEpoch: 7})
	tf.mustCommit(&rl.TopicConfig{TopicID: id, Key: "unclean.leader.election.enable", Value: "true"})
	tf.mustCommit(&rl.PartitionChange{TopicID: id, PartitionEpoch: 1, Set: rl.ChangeReplicas | rl.ChangeReassignment,
		Replicas: []int32{1, 2, 3, 4}, Adding: []int32{4}, Removing: []int32{1}})
	other := topicID(2)
	tf.mustCommit(&rl.Topic{TopicID: other, Name: "other", Configs: []rl.ConfigEntry{{Key: "min.insync.replicas", Value: "2"}}})
	for p := int32(0); p < 5; p++ {
		tf.mustCommit(&rl.Partition{TopicID: other, Partition: p, Replicas: []int32{2, 3}})
	}
	tf.mustCommit(&rl.PartitionStateChange{TopicID: other, State: rl.OfflinePartition, Partitions: []int32{3, 4}},
		&rl.PartitionStateChange{TopicID: other, State: rl.NonExistentPartition, Partitions: []int32{4}},
		&rl.BeginDeleteTopic{TopicID: other})
	tf.mustCommit(scramRecord("bob", rl.ScramSHA512), scramRecord("alice", rl.ScramSHA256), scramRecord("alice", rl.ScramSHA512))
	tf.mustCommit(&rl.AclChange{Add: []rl.AclRule{rule("User:bob", rl.OpCreate), rule("User:alice", rl.OpDescribe)}})
	tf.mustCommit(&rl.BrokerConfig{Broker: "2", Key: "min.insync.replicas", Value: "2"},
		&rl.BrokerConfig{Broker: "", Key: "auto.leader.rebalance.enable", Value: "false"},
		&rl.BrokerConfig{Broker: "", Key: "leader.imbalance.check.interval.seconds", Value: "30"})
	return tf
}

func TestSnapshotRestoreSameHash(t *testing.T) {
	src := richFSM(t)
	var buf bytes.Buffer
	if err := src.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	dst := newTestFSM(t)
	if err := dst.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	hs, is := src.StateHash()
	hd, id := dst.StateHash()
	if hs != hd || is != id {
		t.Fatalf("restore: hash %s@%d, source %s@%d", hd, id, hs, is)
	}
	dst.View(func(im *Image) {
		if im.NumPartitions() != 5 || im.NumTopics() != 2 {
			t.Fatalf("counts after restore: %d topics %d partitions", im.NumTopics(), im.NumPartitions())
		}
		if r := im.TopicByName("t").Reassignments[0]; len(r.Adding) != 1 {
			t.Fatalf("reassignment lost: %+v", r)
		}
		if sec := im.Security(); len(sec.ScramCredentials("alice")) != 2 || len(sec.Rules()) != 2 {
			t.Fatalf("security lost: %d alice credentials, %d rules", len(sec.ScramCredentials("alice")), len(sec.Rules()))
		}
		bc := im.BrokerConfigs()
		if v, _ := bc.Config("2", "min.insync.replicas"); v != "2" || len(bc.Configs(ClusterDefault)) != 2 {
			t.Fatalf("broker configs lost: broker 2 %v, cluster default %v", bc.Configs("2"), bc.Configs(ClusterDefault))
		}
	})
	// The restored image keeps accepting the same log as the source.
	next := &rl.PartitionChange{TopicID: topicID(1), PartitionEpoch: 2, Set: rl.ChangeISR, ISR: []int32{1, 2}}
	dst.index = src.index
	src.mustCommit(next)
	dst.mustCommit(next)
	if a, _ := src.StateHash(); a != func() StateHash { h, _ := dst.StateHash(); return h }() {
		t.Fatal("source and restored image diverged on the next entry")
	}
}

func TestSnapshotIsPointInTime(t *testing.T) {
	tf := richFSM(t)
	want, _ := tf.StateHash()
	snap, err := tf.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Change the image after the snapshot froze it.
	var epoch9 int64
	tf.View(func(im *Image) { epoch9 = im.Broker(9).Epoch })
	tf.mustCommit(&rl.PartitionChange{TopicID: topicID(1), PartitionEpoch: 2, Set: rl.ChangeISR, ISR: []int32{2}},
		&rl.UnfenceBroker{BrokerID: 9, BrokerEpoch: epoch9})
	tf.mustCommit(&rl.Topic{TopicID: topicID(3), Name: "late"})
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	restored := newTestFSM(t)
	if err := restored.Restore(io.NopCloser(&sink.Buffer)); err != nil {
		t.Fatal(err)
	}
	if got, _ := restored.StateHash(); got != want {
		t.Fatal("snapshot saw changes applied after it was taken")
	}
	if now, _ := tf.StateHash(); now == want {
		t.Fatal("live image did not change")
	}
}

func TestRestoreRefusesDamage(t *testing.T) {
	var buf bytes.Buffer
	if err := richFSM(t).WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	flip := append([]byte(nil), good...)
	flip[len(flip)/2] ^= 0x40
	newer := append([]byte(nil), good...)
	newer[len(snapshotMagic)] = 9
	cases := map[string]struct {
		data []byte
		want string
	}{
		"flipped bit":  {flip, "checksum"},
		"truncated":    {good[:len(good)-10], "checksum"},
		"newer format": {newer, "format 9"},
		"not ours":     {[]byte("PK\x03\x04 something else entirely"), "does not start"},
		"empty":        {nil, "too short"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			tf := newTestFSM(t)
			tf.seed(1, 1)
			before, _ := tf.StateHash()
			err := tf.Restore(io.NopCloser(bytes.NewReader(c.data)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to mention %q", err, c.want)
			}
			if after, _ := tf.StateHash(); after != before {
				t.Fatal("failed restore changed the image")
			}
		})
	}
	if !errors.Is(decodeErr(flip), errSnapshotChecksum) {
		t.Fatal("checksum error is not errSnapshotChecksum")
	}
}

func decodeErr(b []byte) error { _, err := decodeSnapshot(b); return err }

type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "mem" }
func (*memSink) Cancel() error { return nil }
func (*memSink) Close() error  { return nil }

// FuzzRestore restores arbitrary bytes. What restores must snapshot
// again, and snapshot → restore → snapshot must be a fixed point: the
// re-snapshot restores to an image of the same state hash and applied
// index, and snapshots to the same bytes. The input itself need not
// come back byte for byte (a varint or a msgpack integer may be written
// longer than the writer writes it, an older format comes back as the
// current one), except when it is known to be a snapshot written by this
// format version: the seeds below and the corpus files named snapshot-*.
// A refused restore leaves the image as it was.
//
// The checksum would stop nearly every mutation at the door, so an input
// is restored with its checksum fixed, and the body decoder is also
// fuzzed directly.
//
//	go test -run '^$' -fuzz '^FuzzRestore$' ./fsm
func FuzzRestore(f *testing.F) {
	written := map[string]bool{}
	for _, s := range restoreSeeds(f) {
		if s.written {
			written[string(s.data)] = true
		}
		f.Add(s.data)
	}
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzRestore", "snapshot-*"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		if b := testkit.ReadFuzzSeed(f, file); len(b) > len(snapshotMagic) && b[len(snapshotMagic)] == snapshotFormatVersion {
			written[string(b)] = true
		}
	}
	empty, _ := New(Options{}).StateHash()
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > len(snapshotMagic)+1 {
			r := &reader{b: data, pos: 0}
			_, _ = readBody(r)
		}
		if n := len(data); n >= 4 && binary.BigEndian.Uint32(data[n-4:]) != crc32.Checksum(data[:n-4], castagnoli) {
			data = withChecksum(data)
		}
		a := New(Options{})
		if err := a.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			if h, i := a.StateHash(); h != empty || i != 0 {
				t.Fatalf("a refused restore (%v) changed the image", err)
			}
			return
		}
		snap1 := snapshotBytes(t, a.WriteSnapshot)
		if written[string(data)] && !bytes.Equal(data, snap1) {
			t.Fatalf("a snapshot did not come back byte for byte:\n got %x\nwant %x", snap1, data)
		}
		b := New(Options{})
		if err := b.Restore(io.NopCloser(bytes.NewReader(snap1))); err != nil {
			t.Fatalf("the re-snapshot does not restore: %v\n%x", err, snap1)
		}
		ha, ia := a.StateHash()
		hb, ib := b.StateHash()
		if ha != hb || ia != ib {
			t.Fatalf("restored from the re-snapshot: %s@%d, from the input: %s@%d", hb, ib, ha, ia)
		}
		if snap2 := snapshotBytes(t, b.WriteSnapshot); !bytes.Equal(snap1, snap2) {
			t.Fatalf("snapshot, restore, snapshot is not a fixed point:\n%x\n%x", snap1, snap2)
		}
	})
}

func snapshotBytes(t testing.TB, write func(io.Writer) error) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return buf.Bytes()
}

// withChecksum returns a copy of a snapshot with its trailer set to the
// checksum of the rest.
func withChecksum(data []byte) []byte {
	out := append([]byte(nil), data...)
	body := out[:len(out)-4]
	binary.BigEndian.PutUint32(out[len(out)-4:], crc32.Checksum(body, castagnoli))
	return out
}

type restoreSeed struct {
	name string
	data []byte
	// written: the bytes are WriteSnapshot's own, so a restore and a
	// snapshot give them back unchanged.
	written bool
	// refused: a restore refuses the bytes.
	refused bool
}

// restoreSeeds are real snapshots: an empty image, a small one (at level
// 1, so in format 2), one that uses every part of the format (format 3),
// the small one in format 1 (no security section), which a restore reads
// and a snapshot rewrites in format 2, the small one at level 2 (format
// 3), and the rich one cut in half with its checksum made to match, which
// the body decoder refuses.
func restoreSeeds(t testing.TB) []restoreSeed {
	snap := func(tf *testFSM) []byte { return snapshotBytes(t, tf.WriteSnapshot) }
	small := newTestFSM(t)
	small.seed(3, 1, 2, 3)
	smallSnap := snap(small)
	// Format 1 is format 2 without the security section: here two empty
	// counts.
	body := smallSnap[:len(smallSnap)-4]
	if smallSnap[len(snapshotMagic)] != 2 || !bytes.HasSuffix(body, []byte{0, 0}) {
		t.Fatalf("the small image's snapshot is not format 2 ending in an empty security section: %x", smallSnap)
	}
	older := func(version byte, cut int) []byte {
		b := append([]byte(nil), body[:len(body)-cut]...)
		b[len(snapshotMagic)] = version
		return withChecksum(append(b, 0, 0, 0, 0))
	}
	rich := snap(richFSM(t))
	cut := withChecksum(append(append([]byte(nil), rich[:len(rich)/2]...), 0, 0, 0, 0))
	return []restoreSeed{
		{name: "snapshot-empty", data: snap(newTestFSM(t)), written: true},
		{name: "snapshot-small", data: smallSnap, written: true},
		{name: "snapshot-rich", data: rich, written: true},
		{name: "format1-small", data: older(1, 2)},
		{name: "format3-small", data: snap(atLatestLevel(small)), written: true},
		{name: "cut-rich", data: cut, refused: true},
	}
}

var writeFuzzCorpus = flag.Bool("write-fuzz-corpus", false, "write the seed corpus files of the fuzz targets into testdata/fuzz")

// TestFuzzRestoreCorpus checks that the seeds restore; with
// -write-fuzz-corpus it writes them to testdata/fuzz/FuzzRestore.
func TestFuzzRestoreCorpus(t *testing.T) {
	for _, s := range restoreSeeds(t) {
		_, err := decodeSnapshot(s.data)
		switch {
		case s.refused && (err == nil || errors.Is(err, errSnapshotChecksum)):
			t.Fatalf("%s: the body decoder did not refuse it (%v)", s.name, err)
		case !s.refused && err != nil:
			t.Fatalf("%s: %v", s.name, err)
		}
		if *writeFuzzCorpus {
			testkit.WriteFuzzSeed(t, "FuzzRestore", s.name, s.data)
		}
	}
}

func TestTopicsAreCopiedOnlyWhileAFrozenViewIsOpen(t *testing.T) {
	tf := richFSM(t)
	topic := func() *Topic {
		var tp *Topic
		tf.View(func(im *Image) { tp = im.Topic(topicID(1)) })
		return tp
	}
	change := func() {
		var epoch int32
		tf.View(func(im *Image) { epoch = im.Partition(topicID(1), 0).PartitionEpoch })
		tf.mustCommit(&rl.PartitionChange{TopicID: topicID(1), PartitionEpoch: epoch, Set: rl.ChangeISR, ISR: []int32{2}})
	}
	// An open snapshot: the topic is copied before it changes.
	snap, err := tf.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	before := topic()
	change()
	if topic() == before {
		t.Fatal("a topic a snapshot may read was changed in place")
	}
	tf.StateHash() // a frozen view of its own, closed on return
	snap.Release()
	snap.Release() // twice is harmless
	// Nothing frozen any more: changed in place.
	before = topic()
	change()
	if topic() != before {
		t.Fatal("a topic was copied with no frozen view open")
	}
	// And a new snapshot is still a point in time.
	snap, err = tf.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := tf.StateHash()
	change()
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	restored := newTestFSM(t)
	if err := restored.Restore(io.NopCloser(&sink.Buffer)); err != nil {
		t.Fatal(err)
	}
	if got, _ := restored.StateHash(); got != want {
		t.Fatal("snapshot saw a change applied after it was taken")
	}
}
