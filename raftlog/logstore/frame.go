package logstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/hashicorp/raft"
)

// A frame is one log entry on disk:
//
//	crc32c (4) | body length (4) | body
//	body: index (8) | term (8) | type (1) | appended-at unix ns (8) |
//	      append's first index (8) | data length (4) | data | extensions
//
// All integers are little-endian. The checksum covers the length field and
// the body, so a length torn by a crash is caught like torn data. The index
// of the first entry of the append that wrote the frame tells Open whether
// damage lies in the last append or before it (see segment.scan).
const (
	frameHeaderSize = 8
	bodyFixedSize   = 8 + 8 + 1 + 8 + 8 + 4

	// MaxEntryBytes bounds a frame's body. It is far above any entry the
	// controller writes; its job is to stop a damaged length field from
	// being believed.
	MaxEntryBytes = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errBadFrame is wrapped by every decoding failure of a single frame.
var errBadFrame = errors.New("bad log frame")

// frameSize is the number of bytes appendFrame writes for l.
func frameSize(l *raft.Log) int {
	return frameHeaderSize + bodyFixedSize + len(l.Data) + len(l.Extensions)
}

// appendFrame appends l's frame, written by the append whose first entry is
// appendFirst, to dst.
func appendFrame(dst []byte, l *raft.Log, appendFirst uint64) []byte {
	start := len(dst)
	bodyLen := bodyFixedSize + len(l.Data) + len(l.Extensions)
	dst = binary.LittleEndian.AppendUint32(dst, 0) // checksum, filled below
	dst = binary.LittleEndian.AppendUint32(dst, uint32(bodyLen))
	dst = binary.LittleEndian.AppendUint64(dst, l.Index)
	dst = binary.LittleEndian.AppendUint64(dst, l.Term)
	dst = append(dst, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	dst = binary.LittleEndian.AppendUint64(dst, uint64(at))
	dst = binary.LittleEndian.AppendUint64(dst, appendFirst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(l.Data)))
	dst = append(dst, l.Data...)
	dst = append(dst, l.Extensions...)
	sum := crc32.Checksum(dst[start+4:], castagnoli)
	binary.LittleEndian.PutUint32(dst[start:], sum)
	return dst
}

// frameBodyLen reads the body length from a frame header and checks it is
// one a frame can have.
func frameBodyLen(header []byte) (int, error) {
	n := binary.LittleEndian.Uint32(header[4:8])
	if n < bodyFixedSize || n > MaxEntryBytes {
		return 0, fmt.Errorf("%w: body length %d outside [%d, %d]", errBadFrame, n, bodyFixedSize, MaxEntryBytes)
	}
	return int(n), nil
}

// checkFrame verifies the checksum of a whole frame (header and body).
func checkFrame(frame []byte) error {
	want := binary.LittleEndian.Uint32(frame[0:4])
	if got := crc32.Checksum(frame[4:], castagnoli); got != want {
		return fmt.Errorf("%w: checksum %08x, frame says %08x", errBadFrame, got, want)
	}
	return nil
}

// checkLayout verifies that a checked frame's data length fits its body:
// the checksum cannot tell a frame this writer never makes.
func checkLayout(frame []byte) error {
	body := frame[frameHeaderSize:]
	if dataLen := binary.LittleEndian.Uint32(body[33:]); uint64(dataLen) > uint64(len(body)-bodyFixedSize) {
		return fmt.Errorf("%w: data length %d, %d bytes left", errBadFrame, dataLen, len(body)-bodyFixedSize)
	}
	return nil
}

// frameIndex is the log index in a checked frame.
func frameIndex(frame []byte) uint64 {
	return binary.LittleEndian.Uint64(frame[frameHeaderSize:])
}

// frameAppendFirst is the first index of the append that wrote a frame.
func frameAppendFirst(frame []byte) uint64 {
	return binary.LittleEndian.Uint64(frame[frameHeaderSize+25:])
}

// decodeFrame fills l from a frame whose checksum has been verified. Data
// and Extensions alias frame, which the caller must not reuse.
func decodeFrame(frame []byte, l *raft.Log) error {
	body := frame[frameHeaderSize:]
	if len(body) < bodyFixedSize {
		return fmt.Errorf("%w: body of %d bytes", errBadFrame, len(body))
	}
	l.Index = binary.LittleEndian.Uint64(body[0:])
	l.Term = binary.LittleEndian.Uint64(body[8:])
	l.Type = raft.LogType(body[16])
	at := int64(binary.LittleEndian.Uint64(body[17:]))
	dataLen := binary.LittleEndian.Uint32(body[33:])
	rest := body[bodyFixedSize:]
	if uint64(dataLen) > uint64(len(rest)) {
		return fmt.Errorf("%w: data length %d, %d bytes left", errBadFrame, dataLen, len(rest))
	}
	l.Data = nilIfEmpty(rest[:dataLen])
	l.Extensions = nilIfEmpty(rest[dataLen:])
	l.AppendedAt = time.Time{}
	if at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	return nil
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}
