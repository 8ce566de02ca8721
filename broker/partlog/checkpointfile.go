package partlog

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// ParseCheckpoint reads Kafka's checkpoint text format, shared by the
// leader-epoch cache and the broker's replication-offset checkpoint: "0",
// the entry count, then one line per entry of exactly fields
// space-separated fields. It returns each entry's fields, and the first
// non-empty line after the entries ("" if none) for callers that refuse
// trailing content.
func ParseCheckpoint(b []byte, fields int) (entries [][]string, rest string, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	line := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return strings.TrimSpace(sc.Text()), true
	}
	v, ok := line()
	if !ok || v != "0" {
		return nil, "", fmt.Errorf("checkpoint version %q, want 0", v)
	}
	cs, ok := line()
	n, err := strconv.Atoi(cs)
	if !ok || err != nil || n < 0 {
		return nil, "", fmt.Errorf("checkpoint count %q", cs)
	}
	entries = make([][]string, 0, min(n, 1<<16))
	for i := range n {
		l, ok := line()
		if !ok {
			return nil, "", fmt.Errorf("checkpoint has %d entries of %d", i, n)
		}
		f := strings.Fields(l)
		if len(f) != fields {
			return nil, "", fmt.Errorf("checkpoint entry %d: %q: want %d fields", i, l, fields)
		}
		entries = append(entries, f)
	}
	for {
		l, ok := line()
		if !ok || l != "" {
			rest = l
			break
		}
	}
	return entries, rest, sc.Err()
}
