package voter_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit/lossyfs"
	"github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/raftlog/logstore"
)

// TestVoterPowerLoss runs three voters, each in a child process, the data
// directory of one of them (the victim) on a lossy file system, and cuts
// that file system's power again and again while entries commit: as a
// follower, and in about a third of the cuts as the leader. After each cut
// the victim is killed, and what survived on its disk is checked before it
// starts again on it:
//
//   - its term is at least the last one it reported, and every vote it
//     granted (seen by the candidate that got it) is still on disk;
//   - its log, or a snapshot, holds the last entry it reported stored;
//   - it opens: a torn append is dropped, nothing is refused;
//   - it rejoins and catches up, and every entry the cluster acknowledged
//     is on all three voters, with the same data, and the three agree.
//
// POWERLOSS_CUTS sets the number of cuts (default 40), POWERLOSS_SEED the
// seed (default: from the clock; the test logs it).
func TestVoterPowerLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("runs voter processes for a while")
	}
	fs := lossyfs.MountForTest(t)
	cuts := plEnvInt(t, "POWERLOSS_CUTS", 40)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("POWERLOSS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("POWERLOSS_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (POWERLOSS_SEED=%d repeats the choices)", seed, seed)
	h := newPLHarness(t, fs, seed)
	for i := range cuts {
		h.cycle(i)
	}
	h.stats.log(t)
}

func plEnvInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q is not a count", name, s)
	}
	return n
}

const (
	plVictim      = 2 // node index: raft id "3"
	plWait        = 60 * time.Second
	plCallTimeout = 20 * time.Second
)

type plHarness struct {
	t    *testing.T
	fs   *lossyfs.FS
	rng  *rand.Rand
	exe  string
	cfgs []plChildConfig
	// proc is each node's current process. Only the test's goroutine
	// replaces one, under procMu; the load's goroutine reads under it.
	procMu sync.RWMutex
	proc   []*plProc

	mu        sync.Mutex
	acked     map[uint64]string // every entry the cluster acknowledged: its data's digest
	unseen    []uint64          // acknowledged, not yet checked on every voter
	votes     map[uint64]string // term -> candidate id, for votes the victim granted
	voteErrs  []string
	otherErrs []string    // store errors of the voters whose disks are fine
	restarts  map[int]int // restarts by unstick, by cut
	current   int         // the cut under way

	stats plStats
}

// plStats are the outcomes the test reports.
type plStats struct {
	cuts, asLeader, leaderMissed int
	onChange                     int // cuts armed on the victim's k-th change
	modes                        map[lossyfs.Mode]int
	lostBytes, torn              int // cuts that lost written bytes; cuts that kept a torn write
	lostChanges, pendingChanges  int
	dropped                      int            // restarts whose log dropped a torn append
	restored, installed          int            // restarts from a snapshot; snapshots installed from the leader
	unstuck                      map[string]int // restarts out of a raft bug, by bug (see unstick)
	selfExit, storeErrors        int            // victim exited by itself after the cut; logged a store error
	shutdowns, shutdownExits     int            // Shutdowns asked of the victim after the cut; of them, ended by the process dying
	shutdownErrs                 map[string]int
	reactions                    map[string]int // the victim's errors after the cut, by message
	healthyErrors                map[string]int // and before it, while its disk was fine
	logChecked, logSkipped       int            // last reported entry checked on disk, or not (a new term since)
	votesChecked                 int
	entries                      int
}

func (s *plStats) log(t *testing.T) {
	t.Logf("%d cuts (%d right after a change to the disk, the others at a moment the load reached; %d with the victim leading, %d more meant to but leadership did not move); modes %v",
		s.cuts, s.onChange, s.asLeader, s.leaderMissed, s.modes)
	t.Logf("cuts that lost unsynced written bytes: %d; that kept a torn write: %d; changes lost in all: %d of %d pending",
		s.lostBytes, s.torn, s.lostChanges, s.pendingChanges)
	t.Logf("restarts: %d dropped a torn append from the log, %d restored a snapshot, %d snapshots installed from the leader after a restart; no refusal",
		s.dropped, s.restored, s.installed)
	t.Logf("voters restarted out of a hashicorp/raft bug: %v", s.unstuck)
	t.Logf("after the cut the victim exited by itself %d times, logged a failing store %d times (then was killed); its errors: %v",
		s.selfExit, s.storeErrors, s.reactions)
	t.Logf("after the cut the victim was asked to shut down %d times: it returned an error %v, the process died in it %d times, it never hung",
		s.shutdowns, s.shutdownErrs, s.shutdownExits)
	t.Logf("errors the victim logged while its disk was fine (none from its stores): %v", s.healthyErrors)
	t.Logf("checked on disk: the last stored entry %d times (%d skipped: a new term began before the cut), the last granted vote %d times; %d entries acknowledged, all present on all voters",
		s.logChecked, s.logSkipped, s.votesChecked, s.entries)
}

func newPLHarness(t *testing.T, fs *lossyfs.FS, seed uint64) *plHarness {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := &plHarness{t: t, fs: fs, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), exe: exe,
		acked: map[uint64]string{}, votes: map[uint64]string{}, restarts: map[int]int{}, stats: plStats{unstuck: map[string]int{}, modes: map[lossyfs.Mode]int{}, reactions: map[string]int{}, healthyErrors: map[string]int{}, shutdownErrs: map[string]int{}}}
	var lns []*os.File
	var peers []raft.Server
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		f, err := ln.(*net.TCPListener).File()
		_ = ln.Close()
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, f)
		peers = append(peers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(strconv.Itoa(i + 1)), Address: raft.ServerAddress(ln.Addr().String())})
	}
	for i := range 3 {
		dir := t.TempDir()
		if i == plVictim {
			// A directory inside the mount, as a data.dir inside a
			// mounted disk: its own entry needs a sync too.
			dir = filepath.Join(fs.Dir(), "voter-3")
		}
		h.cfgs = append(h.cfgs, plChildConfig{ID: string(peers[i].ID), Addr: string(peers[i].Address), DataDir: dir, Peers: peers})
	}
	// Registered after MountForTest's cleanup, so the processes are gone
	// before the file system is unmounted.
	t.Cleanup(func() {
		for _, p := range h.proc {
			if p != nil {
				p.kill()
			}
		}
	})
	h.proc = make([]*plProc, 3)
	for i := range 3 {
		cfg := h.cfgs[i]
		cfg.ListenerFD = true
		h.setProc(i, h.start(i, cfg, lns[i]))
		_ = lns[i].Close()
	}
	for i := range 3 {
		h.waitStarted(i)
	}
	return h
}

// start runs node i's child process.
func (h *plHarness) start(i int, cfg plChildConfig, ln *os.File) *plProc {
	env, err := json.Marshal(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	cmd := exec.Command(h.exe, "-test.run=^TestPowerLossVoterProcess$", "-test.count=1", "-test.timeout=0")
	cmd.Env = append(os.Environ(), plVoterEnv+"="+string(env))
	if ln != nil {
		cmd.ExtraFiles = []*os.File{ln}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &plProc{id: cfg.ID, cmd: cmd, calls: map[int]chan plMessage{}, exited: make(chan struct{}),
		started: make(chan plMessage, 1)}
	p.onEvent = func(m plMessage) { h.event(i, p, m) }
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		h.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		h.t.Fatal(err)
	}
	cmd.Stderr = &p.stderr
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	go p.read(stdout)
	return p
}

// waitStarted waits for node i's voter to open its stores and start; a
// refusal fails the test.
func (h *plHarness) waitStarted(i int) {
	h.t.Helper()
	p := h.proc[i]
	select {
	case m := <-p.started:
		if m.Event != "started" {
			h.t.Fatalf("voter %s refused to start on what its disk kept: %s\ndata directory:\n%s", p.id, m.Err, plListDir(h.fs.Backing()))
		}
	case <-p.exited:
		h.t.Fatalf("voter %s exited before it started: %v\n%s\ndata directory:\n%s", p.id, p.exitErr, p.stderr.tail(), plListDir(h.fs.Backing()))
	case <-time.After(plWait):
		h.t.Fatalf("voter %s did not start within %v\n%s", p.id, plWait, p.stderr.tail())
	}
}

// event handles an event from p, node i's process.
func (h *plHarness) event(i int, p *plProc, m plMessage) {
	switch m.Event {
	case "vote":
		if m.From != h.cfgs[plVictim].ID {
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		cand := h.cfgs[i].ID
		if prev, ok := h.votes[m.Term]; ok && prev != cand {
			h.voteErrs = append(h.voteErrs, fmt.Sprintf("voter %s granted its vote in term %d to %s and to %s",
				m.From, m.Term, prev, cand))
		}
		h.votes[m.Term] = cand
	case "log":
		switch {
		case strings.HasPrefix(m.Msg, "Installed remote snapshot"):
			p.mu.Lock()
			p.installs = plRecent(append(p.installs, m.Time))
			p.mu.Unlock()
		case m.Msg == "failed to get previous log" && strings.Contains(m.Line, raft.ErrLogNotFound.Error()):
			p.mu.Lock()
			p.prevMisses = plRecent(append(p.prevMisses, m.Time))
			p.mu.Unlock()
		}
		if i != plVictim {
			// The other voters' disks never fail: a store error there is
			// a bug.
			if m.Level == "error" && plDiskError(m, h.cfgs[i].DataDir) {
				h.mu.Lock()
				h.otherErrs = append(h.otherErrs, fmt.Sprintf("voter %s: %s", h.cfgs[i].ID, m.Line))
				h.mu.Unlock()
			}
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		switch {
		case strings.Contains(m.Msg, "dropping the end of the raft log"):
			p.dropped = true
		case m.Msg == "restored from snapshot":
			p.restored = true
		case strings.HasPrefix(m.Msg, "Installed remote snapshot"):
			p.installed = true
		case m.Level == "error":
			p.errors = append(p.errors, m)
		}
		if p.logTail = append(p.logTail, m.Line); len(p.logTail) > 40 {
			p.logTail = p.logTail[1:]
		}
	}
}

// cycle is one power cut of the victim.
func (h *plHarness) cycle(n int) {
	t := h.t
	for _, p := range h.proc {
		if !p.alive() {
			t.Fatalf("cut %d: voter %s exited: %v\n%s", n, p.id, p.exitErr, p.stderr.tail())
		}
	}
	h.mu.Lock()
	errs := h.otherErrs
	h.mu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("cut %d: %s", n, strings.Join(errs, "\n"))
	}
	h.stats.cuts++
	h.current = n
	mode := lossyfs.Mode(h.rng.IntN(2))
	h.stats.modes[mode]++
	lead := h.rng.IntN(3) == 0
	// Half the cuts come right after the victim's k-th change or sync to
	// its disk (so often between a write and its sync), half at a moment
	// the load reaches, wherever the victim is then.
	onChange := h.rng.IntN(2) == 0
	cutAfter := 1 + h.rng.IntN(40)
	more := h.rng.IntN(40)
	shutdown := h.rng.IntN(2) == 0
	cutRng := rand.New(rand.NewPCG(h.rng.Uint64(), 0))
	h.setRole(lead)

	load := h.startLoad(n)
	load.waitAcked(t, 1)
	victim := h.proc[plVictim]
	before, err := victim.status()
	if err != nil {
		t.Fatalf("cut %d: victim status before the cut: %v\n%s", n, err, victim.stderr.tail())
	}
	if before.State == "Leader" {
		h.stats.asLeader++
	}
	if onChange {
		h.stats.onChange++
		done, err := h.fs.CutAfter(cutAfter, mode, cutRng)
		if err != nil {
			t.Fatalf("cut %d: %v", n, err)
		}
		select {
		case <-done:
		case <-time.After(plWait):
			t.Fatalf("cut %d: the victim made no %d changes or syncs to its disk within %v", n, cutAfter, plWait)
		}
	} else {
		load.waitAcked(t, cutAfter)
	}
	report, err := h.fs.Cut(mode, cutRng)
	if err != nil {
		t.Fatalf("cut %d: %v", n, err)
	}
	victim = h.proc[plVictim] // unstick may have restarted it meanwhile
	// Raft meets EIO at its next write: give it a moment to show how it
	// reacts (an error logged, or a panic that ends the process), then
	// kill it as the power cut would have.
	reacted := waitUntil(2*time.Second, func() bool {
		select {
		case <-victim.exited:
			return true
		default:
			return victim.sawErrorsSince(report.At)
		}
	})
	select {
	case <-victim.exited:
		h.stats.selfExit++
	default:
		if reacted {
			h.stats.storeErrors++
		}
		// Every other cut, the voter is shut down first, as a node that
		// sees its disk fail would: it must stop, not hang.
		if shutdown {
			h.stats.shutdowns++
			switch _, err := victim.call(plRequest{Op: "shutdown"}); {
			case err == nil:
			case errors.Is(err, errPLExited):
				h.stats.shutdownExits++
			case strings.Contains(err.Error(), "no answer"):
				t.Fatalf("cut %d: the victim's Shutdown hangs on its failed disk: %v\n%s", n, err, h.dump())
			default:
				h.stats.shutdownErrs[err.Error()]++
			}
		}
	}
	victim.kill()
	victim.mu.Lock()
	for _, m := range victim.errors {
		if m.Time.Before(report.At) {
			// Logged while its disk was fine: a failing store then is
			// a bug.
			if plDiskError(m, h.cfgs[plVictim].DataDir) {
				victim.mu.Unlock()
				t.Fatalf("cut %d: before the cut, with its disk fine, the victim logged %s", n, m.Line)
			}
			h.stats.healthyErrors[m.Msg]++
		} else {
			h.stats.reactions[m.Msg]++
		}
	}
	victim.mu.Unlock()
	if err := h.fs.Unmount(); err != nil {
		t.Fatalf("cut %d: %v", n, err)
	}
	if report.Pending > 0 {
		h.stats.pendingChanges += report.Pending
		h.stats.lostChanges += report.Pending - report.Kept
	}
	if report.LostBytes() > 0 {
		h.stats.lostBytes++
	}
	if report.Torn {
		h.stats.torn++
	}
	h.checkDisk(n, before)

	// The other two go on without the victim.
	load.waitAcked(t, cutAfter+more)
	load.stop(t)

	if err := h.fs.Mount(); err != nil {
		t.Fatalf("cut %d: %v", n, err)
	}
	h.setProc(plVictim, h.start(plVictim, h.cfgs[plVictim], nil))
	h.waitStarted(plVictim)
	h.waitConverged(n)
	h.checkAcked(n)
	for _, p := range []*plProc{h.proc[0], h.proc[1], h.proc[2], victim} {
		if tail := p.stderr.tail(); strings.Contains(tail, "DATA RACE") {
			t.Fatalf("cut %d: voter %s: %s", n, p.id, tail)
		}
	}
	p := h.proc[plVictim]
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dropped {
		h.stats.dropped++
	}
	if p.restored {
		h.stats.restored++
	}
	if p.installed {
		h.stats.installed++
	}
	t.Logf("cut %d: victim %s at term %d, last entry %d; %v; acknowledged %d entries so far",
		n, before.State, before.Term, before.LastLogIndex, report, len(h.acked))
}

// setRole makes the victim lead, or not, by handing leadership over.
// Leadership can move on its own too: the cut counts the role the victim
// had just before it.
func (h *plHarness) setRole(lead bool) {
	victim := h.proc[plVictim]
	for range 3 {
		leader := h.leader()
		if (leader == victim) == lead {
			return
		}
		req := plRequest{Op: "transfer"} // away from the victim
		if lead {
			cfg := h.cfgs[plVictim]
			req = plRequest{Op: "transfer", To: cfg.ID, Addr: cfg.Addr}
		}
		if _, err := leader.call(req); err != nil {
			continue
		}
		if waitUntil(5*time.Second, func() bool {
			s, err := victim.status()
			return err == nil && (s.State == "Leader") == lead && s.Leader != ""
		}) {
			return
		}
	}
	if lead {
		h.stats.leaderMissed++
	}
}

// leader waits for a running voter that says it leads.
func (h *plHarness) leader() *plProc {
	var leader *plProc
	if !waitUntil(plWait, func() bool {
		h.unstick()
		for _, p := range h.proc {
			if p.alive() {
				if s, err := p.status(); err == nil && s.State == "Leader" {
					leader = p
					return true
				}
			}
		}
		return false
	}) {
		h.t.Fatalf("no leader within %v\n%s", plWait, h.dump())
	}
	return leader
}

// checkDisk reads what survived on the victim's disk (a copy of it, so
// that nothing is repaired before the victim opens it) and checks it
// against what the victim had told others.
func (h *plHarness) checkDisk(n int, before *plStatus) {
	t := h.t
	dir := filepath.Join(h.fs.Backing(), "voter-3")
	tmp, err := os.MkdirTemp("", "powerloss-disk-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	if err := os.CopyFS(tmp, os.DirFS(dir)); err != nil {
		t.Fatalf("cut %d: the victim's data directory after the cut: %v", n, err)
	}
	if _, err := os.Stat(filepath.Join(tmp, raftlog.BoltFile)); err != nil {
		t.Fatalf("cut %d: %s is gone after the cut (%v): the voter reported term %d and lost it", n, raftlog.BoltFile, err, before.Term)
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(tmp, raftlog.BoltFile)})
	if err != nil {
		t.Fatalf("cut %d: open %s after the cut: %v", n, raftlog.BoltFile, err)
	}
	defer bolt.Close()
	term := plStable(t, bolt.GetUint64, "CurrentTerm")
	voteTerm := plStable(t, bolt.GetUint64, "LastVoteTerm")
	cand, err := bolt.Get([]byte("LastVoteCand"))
	if err != nil && err.Error() != "not found" {
		t.Fatal(err)
	}
	if term < before.Term {
		t.Fatalf("cut %d: the victim reported term %d before the cut; its disk kept term %d", n, before.Term, term)
	}
	h.mu.Lock()
	var lastVote uint64
	for vt := range h.votes {
		lastVote = max(lastVote, vt)
	}
	votedFor := h.votes[lastVote]
	errs := h.voteErrs
	h.mu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("cut %d: %s", n, strings.Join(errs, "; "))
	}
	if lastVote > 0 {
		h.stats.votesChecked++
		want := h.cfgs[plIndex(votedFor)].Addr
		if voteTerm < lastVote || voteTerm == lastVote && string(cand) != want {
			t.Fatalf("cut %d: the victim granted its vote in term %d to %s (%s); its disk kept a vote in term %d for %q",
				n, lastVote, votedFor, want, voteTerm, cand)
		}
	}

	// The log: entries up to the last one the victim reported stored
	// are on disk, or in a snapshot. Only when that entry is of the term
	// the disk kept: a new term since could have replaced it.
	var logs bytes.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	store, err := logstore.Open(filepath.Join(tmp, raftlog.LogDir), logstore.Options{Logger: logger})
	if err != nil {
		t.Fatalf("cut %d: the log refuses to open after the cut: %v", n, err)
	}
	defer store.Close()
	snaps, err := raft.NewFileSnapshotStoreWithLogger(tmp, 2, logger)
	if err != nil {
		t.Fatal(err)
	}
	list, err := snaps.List()
	if err != nil {
		t.Fatal(err)
	}
	var snapIndex uint64
	if len(list) > 0 {
		snapIndex = list[0].Index
	}
	// Whatever the log lacks at its front, a snapshot must cover, or the
	// voter cannot start.
	if first, _ := store.FirstIndex(); first > 1 && snapIndex < first-1 {
		t.Fatalf("cut %d: after the cut the log starts at %d and the newest snapshot is at %d: entries %d to %d are gone\n%s%s",
			n, first, snapIndex, snapIndex+1, first-1, logs.String(), plListDir(dir))
	}
	want := before.LastLogIndex
	if before.LastLogTerm != before.Term || term != before.Term {
		h.stats.logSkipped++
		return
	}
	h.stats.logChecked++
	if snapIndex >= want {
		return
	}
	var l raft.Log
	if err := store.GetLog(want, &l); err != nil {
		first, _ := store.FirstIndex()
		last, _ := store.LastIndex()
		t.Fatalf("cut %d: the victim reported entry %d (term %d) stored; after the cut its log holds [%d, %d] and its newest snapshot index %d (%v)\n%s",
			n, want, before.LastLogTerm, first, last, snapIndex, err, logs.String())
	}
	if l.Term != before.LastLogTerm {
		t.Fatalf("cut %d: entry %d is of term %d after the cut; the victim reported term %d", n, want, l.Term, before.LastLogTerm)
	}
}

func plStable(t *testing.T, get func([]byte) (uint64, error), key string) uint64 {
	v, err := get([]byte(key))
	if err != nil && err.Error() != "not found" {
		t.Fatalf("read %s: %v", key, err)
	}
	return v
}

func plIndex(id string) int {
	n, _ := strconv.Atoi(id)
	return n - 1
}

// waitConverged waits until the three voters applied the same entries,
// the last acknowledged one among them.
func (h *plHarness) waitConverged(n int) {
	h.mu.Lock()
	var lastAcked uint64
	for i := range h.acked {
		lastAcked = max(lastAcked, i)
	}
	h.mu.Unlock()
	var got []plMessage
	if !waitUntil(plWait, func() bool {
		got = got[:0]
		for _, p := range h.proc {
			m, err := p.call(plRequest{Op: "fsm"})
			if err != nil {
				return false
			}
			got = append(got, m)
		}
		if got[0].Last >= lastAcked && got[0].Hash == got[1].Hash && got[1].Hash == got[2].Hash {
			return true
		}
		h.unstick()
		return false
	}) {
		h.t.Fatalf("cut %d: the voters did not converge within %v (last acknowledged %d): %+v\n%s", n, plWait, lastAcked, got, h.dump())
	}
}

// livelocked reports whether p shows raft's install-snapshot livelock:
// snapshots installed again and again, each followed by an AppendEntries
// refused for want of the entry before it.
func (p *plProc) livelocked() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	recent := func(ts []time.Time) bool { return len(ts) == 3 && time.Since(ts[0]) < 2*time.Second }
	return recent(p.installs) && recent(p.prevMisses)
}

// plRecent keeps the last three times.
func plRecent(ts []time.Time) []time.Time {
	return ts[max(0, len(ts)-3):]
}

func (h *plHarness) setProc(i int, p *plProc) {
	h.procMu.Lock()
	h.proc[i] = p
	h.procMu.Unlock()
}

// unstick restarts a voter caught in one of two bugs of hashicorp/raft
// v1.8.0 that frequent snapshots and restarts bring out; a restart reads
// raft's state from the disk again and ends both. They are counted and
// logged, at most three restarts per cut, so that a voter stuck for good
// still fails the test.
//
//   - The install-snapshot livelock: a follower that installs a snapshot
//     older than its last entry (a leader that lost its uncommitted tail
//     can have one) deletes its whole log, the log store being monotonic,
//     but keeps that last entry as its own, refuses every AppendEntries
//     after the snapshot for want of the entry before them, and is sent
//     the snapshot again, for ever (hashicorp/raft#697 is the same
//     livelock with a log store that is not monotonic).
//   - The snapshot index going back (hashicorp/raft#248): a snapshot the
//     voter took of its FSM completes after it installed a newer one from
//     the leader, and raft sets its last snapshot back to the older one.
//     Its log deleted by the install, the voter then takes its last index
//     to be below what it committed; elected meanwhile, it leads with a
//     next index below the commit index, cannot find the entries its
//     followers need, and nothing commits.
func (h *plHarness) unstick() {
	n := h.current
	for i, p := range h.proc {
		if !p.alive() || h.restarts[n] >= 3 {
			continue
		}
		why := ""
		if p.livelocked() {
			why = "install-snapshot livelock"
		} else if s, err := p.status(); err == nil && s.State == "Leader" && max(s.LastLogIndex, s.LastSnapshotIndex) < s.CommitIndex {
			why = "snapshot index gone back below the commit index"
		}
		if why == "" {
			continue
		}
		h.restarts[n]++
		h.stats.unstuck[why]++
		h.t.Logf("cut %d: voter %s is caught in raft's %s; restarting it", n, p.id, why)
		p.kill()
		h.setProc(i, h.start(i, h.cfgs[i], nil))
		h.waitStarted(i)
	}
}

// dump describes the cluster for a failure message: each voter's raft
// state, the victim's last warnings and errors, its standard error and its
// data directory.
func (h *plHarness) dump() string {
	var b strings.Builder
	for _, q := range h.proc {
		if q.alive() {
			s, err := q.status()
			fmt.Fprintf(&b, "voter %s: %+v %v\n", q.id, s, err)
		} else {
			fmt.Fprintf(&b, "voter %s: exited (%v)\n", q.id, q.exitErr)
		}
	}
	p := h.proc[plVictim]
	p.mu.Lock()
	fmt.Fprintf(&b, "the victim's last warnings and errors:\n%s\n", strings.Join(p.logTail, "\n"))
	p.mu.Unlock()
	fmt.Fprintf(&b, "its standard error:\n%s\nits data directory:\n%s", p.stderr.tail(), plListDir(h.cfgs[plVictim].DataDir))
	return b.String()
}

// checkAcked checks the entries acknowledged since the last check on
// every voter.
func (h *plHarness) checkAcked(n int) {
	h.mu.Lock()
	idx := h.unseen
	h.unseen = nil
	want := make(map[uint64]string, len(idx))
	for _, i := range idx {
		want[i] = h.acked[i]
	}
	h.stats.entries = len(h.acked)
	h.mu.Unlock()
	for _, p := range h.proc {
		m, err := p.call(plRequest{Op: "entries", Indexes: idx})
		if err != nil {
			h.t.Fatalf("cut %d: entries from voter %s: %v", n, p.id, err)
		}
		for _, i := range idx {
			if got, ok := m.Entries[i]; !ok || got != want[i] {
				h.t.Fatalf("cut %d: voter %s holds an entry with digest %q at index %d (present: %v); the cluster acknowledged one with digest %s there",
					n, p.id, got, i, ok, want[i])
			}
		}
	}
}

// plLoad proposes entries on whichever voter leads, eight at a time,
// recording each one acknowledged.
type plLoad struct {
	h     *plHarness
	done  chan struct{}
	ended chan error
	mu    sync.Mutex
	acked int
}

func (h *plHarness) startLoad(cycle int) *plLoad {
	l := &plLoad{h: h, done: make(chan struct{}), ended: make(chan error, 1)}
	go func() { l.ended <- l.run(cycle) }()
	return l
}

func (l *plLoad) run(cycle int) error {
	h := l.h
	var leader *plProc
	for seq := 0; ; {
		select {
		case <-l.done:
			return nil
		default:
		}
		if leader == nil || !leader.alive() {
			leader = nil
			for _, p := range h.liveProcs() {
				if s, err := p.status(); err == nil && s.State == "Leader" {
					leader = p
				}
			}
			if leader == nil {
				select {
				case <-l.done:
					return nil
				case <-time.After(10 * time.Millisecond): // polling for a leader
				}
				continue
			}
		}
		const batch = 8
		var wg sync.WaitGroup
		replies := make([]plMessage, batch)
		errs := make([]error, batch)
		data := make([]string, batch)
		for k := range batch {
			// Up to 3 KiB, so that one append often crosses a page.
			data[k] = fmt.Sprintf("c%d-e%d|%s", cycle, seq, strings.Repeat("x", seq*7919%3072))
			seq++
			wg.Go(func() { replies[k], errs[k] = leader.call(plRequest{Op: "apply", Data: data[k]}) })
		}
		wg.Wait()
		for k := range batch {
			if errs[k] != nil {
				leader = nil
				continue
			}
			if err := h.ack(replies[k].Index, data[k]); err != nil {
				return err
			}
			l.mu.Lock()
			l.acked++
			l.mu.Unlock()
		}
	}
}

// waitAcked waits until n entries of this load were acknowledged.
func (l *plLoad) waitAcked(t *testing.T, n int) {
	t.Helper()
	var err error
	if !waitUntil(plWait, func() bool {
		select {
		case err = <-l.ended:
			return true
		default:
		}
		l.h.unstick()
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.acked >= n
	}) {
		l.mu.Lock()
		acked := l.acked
		l.mu.Unlock()
		t.Fatalf("only %d entries acknowledged within %v, waiting for %d\n%s", acked, plWait, n, l.h.dump())
	}
	if err != nil {
		t.Fatal(err)
	}
}

func (l *plLoad) stop(t *testing.T) {
	close(l.done)
	if err := <-l.ended; err != nil {
		t.Fatal(err)
	}
}

func (h *plHarness) ack(index uint64, data string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	digest := plDigest(data)
	if prev, ok := h.acked[index]; ok && prev != digest {
		return fmt.Errorf("index %d acknowledged twice, for entries with digests %s and %s (%.40q)", index, prev, digest, data)
	}
	h.acked[index] = digest
	h.unseen = append(h.unseen, index)
	return nil
}

func (h *plHarness) liveProcs() []*plProc {
	h.procMu.RLock()
	defer h.procMu.RUnlock()
	var out []*plProc
	for _, p := range h.proc {
		if p.alive() {
			out = append(out, p)
		}
	}
	return out
}

// waitUntil polls cond until it holds or timeout passes, and reports
// whether it held.
func waitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// plProc is a child voter process.
type plProc struct {
	id      string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stderr  plTail
	onEvent func(plMessage)
	started chan plMessage
	exited  chan struct{}
	exitErr error

	mu        sync.Mutex // guards what follows
	next      int
	calls     map[int]chan plMessage
	dropped   bool
	restored  bool
	installed bool
	// When the last snapshots were installed, and AppendEntries refused
	// for want of the entry before them: both repeating is raft's
	// livelock (see unstick).
	installs, prevMisses []time.Time
	errors               []plMessage // what it logged at level error
	logTail              []string    // its last warnings and errors
}

func (p *plProc) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m plMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			continue
		}
		if m.ID == 0 {
			switch m.Event {
			case "started", "start-failed":
				p.started <- m
			default:
				p.onEvent(m)
			}
			continue
		}
		p.mu.Lock()
		ch := p.calls[m.ID]
		delete(p.calls, m.ID)
		p.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
	p.exitErr = p.cmd.Wait()
	close(p.exited)
}

func (p *plProc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

var errPLExited = errors.New("the voter process exited")

// call sends req and waits for its reply; a reply with an error is an
// error.
func (p *plProc) call(req plRequest) (plMessage, error) {
	ch := make(chan plMessage, 1)
	p.mu.Lock()
	p.next++
	req.ID = p.next
	p.calls[req.ID] = ch
	b, _ := json.Marshal(req)
	_, err := p.stdin.Write(append(b, '\n'))
	p.mu.Unlock()
	if err != nil {
		return plMessage{}, fmt.Errorf("%w: %v", errPLExited, err)
	}
	select {
	case m := <-ch:
		if m.Err != "" {
			return m, errors.New(m.Err)
		}
		return m, nil
	case <-p.exited:
		return plMessage{}, errPLExited
	case <-time.After(plCallTimeout):
		return plMessage{}, fmt.Errorf("voter %s: no answer to %s within %v", p.id, req.Op, plCallTimeout)
	}
}

func (p *plProc) status() (*plStatus, error) {
	m, err := p.call(plRequest{Op: "status"})
	if err != nil {
		return nil, err
	}
	return m.Status, nil
}

// plDiskError reports whether a raft error m, logged by a voter with its
// data in dir, is a failure of its disk or of its stores: one that names
// a file of dir. (Raft logs errors at level error that are none of these:
// a snapshot it does not take during a leadership transfer, an entry a
// leader no longer holds for a follower, a connection to a killed peer,
// the failure a follower answered an InstallSnapshot with.)
func plDiskError(m plMessage, dir string) bool {
	return strings.Contains(m.Line, dir)
}

// sawErrorsSince reports whether p logged an error at or after t.
func (p *plProc) sawErrorsSince(t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.ContainsFunc(p.errors, func(m plMessage) bool { return !m.Time.Before(t) })
}

// kill ends the process with SIGKILL and waits until it is gone.
func (p *plProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// plTail keeps the last 64 KiB a process wrote to stderr.
type plTail struct {
	mu  sync.Mutex
	buf []byte
}

func (w *plTail) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	if over := len(w.buf) - 64<<10; over > 0 {
		w.buf = w.buf[over:]
	}
	return len(b), nil
}

func (w *plTail) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// plListDir lists the files under dir with their sizes, for failure
// messages.
func plListDir(dir string) string {
	var b strings.Builder
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			fmt.Fprintf(&b, "  %s: %v\n", p, err)
			return nil
		}
		if info, err := d.Info(); err == nil && !d.IsDir() {
			fmt.Fprintf(&b, "  %s %d\n", p, info.Size())
		} else {
			fmt.Fprintf(&b, "  %s/\n", p)
		}
		return nil
	})
	return b.String()
}
