package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// batchMagic opens every log entry written by this package, followed by the
// batch format version. Anything else in a command entry is not ours.
const (
	batchMagic         byte = 0xCB
	batchFormatVersion byte = 1
)

// MaxRecordsPerBatch bounds the record count a decoder accepts, so a
// corrupted count cannot make it allocate without limit.
const MaxRecordsPerBatch = 1 << 22

// ErrUnknownType and ErrNewerVersion are wrapped by DecodeError when a record
// is of a type, or a version of a type, that this binary does not know.
var (
	ErrUnknownType  = errors.New("unknown record type")
	ErrNewerVersion = errors.New("record version newer than this binary supports")
)

// DecodeError says which record of an entry could not be decoded and why.
type DecodeError struct {
	Record  int        // position of the record in its batch, -1 for the batch header
	Type    RecordType // type byte of the record, 0 if not reached
	Version uint8
	Err     error
}

func (e *DecodeError) Error() string {
	if e.Record < 0 {
		return fmt.Sprintf("decode batch header: %v", e.Err)
	}
	return fmt.Sprintf("decode record %d (type %s, version %d): %v", e.Record, e.Type, e.Version, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

var encPool = sync.Pool{New: func() any {
	buf := new(bytes.Buffer)
	enc := msgpack.NewEncoder(buf)
	// Integers take their shortest form: broker ids, partition numbers and
	// epochs are small, and a fixed five bytes each would triple the
	// size of a broker event's entries. Decoders read any form.
	enc.UseCompactInts(true)
	return &pooledEncoder{buf: buf, enc: enc}
}}

type pooledEncoder struct {
	buf *bytes.Buffer
	enc *msgpack.Encoder
}

// EncodeRecord encodes one record: type byte, version, msgpack body.
func EncodeRecord(r Record) ([]byte, error) {
	return AppendRecord(nil, r)
}

// AppendRecord appends the encoding of r to dst.
func AppendRecord(dst []byte, r Record) ([]byte, error) {
	t := r.Type()
	if _, ok := recordVersions[t]; !ok {
		return dst, fmt.Errorf("encode: %w: %d", ErrUnknownType, uint8(t))
	}
	v := RecordVersion(r)
	pe := encPool.Get().(*pooledEncoder)
	defer encPool.Put(pe)
	pe.buf.Reset()
	var err error
	if ce, ok := r.(msgpack.CustomEncoder); ok {
		err = ce.EncodeMsgpack(pe.enc)
	} else {
		err = pe.enc.Encode(r)
	}
	if err != nil {
		return dst, fmt.Errorf("encode %s: %w", t, err)
	}
	dst = append(dst, byte(t), v)
	return append(dst, pe.buf.Bytes()...), nil
}

// DecodeRecord decodes one record written by EncodeRecord. The whole of b
// must be the record: trailing bytes are an error.
func DecodeRecord(b []byte) (Record, error) {
	r, err := decodeRecord(b, &mpReader{})
	if err != nil {
		err.Record = 0
		return nil, err
	}
	return r, nil
}

// decodeRecord decodes one record, reading its body through mr when the
// record has a hand-written decoder. A batch passes the same reader for
// all its records: the interface call makes it escape, and one allocation
// per record was the largest on the apply path.
func decodeRecord(b []byte, mr *mpReader) (Record, *DecodeError) {
	if len(b) < 2 {
		return nil, &DecodeError{Err: fmt.Errorf("record of %d bytes is shorter than its 2-byte header", len(b))}
	}
	t, v := RecordType(b[0]), b[1]
	known, ok := recordVersions[t]
	if !ok {
		return nil, &DecodeError{Type: t, Version: v, Err: ErrUnknownType}
	}
	if v == 0 || v > known {
		err := ErrNewerVersion
		if v == 0 {
			err = errors.New("record version 0 is invalid")
		}
		return nil, &DecodeError{Type: t, Version: v, Err: fmt.Errorf("%w (have %d, know up to %d)", err, v, known)}
	}
	r := newRecord(t)
	if err := decodeBody(r, b[2:], mr); err != nil {
		return nil, &DecodeError{Type: t, Version: v, Err: err}
	}
	if vr, ok := r.(versionedRecord); ok && vr.recordVersion() != v {
		return nil, &DecodeError{Type: t, Version: v, Err: fmt.Errorf("body is of version %d", vr.recordVersion())}
	}
	if err := validate(r); err != nil {
		return nil, &DecodeError{Type: t, Version: v, Err: err}
	}
	return r, nil
}

// decodeBody decodes a record's msgpack body, which must be all of b.
func decodeBody(r Record, b []byte, mr *mpReader) error {
	if fd, ok := r.(fastDecoder); ok {
		*mr = mpReader{b: b}
		if err := fd.decodeFast(mr); err != nil {
			return fmt.Errorf("body: %w", err)
		}
		if mr.pos != len(b) {
			return fmt.Errorf("%d trailing bytes after body", len(b)-mr.pos)
		}
		return nil
	}
	// msgpack.Decoder allocates declared lengths up front: bound them by
	// the input first (mpReader needs no such check, it reads in place).
	if err := CheckMsgpack(b, 1); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	rd := bytes.NewReader(b)
	dec := msgpack.GetDecoder()
	defer msgpack.PutDecoder(dec)
	dec.Reset(rd)
	if err := dec.Decode(r); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	if rd.Len() != 0 {
		return fmt.Errorf("%d trailing bytes after body", rd.Len())
	}
	return nil
}

// validate checks the few invariants a record must hold to be meaningful at
// all; whether it fits the current image is the FSM's business.
func validate(r Record) error {
	switch rec := r.(type) {
	case *ReplicaStateChange:
		if !rec.State.Valid() {
			return fmt.Errorf("field State: %v is not a replica state", rec.State)
		}
	case *PartitionStateChange:
		if !rec.State.Valid() {
			return fmt.Errorf("field State: %v is not a partition state", rec.State)
		}
	case *PartitionChange:
		if rec.Set&^(ChangeLeader|ChangeISR|ChangeReplicas|ChangeReassignment) != 0 {
			return fmt.Errorf("field Set: unknown bits %#x", rec.Set)
		}
	case *PartitionChanges:
		for i := range rec.Changes {
			if set := rec.Changes[i].Set; set&^(ChangeLeader|ChangeISR|ChangeReplicas|ChangeReassignment) != 0 {
				return fmt.Errorf("field Changes[%d].Set: unknown bits %#x", i, set)
			}
		}
	}
	return nil
}

// Batch is the records of one log entry. The FSM applies them in order
// and readers see them all at once; a record it refuses changes nothing
// and the others still apply (see the package comment).
type Batch []Record

// EncodeBatch encodes records as one log entry:
//
//	magic | format version | uvarint count | count × (uvarint length | record)
func EncodeBatch(records []Record) ([]byte, error) {
	out := make([]byte, 0, 16+len(records)*48)
	out = append(out, batchMagic, batchFormatVersion)
	out = binary.AppendUvarint(out, uint64(len(records)))
	var scratch []byte
	for _, r := range records {
		var err error
		scratch, err = AppendRecord(scratch[:0], r)
		if err != nil {
			return nil, err
		}
		out = binary.AppendUvarint(out, uint64(len(scratch)))
		out = append(out, scratch...)
	}
	return out, nil
}

// IsBatch reports whether b starts like a log entry of this package.
func IsBatch(b []byte) bool { return len(b) >= 2 && b[0] == batchMagic }

// DecodeBatch decodes a log entry written by EncodeBatch. Any error is a
// *DecodeError naming the record that failed.
func DecodeBatch(b []byte) (Batch, error) {
	if len(b) < 2 {
		return nil, &DecodeError{Record: -1, Err: fmt.Errorf("entry of %d bytes is shorter than the batch header", len(b))}
	}
	if b[0] != batchMagic {
		return nil, &DecodeError{Record: -1, Err: fmt.Errorf("bad magic %#x, want %#x", b[0], batchMagic)}
	}
	if b[1] != batchFormatVersion {
		return nil, &DecodeError{Record: -1, Err: fmt.Errorf("batch format %d, this binary knows %d", b[1], batchFormatVersion)}
	}
	b = b[2:]
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, &DecodeError{Record: -1, Err: errors.New("bad record count")}
	}
	b = b[k:]
	// Every record takes at least 3 bytes (length, type, version), so the
	// count cannot honestly exceed len(b)/3.
	if n > MaxRecordsPerBatch || n > uint64(len(b)/3) {
		return nil, &DecodeError{Record: -1, Err: fmt.Errorf("record count %d does not fit in %d bytes", n, len(b))}
	}
	out := make(Batch, 0, n)
	mr := &mpReader{}
	for i := 0; i < int(n); i++ {
		l, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, &DecodeError{Record: i, Err: errors.New("bad record length")}
		}
		b = b[k:]
		if l > uint64(len(b)) {
			if len(b) >= 2 {
				return nil, &DecodeError{Record: i, Type: RecordType(b[0]), Version: b[1], Err: fmt.Errorf("record length %d exceeds the %d bytes left", l, len(b))}
			}
			return nil, &DecodeError{Record: i, Err: fmt.Errorf("record length %d exceeds the %d bytes left", l, len(b))}
		}
		r, err := decodeRecord(b[:l], mr)
		if err != nil {
			err.Record = i
			return nil, err
		}
		out = append(out, r)
		b = b[l:]
	}
	if len(b) != 0 {
		return nil, &DecodeError{Record: -1, Err: fmt.Errorf("%d trailing bytes after %d records", len(b), n)}
	}
	return out, nil
}
