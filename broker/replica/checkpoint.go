package replica

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/broker/partlog"
)

// The high-watermark checkpoint is Kafka's replication-offset-checkpoint:
// one file in the data directory holding each local replica's high
// watermark, written atomically (a temporary file, synced, renamed, the
// directory synced) on the housekeeping tick when a high watermark moved,
// and on Close. At start the manager reads it, and a replica's first
// opening takes its high watermark from it, never above the log's end nor
// below its start: a leader that restarts serves consumers what was
// committed at once instead of waiting for its followers to fetch again.
//
// The text format is Kafka's: the version (0), the number of entries,
// then one "topic partition offset" line each.

const checkpointName = "replication-offset-checkpoint"

func (m *Manager) checkpointPath() string { return filepath.Join(m.cfg.DataDir, checkpointName) }

// readCheckpoint reads the checkpoint file; none is an empty checkpoint.
func readCheckpoint(path string) (map[broker.TopicPartition]int64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[broker.TopicPartition]int64{}, nil
	}
	if err != nil {
		return nil, err
	}
	return parseCheckpoint(b)
}

// parseCheckpoint decodes a checkpoint, refusing anything malformed.
func parseCheckpoint(b []byte) (map[broker.TopicPartition]int64, error) {
	entries, _, err := partlog.ParseCheckpoint(b, 3)
	if err != nil {
		return nil, err
	}
	out := make(map[broker.TopicPartition]int64, len(entries))
	for _, f := range entries {
		part, err1 := strconv.ParseInt(f[1], 10, 32)
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || part < 0 || off < 0 {
			return nil, fmt.Errorf("entry %q: bad partition or offset", strings.Join(f, " "))
		}
		out[broker.TopicPartition{Topic: f[0], Partition: int32(part)}] = off
	}
	return out, nil
}

func formatCheckpoint(hws map[broker.TopicPartition]int64) []byte {
	tps := make([]broker.TopicPartition, 0, len(hws))
	for tp := range hws {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(tps))
	for _, tp := range tps {
		fmt.Fprintf(&b, "%s %d %d\n", tp.Topic, tp.Partition, hws[tp])
	}
	return b.Bytes()
}

// loadCheckpoint reads the checkpoint at start. A file that cannot be
// read or parsed is reported and ignored: every replica then starts at
// high watermark 0 and learns it again from its ISR, which is safe.
func (m *Manager) loadCheckpoint() {
	hws, err := readCheckpoint(m.checkpointPath())
	if err != nil {
		m.log.Warn("the high-watermark checkpoint is unreadable: replicas start from high watermark 0", "file", m.checkpointPath(), "error", err)
		hws = map[broker.TopicPartition]int64{}
	}
	m.savedHW = hws
}

// restoreHWLocked gives a replica being opened the high watermark the
// checkpoint has for it, once: within its log. m.mu is held.
func (m *Manager) restoreHWLocked(p *partition) {
	hw, ok := m.savedHW[p.tp]
	if !ok {
		return
	}
	delete(m.savedHW, p.tp)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.log != nil {
		p.hw = min(max(hw, p.log.StartOffset()), p.log.EndOffset())
	}
}

// writeCheckpoint writes every replica's high watermark, and those of
// the checkpoint not opened since the start, if any changed since the
// last write.
func (m *Manager) writeCheckpoint() error {
	m.checkpointMu.Lock()
	defer m.checkpointMu.Unlock()
	hws := map[broker.TopicPartition]int64{}
	m.mu.Lock()
	for tp, hw := range m.savedHW {
		hws[tp] = hw
	}
	for _, p := range m.parts {
		p.mu.Lock()
		if p.log != nil {
			hws[p.tp] = p.hw
		}
		p.mu.Unlock()
	}
	m.mu.Unlock()
	b := formatCheckpoint(hws)
	if bytes.Equal(b, m.checkpointed) {
		return nil
	}
	if err := partlog.WriteFileAtomic(m.checkpointPath(), b); err != nil {
		return err
	}
	m.checkpointed = b
	return nil
}
