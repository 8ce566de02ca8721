package voter_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
	"github.com/ctrlquorum/ctrlquorum/voter"
)

// The power-loss test runs each voter in a process of its own: this test
// binary again, running TestPowerLossVoterProcess with plVoterEnv set to
// the voter's configuration. A voter whose disk is cut may panic (raft
// panics when its stable store fails, or a log read does); in a child
// process that is contained, and the test kills the process anyway, as the
// power cut would.
//
// The child speaks JSON lines: requests on stdin, replies (with the
// request's id) and events (id 0) on stdout. Its raft logs at Debug level
// are read by the child itself and turned into events: every vote granted
// to it ("vote", with the voter and term), and every line at Warn or
// above ("log"). Stdin closing ends the process.
const plVoterEnv = "CTRLQUORUM_POWERLOSS_VOTER"

// plChildConfig is what a child voter is started with.
type plChildConfig struct {
	ID      string
	Addr    string
	DataDir string
	Peers   []raft.Server
	// ListenerFD says the raft listener is open on fd 3 (the first start);
	// otherwise the child listens on Addr itself.
	ListenerFD bool
}

// The voters take snapshots and compact often, so cuts land in those too,
// and a voter that was down a while catches up from a snapshot.
func plTune(c *voter.Config) {
	voter.FastTimeouts(c)
	c.SnapshotThreshold = 32
	c.SnapshotInterval = 50 * time.Millisecond
	c.TrailingLogs = 16
}

type plRequest struct {
	ID      int      `json:"id"`
	Op      string   `json:"op"` // apply, status, transfer, shutdown, fsm, entries
	Data    string   `json:"data,omitempty"`
	To      string   `json:"to,omitempty"`
	Addr    string   `json:"addr,omitempty"`
	Indexes []uint64 `json:"indexes,omitempty"`
}

type plStatus struct {
	State             string `json:"state"`
	Term              uint64 `json:"term"`
	LastLogIndex      uint64 `json:"last_log_index"`
	LastLogTerm       uint64 `json:"last_log_term"`
	LastSnapshotIndex uint64 `json:"last_snapshot_index"`
	CommitIndex       uint64 `json:"commit_index"`
	Leader            string `json:"leader"`
}

// plMessage is one line from a child: a reply (ID set) or an event.
type plMessage struct {
	ID  int    `json:"id,omitempty"`
	Err string `json:"err,omitempty"`

	Index   uint64            `json:"index,omitempty"`   // apply: the entry's index
	Status  *plStatus         `json:"status,omitempty"`  // status
	Count   int               `json:"count,omitempty"`   // fsm: entries applied
	Last    uint64            `json:"last,omitempty"`    // fsm: index of the last one
	Hash    string            `json:"hash,omitempty"`    // fsm: of all (index, data)
	Entries map[uint64]string `json:"entries,omitempty"` // entries: their digests

	Event string    `json:"event,omitempty"` // started, start-failed, vote, log
	From  string    `json:"from,omitempty"`  // vote: the voter that granted it
	Term  uint64    `json:"term,omitempty"`  // vote
	Level string    `json:"level,omitempty"` // log
	Msg   string    `json:"msg,omitempty"`   // log
	Line  string    `json:"line,omitempty"`  // log: the whole line
	Time  time.Time `json:"time,omitzero"`   // log: when it was logged
}

// TestPowerLossVoterProcess is the child voter of TestVoterPowerLoss; run
// directly it skips.
func TestPowerLossVoterProcess(t *testing.T) {
	env := os.Getenv(plVoterEnv)
	if env == "" {
		t.Skip("the child voter of TestVoterPowerLoss")
	}
	var cfg plChildConfig
	if err := json.Unmarshal([]byte(env), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bad config:", err)
		os.Exit(2)
	}
	plRunChild(cfg)
}

type plEmitter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (e *plEmitter) emit(m plMessage) {
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.enc.Encode(m)
}

// plLogFilter reads raft's JSON log lines and emits the events the test
// needs.
type plLogFilter struct {
	out     *plEmitter
	partial []byte
}

func (f *plLogFilter) Write(p []byte) (int, error) {
	f.partial = append(f.partial, p...)
	for {
		i := bytes.IndexByte(f.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := f.partial[:i]
		f.line(line)
		f.partial = f.partial[i+1:]
	}
}

func (f *plLogFilter) line(line []byte) {
	var l map[string]any
	if json.Unmarshal(line, &l) != nil {
		f.out.emit(plMessage{Event: "log", Level: "unparsed", Line: string(line)})
		return
	}
	level, _ := l["@level"].(string)
	msg, _ := l["@message"].(string)
	switch {
	case msg == "vote granted":
		from, _ := l["from"].(string)
		term, _ := l["term"].(float64)
		f.out.emit(plMessage{Event: "vote", From: from, Term: uint64(term)})
	case level == "warn" || level == "error" ||
		msg == "restored from snapshot" || strings.HasPrefix(msg, "Installed remote snapshot"):
		at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(l["@timestamp"]))
		f.out.emit(plMessage{Event: "log", Level: level, Msg: msg, Line: string(line), Time: at})
	}
}

func plRunChild(cfg plChildConfig) {
	out := &plEmitter{enc: json.NewEncoder(os.Stdout)}
	fail := func(err error) {
		out.emit(plMessage{Event: "start-failed", Err: err.Error()})
		os.Exit(3)
	}
	var stream *raftnet.StreamLayer
	var err error
	if cfg.ListenerFD {
		var ln net.Listener
		ln, err = net.FileListener(os.NewFile(3, "raft listener"))
		if err == nil {
			stream, err = raftnet.NewStreamLayer(ln, cfg.Addr, raftnet.TCPDialer(nil))
		}
	} else {
		stream, err = raftnet.NewTCPStreamLayer(cfg.Addr, "")
	}
	if err != nil {
		fail(err)
	}
	fsm := newIndexFSM()
	vc := voter.Config{
		NodeID:  cfg.ID,
		Stream:  stream,
		DataDir: cfg.DataDir,
		Peers:   cfg.Peers,
		FSM:     fsm,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:       "voter-" + cfg.ID,
			Level:      hclog.Debug,
			JSONFormat: true,
			Output:     &plLogFilter{out: out},
		}),
	}
	plTune(&vc)
	v, err := voter.Start(vc)
	if err != nil {
		fail(err)
	}
	out.emit(plMessage{Event: "started"})

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var req plRequest
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintln(os.Stderr, "bad request:", err)
			os.Exit(2)
		}
		go func() { out.emit(plServe(v, fsm, req)) }()
	}
	// The test is gone, or done with this voter: no shutdown, as after a
	// crash.
	os.Exit(0)
}

func plServe(v *voter.Voter, fsm *indexFSM, req plRequest) plMessage {
	m := plMessage{ID: req.ID}
	var err error
	switch req.Op {
	case "apply":
		f := v.Apply([]byte(req.Data), 5*time.Second)
		if err = f.Error(); err == nil {
			m.Index = f.Index()
		}
	case "status":
		s := v.Raft().Stats()
		_, leader := v.LeaderID()
		m.Status = &plStatus{State: s["state"], Term: plUint(s["term"]), LastLogIndex: plUint(s["last_log_index"]),
			LastLogTerm: plUint(s["last_log_term"]), LastSnapshotIndex: plUint(s["last_snapshot_index"]),
			CommitIndex: plUint(s["commit_index"]), Leader: leader}
	case "transfer":
		if req.To == "" {
			err = v.Raft().LeadershipTransfer().Error()
		} else {
			err = v.Raft().LeadershipTransferToServer(raft.ServerID(req.To), raft.ServerAddress(req.Addr)).Error()
		}
	case "shutdown":
		err = v.Shutdown()
	case "fsm":
		m.Count, m.Last, m.Hash = fsm.summary()
	case "entries":
		m.Entries = fsm.entries(req.Indexes)
	default:
		err = fmt.Errorf("unknown op %q", req.Op)
	}
	if err != nil {
		m.Err = err.Error()
	}
	return m
}

func plUint(s string) uint64 {
	var n uint64
	_, _ = fmt.Sscan(s, &n)
	return n
}

// indexFSM keeps a digest of every command it applied, by its raft index,
// and a hash of them all in index order, kept up as entries apply (raft
// applies them in that order) and recomputed on a restore.
type indexFSM struct {
	mu   sync.Mutex
	data map[uint64]string
	last uint64
	hash [sha256.Size]byte
}

func (f *indexFSM) add(index uint64, digest string) {
	f.data[index] = digest
	f.last = index
	f.hash = sha256.Sum256(fmt.Appendf(f.hash[:], "%d=%s", index, digest))
}

func newIndexFSM() *indexFSM { return &indexFSM{data: map[uint64]string{}} }

var _ raft.BatchingFSM = (*indexFSM)(nil)

func (f *indexFSM) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

func (f *indexFSM) ApplyBatch(logs []*raft.Log) []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range logs {
		if l.Type == raft.LogCommand {
			f.add(l.Index, plDigest(string(l.Data)))
		}
	}
	return make([]any, len(logs))
}

func (f *indexFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := json.Marshal(f.data)
	return indexSnapshot(b), err
}

func (f *indexFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data := map[uint64]string{}
	if err := json.NewDecoder(rc).Decode(&data); err != nil {
		return err
	}
	idx := make([]uint64, 0, len(data))
	for i := range data {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data, f.last, f.hash = make(map[uint64]string, len(data)), 0, [sha256.Size]byte{}
	for _, i := range idx {
		f.add(i, data[i])
	}
	return nil
}

// plDigest stands for an entry's data in the FSM: entries are up to a
// few KiB, so that appends cross page boundaries, and a snapshot of them
// all would be large.
func plDigest(data string) string {
	sum := sha256.Sum256([]byte(data))
	return hex.EncodeToString(sum[:8])
}

func (f *indexFSM) summary() (count int, last uint64, hash string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.data), f.last, hex.EncodeToString(f.hash[:])
}

func (f *indexFSM) entries(idx []uint64) map[uint64]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[uint64]string{}
	for _, i := range idx {
		if d, ok := f.data[i]; ok {
			out[i] = d
		}
	}
	return out
}

type indexSnapshot []byte

func (s indexSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s indexSnapshot) Release() {}
