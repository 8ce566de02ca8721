package raftnet_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig/tlstest"
	"github.com/ctrlquorum/ctrlquorum/voter"
	"github.com/ctrlquorum/ctrlquorum/voter/votertest"
)

// countFSM counts applied commands.
type countFSM struct{ n atomic.Uint64 }

func (f *countFSM) Apply(*raft.Log) any { return f.n.Add(1) }
func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) {
	return countSnap(f.n.Load()), nil
}
func (f *countFSM) Restore(r io.ReadCloser) error {
	defer r.Close()
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return err
	}
	f.n.Store(binary.BigEndian.Uint64(b[:]))
	return nil
}

type countSnap uint64

func (s countSnap) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(binary.BigEndian.AppendUint64(nil, uint64(s))); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}
func (countSnap) Release() {}

type tlsCluster struct {
	t      *testing.T
	pki    *tlstest.PKI
	certs  []*tlsconfig.Reloader
	voters []*voter.Voter
	fsms   []*countFSM
	ids    []int32
	// logs are what each voter's TLS stream layer logged.
	logs []*testkit.JSONLog
}

// refusals returns the handshakes a stream layer refused, as its log
// says, that match.
func refusals(t testing.TB, l *testkit.JSONLog, match func(rec map[string]any) bool) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, rec := range l.Find(t, "refused connection: TLS handshake failed", nil) {
		if match(rec) {
			out = append(out, rec)
		}
	}
	return out
}

var field = testkit.Field

// newTLSCluster starts three voters (1001–1003) whose raft traffic runs
// over mutual TLS, each accepting only the other configured voters.
func newTLSCluster(t *testing.T) *tlsCluster {
	t.Helper()
	c := &tlsCluster{t: t, pki: tlstest.NewPKI(t, "cluster CA"), ids: []int32{1001, 1002, 1003}}
	peers := tlsconfig.Voters(c.ids...)
	streams := make([]*raftnet.StreamLayer, 3)
	var servers []raft.Server
	for i, id := range c.ids {
		certs, err := tlsconfig.NewReloader(c.pki.Voter(id), tlsconfig.Options{Expect: tlsconfig.Voters(id)})
		if err != nil {
			t.Fatal(err)
		}
		c.certs = append(c.certs, certs)
		c.logs = append(c.logs, &testkit.JSONLog{})
		streams[i], err = raftnet.NewTLSStreamLayer(raftnet.TLSStreamConfig{BindAddr: "127.0.0.1:0", Certs: certs, Peers: peers,
			Logger: c.logs[i].Logger()})
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(strconv.Itoa(int(id))), Address: raft.ServerAddress(streams[i].Addr().String())})
	}
	for i, id := range c.ids {
		fsm := &countFSM{}
		cfg := voter.Config{NodeID: strconv.Itoa(int(id)), Stream: streams[i], DataDir: t.TempDir(), Peers: servers, FSM: fsm,
			Logger: hclog.New(&hclog.LoggerOptions{Name: "voter-" + strconv.Itoa(int(id)), Level: hclog.Off})}
		v, err := voter.Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.voters = append(c.voters, v)
		c.fsms = append(c.fsms, fsm)
	}
	t.Cleanup(func() {
		for _, v := range c.voters {
			_ = v.Shutdown()
		}
	})
	return c
}

func (c *tlsCluster) leader() *voter.Voter {
	c.t.Helper()
	var l *voter.Voter
	votertest.WaitFor(c.t, 20*time.Second, "a leader", func() bool {
		l = nil
		for _, v := range c.voters {
			if v.IsLeader() {
				l = v
			}
		}
		return l != nil
	})
	return l
}

// apply commits n entries through the current leader, following
// leadership if it moves, and fails the test if any is lost.
func (c *tlsCluster) apply(n int) {
	c.t.Helper()
	for i := 0; i < n; i++ {
		deadline := time.Now().Add(20 * time.Second)
		for {
			err := c.leader().Apply([]byte(fmt.Sprint(i)), 5*time.Second).Error()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("apply %d: %v", i, err)
			}
		}
	}
}

func (c *tlsCluster) converged(want uint64) {
	c.t.Helper()
	votertest.WaitFor(c.t, 20*time.Second, fmt.Sprintf("every voter to apply %d entries", want), func() bool {
		for _, f := range c.fsms {
			if f.n.Load() < want {
				return false
			}
		}
		return true
	})
}

// hostileRPC is one raft RPC that would disturb the cluster if a voter
// served it.
type hostileRPC struct {
	name string
	// send returns what the voter answered, when it did.
	send func(tr *raft.NetworkTransport, id raft.ServerID, addr raft.ServerAddress) (string, error)
}

// hostileRPCs claims voter 1002 at self, with a term far ahead of term
// and a log far longer than the cluster's: a RequestVote and a
// RequestPreVote that would win a vote, an AppendEntries that would
// depose the leader, an InstallSnapshot that would replace every voter's
// state and configuration, and a TimeoutNow that would start an election
// at once.
func hostileRPCs(term uint64, self raft.ServerAddress) []hostileRPC {
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("1002"), Addr: []byte(self)}
	return []hostileRPC{
		{"RequestVote", func(tr *raft.NetworkTransport, id raft.ServerID, addr raft.ServerAddress) (string, error) {
			var resp raft.RequestVoteResponse
			err := tr.RequestVote(id, addr, &raft.RequestVoteRequest{RPCHeader: hdr, Term: term + 100,
				LastLogIndex: 1 << 40, LastLogTerm: term + 99}, &resp)
			return fmt.Sprintf("granted=%v term=%d", resp.Granted, resp.Term), err
		}},
		{"RequestPreVote", func(tr *raft.NetworkTransport, id raft.ServerID, addr raft.ServerAddress) (string, error) {
			var resp raft.RequestPreVoteResponse
			err := tr.RequestPreVote(id, addr, &raft.RequestPreVoteRequest{RPCHeader: hdr, Term: term + 100,
				LastLogIndex: 1 << 40, LastLogTerm: term + 99}, &resp)
			return fmt.Sprintf("granted=%v term=%d", resp.Granted, resp.Term), err
		}},
		{"AppendEntries", func(tr *raft.NetworkTransport, id raft.ServerID, addr raft.ServerAddress) (string, error) {
			var resp raft.AppendEntriesResponse
			err := tr.AppendEntries(id, addr, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: term + 100,
				PrevLogEntry: 1 << 40, PrevLogTerm: term + 99, LeaderCommitIndex: 1 << 40}, &resp)
			return fmt.Sprintf("success=%v term=%d", resp.Success, resp.Term), err
		}},
		{"InstallSnapshot", func(tr *raft.NetworkTransport, id raft.ServerID, addr raft.ServerAddress) (string, error) {
			conf := raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "1002", Address: self}}})
			data := binary.BigEndian.AppendUint64(nil, 1<<40)
			var resp raft.InstallSnapshotResponse
			err := tr.InstallSnapshot(id, addr, &raft.InstallSnapshotRequest{RPCHeader: hdr, SnapshotVersion: raft.SnapshotVersionMax,
				Term: term + 100, Leader: []byte(self), LastLogIndex: 1 << 40, LastLogTerm: term + 99,
				Configuration: conf, ConfigurationIndex: 1 << 40, Size: int64(len(data))}, &resp, bytes.NewReader(data))
			return fmt.Sprintf("success=%v term=%d", resp.Success, resp.Term), err
		}},
		{"TimeoutNow", func(tr *raft.NetworkTransport, id raft.ServerID, addr raft.ServerAddress) (string, error) {
			var resp raft.TimeoutNowResponse
			err := tr.TimeoutNow(id, addr, &raft.TimeoutNowRequest{RPCHeader: hdr}, &resp)
			return fmt.Sprintf("from %q", resp.ID), err
		}},
	}
}

// rawTransport is a raft transport over a TLS stream layer that presents
// files and trusts any server certificate of its CA bundle.
func rawTransport(t *testing.T, files tlsconfig.Files) (*raft.NetworkTransport, raft.ServerAddress) {
	t.Helper()
	certs, err := tlsconfig.NewReloader(files, tlsconfig.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := raftnet.NewTLSStreamLayer(raftnet.TLSStreamConfig{BindAddr: "127.0.0.1:0", Certs: certs,
		Peers: func(tlsconfig.Identity) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	trans := raftnet.NewRaftTransport(st, nil)
	t.Cleanup(func() { _ = trans.Close() })
	return trans, raft.ServerAddress(st.Addr().String())
}

// withBothCAs returns files whose CA bundle holds other's CA as well as
// the cluster's: a stranger of another CA that can verify the voters, so
// that only the voters' verdict on its certificate decides.
func withBothCAs(t *testing.T, files tlsconfig.Files, other, cluster *tlstest.PKI) tlsconfig.Files {
	t.Helper()
	files.CA = filepath.Join(t.TempDir(), "both.crt")
	if err := tlsconfig.WriteFileAtomic(files.CA, append(append([]byte{}, other.CA.CertPEM...), cluster.CA.CertPEM...), 0o644); err != nil {
		t.Fatal(err)
	}
	return files
}

// TestTLSRaftClusterRefusesStrangers: three voters commit over mutual TLS.
// Processes holding a certificate of another CA, one naming a voter id
// that is not configured, or a broker's certificate, send every raft RPC
// that could disturb the quorum (see hostileRPCs) to every voter: each
// RPC fails, each voter logs one refused handshake per RPC naming the
// stranger, none of them reaches raft (no voter takes the term they carry,
// and the only campaigns any voter hears are voters' own elections, which
// a loaded host may cause), and the cluster keeps committing under one
// leader. A process with a configured voter's certificate gets an
// answer through the same kind of transport, so the refusals are the
// voters' verdict on the certificates and nothing else.
func TestTLSRaftClusterRefusesStrangers(t *testing.T) {
	c := newTLSCluster(t)
	c.apply(20)
	c.converged(20)
	leader := c.leader()
	term := leader.Raft().CurrentTerm()

	// A vote request for an old term is answered (and not granted) when
	// it comes with a configured voter's certificate.
	probe, probeAddr := rawTransport(t, c.pki.Issue("probe-1003", tlsconfig.VoterURI(1003)))
	for _, v := range c.voters {
		var resp raft.RequestVoteResponse
		err := probe.RequestVote(raft.ServerID(v.ID()), raft.ServerAddress(v.Addr()), &raft.RequestVoteRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("1003"), Addr: []byte(probeAddr)},
			Term:      0}, &resp)
		if err != nil || resp.Granted {
			t.Fatalf("configured voter's certificate: RequestVote to voter %s: granted=%v error %v", v.ID(), resp.Granted, err)
		}
	}

	// From here on, what reaches raft's vote handling is recorded.
	observed := make([]*voteRequests, len(c.voters))
	voterAddrs := make([]string, len(c.voters))
	for i, v := range c.voters {
		observed[i] = observeVoteRequests(t, v.Raft())
		voterAddrs[i] = v.Addr()
	}

	other := tlstest.NewPKI(t, "another CA")
	strangers := []struct {
		name  string
		files tlsconfig.Files
		// is tells the voters' log lines about this stranger's refused
		// handshakes from the others'.
		is func(rec map[string]any) bool
	}{
		{"another CA, configured voter id", withBothCAs(t, other.Voter(1002), other, c.pki), func(rec map[string]any) bool {
			return strings.Contains(field(rec, "reason"), "certificate signed by unknown authority") &&
				field(rec, "unverified_uris") == "ctrlquorum://voter/1002" && field(rec, "unverified_issuer") == "CN=another CA,O=ctrlquorum"
		}},
		{"same CA, unconfigured voter id", c.pki.Voter(1009), func(rec map[string]any) bool {
			return strings.Contains(field(rec, "reason"), "certificate names voter 1009, which is not a configured voter")
		}},
		{"same CA, broker certificate", c.pki.Broker(2), func(rec map[string]any) bool {
			return strings.Contains(field(rec, "reason"), `certificate "broker-2" broker 2 names no voter id`)
		}},
	}
	for _, s := range strangers {
		trans, self := rawTransport(t, s.files)
		rpcs := hostileRPCs(term, self)
		for _, v := range c.voters {
			for _, rpc := range rpcs {
				if answer, err := rpc.send(trans, raft.ServerID(v.ID()), raft.ServerAddress(v.Addr())); err == nil {
					t.Errorf("%s: %s to voter %s got an answer (%s)", s.name, rpc.name, v.ID(), answer)
				}
			}
		}
		// A voter logs a refusal once its side of the handshake has
		// failed, which the stranger may learn of first.
		for i, v := range c.voters {
			votertest.WaitFor(t, 10*time.Second, fmt.Sprintf("voter %s to log %d refusals of %s", v.ID(), len(rpcs), s.name), func() bool {
				return len(refusals(t, c.logs[i], s.is)) == len(rpcs)
			})
		}
	}
	// Every stranger RPC carries term+100: had one reached raft, its
	// receiver would have taken that term. A loaded host may still see
	// elections among the voters (a leader stalled past its lease), which
	// show as vote requests from voters' addresses; a TimeoutNow that got
	// through would show as a leadership-transfer campaign.
	var heard []campaign
	for i := range c.voters {
		heard = append(heard, observed[i].campaigns()...)
	}
	for _, cp := range heard {
		if !slices.Contains(voterAddrs, cp.addr) || cp.transfer || cp.term >= term+100 {
			t.Errorf("a voter's raft heard a campaign that is not a voter's own election: %+v (voters at %v)", cp, voterAddrs)
		}
	}
	for _, v := range c.voters {
		if got := v.Raft().CurrentTerm(); got >= term+100 || (got != term && len(heard) == 0) {
			t.Errorf("voter %s moved from term %d to %d (vote requests heard: %+v)", v.ID(), term, got, heard)
		}
	}
	c.apply(20)
	c.converged(40)
	_, leaderNow := c.voters[0].LeaderID()
	for _, v := range c.voters {
		if _, id := v.LeaderID(); id != leaderNow || !slices.ContainsFunc(c.voters, func(w *voter.Voter) bool { return w.ID() == id }) {
			t.Errorf("voter %s follows %q; voter %s follows %q", v.ID(), id, c.voters[0].ID(), leaderNow)
		}
	}
	for i, f := range c.fsms {
		if n := f.n.Load(); n >= 1<<40 {
			t.Errorf("voter %s restored the stranger's snapshot (count %d)", c.voters[i].ID(), n)
		}
	}
}

// TestTLSRaftIntruderVoterNeverJoins: one follower of a three-voter
// cluster stops, and a real voter (raft and bolt on a temporary
// directory) takes its place: bootstrapped with the cluster's own
// configuration, listening on the stopped voter's raft address, holding a
// certificate of another CA that names the stopped voter's id. Were its
// certificate accepted, the leader would replicate the whole log to it
// (its bootstrap entry is the cluster's first entry) and it could vote.
// Instead the leader refuses the intruder's certificate on every attempt
// to reach the missing voter, the other follower refuses every one of
// its campaigns, and both refusals are logged; no vote request of the
// intruder's ever reaches raft on either remaining voter, so the cluster's
// term moves only through elections between those two (a loaded host can
// stall the leader past its lease), its leader is one of them and its
// configuration stays as it was, the remaining two voters keep committing,
// and the intruder's log never gets past its bootstrap entry.
func TestTLSRaftIntruderVoterNeverJoins(t *testing.T) {
	c := newTLSCluster(t)
	c.apply(10)
	c.converged(10)
	leader := c.leader()
	term := leader.Raft().CurrentTerm()
	confBefore := leader.Raft().GetConfiguration()
	if err := confBefore.Error(); err != nil {
		t.Fatal(err)
	}
	victim, other := -1, -1
	for i, v := range c.voters {
		switch {
		case v == leader:
		case victim < 0:
			victim = i
		default:
			other = i
		}
	}
	victimID, victimAddr := c.voters[victim].ID(), c.voters[victim].Addr()
	running := []int{slices.Index(c.voters, leader), other}
	campaigns := make([]*voteRequests, len(c.voters))
	for _, i := range running {
		campaigns[i] = observeVoteRequests(t, c.voters[i].Raft())
	}
	if err := c.voters[victim].Shutdown(); err != nil {
		t.Fatal(err)
	}

	pki := tlstest.NewPKI(t, "intruder CA")
	id, _ := strconv.Atoi(victimID)
	files := withBothCAs(t, pki.Voter(int32(id)), pki, c.pki)
	certs, err := tlsconfig.NewReloader(files, tlsconfig.Options{Expect: tlsconfig.Voters(int32(id))})
	if err != nil {
		t.Fatal(err)
	}
	intruderLog := &testkit.JSONLog{}
	// The stopped voter's port is free once its listener has closed.
	var stream *raftnet.StreamLayer
	votertest.WaitFor(t, 10*time.Second, "the stopped voter's raft address to be free", func() bool {
		stream, err = raftnet.NewTLSStreamLayer(raftnet.TLSStreamConfig{BindAddr: victimAddr, Certs: certs,
			Peers: tlsconfig.Voters(c.ids...), Logger: intruderLog.Logger()})
		return err == nil
	})
	fsm := &countFSM{}
	cfg := voter.Config{NodeID: victimID, Stream: stream, DataDir: t.TempDir(), Peers: confBefore.Configuration().Servers, FSM: fsm,
		Logger: hclog.New(&hclog.LoggerOptions{Name: "intruder", Level: hclog.Off})}
	// Short timeouts: the intruder campaigns as often as it can.
	voter.FastTimeouts(&cfg)
	intruder, err := voter.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = intruder.Shutdown() })

	// Commits go on while the leader tries to reach the missing voter and
	// the intruder campaigns; wait until both have been refused several
	// times.
	isIntruder := func(rec map[string]any) bool {
		return field(rec, "unverified_uris") == "ctrlquorum://voter/"+victimID && field(rec, "unverified_issuer") == "CN=intruder CA,O=ctrlquorum" &&
			strings.Contains(field(rec, "reason"), "certificate signed by unknown authority")
	}
	// A voter that dials the missing voter and finds the intruder's
	// certificate aborts the handshake with this alert.
	refusedByCluster := func(rec map[string]any) bool {
		return field(rec, "reason") == "remote error: tls: bad certificate"
	}
	applied := uint64(10)
	votertest.WaitFor(t, 30*time.Second, "three refusals each way", func() bool {
		c.apply(1)
		applied++
		if intruder.Raft().LastIndex() > 1 {
			return true // it got in: reported below
		}
		return len(refusals(t, c.logs[other], isIntruder)) >= 3 && len(refusals(t, intruderLog, refusedByCluster)) >= 3
	})
	c.apply(10)
	applied += 10
	votertest.WaitFor(t, 20*time.Second, "the leader and the remaining follower to apply every entry", func() bool {
		for _, i := range running {
			if c.fsms[i].n.Load() < applied {
				return false
			}
		}
		return true
	})

	if n := len(refusals(t, c.logs[other], isIntruder)); n < 3 {
		t.Errorf("voter %s logged %d refusals of the intruder's certificate", c.voters[other].ID(), n)
	}
	if n := len(refusals(t, intruderLog, refusedByCluster)); n < 3 {
		t.Errorf("the intruder saw %d of its handshakes refused by a voter that dialled it", n)
	}
	// With one voter stopped, an election needs both remaining voters, so
	// a term that moved shows as a vote request one of them heard from the
	// other; one from any other id would be the intruder's.
	runningIDs := []string{c.voters[running[0]].ID(), c.voters[running[1]].ID()}
	_, leaderNow := c.voters[running[0]].LeaderID()
	var heard []string
	for _, i := range running {
		heard = append(heard, campaigns[i].senders()...)
	}
	for _, id := range heard {
		if !slices.Contains(runningIDs, id) {
			t.Errorf("a remaining voter heard a vote request from %q (the intruder is %s); requests heard: %v", id, victimID, heard)
		}
	}
	for _, i := range running {
		v := c.voters[i]
		if got := v.Raft().CurrentTerm(); got != term && len(heard) == 0 {
			t.Errorf("voter %s moved from term %d to %d with no vote request between the remaining voters", v.ID(), term, got)
		}
		if _, id := v.LeaderID(); id != leaderNow || !slices.Contains(runningIDs, id) {
			t.Errorf("voter %s follows %q; the remaining voters are %v and the first follows %q", v.ID(), id, runningIDs, leaderNow)
		}
	}
	confAfter := leader.Raft().GetConfiguration()
	if err := confAfter.Error(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(confBefore.Configuration(), confAfter.Configuration()) {
		t.Errorf("the cluster's configuration changed: %+v, was %+v", confAfter.Configuration(), confBefore.Configuration())
	}
	// The intruder holds its bootstrap entry and nothing else.
	if got := intruder.Raft().LastIndex(); got != 1 {
		t.Errorf("the intruder's log reaches index %d; the cluster's is at %d", got, leader.Raft().LastIndex())
	}
	if n := fsm.n.Load(); n != 0 {
		t.Errorf("the intruder applied %d of the cluster's entries", n)
	}
	if intruder.IsLeader() {
		t.Error("the intruder leads")
	}
	if addr, id := intruder.LeaderID(); addr != "" || id != "" {
		t.Errorf("the intruder knows a leader: %s at %s", id, addr)
	}
}

// TestTLSRaftClusterRotation: every voter's certificate is replaced and
// reloaded while entries are committed; no entry fails, and a new
// connection to each voter sees its new certificate.
func TestTLSRaftClusterRotation(t *testing.T) {
	c := newTLSCluster(t)
	c.apply(5)
	term := c.leader().Raft().CurrentTerm()

	var committed atomic.Int64
	var failed atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var l *voter.Voter
			for _, v := range c.voters {
				if v.IsLeader() {
					l = v
				}
			}
			if l == nil {
				failed.Store(fmt.Errorf("no leader during rotation"))
				return
			}
			if err := l.Apply([]byte("r"+strconv.Itoa(i)), 5*time.Second).Error(); err != nil {
				failed.Store(fmt.Errorf("apply during rotation: %w", err))
				return
			}
			committed.Add(1)
		}
	}()

	old := make([]string, 3)
	for i, id := range c.ids {
		old[i] = c.certs[i].Leaf().SerialNumber.String()
		start := committed.Load()
		c.pki.Voter(id)
		if err := c.certs[i].Reload(); err != nil {
			t.Fatal(err)
		}
		votertest.WaitFor(t, 10*time.Second, "commits after a reload", func() bool { return committed.Load() >= start+10 || failed.Load() != nil })
	}
	close(stop)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}

	// A fresh connection to each voter presents the new certificate.
	probe, err := tlsconfig.NewReloader(c.pki.Issue("probe", tlsconfig.VoterURI(1003)), tlsconfig.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range c.voters {
		conn, err := tlsDial(probe, v.Addr())
		if err != nil {
			t.Fatalf("dial voter %s after rotation: %v", v.ID(), err)
		}
		got := conn.serial
		conn.Close()
		if got == old[i] || got != c.certs[i].Leaf().SerialNumber.String() {
			t.Fatalf("voter %s presented serial %s (old %s, current %s)", v.ID(), got, old[i], c.certs[i].Leaf().SerialNumber)
		}
	}
	n := uint64(5 + committed.Load())
	c.converged(n)
	// No connection broke badly enough to start an election.
	for _, v := range c.voters {
		if got := v.Raft().CurrentTerm(); got != term {
			t.Errorf("voter %s moved from term %d to %d during the rotation", v.ID(), term, got)
		}
	}
}

type probeConn struct {
	net.Conn
	serial string
}

func tlsDial(certs *tlsconfig.Reloader, addr string) (*probeConn, error) {
	dial := raftnet.TLSDialer(nil, certs.ClientConfig("", tlsconfig.Voters(1001, 1002, 1003)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &probeConn{Conn: c, serial: c.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String()}, nil
}

// voteRequests collects the vote and pre-vote requests that reached one
// voter's raft.
type voteRequests struct {
	mu   sync.Mutex
	seen []campaign
}

// campaign is one vote or pre-vote request as raft received it.
type campaign struct {
	id, addr string
	term     uint64
	// transfer: the candidate campaigns because it was told to take over
	// (TimeoutNow), not because its leader went quiet.
	transfer bool
}

func observeVoteRequests(t *testing.T, r *raft.Raft) *voteRequests {
	v := &voteRequests{}
	ch := make(chan raft.Observation, 64)
	obs := raft.NewObserver(ch, true, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.RequestVoteRequest, raft.RequestPreVoteRequest:
			return true
		}
		return false
	})
	r.RegisterObserver(obs)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for o := range ch {
			var c campaign
			switch req := o.Data.(type) {
			case raft.RequestVoteRequest:
				c = campaign{id: string(req.ID), addr: string(req.Addr), term: req.Term, transfer: req.LeadershipTransfer}
			case raft.RequestPreVoteRequest:
				c = campaign{id: string(req.ID), addr: string(req.Addr), term: req.Term}
			}
			v.mu.Lock()
			v.seen = append(v.seen, c)
			v.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		r.DeregisterObserver(obs)
		close(ch)
		<-done
	})
	return v
}

func (v *voteRequests) campaigns() []campaign {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.seen)
}

func (v *voteRequests) senders() []string {
	var ids []string
	for _, c := range v.campaigns() {
		ids = append(ids, c.id)
	}
	return ids
}
