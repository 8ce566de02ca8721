package listener

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
	"github.com/ctrlquorum/ctrlquorum/voter"
	"github.com/ctrlquorum/ctrlquorum/voter/meta"
)

// joiningVoter is a controller node started with no raft state and no
// peers, with its listener: a node formatted to join, waiting to be added.
type joiningVoter struct {
	id   int32
	dir  [16]byte
	raft string
	node *controller.Node
	l    *Listener
}

func (c *testCluster) startJoiner(id int32) *joiningVoter {
	c.t.Helper()
	j := &joiningVoter{id: id, dir: meta.NewUUID()}
	stream := testkit.BindOutsideEphemeral(c.t, "127.0.0.1", func(addr string) (*raftnet.StreamLayer, error) {
		return raftnet.NewTCPStreamLayer(addr, "")
	})
	ln := testkit.BindOutsideEphemeral(c.t, "127.0.0.1", func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) })
	j.raft = stream.Addr().String()
	sender := &ackSender{}
	n, err := controller.StartNode(controller.NodeConfig{
		NodeID: id, DataDir: c.t.TempDir(), Sender: sender, SessionTimeout: c.session,
		Logger: c.logger("voter-" + strconv.Itoa(int(id))),
		Voter: func(vc *voter.Config) {
			vc.Stream, vc.DirectoryID = stream, directoryText(j.dir)
			voter.FastTimeouts(vc)
		},
	})
	if err != nil {
		c.t.Fatal(err)
	}
	sender.ctl.Store(n.Controller)
	l, err := New(Config{Listener: ln, Node: n, Peers: c.peers, ClusterID: testClusterID, Logger: c.logger("listener-" + strconv.Itoa(int(id)))})
	if err != nil {
		_ = n.Shutdown()
		c.t.Fatal(err)
	}
	j.node, j.l = n, l
	c.t.Cleanup(j.stop)
	return j
}

func (j *joiningVoter) stop() {
	if j.l != nil {
		_ = j.l.Close()
		_ = j.node.Shutdown()
		j.l = nil
	}
}

func (j *joiningVoter) addRequest() *kmsg.AddRaftVoterRequest {
	req := kmsg.NewPtrAddRaftVoterRequest()
	cid := testClusterID
	req.ClusterID, req.VoterID, req.VoterDirectoryID, req.TimeoutMillis = &cid, j.id, j.dir, 30000
	host, port, _ := net.SplitHostPort(j.raft)
	lhost, lport, _ := net.SplitHostPort(j.l.Addr().String())
	for _, e := range []struct{ name, host, port string }{{RaftEndpoint, host, port}, {"CONTROLLER", lhost, lport}} {
		ep := kmsg.NewAddRaftVoterRequestListener()
		p, _ := strconv.Atoi(e.port)
		ep.Name, ep.Host, ep.Port = e.name, e.host, uint16(p)
		req.Listeners = append(req.Listeners, ep)
	}
	return req
}

// callAt sends req to the listener at addr, as an admin client does.
func callAt(t *testing.T, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := kafkaclient.Dial(ctx, addr, kafkaclient.Options{ClientID: "membership-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := conn.Request(ctx, req)
	if err != nil {
		t.Fatalf("%s to %s: %v", kmsg.NameForKey(req.Key()), addr, err)
	}
	return resp
}

func describeQuorumReq() *kmsg.DescribeQuorumRequest {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = metadataTopic
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	return req
}

// quorumOf describes the quorum from the active controller.
func (c *testCluster) quorumOf(t *testing.T) kmsg.DescribeQuorumResponseTopicPartition {
	t.Helper()
	cl := c.client()
	resp := c.toControllerRetry(t, cl, describeQuorumReq(), func(r kmsg.Response) int16 { return r.(*kmsg.DescribeQuorumResponse).ErrorCode })
	qr := resp.(*kmsg.DescribeQuorumResponse)
	if qr.ErrorCode != 0 || len(qr.Topics) != 1 || len(qr.Topics[0].Partitions) != 1 {
		t.Fatalf("DescribeQuorum: %+v", qr)
	}
	return qr.Topics[0].Partitions[0]
}

func replicaIDs(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) []int32 {
	var out []int32
	for _, r := range rs {
		out = append(out, r.ReplicaID)
	}
	return out
}

func codeName(code int16) string {
	if err := kerr.ErrorForCode(code); err != nil {
		return err.Error()
	}
	return "NONE"
}

// TestAddRaftVoterThroughStandby: AddRaftVoter sent to a standby is
// forwarded to the active controller, which adds the node; DescribeQuorum
// then lists it among the voters with its directory id and listener, and
// a node id that is a voter already, a request without a directory id or
// an endpoint, and another cluster's id are refused with Kafka's codes.
func TestAddRaftVoterThroughStandby(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	act := c.active(30 * time.Second)
	standby := c.listener(c.standbyIndex(act)).Addr().String()
	j := c.startJoiner(1004)

	resp := callAt(t, standby, j.addRequest()).(*kmsg.AddRaftVoterResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("AddRaftVoter through a standby: %s %v", codeName(resp.ErrorCode), deref(resp.ErrorMessage))
	}
	q := c.quorumOf(t)
	var found bool
	for _, v := range q.CurrentVoters {
		if v.ReplicaID == 1004 {
			found = true
			if v.ReplicaDirectoryID != j.dir {
				t.Errorf("voter 1004 is listed with directory %s, want %s", directoryText(v.ReplicaDirectoryID), directoryText(j.dir))
			}
		}
	}
	if !found || len(q.CurrentVoters) != 4 || len(q.Observers) != 0 {
		t.Fatalf("voters %v, observers %v; want 1001-1004 voting", replicaIDs(q.CurrentVoters), replicaIDs(q.Observers))
	}
	votertestWait(t, "voter 1004 to have caught up", func() bool {
		return j.node.Voter.Raft().AppliedIndex() >= c.node(act).Voter.Raft().CommitIndex()
	})

	for name, tc := range map[string]struct {
		mutate func(*kmsg.AddRaftVoterRequest)
		want   *kerr.Error
	}{
		"a voter already":      {func(*kmsg.AddRaftVoterRequest) {}, kerr.DuplicateVoter},
		"no directory id":      {func(r *kmsg.AddRaftVoterRequest) { r.VoterID, r.VoterDirectoryID = 1005, [16]byte{} }, kerr.InvalidRequest},
		"no raft endpoint":     {func(r *kmsg.AddRaftVoterRequest) { r.VoterID, r.Listeners = 1005, r.Listeners[1:] }, kerr.InvalidRequest},
		"another cluster's id": {func(r *kmsg.AddRaftVoterRequest) { other := "other"; r.ClusterID = &other }, kerr.InconsistentClusterID},
	} {
		req := j.addRequest()
		tc.mutate(req)
		resp := callAt(t, standby, req).(*kmsg.AddRaftVoterResponse)
		if resp.ErrorCode != tc.want.Code {
			t.Errorf("%s: %s (%v), want %s", name, codeName(resp.ErrorCode), deref(resp.ErrorMessage), tc.want.Message)
		}
	}
	if q := c.quorumOf(t); len(q.CurrentVoters) != 4 || len(q.Observers) != 0 {
		t.Fatalf("the refused requests changed the quorum: voters %v, observers %v", replicaIDs(q.CurrentVoters), replicaIDs(q.Observers))
	}
}

// TestRemoveRaftVoterOfTheActiveController: removing the active
// controller's own voter hands leadership over first, and the new active
// controller removes it; an unknown voter is VOTER_NOT_FOUND.
func TestRemoveRaftVoterOfTheActiveController(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	act := c.active(30 * time.Second)
	old := c.ids[act]
	req := kmsg.NewPtrRemoveRaftVoterRequest()
	req.VoterID = 1009
	if resp := callAt(t, c.listener(act).Addr().String(), req).(*kmsg.RemoveRaftVoterResponse); resp.ErrorCode != kerr.VoterNotFound.Code {
		t.Fatalf("removing unknown voter 1009: %s, want VOTER_NOT_FOUND", codeName(resp.ErrorCode))
	}
	req.VoterID = old
	resp := callAt(t, c.listener(act).Addr().String(), req).(*kmsg.RemoveRaftVoterResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("removing the active controller %d: %s %v", old, codeName(resp.ErrorCode), deref(resp.ErrorMessage))
	}
	q := c.quorumOf(t)
	if len(q.CurrentVoters) != 2 || q.LeaderID == old {
		t.Fatalf("after removing %d: leader %d, voters %v", old, q.LeaderID, replicaIDs(q.CurrentVoters))
	}
	for _, v := range q.CurrentVoters {
		if v.ReplicaID == old {
			t.Fatalf("voter %d is still listed: %v", old, replicaIDs(q.CurrentVoters))
		}
	}
	if st := c.node(act).Voter.MembershipStats(); st.Failed != 1 {
		t.Errorf("the old leader's stats %+v: want the unknown voter counted as failed", st)
	}
}

// TestAddRaftVoterThatStopsFailsCleanly: the node being added stops
// before it catches up; the request times out with REQUEST_TIMED_OUT,
// a second change meanwhile is refused with REQUEST_TIMED_OUT, and the
// quorum is left with its three voters and no observer.
func TestAddRaftVoterThatStopsFailsCleanly(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	act := c.active(30 * time.Second)
	j := c.startJoiner(1004)
	req := j.addRequest()
	req.TimeoutMillis = 4000
	j.stop()
	done := make(chan *kmsg.AddRaftVoterResponse, 1)
	go func() { done <- callAt(t, c.listener(act).Addr().String(), req).(*kmsg.AddRaftVoterResponse) }()
	votertestWait(t, "1004 to be an observer", func() bool {
		ms, _, _ := c.node(act).Voter.Members()
		return len(ms) == 4
	})
	rm := kmsg.NewPtrRemoveRaftVoterRequest()
	rm.VoterID = c.ids[(act+1)%3]
	if resp := callAt(t, c.listener(act).Addr().String(), rm).(*kmsg.RemoveRaftVoterResponse); resp.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("a second change during an add: %s, want REQUEST_TIMED_OUT", codeName(resp.ErrorCode))
	}
	resp := <-done
	if resp.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("adding a stopped node: %s %v, want REQUEST_TIMED_OUT", codeName(resp.ErrorCode), deref(resp.ErrorMessage))
	}
	q := c.quorumOf(t)
	if len(q.CurrentVoters) != 3 || len(q.Observers) != 0 {
		t.Fatalf("after the failed add: voters %v, observers %v", replicaIDs(q.CurrentVoters), replicaIDs(q.Observers))
	}
}

func votertestWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitFor(t, 30*time.Second, what, cond)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
