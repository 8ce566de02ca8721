package fsm

import (
	"errors"
	"strings"
	"testing"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

func TestPartitionChangeEpochs(t *testing.T) {
	tf := newTestFSM(t)
	id := tf.seed(3, 1, 2, 3)
	p := tf.partition(id, 0)
	if p.Leader != 1 || p.LeaderEpoch != 1 || p.PartitionEpoch != 1 {
		t.Fatalf("after first election: leader %d epoch %d partition epoch %d", p.Leader, p.LeaderEpoch, p.PartitionEpoch)
	}

	// ISR shrink: partition epoch bumps, leader epoch stays.
	tf.mustCommit(&rl.PartitionChange{TopicID: id, PartitionEpoch: 1, Set: rl.ChangeISR, ISR: []int32{1, 2}})
	p = tf.partition(id, 0)
	if p.LeaderEpoch != 1 || p.PartitionEpoch != 2 || len(p.ISR) != 2 {
		t.Fatalf("after ISR shrink: %+v", p)
	}

	// A change computed from epoch 1 is stale now, and changes nothing.
	before, _ := tf.StateHash()
	err := tf.commit(&rl.PartitionChange{TopicID: id, PartitionEpoch: 1, Set: rl.ChangeLeader, Leader: 2}).Err()
	if !errors.Is(err, ErrStalePartitionEpoch) {
		t.Fatalf("stale change: err = %v", err)
	}
	if after, _ := tf.StateHash(); after != before {
		t.Fatal("stale change altered the image")
	}

	// Leader change: both epochs bump.
	tf.mustCommit(&rl.PartitionChange{TopicID: id, PartitionEpoch: 2, Set: rl.ChangeLeader, Leader: 2})
	p = tf.partition(id, 0)
	if p.Leader != 2 || p.LeaderEpoch != 2 || p.PartitionEpoch != 3 {
		t.Fatalf("after leader change: %+v", p)
	}
	// Leader -1 is a leader change too.
	tf.mustCommit(&rl.PartitionChange{TopicID: id, PartitionEpoch: 3, Set: rl.ChangeLeader, Leader: rl.NoLeader})
	if p = tf.partition(id, 0); p.LeaderEpoch != 3 {
		t.Fatalf("leader -1 did not bump the leader epoch: %+v", p)
	}
}

func TestPartitionChangeValidation(t *testing.T) {
	tf := newTestFSM(t)
	id := tf.seed(3, 1, 2, 3)
	cases := []struct {
		name string
		c    rl.PartitionChange
		want string
	}{
		{"leader outside replicas", rl.PartitionChange{Set: rl.ChangeLeader, Leader: 9}, "not a replica"},
		{"isr outside replicas", rl.PartitionChange{Set: rl.ChangeISR, ISR: []int32{1, 9}}, "not within replicas"},
		{"duplicate in isr", rl.PartitionChange{Set: rl.ChangeISR, ISR: []int32{1, 1}}, "twice"},
		{"empty replicas", rl.PartitionChange{Set: rl.ChangeReplicas}, "empty"},
		{"replicas drop the leader", rl.PartitionChange{Set: rl.ChangeReplicas | rl.ChangeISR, Replicas: []int32{2, 3}, ISR: []int32{2}}, "not a replica"},
		{"adding outside replicas", rl.PartitionChange{Set: rl.ChangeReassignment, Adding: []int32{7}}, "not within replicas"},
		{"unknown partition", rl.PartitionChange{Partition: 4, Set: rl.ChangeLeader, Leader: 1}, "unknown partition"},
		{"leader below -1", rl.PartitionChange{Set: rl.ChangeLeader, Leader: -5}, "leader -5"},
	}
	before, _ := tf.StateHash()
	for _, c := range cases {
		c.c.TopicID, c.c.PartitionEpoch = id, 1
		err := tf.commit(&c.c).Err()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.want)
		}
	}
	if after, _ := tf.StateHash(); after != before {
		t.Fatal("a rejected change altered the image")
	}
}

func TestReassignmentFields(t *testing.T) {
	tf := newTestFSM(t)
	id := tf.seed(4, 1, 2, 3)
	tf.mustCommit(&rl.PartitionChange{TopicID: id, PartitionEpoch: 1, Set: rl.ChangeReplicas | rl.ChangeReassignment,
		Replicas: []int32{1, 2, 3, 4}, Adding: []int32{4}, Removing: []int32{1}})
	var r Reassignment
	var ok bool
	tf.View(func(im *Image) { r, ok = im.Topic(id).Reassignments[0] })
	if !ok || r.Adding[0] != 4 || r.Removing[0] != 1 {
		t.Fatalf("reassignment = %+v %v", r, ok)
	}
	p := tf.partition(id, 0)
	if p.ReplicaState(4) != rl.NonExistentReplica || p.ReplicaState(1) != rl.OnlineReplica {
		t.Fatalf("replica states not carried over: %v %v", p.Replicas, p.ReplicaStates)
	}
	tf.mustCommit(&rl.PartitionChange{TopicID: id, PartitionEpoch: 2, Set: rl.ChangeReassignment})
	tf.View(func(im *Image) { _, ok = im.Topic(id).Reassignments[0] })
	if ok {
		t.Fatal("clearing adding and removing left the reassignment")
	}
}

func TestBrokerEpochs(t *testing.T) {
	tf := newTestFSM(t)
	tf.mustCommit(&rl.RegisterBroker{BrokerID: 5, IncarnationID: rl.IncarnationID{1}})
	first := int64(tf.index)
	var b Broker
	tf.View(func(im *Image) { b = *im.Broker(5) })
	if b.Epoch != first || !b.Fenced {
		t.Fatalf("registered broker: %+v", b)
	}
	tf.mustCommit(&rl.UnfenceBroker{BrokerID: 5, BrokerEpoch: first})
	// New incarnation: new epoch, fenced again; the old epoch is stale.
	tf.mustCommit(&rl.RegisterBroker{BrokerID: 5, IncarnationID: rl.IncarnationID{2}})
	second := int64(tf.index)
	for _, r := range []rl.Record{
		&rl.UnfenceBroker{BrokerID: 5, BrokerEpoch: first},
		&rl.FenceBroker{BrokerID: 5, BrokerEpoch: first},
		&rl.BrokerShutdown{BrokerID: 5, BrokerEpoch: first},
		&rl.UnregisterBroker{BrokerID: 5, BrokerEpoch: first},
	} {
		if err := tf.commit(r).Err(); !errors.Is(err, ErrStaleBrokerEpoch) {
			t.Errorf("%s with old epoch: err = %v", r.Type(), err)
		}
	}
	tf.View(func(im *Image) { b = *im.Broker(5) })
	if b.Epoch != second || !b.Fenced || b.Incarnation != (rl.IncarnationID{2}) {
		t.Fatalf("after re-registration: %+v", b)
	}
	tf.mustCommit(&rl.UnfenceBroker{BrokerID: 5, BrokerEpoch: second}, &rl.BrokerShutdown{BrokerID: 5, BrokerEpoch: second})
	tf.View(func(im *Image) { b = *im.Broker(5) })
	if b.Fenced || !b.ShuttingDown {
		t.Fatalf("after unfence+shutdown: %+v", b)
	}
	tf.mustCommit(&rl.UnregisterBroker{BrokerID: 5, BrokerEpoch: second})
	tf.View(func(im *Image) {
		if im.Broker(5) != nil {
			t.Fatal("unregistered broker still present")
		}
	})
	if err := tf.commit(&rl.FenceBroker{BrokerID: 5, BrokerEpoch: second}).Err(); !errors.Is(err, ErrUnknownBroker) {
		t.Fatalf("fence of unknown broker: %v", err)
	}
}

func TestControllerEpochMustBeSuccessor(t *testing.T) {
	tf := newTestFSM(t)
	tf.mustCommit(&rl.ControllerEpoch{Epoch: 1, NodeID: 1})
	if err := tf.commit(&rl.ControllerEpoch{Epoch: 1, NodeID: 2}).Err(); !errors.Is(err, ErrStaleControllerEpoch) {
		t.Fatalf("second epoch 1: %v", err)
	}
	if err := tf.commit(&rl.ControllerEpoch{Epoch: 3, NodeID: 2}).Err(); !errors.Is(err, ErrStaleControllerEpoch) {
		t.Fatalf("gap: %v", err)
	}
	tf.mustCommit(&rl.ControllerEpoch{Epoch: 2, NodeID: 3})
	tf.View(func(im *Image) {
		if e, n := im.ControllerEpoch(); e != 2 || n != 3 {
			t.Fatalf("epoch %d node %d", e, n)
		}
	})
}

func TestTopicLifecycle(t *testing.T) {
	tf := newTestFSM(t)
	id := tf.seed(3, 1, 2, 3)
	if err := tf.commit(&rl.Topic{TopicID: topicID(99), Name: "t"}).Err(); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate name: %v", err)
	}
	if err := tf.commit(&rl.Topic{TopicID: id, Name: "other"}).Err(); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate id: %v", err)
	}
	tf.mustCommit(&rl.TopicConfig{TopicID: id, Key: "min.insync.replicas", Value: "2"},
		&rl.TopicConfig{TopicID: id, Key: "cleanup.policy", Value: "compact"},
		&rl.TopicConfig{TopicID: id, Key: "cleanup.policy", Delete: true})
	tf.View(func(im *Image) {
		tp := im.TopicByName("t")
		if v, ok := tp.Config("min.insync.replicas"); !ok || v != "2" {
			t.Fatalf("config = %q %v", v, ok)
		}
		if _, ok := tp.Config("cleanup.policy"); ok {
			t.Fatal("deleted config still set")
		}
	})
	if err := tf.commit(&rl.Partition{TopicID: id, Partition: 5, Replicas: []int32{1}}).Err(); err == nil {
		t.Fatal("partition 5 accepted while next is 1")
	}
	if err := tf.commit(&rl.RemoveTopic{TopicID: id}).Err(); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("remove before delete: %v", err)
	}
	tf.mustCommit(&rl.BeginDeleteTopic{TopicID: id})
	if err := tf.commit(&rl.Partition{TopicID: id, Partition: 1, Replicas: []int32{1}}).Err(); !errors.Is(err, ErrTopicDeleting) {
		t.Fatalf("partition on deleting topic: %v", err)
	}
	if err := tf.commit(&rl.RemoveTopic{TopicID: id}).Err(); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("remove with replicas left: %v", err)
	}
	// Walk every replica through deletion; the leader first steps down.
	all := []rl.ReplicaRef{{Broker: 1}, {Broker: 2}, {Broker: 3}}
	tf.mustCommit(&rl.PartitionChange{TopicID: id, PartitionEpoch: 1, Set: rl.ChangeLeader, Leader: rl.NoLeader},
		&rl.PartitionStateChange{TopicID: id, State: rl.OfflinePartition, Partitions: []int32{0}})
	for _, s := range []rl.ReplicaState{rl.OfflineReplica, rl.ReplicaDeletionStarted, rl.ReplicaDeletionSuccessful, rl.NonExistentReplica} {
		tf.mustCommit(&rl.ReplicaStateChange{TopicID: id, State: s, Replicas: all})
	}
	tf.mustCommit(&rl.PartitionStateChange{TopicID: id, State: rl.NonExistentPartition, Partitions: []int32{0}}, &rl.RemoveTopic{TopicID: id})
	tf.View(func(im *Image) {
		if im.TopicByName("t") != nil || im.NumTopics() != 0 || im.NumPartitions() != 0 {
			t.Fatalf("topic not removed: %d topics %d partitions", im.NumTopics(), im.NumPartitions())
		}
	})
	// The name is free again, under a new id.
	tf.mustCommit(&rl.Topic{TopicID: topicID(100), Name: "t"})
}

func TestSameLogSameHash(t *testing.T) {
	a, b := newTestFSM(t), newTestFSM(t)
	a.seed(3, 1, 2, 3)
	b.seed(3, 1, 2, 3)
	ha, ia := a.StateHash()
	hb, ib := b.StateHash()
	if ha != hb || ia != ib {
		t.Fatalf("same log, different hash: %s@%d vs %s@%d", ha, ia, hb, ib)
	}
	b.mustCommit(&rl.PartitionChange{TopicID: topicID(1), PartitionEpoch: 1, Set: rl.ChangeISR, ISR: []int32{1, 2}})
	if hb2, _ := b.StateHash(); hb2 == ha {
		t.Fatal("hash did not change with the image")
	}
}

func TestUndecodableEntryHaltsTheNode(t *testing.T) {
	unknown := []byte{0xCB, 1, 1, 3, 250, 1, 0x90}
	newer := []byte{0xCB, 1, 1, 3, byte(rl.TypeTopic), 99, 0x90}
	cases := map[string]struct {
		data []byte
		want []string
	}{
		"corrupt entry": {[]byte{0xCB, 1, 1, 3, byte(rl.TypeTopic), 1, 0xc1}, []string{"log index 2", "record 0 of type Topic"}},
		"bad count":     {[]byte{0xCB, 1, 5, 1, 2}, []string{"log index 2", "record count"}},
		"unknown type":  {unknown, []string{"log index 2", "unknown(250)", "unknown record type"}},
		"newer version": {newer, []string{"log index 2", "type Topic", "version 99"}},
		"not a batch":   {[]byte("hello"), []string{"log index 2", "bad magic"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			tf := newTestFSM(t)
			tf.mustCommit(&rl.ControllerEpoch{Epoch: 1, NodeID: 1})
			res := tf.commitRaw(c.data)
			if _, ok := res.(error); !ok {
				t.Fatalf("result = %v, want an error", res)
			}
			if len(tf.halts) != 1 {
				t.Fatalf("halt called %d times", len(tf.halts))
			}
			for _, w := range c.want {
				if !strings.Contains(tf.halts[0].Error(), w) {
					t.Errorf("halt message %q does not mention %q", tf.halts[0], w)
				}
			}
			// Nothing after the bad entry is applied.
			tf.commitRaw(mustEncode(t, &rl.ControllerEpoch{Epoch: 2, NodeID: 1}))
			tf.View(func(im *Image) {
				if e, _ := im.ControllerEpoch(); e != 1 {
					t.Fatalf("entry after a halt was applied: epoch %d", e)
				}
			})
			if !errors.Is(tf.Halted(), ErrHalted) {
				t.Fatalf("Halted() = %v", tf.Halted())
			}
		})
	}
}
