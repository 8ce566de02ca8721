package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// mpReader reads msgpack values straight from a byte slice. The hot
// records decode through it instead of msgpack.Decoder, whose per-call
// overhead dominated apply time; the encoding is the same.
type mpReader struct {
	b   []byte
	pos int
}

var errShort = errors.New("msgpack: unexpected end of record")

func (r *mpReader) code() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, errShort
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

func (r *mpReader) take(n int) ([]byte, error) {
	if n < 0 || r.pos+n > len(r.b) {
		return nil, errShort
	}
	s := r.b[r.pos : r.pos+n]
	r.pos += n
	return s, nil
}

// fits refuses an array length that the bytes left cannot hold at one byte
// per element, so a corrupt length never drives an allocation.
func (r *mpReader) fits(n uint64) (int, error) {
	if n > uint64(len(r.b)-r.pos) {
		return 0, fmt.Errorf("msgpack: array of %d cannot fit in %d bytes", n, len(r.b)-r.pos)
	}
	return int(n), nil
}

// arrayLen returns -1 for nil.
func (r *mpReader) arrayLen() (int, error) {
	c, err := r.code()
	if err != nil {
		return 0, err
	}
	switch {
	case c == 0xc0:
		return -1, nil
	case c >= 0x90 && c <= 0x9f:
		return int(c & 0x0f), nil
	case c == 0xdc:
		s, err := r.take(2)
		if err != nil {
			return 0, err
		}
		return r.fits(uint64(binary.BigEndian.Uint16(s)))
	case c == 0xdd:
		s, err := r.take(4)
		if err != nil {
			return 0, err
		}
		return r.fits(uint64(binary.BigEndian.Uint32(s)))
	}
	return 0, fmt.Errorf("msgpack: code %#x is not an array", c)
}

func (r *mpReader) int64() (int64, error) {
	c, err := r.code()
	if err != nil {
		return 0, err
	}
	switch {
	case c <= 0x7f:
		return int64(c), nil
	case c >= 0xe0:
		return int64(int8(c)), nil
	}
	var n int
	switch c {
	case 0xcc, 0xd0:
		n = 1
	case 0xcd, 0xd1:
		n = 2
	case 0xce, 0xd2:
		n = 4
	case 0xcf, 0xd3:
		n = 8
	default:
		return 0, fmt.Errorf("msgpack: code %#x is not an integer", c)
	}
	s, err := r.take(n)
	if err != nil {
		return 0, err
	}
	switch c {
	case 0xcc:
		return int64(s[0]), nil
	case 0xcd:
		return int64(binary.BigEndian.Uint16(s)), nil
	case 0xce:
		return int64(binary.BigEndian.Uint32(s)), nil
	case 0xcf:
		u := binary.BigEndian.Uint64(s)
		if u > math.MaxInt64 {
			return 0, fmt.Errorf("msgpack: %d overflows int64", u)
		}
		return int64(u), nil
	case 0xd0:
		return int64(int8(s[0])), nil
	case 0xd1:
		return int64(int16(binary.BigEndian.Uint16(s))), nil
	case 0xd2:
		return int64(int32(binary.BigEndian.Uint32(s))), nil
	default:
		return int64(binary.BigEndian.Uint64(s)), nil
	}
}

func (r *mpReader) int32() (int32, error) {
	v, err := r.int64()
	if err != nil {
		return 0, err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("msgpack: %d overflows int32", v)
	}
	return int32(v), nil
}

func (r *mpReader) uint8() (uint8, error) {
	v, err := r.int64()
	if err != nil {
		return 0, err
	}
	if v < 0 || v > math.MaxUint8 {
		return 0, fmt.Errorf("msgpack: %d overflows uint8", v)
	}
	return uint8(v), nil
}

func (r *mpReader) topicID(id *TopicID) error {
	c, err := r.code()
	if err != nil {
		return err
	}
	if c != 0xc4 {
		return fmt.Errorf("msgpack: topic id: code %#x is not bin8", c)
	}
	n, err := r.code()
	if err != nil {
		return err
	}
	if int(n) != len(id) {
		return fmt.Errorf("topic id of %d bytes, want %d", n, len(id))
	}
	s, err := r.take(len(id))
	if err != nil {
		return err
	}
	copy(id[:], s)
	return nil
}

func (r *mpReader) int32s() ([]int32, error) {
	n, err := r.arrayLen()
	if err != nil || n < 0 {
		return nil, err
	}
	out := make([]int32, n)
	for i := range out {
		if out[i], err = r.int32(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r *mpReader) expectArray(what string, fields int) error {
	n, err := r.arrayLen()
	if err != nil {
		return err
	}
	if n != fields {
		return fmt.Errorf("%s: %d fields, want %d", what, n, fields)
	}
	return nil
}

// fastDecoder is implemented by the records mpReader decodes.
type fastDecoder interface {
	decodeFast(r *mpReader) error
}

func (rec *Partition) decodeFast(r *mpReader) (err error) {
	if err = r.expectArray("Partition", 3); err != nil {
		return err
	}
	if err = r.topicID(&rec.TopicID); err != nil {
		return err
	}
	if rec.Partition, err = r.int32(); err != nil {
		return err
	}
	rec.Replicas, err = r.int32s()
	return err
}

func (rec *PartitionChange) decodeFast(r *mpReader) (err error) {
	if err = r.expectArray("PartitionChange", 9); err != nil {
		return err
	}
	if err = r.topicID(&rec.TopicID); err != nil {
		return err
	}
	var d PartitionDelta
	if err = r.deltaFields(&d, nil, 0); err != nil {
		return err
	}
	rec.Partition, rec.PartitionEpoch, rec.Set, rec.Leader = d.Partition, d.PartitionEpoch, d.Set, d.Leader
	rec.ISR, rec.Replicas, rec.Adding, rec.Removing = d.ISR, d.Replicas, d.Adding, d.Removing
	return nil
}

// deltaFields reads a partition change's fields after its topic id: a
// PartitionChange's and each change of a PartitionChanges are the same
// fields in the same order. With pool set, the broker lists are carved
// from it (hint: how many changes are still to come).
func (r *mpReader) deltaFields(d *PartitionDelta, pool *[]int32, hint int) (err error) {
	if d.Partition, err = r.int32(); err != nil {
		return err
	}
	if d.PartitionEpoch, err = r.int32(); err != nil {
		return err
	}
	if d.Set, err = r.uint8(); err != nil {
		return err
	}
	if d.Leader, err = r.int32(); err != nil {
		return err
	}
	for _, dst := range []*[]int32{&d.ISR, &d.Replicas, &d.Adding, &d.Removing} {
		if pool == nil {
			*dst, err = r.int32s()
		} else {
			*dst, *pool, err = r.int32sFrom(*pool, hint)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (rec *ReplicaStateChange) decodeFast(r *mpReader) (err error) {
	if err = r.expectArray("ReplicaStateChange", 3); err != nil {
		return err
	}
	if err = r.topicID(&rec.TopicID); err != nil {
		return err
	}
	s, err := r.uint8()
	if err != nil {
		return err
	}
	rec.State = ReplicaState(s)
	n, err := r.arrayLen()
	if err != nil || n < 0 {
		return err
	}
	rec.Replicas = make([]ReplicaRef, n)
	for i := range rec.Replicas {
		if err = r.expectArray("ReplicaRef", 2); err != nil {
			return err
		}
		if rec.Replicas[i].Partition, err = r.int32(); err != nil {
			return err
		}
		if rec.Replicas[i].Broker, err = r.int32(); err != nil {
			return err
		}
	}
	return nil
}

func (rec *PartitionStateChange) decodeFast(r *mpReader) (err error) {
	if err = r.expectArray("PartitionStateChange", 3); err != nil {
		return err
	}
	if err = r.topicID(&rec.TopicID); err != nil {
		return err
	}
	s, err := r.uint8()
	if err != nil {
		return err
	}
	rec.State = PartitionState(s)
	rec.Partitions, err = r.int32s()
	return err
}

// partitionDeltaMinBytes is the least a PartitionDelta takes: an array
// header and eight one-byte fields. It bounds what a declared count may
// make the decoder allocate.
const partitionDeltaMinBytes = 9

func (rec *PartitionChanges) decodeFast(r *mpReader) (err error) {
	if err = r.expectArray("PartitionChanges", 2); err != nil {
		return err
	}
	if err = r.topicID(&rec.TopicID); err != nil {
		return err
	}
	n, err := r.arrayLen()
	if err != nil || n < 0 {
		return err
	}
	if left := len(r.b) - r.pos; n > left/partitionDeltaMinBytes {
		return fmt.Errorf("msgpack: %d partition changes cannot fit in %d bytes", n, left)
	}
	rec.Changes = make([]PartitionDelta, n)
	// The changes' broker lists share backing arrays, a few allocations
	// for the whole record rather than one per list.
	var pool []int32
	for i := range rec.Changes {
		d := &rec.Changes[i]
		if err = r.expectArray("PartitionDelta", 8); err != nil {
			return err
		}
		if err = r.deltaFields(d, &pool, n-i); err != nil {
			return err
		}
	}
	return nil
}

// int32sFrom is int32s with the result carved out of pool (grown as
// needed, by room for about `ahead` more lists); it returns the rest of
// the pool.
func (r *mpReader) int32sFrom(pool []int32, ahead int) ([]int32, []int32, error) {
	n, err := r.arrayLen()
	if err != nil || n < 0 {
		return nil, pool, err
	}
	if n == 0 {
		return []int32{}, pool, nil
	}
	if cap(pool)-len(pool) < n {
		// Each int32 takes at least a byte, so what is left of the input
		// bounds the room worth making.
		room := min(max(n, 4*ahead), len(r.b)-r.pos)
		pool = make([]int32, 0, max(room, n))
	}
	start := len(pool)
	for i := 0; i < n; i++ {
		v, err := r.int32()
		if err != nil {
			return nil, pool, err
		}
		pool = append(pool, v)
	}
	return pool[start:len(pool):len(pool)], pool, nil
}

// str reads a string written as msgpack str (or bin, or nil for "", as
// msgpack.Decoder accepts).
func (r *mpReader) str() (string, error) {
	c, err := r.code()
	if err != nil {
		return "", err
	}
	var n uint64
	switch {
	case c == 0xc0:
		return "", nil
	case c >= 0xa0 && c <= 0xbf:
		n = uint64(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		s, err := r.take(1)
		if err != nil {
			return "", err
		}
		n = uint64(s[0])
	case c == 0xda || c == 0xc5:
		s, err := r.take(2)
		if err != nil {
			return "", err
		}
		n = uint64(binary.BigEndian.Uint16(s))
	case c == 0xdb || c == 0xc6:
		s, err := r.take(4)
		if err != nil {
			return "", err
		}
		n = uint64(binary.BigEndian.Uint32(s))
	default:
		return "", fmt.Errorf("msgpack: code %#x is not a string", c)
	}
	if n > uint64(len(r.b)-r.pos) {
		return "", errShort
	}
	s, err := r.take(int(n))
	return string(s), err
}

func (rec *Topic) decodeFast(r *mpReader) (err error) {
	if err = r.expectArray("Topic", 3); err != nil {
		return err
	}
	if err = r.topicID(&rec.TopicID); err != nil {
		return err
	}
	if rec.Name, err = r.str(); err != nil {
		return err
	}
	n, err := r.arrayLen()
	if err != nil || n < 0 {
		return err
	}
	rec.Configs = make([]ConfigEntry, n)
	for i := range rec.Configs {
		if err = r.expectArray("ConfigEntry", 2); err != nil {
			return err
		}
		if rec.Configs[i].Key, err = r.str(); err != nil {
			return err
		}
		if rec.Configs[i].Value, err = r.str(); err != nil {
			return err
		}
	}
	return nil
}
