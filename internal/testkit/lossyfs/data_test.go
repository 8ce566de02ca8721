package lossyfs

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestDataMatchesAByteSlice runs random writes (zeros among them, which
// free pages), truncates and reads on data and on a plain byte slice.
func TestDataMatchesAByteSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var d data
	var ref []byte
	for step := range 5000 {
		off := rng.Int64N(6 * PageSize)
		switch rng.IntN(4) {
		case 0:
			size := off
			if size < int64(len(ref)) {
				ref = ref[:size]
			} else {
				ref = append(ref, make([]byte, size-int64(len(ref)))...)
			}
			d.truncate(size)
		default:
			b := make([]byte, rng.IntN(2*PageSize))
			if rng.IntN(3) > 0 {
				for i := range b {
					b[i] = byte(rng.IntN(256))
				}
			}
			if end := off + int64(len(b)); end > int64(len(ref)) {
				ref = append(ref, make([]byte, end-int64(len(ref)))...)
			}
			copy(ref[off:], b)
			d.writeAt(b, off)
		}
		if d.size != int64(len(ref)) {
			t.Fatalf("step %d: size %d, want %d", step, d.size, len(ref))
		}
		got := make([]byte, len(ref)+10)
		n := d.readAt(got, 0)
		if !bytes.Equal(got[:n], ref) {
			t.Fatalf("step %d: content differs", step)
		}
	}
}
