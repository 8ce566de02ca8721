package raftlog

import (
	"encoding/binary"
	"fmt"
)

// CheckMsgpack walks the msgpack values in b without decoding them and fails
// if any declared length (string, binary, array, map) cannot fit in the bytes
// that follow it, or if b holds anything but exactly `values` complete values.
//
// msgpack/v5 allocates a slice of the declared array length before it reads
// the elements, so a corrupt length of 2^32 would exhaust memory before the
// input runs out. Every element takes at least one byte, so checking lengths
// against the remaining input first bounds all allocation by the input size.
func CheckMsgpack(b []byte, values int) error {
	need := uint64(values)
	i := 0
	for need > 0 {
		if i >= len(b) {
			return fmt.Errorf("msgpack: truncated at byte %d, %d value(s) missing", i, need)
		}
		need--
		c := b[i]
		i++
		var skip, items uint64 // bytes to skip; nested values to expect
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		case c >= 0x80 && c <= 0x8f:
			items = 2 * uint64(c&0x0f)
		case c >= 0x90 && c <= 0x9f:
			items = uint64(c & 0x0f)
		case c >= 0xa0 && c <= 0xbf:
			skip = uint64(c & 0x1f)
		case c == 0xc1:
			return fmt.Errorf("msgpack: invalid code 0xc1 at byte %d", i-1)
		default:
			var err error
			skip, items, i, err = msgpackHeader(b, i, c)
			if err != nil {
				return err
			}
		}
		left := uint64(len(b) - i)
		if skip > left {
			return fmt.Errorf("msgpack: length %d at byte %d exceeds the %d bytes left", skip, i, left)
		}
		if items > left-skip {
			return fmt.Errorf("msgpack: %d elements at byte %d cannot fit in the %d bytes left", items, i, left)
		}
		i += int(skip)
		need += items
	}
	if i != len(b) {
		return fmt.Errorf("msgpack: %d trailing bytes", len(b)-i)
	}
	return nil
}

// msgpackHeader decodes the multi-byte headers (codes 0xc4–0xdf).
func msgpackHeader(b []byte, i int, c byte) (skip, items uint64, next int, err error) {
	size := func(n int) (uint64, error) {
		if i+n > len(b) {
			return 0, fmt.Errorf("msgpack: header truncated at byte %d", i)
		}
		var v uint64
		switch n {
		case 1:
			v = uint64(b[i])
		case 2:
			v = uint64(binary.BigEndian.Uint16(b[i:]))
		case 4:
			v = uint64(binary.BigEndian.Uint32(b[i:]))
		}
		i += n
		return v, nil
	}
	var n uint64
	switch c {
	case 0xc4, 0xd9: // bin8, str8
		n, err = size(1)
		skip = n
	case 0xc5, 0xda:
		n, err = size(2)
		skip = n
	case 0xc6, 0xdb:
		n, err = size(4)
		skip = n
	case 0xc7: // ext8: length, then type byte
		n, err = size(1)
		skip = n + 1
	case 0xc8:
		n, err = size(2)
		skip = n + 1
	case 0xc9:
		n, err = size(4)
		skip = n + 1
	case 0xca, 0xce, 0xd2:
		skip = 4
	case 0xcb, 0xcf, 0xd3:
		skip = 8
	case 0xcc, 0xd0:
		skip = 1
	case 0xcd, 0xd1:
		skip = 2
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1,2,4,8,16 plus type byte
		skip = 1 + 1<<(c-0xd4)
	case 0xdc:
		items, err = size(2)
	case 0xdd:
		items, err = size(4)
	case 0xde:
		n, err = size(2)
		items = 2 * n
	case 0xdf:
		n, err = size(4)
		items = 2 * n
	}
	return skip, items, i, err
}
