package partlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// EpochEntry says that leader epoch Epoch wrote its first record at
// StartOffset.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// epochCache is Kafka's leader-epoch cache (LeaderEpochFileCache): the
// epochs whose leaders wrote to this log and where each began, in
// increasing order of both, kept in leader-epoch-checkpoint. It answers
// OffsetsForLeaderEpoch: where an epoch's records end in this log.
type epochCache struct {
	path    string
	entries []EpochEntry
}

const epochCheckpointName = "leader-epoch-checkpoint"

// loadEpochs reads dir's checkpoint; a missing file is an empty cache. A
// damaged one is an error: the log is then not opened, rather than
// answering OffsetsForLeaderEpoch wrongly.
func loadEpochs(dir string) (*epochCache, error) {
	c := &epochCache{path: filepath.Join(dir, epochCheckpointName)}
	b, err := os.ReadFile(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	entries, err := parseEpochCheckpoint(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.path, err)
	}
	c.entries = entries
	return c, nil
}

// parseEpochCheckpoint reads Kafka's checkpoint text: "0", the count,
// then one "epoch offset" line per entry, both increasing.
func parseEpochCheckpoint(b []byte) ([]EpochEntry, error) {
	entries, rest, err := ParseCheckpoint(b, 2)
	if err != nil {
		return nil, err
	}
	out := make([]EpochEntry, 0, len(entries))
	for i, f := range entries {
		e, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || e < 0 || o < 0 {
			return nil, fmt.Errorf("checkpoint entry %d: %q", i, strings.Join(f, " "))
		}
		if k := len(out); k > 0 && (int32(e) <= out[k-1].Epoch || o < out[k-1].StartOffset) {
			return nil, fmt.Errorf("checkpoint entry %d: %q does not follow %d %d", i, strings.Join(f, " "), out[k-1].Epoch, out[k-1].StartOffset)
		}
		out = append(out, EpochEntry{Epoch: int32(e), StartOffset: o})
	}
	if rest != "" {
		return nil, fmt.Errorf("checkpoint has %q after its %d entries", rest, len(entries))
	}
	return out, nil
}

// save writes the checkpoint: a new file, synced, renamed over the old
// one, and the directory synced, so that a crash leaves the old or the
// new cache, never a mix.
func (c *epochCache) save() error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(c.entries))
	for _, e := range c.entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return WriteFileAtomic(c.path, b.Bytes())
}

// latest returns the newest entry, or false for an empty cache.
func (c *epochCache) latest() (EpochEntry, bool) {
	if len(c.entries) == 0 {
		return EpochEntry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// assign notes that epoch starts at offset, if it is newer than every
// epoch known; reports whether the cache changed. An entry at or past
// offset with an older epoch (left by a truncation in memory only) is
// dropped first, so that start offsets keep growing.
func (c *epochCache) assign(epoch int32, offset int64) bool {
	if l, ok := c.latest(); ok && epoch <= l.Epoch {
		return false
	}
	for len(c.entries) > 0 && c.entries[len(c.entries)-1].StartOffset > offset {
		c.entries = c.entries[:len(c.entries)-1]
	}
	c.entries = append(c.entries, EpochEntry{Epoch: epoch, StartOffset: offset})
	return true
}

// truncateFromEnd drops the entries that start at or after offset, as a
// log truncated to offset no longer holds their records; reports whether
// the cache changed.
func (c *epochCache) truncateFromEnd(offset int64) bool {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= offset {
		n--
	}
	changed := n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// endOffsetFor answers OffsetsForLeaderEpoch as Kafka's cache does: for
// the newest epoch, the log end; for an older epoch, the start of the
// next epoch the cache knows, together with the largest known epoch not
// above the one asked (the requested one when it is older than all);
// for an epoch newer than all, or an empty cache, (-1, -1).
func (c *epochCache) endOffsetFor(epoch int32, logEnd int64) (int32, int64) {
	l, ok := c.latest()
	if !ok || epoch < 0 {
		return -1, -1
	}
	if epoch == l.Epoch {
		return epoch, logEnd
	}
	if epoch > l.Epoch {
		return -1, -1
	}
	// The first entry with an epoch above the one asked.
	i := 0
	for i < len(c.entries) && c.entries[i].Epoch <= epoch {
		i++
	}
	if i == 0 {
		return epoch, c.entries[0].StartOffset
	}
	return c.entries[i-1].Epoch, c.entries[i].StartOffset
}

// WriteFileAtomic replaces path with b: written to path.tmp, synced,
// renamed, and the directory synced, so that a crash leaves the old file
// or the new one, never a torn one.
func WriteFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
