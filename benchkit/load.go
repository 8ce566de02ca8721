package benchkit

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// rawRaftFloor measures sequential raft.Apply of a ~100-byte entry through
// the active voter: one commit with nothing of the controller in it (a
// valid batch whose record the FSM rejects, so the image is unchanged).
func rawRaftFloor(n *controller.Node, samples int) (time.Duration, error) {
	data, err := rl.EncodeBatch([]rl.Record{&rl.TopicConfig{TopicID: rl.TopicID{0xff, 0xfe}, Key: string(make([]byte, 80))}})
	if err != nil {
		return 0, err
	}
	var d []time.Duration
	for i := 0; i < samples; i++ {
		start := time.Now()
		if err := n.Voter.Raft().Apply(data, 5*time.Second).Error(); err != nil {
			return 0, fmt.Errorf("raw raft apply: %w", err)
		}
		d = append(d, time.Since(start))
	}
	return median(d), nil
}

// loadLeader waits for a leader whose image holds every committed entry
// (a barrier committed in its term).
func loadLeader(ctx context.Context, c *cluster) (*controller.Node, error) {
	for {
		for _, n := range c.running() {
			if n != nil && n.Voter.IsLeader() && n.Voter.Raft().Barrier(time.Minute).Error() == nil {
				return n, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no leader: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func median(s []time.Duration) time.Duration {
	if len(s) == 0 {
		return 0
	}
	s = append([]time.Duration(nil), s...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// loadImage commits topics of 100 partitions each, replication factor 3
// over brokers 1..brokers, straight into raft in large entries: the image
// of a cluster in steady state, built without the event loop (whose own
// speed the scenarios measure). Replicas of partition p of topic t start
// at broker (t*100+p) mod brokers, so each broker leads the same share.
func loadImage(ctx context.Context, c *cluster, partitions int, brokers int32, progress func(done int)) error {
	_, node, err := c.active(ctx)
	if err != nil {
		return err
	}
	const perTopic = 100
	var batch []rl.Record
	var pending int
	done := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		data, err := rl.EncodeBatch(batch)
		if err != nil {
			return err
		}
		first := batch[0].(*rl.Topic).TopicID
		for attempt := 1; ; attempt++ {
			f := node.Voter.Raft().Apply(data, time.Minute)
			err := f.Error()
			if err == nil {
				if res, ok := f.Response().(*fsm.ApplyResult); ok && res.Err() != nil {
					return fmt.Errorf("load image: %w", res.Err())
				}
				break
			}
			// On a loaded machine a large image can outlast a leader:
			// go on with the next one, after finding out whether the
			// batch committed before the change.
			if attempt == 5 {
				return fmt.Errorf("load image: %w", err)
			}
			if node, err = loadLeader(ctx, c); err != nil {
				return fmt.Errorf("load image: %w", err)
			}
			committed := false
			node.FSM.View(func(im *fsm.Image) { committed = im.Topic(first) != nil })
			if committed {
				break
			}
		}
		batch = batch[:0]
		done += pending
		pending = 0
		if progress != nil {
			progress(done)
		}
		return ctx.Err()
	}
	for tn := 0; tn*perTopic < partitions; tn++ {
		var id rl.TopicID
		id[0], id[1], id[2], id[15] = byte(tn>>16), byte(tn>>8), byte(tn), 0xbe
		batch = append(batch, &rl.Topic{TopicID: id, Name: fmt.Sprintf("bench-%06d", tn)})
		var refs []rl.ReplicaRef
		var pids []int32
		var changes []rl.Record
		count := min(perTopic, partitions-tn*perTopic)
		for p := int32(0); p < int32(count); p++ {
			first := int32(tn*perTopic+int(p)) % brokers
			reps := []int32{first + 1, (first+1)%brokers + 1, (first+2)%brokers + 1}
			batch = append(batch, &rl.Partition{TopicID: id, Partition: p, Replicas: reps})
			for _, r := range reps {
				refs = append(refs, rl.ReplicaRef{Partition: p, Broker: r})
			}
			pids = append(pids, p)
			changes = append(changes, &rl.PartitionChange{TopicID: id, Partition: p, Set: rl.ChangeLeader | rl.ChangeISR, Leader: reps[0], ISR: reps})
		}
		batch = append(batch, &rl.ReplicaStateChange{TopicID: id, State: rl.NewReplica, Replicas: refs})
		batch = append(batch, changes...)
		batch = append(batch, &rl.PartitionStateChange{TopicID: id, State: rl.OnlinePartition, Partitions: pids},
			&rl.ReplicaStateChange{TopicID: id, State: rl.OnlineReplica, Replicas: refs})
		pending += count
		if len(batch) >= 20_000 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	return c.converged(ctx)
}
