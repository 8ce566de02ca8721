package partlog

import (
	"encoding/binary"
	"sort"
)

// indexEntryBytes is the size of an offset index entry: the batch's base
// offset relative to the segment's base (uint32) and the batch's byte
// position in the segment file (uint32), as Kafka's .index.
const indexEntryBytes = 8

// indexEntry is one entry of a segment's offset index.
type indexEntry struct {
	rel uint32 // base offset of the batch minus the segment's base offset
	pos uint32 // byte position of the batch in the .log file
}

// appendEntry encodes e onto b.
func appendEntry(b []byte, e indexEntry) []byte {
	b = binary.BigEndian.AppendUint32(b, e.rel)
	return binary.BigEndian.AppendUint32(b, e.pos)
}

// decodeIndex reads an index file's bytes, or reports false when they are
// not a valid index of a log file of logSize bytes: a partial entry,
// offsets or positions that do not grow, or a position past the file.
func decodeIndex(b []byte, logSize int64) ([]indexEntry, bool) {
	if len(b)%indexEntryBytes != 0 {
		return nil, false
	}
	out := make([]indexEntry, 0, len(b)/indexEntryBytes)
	for i := 0; i < len(b); i += indexEntryBytes {
		e := indexEntry{rel: binary.BigEndian.Uint32(b[i:]), pos: binary.BigEndian.Uint32(b[i+4:])}
		if int64(e.pos)+HeaderBytes > logSize {
			return nil, false
		}
		if n := len(out); n > 0 && (e.rel <= out[n-1].rel || e.pos <= out[n-1].pos) {
			return nil, false
		}
		out = append(out, e)
	}
	return out, true
}

// lookup returns the position of the last indexed batch whose base offset
// is at most rel: where a scan for rel starts (0 before the first entry).
func lookup(idx []indexEntry, rel uint32) uint32 {
	i := sort.Search(len(idx), func(i int) bool { return idx[i].rel > rel })
	if i == 0 {
		return 0
	}
	return idx[i-1].pos
}
