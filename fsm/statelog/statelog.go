// Package statelog keeps a voter's state-change log: every transition
// its FSM applies, one JSON line each, in files rotated by size.
//
// Kafka writes its state-change.log on whichever broker was the
// controller, so a failover splits the story across hosts. Here every
// transition is a committed record that every voter applies, so every
// voter writes the same lines: grep works on any host, and any voter
// answers `ctrlnode state-changes` alike. The lines are a view of the
// raft log, not a store of their own: they are buffered and not synced,
// and a voter that restarts replays its log from its last snapshot and
// writes again what the file is missing (entries at or below the last
// index in the file are skipped). A voter that installs a snapshot cannot
// replay what the snapshot covers: it writes a "restored" line, and the
// history it has starts after it.
//
// Files: state-change.log is written; when it passes MaxFileBytes it is
// renamed state-change.log.1 (the older ones shifted up, the oldest past
// Files removed) and a new one begun.
package statelog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/ctrlquorum/ctrlquorum/fsm"
)

// FileName is the file being written; rotated ones add .1, .2, ….
const FileName = "state-change.log"

// KindRestored marks where a voter's history restarts after it installed
// a snapshot.
const KindRestored = "restored"

// Line is one line of the log: a transition with its entry's header.
type Line struct {
	Index           uint64    `json:"index"`
	Term            uint64    `json:"term"`
	Time            time.Time `json:"time"`
	ControllerEpoch int32     `json:"controller_epoch"`
	ControllerNode  int32     `json:"controller_node"`
	TopicID         string    `json:"topic_id,omitempty"`
	fsm.StateChange
}

// Text is the transition the line records, without its entry's header.
func (l Line) Text() string {
	if l.Kind == KindRestored {
		return "history restarts here: this voter installed a snapshot of the log up to this index"
	}
	return l.Describe()
}

// String is the line as the history prints it.
func (l Line) String() string {
	cause := ""
	if l.Cause != "" {
		cause = "[" + l.Cause + "]  "
	}
	return fmt.Sprintf("%d  term %d  %s  controller %d (epoch %d)  %s%s", l.Index, l.Term, l.Time.UTC().Format(time.RFC3339Nano),
		l.ControllerNode, l.ControllerEpoch, cause, l.Text())
}

// Options size the log. Zero values take the defaults.
type Options struct {
	// MaxFileBytes is the size at which the file is rotated. Default
	// 64 MiB.
	MaxFileBytes int64
	// Files is how many files are kept, the one being written included.
	// Default 4.
	Files int
}

// Log is a state-change log being written.
type Log struct {
	dir  string
	opts Options

	mu        sync.Mutex
	f         *os.File
	w         *bufio.Writer
	size      int64
	lastIndex uint64
	followers map[chan Line]struct{}
	closed    bool
}

// Open opens (creating it if needed) the log in dir.
func Open(dir string, opts Options) (*Log, error) {
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = 64 << 20
	}
	if opts.Files <= 0 {
		opts.Files = 4
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state-change log: %w", err)
	}
	l := &Log{dir: dir, opts: opts, followers: map[chan Line]struct{}{}}
	// The last index written is in the newest file that has a line.
	for i := 0; i < opts.Files && l.lastIndex == 0; i++ {
		last, err := lastIndexIn(l.path(i))
		if err != nil {
			return nil, err
		}
		l.lastIndex = last
	}
	if err := l.openCurrent(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Log) path(n int) string {
	if n == 0 {
		return filepath.Join(l.dir, FileName)
	}
	return filepath.Join(l.dir, FileName+"."+strconv.Itoa(n))
}

func (l *Log) openCurrent() error {
	f, err := os.OpenFile(l.path(0), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("state-change log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("state-change log: %w", err)
	}
	l.f, l.w, l.size = f, bufio.NewWriterSize(f, 64<<10), st.Size()
	return nil
}

// lastIndexIn returns the index of the last whole line of a file, 0 for
// none (or no file). A torn last line, from a crash, is passed over.
func lastIndexIn(path string) (uint64, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("state-change log: %w", err)
	}
	for len(data) > 0 {
		end := bytes.LastIndexByte(data[:len(data)-1], '\n')
		line := data[end+1:]
		data = data[:max(end, 0)]
		var head struct {
			Index uint64 `json:"index"`
		}
		if json.Unmarshal(line, &head) == nil && head.Index > 0 {
			return head.Index, nil
		}
		if end < 0 {
			break
		}
	}
	return 0, nil
}

// Append writes an entry's transitions; an entry at or below the last
// index written is skipped (a replay after a restart).
func (l *Log) Append(e fsm.EntryChanges) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || e.Index <= l.lastIndex {
		return nil
	}
	for _, ch := range e.Changes {
		line := Line{Index: e.Index, Term: e.Term, Time: e.AppendedAt, ControllerEpoch: e.ControllerEpoch, ControllerNode: e.ControllerNode, StateChange: ch}
		if !ch.TopicID.IsZero() {
			line.TopicID = ch.TopicID.String()
		}
		if err := l.writeLocked(line); err != nil {
			return err
		}
	}
	l.lastIndex = e.Index
	return l.w.Flush()
}

// Restored notes that the voter installed a snapshot up to index: the
// history it has restarts after it.
func (l *Log) Restored(index uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || index <= l.lastIndex {
		return nil
	}
	if err := l.writeLocked(Line{Index: index, StateChange: fsm.StateChange{Kind: KindRestored, Partition: -1, Broker: -1}}); err != nil {
		return err
	}
	l.lastIndex = index
	return l.w.Flush()
}

func (l *Log) writeLocked(line Line) error {
	b, err := json.Marshal(line)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if l.size > 0 && l.size+int64(len(b)) > l.opts.MaxFileBytes {
		if err := l.rotateLocked(); err != nil {
			return err
		}
	}
	if _, err := l.w.Write(b); err != nil {
		return fmt.Errorf("state-change log: %w", err)
	}
	l.size += int64(len(b))
	for ch := range l.followers {
		select {
		case ch <- line:
		default:
			// A follower that cannot keep up is dropped: its channel
			// closes and it reads the files again.
			delete(l.followers, ch)
			close(ch)
		}
	}
	return nil
}

func (l *Log) rotateLocked() error {
	if err := l.w.Flush(); err != nil {
		return err
	}
	if err := l.f.Close(); err != nil {
		return err
	}
	_ = os.Remove(l.path(l.opts.Files - 1))
	for n := l.opts.Files - 2; n >= 0; n-- {
		if err := os.Rename(l.path(n), l.path(n+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("state-change log: rotate: %w", err)
		}
	}
	return l.openCurrent()
}

// Close flushes and closes the log; followers' channels close.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	for ch := range l.followers {
		close(ch)
	}
	l.followers = nil
	err := l.w.Flush()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Filter selects lines. Zero values select all; Partition and Broker
// select with -1 for any.
type Filter struct {
	Topic     string
	Partition int32
	Broker    int32
	Since     uint64
}

// All is the filter that selects every line.
var All = Filter{Partition: -1, Broker: -1}

// Match reports whether the filter selects the line. Restored lines are
// always selected: they say where the history starts.
func (f Filter) Match(l Line) bool {
	if l.Kind == KindRestored {
		return l.Index >= f.Since
	}
	switch {
	case l.Index < f.Since:
		return false
	case f.Topic != "" && l.Topic != f.Topic:
		return false
	case f.Partition >= 0 && l.Partition != f.Partition:
		return false
	case f.Broker >= 0 && l.Broker != f.Broker:
		return false
	}
	return true
}

// Read calls fn with every line the filter selects, oldest first, until
// fn returns false. It returns the index up to which it read, for Follow
// to go on from.
func (l *Log) Read(f Filter, fn func(Line) bool) (uint64, error) {
	l.mu.Lock()
	err := l.w.Flush()
	last := l.lastIndex
	l.mu.Unlock()
	if err != nil {
		return 0, err
	}
	for n := l.opts.Files - 1; n >= 0; n-- {
		more, err := readFile(l.path(n), last, f, fn)
		if err != nil {
			return 0, err
		}
		if !more {
			return last, nil
		}
	}
	return last, nil
}

func readFile(path string, upTo uint64, f Filter, fn func(Line) bool) (bool, error) {
	file, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("state-change log: %w", err)
	}
	defer file.Close()
	r := bufio.NewReaderSize(file, 64<<10)
	for {
		b, err := r.ReadBytes('\n')
		if len(b) > 0 && b[len(b)-1] == '\n' {
			var line Line
			// A line that does not parse (torn by a crash) is skipped.
			if json.Unmarshal(b, &line) == nil && line.Index <= upTo && f.Match(line) && !fn(line) {
				return false, nil
			}
		}
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("state-change log: %w", err)
		}
	}
}

// Follow calls fn with every line the filter selects, the ones in the
// files first and then each as it is written, until fn returns false,
// done closes or the log closes. A follower too slow for the writer
// reads the files again from where it was.
func (l *Log) Follow(done <-chan struct{}, f Filter, fn func(Line) bool) error {
	for {
		ch := make(chan Line, 4096)
		// Subscribe before reading the files, so that nothing written in
		// between is missed; what the files gave already is skipped.
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return nil
		}
		l.followers[ch] = struct{}{}
		l.mu.Unlock()
		stopped := false
		last, err := l.Read(f, func(line Line) bool {
			if !fn(line) {
				stopped = true
				return false
			}
			return true
		})
		if err != nil || stopped {
			l.unfollow(ch)
			return err
		}
		f.Since = last + 1
		for open := true; open; {
			select {
			case <-done:
				l.unfollow(ch)
				return nil
			case line, ok := <-ch:
				if !ok {
					open = false
					break
				}
				if line.Index >= f.Since && f.Match(line) && !fn(line) {
					l.unfollow(ch)
					return nil
				}
			}
		}
	}
}

func (l *Log) unfollow(ch chan Line) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.followers[ch]; ok {
		delete(l.followers, ch)
		close(ch)
	}
}

// Start returns the index of the first line retained, 0 for an empty log.
func (l *Log) Start() (uint64, error) {
	var first uint64
	_, err := l.Read(All, func(line Line) bool { first = line.Index; return false })
	return first, err
}
