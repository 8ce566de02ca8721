package raftlog

import (
	"github.com/vmihailenco/msgpack/v5"
)

// Hand-written msgpack encoders for the records that come in the hundreds of
// thousands (partition creation and changes, state changes). They produce
// exactly what the struct tags would (an array of the fields in order, each
// integer in its shortest form, as the record encoder writes them), so
// the format is the same either way; reflection is simply too slow on the
// apply path, which every voter runs for every record.

func encodeTopicID(e *msgpack.Encoder, id TopicID) error { return e.EncodeBytes(id[:]) }

func encodeInt32s(e *msgpack.Encoder, s []int32) error {
	if s == nil {
		return e.EncodeNil()
	}
	if err := e.EncodeArrayLen(len(s)); err != nil {
		return err
	}
	for _, v := range s {
		if err := e.EncodeInt(int64(v)); err != nil {
			return err
		}
	}
	return nil
}

func (r *Partition) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(3); err != nil {
		return err
	}
	if err := encodeTopicID(e, r.TopicID); err != nil {
		return err
	}
	if err := e.EncodeInt(int64(r.Partition)); err != nil {
		return err
	}
	return encodeInt32s(e, r.Replicas)
}

func (r *PartitionChange) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(9); err != nil {
		return err
	}
	if err := encodeTopicID(e, r.TopicID); err != nil {
		return err
	}
	d := r.Delta()
	return encodeDeltaFields(e, &d)
}

// encodeDeltaFields writes a partition change's fields after its topic
// id: a PartitionChange's and each change of a PartitionChanges are the
// same fields in the same order.
func encodeDeltaFields(e *msgpack.Encoder, d *PartitionDelta) error {
	for _, v := range []int32{d.Partition, d.PartitionEpoch} {
		if err := e.EncodeInt(int64(v)); err != nil {
			return err
		}
	}
	if err := e.EncodeUint(uint64(d.Set)); err != nil {
		return err
	}
	if err := e.EncodeInt(int64(d.Leader)); err != nil {
		return err
	}
	for _, s := range [][]int32{d.ISR, d.Replicas, d.Adding, d.Removing} {
		if err := encodeInt32s(e, s); err != nil {
			return err
		}
	}
	return nil
}

func (r *ReplicaStateChange) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(3); err != nil {
		return err
	}
	if err := encodeTopicID(e, r.TopicID); err != nil {
		return err
	}
	if err := e.EncodeUint(uint64(uint8(r.State))); err != nil {
		return err
	}
	if r.Replicas == nil {
		return e.EncodeNil()
	}
	if err := e.EncodeArrayLen(len(r.Replicas)); err != nil {
		return err
	}
	for _, ref := range r.Replicas {
		if err := e.EncodeArrayLen(2); err != nil {
			return err
		}
		if err := e.EncodeInt(int64(ref.Partition)); err != nil {
			return err
		}
		if err := e.EncodeInt(int64(ref.Broker)); err != nil {
			return err
		}
	}
	return nil
}

func (r *PartitionStateChange) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(3); err != nil {
		return err
	}
	if err := encodeTopicID(e, r.TopicID); err != nil {
		return err
	}
	if err := e.EncodeUint(uint64(uint8(r.State))); err != nil {
		return err
	}
	return encodeInt32s(e, r.Partitions)
}

func (r *PartitionChanges) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(2); err != nil {
		return err
	}
	if err := encodeTopicID(e, r.TopicID); err != nil {
		return err
	}
	if r.Changes == nil {
		return e.EncodeNil()
	}
	if err := e.EncodeArrayLen(len(r.Changes)); err != nil {
		return err
	}
	for i := range r.Changes {
		if err := e.EncodeArrayLen(8); err != nil {
			return err
		}
		if err := encodeDeltaFields(e, &r.Changes[i]); err != nil {
			return err
		}
	}
	return nil
}

func (r *Topic) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(3); err != nil {
		return err
	}
	if err := encodeTopicID(e, r.TopicID); err != nil {
		return err
	}
	if err := e.EncodeString(r.Name); err != nil {
		return err
	}
	if r.Configs == nil {
		return e.EncodeNil()
	}
	if err := e.EncodeArrayLen(len(r.Configs)); err != nil {
		return err
	}
	for _, c := range r.Configs {
		if err := e.EncodeArrayLen(2); err != nil {
			return err
		}
		if err := e.EncodeString(c.Key); err != nil {
			return err
		}
		if err := e.EncodeString(c.Value); err != nil {
			return err
		}
	}
	return nil
}
