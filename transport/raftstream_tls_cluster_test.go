package transport_test

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/ctrlquorum/ctrlquorum/transport"
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
}

// newTLSCluster starts three voters (1001–1003) whose raft traffic runs
// over mutual TLS, each accepting only the other configured voters.
func newTLSCluster(t *testing.T) *tlsCluster {
	t.Helper()
	c := &tlsCluster{t: t, pki: tlstest.NewPKI(t, "cluster CA"), ids: []int32{1001, 1002, 1003}}
	peers := tlsconfig.Voters(c.ids...)
	streams := make([]*transport.StreamLayer, 3)
	var servers []raft.Server
	for i, id := range c.ids {
		certs, err := tlsconfig.NewReloader(c.pki.Voter(id), tlsconfig.Options{Expect: tlsconfig.Voters(id)})
		if err != nil {
			t.Fatal(err)
		}
		c.certs = append(c.certs, certs)
		streams[i], err = transport.NewTLSStreamLayer(transport.TLSStreamConfig{BindAddr: "127.0.0.1:0", Certs: certs, Peers: peers,
			Logger: hclog.NewNullLogger()})
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

// TestTLSRaftClusterRefusesStrangers: three voters commit over mutual TLS.
// Processes holding a certificate of another CA, one naming a voter id
// that is not configured, or a broker's certificate, try to disrupt the
// quorum with a RequestVote of a much higher term and an AppendEntries:
// every RPC fails, no voter's term moves, and the cluster keeps
// committing.
func TestTLSRaftClusterRefusesStrangers(t *testing.T) {
	c := newTLSCluster(t)
	c.apply(20)
	c.converged(20)
	leader := c.leader()
	term := leader.Raft().CurrentTerm()

	other := tlstest.NewPKI(t, "another CA")
	// The stranger of another CA trusts the cluster's CA as well as its
	// own, so that only the voters' verdict decides.
	foreign := other.Voter(1002)
	foreign.CA = filepath.Join(t.TempDir(), "both.crt")
	if err := tlsconfig.WriteFileAtomic(foreign.CA, append(append([]byte{}, other.CA.CertPEM...), c.pki.CA.CertPEM...), 0o644); err != nil {
		t.Fatal(err)
	}
	strangers := map[string]tlsconfig.Files{
		"another CA, configured voter id": foreign,
		"same CA, unconfigured voter id":  c.pki.Voter(1009),
		"same CA, broker certificate":     c.pki.Broker(2),
	}
	for name, files := range strangers {
		certs, err := tlsconfig.NewReloader(files, tlsconfig.Options{})
		if err != nil {
			t.Fatal(err)
		}
		// The stranger trusts anyone: only the voters' verdict counts.
		st, err := transport.NewTLSStreamLayer(transport.TLSStreamConfig{BindAddr: "127.0.0.1:0", Certs: certs,
			Peers: func(tlsconfig.Identity) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		trans := transport.NewRaftTransport(st, nil)
		for _, v := range c.voters {
			var vresp raft.RequestVoteResponse
			err := trans.RequestVote(raft.ServerID(v.ID()), raft.ServerAddress(v.Addr()), &raft.RequestVoteRequest{
				RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("1002"), Addr: []byte(st.Addr().String())},
				Term:      term + 100, LastLogIndex: 1 << 40, LastLogTerm: term + 99,
			}, &vresp)
			if err == nil {
				t.Errorf("%s: RequestVote to voter %s got an answer (granted=%v term=%d)", name, v.ID(), vresp.Granted, vresp.Term)
			}
			var aresp raft.AppendEntriesResponse
			err = trans.AppendEntries(raft.ServerID(v.ID()), raft.ServerAddress(v.Addr()), &raft.AppendEntriesRequest{
				RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("1002"), Addr: []byte(st.Addr().String())},
				Term:      term + 100, PrevLogEntry: 1 << 40, PrevLogTerm: term + 99,
			}, &aresp)
			if err == nil {
				t.Errorf("%s: AppendEntries to voter %s got an answer (term=%d)", name, v.ID(), aresp.Term)
			}
		}
		_ = trans.Close()
	}
	for _, v := range c.voters {
		if got := v.Raft().CurrentTerm(); got != term {
			t.Errorf("voter %s moved from term %d to %d", v.ID(), term, got)
		}
	}
	if !leader.IsLeader() {
		t.Error("the leader lost leadership")
	}
	c.apply(20)
	c.converged(40)
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
	dial := transport.TLSDialer(nil, certs.ClientConfig("", tlsconfig.Voters(1001, 1002, 1003)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &probeConn{Conn: c, serial: c.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String()}, nil
}
