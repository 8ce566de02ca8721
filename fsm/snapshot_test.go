package fsm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// richFSM builds an image that uses every part of the snapshot format.
func richFSM(t testing.TB) *testFSM {
	tf := newTestFSM(t)
	id := tf.seed(4, 1, 2, 3)
	tf.mustCommit(&rl.ControllerEpoch{Epoch: 1, NodeID: 2})
	tf.mustCommit(&rl.RegisterBroker{BrokerID: 9, IncarnationID: rl.IncarnationID{7}, Rack: "rack-b",
		Endpoints: []rl.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.9", Port: 9092}}})
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

func FuzzRestore(f *testing.F) {
	var buf bytes.Buffer
	_ = richFSM(f).WriteSnapshot(&buf)
	f.Add(buf.Bytes())
	var empty bytes.Buffer
	_ = New(Options{}).WriteSnapshot(&empty)
	f.Add(empty.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		// The checksum would stop nearly every mutation at the door, so
		// fuzz the body decoder directly as well as the whole path.
		_, _ = decodeSnapshot(data)
		if len(data) > len(snapshotMagic)+1 {
			r := &reader{b: data, pos: 0}
			_, _ = readBody(r)
		}
	})
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
