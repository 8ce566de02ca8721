package listener

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
	"github.com/ctrlquorum/ctrlquorum/voter"
)

// RaftEndpoint is the name of the endpoint, in an AddRaftVoter request's
// Listeners, that gives the new voter's raft address. In KRaft the
// controller listener carries raft itself; here raft has a port of its
// own, so a request names both: this one, and the controller listener
// (Config.ControllerListener, "CONTROLLER") where the voter serves the
// Kafka protocol.
const RaftEndpoint = "RAFT"

// addRaftVoter adds a voter (KIP-853): the active controller has it join
// as a non-voter, waits for its log to reach the commit index, then
// promotes it (voter.AddVoter), and answers once the promotion is
// committed. The error codes are Kafka's: REQUEST_TIMED_OUT while another
// change runs or when the voter does not catch up in time (it is then
// taken out again), DUPLICATE_VOTER for an id that is a voter already,
// INVALID_REQUEST for a request without a directory id or without both
// endpoints, INCONSISTENT_CLUSTER_ID, NOT_CONTROLLER from a standby that
// cannot forward it. The answer always waits for the commit, as v1's
// AckWhenCommitted asks by default: a voter change is acknowledged only
// once it holds.
func (l *Listener) addRaftVoter(ctx context.Context, c *kafkawire.Conn, req *kmsg.AddRaftVoterRequest) *kmsg.AddRaftVoterResponse {
	resp := req.ResponseKind().(*kmsg.AddRaftVoterResponse)
	fail := func(err error) *kmsg.AddRaftVoterResponse {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return resp
	}
	if err := l.checkClusterID(req.ClusterID); err != nil {
		return fail(err)
	}
	addr, err := l.newVoterAddress(req)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := l.requestContext(ctx, req.TimeoutMillis)
	defer cancel()
	if l.standby() {
		if r := l.forwardMembership(ctx, c, req); r != nil {
			return r.(*kmsg.AddRaftVoterResponse)
		}
		return fail(l.notController())
	}
	target, _ := peerListener(req.VoterID, addr)
	id := strconv.Itoa(int(req.VoterID))
	var lastLog time.Time
	err = l.node.Voter.AddVoter(ctx, voter.AddVoterRequest{
		ID: id, Address: addr,
		LogEnd: func(ctx context.Context) (uint64, error) { return l.logEndOf(ctx, target, req.VoterDirectoryID) },
		Progress: func(end, commit uint64, err error) {
			if time.Since(lastLog) < 5*time.Second {
				return
			}
			lastLog = time.Now()
			if err != nil {
				l.log.Info("voter being added: its log end is not known yet", "voter", id, "error", err)
				return
			}
			l.log.Info("voter being added is catching up", "voter", id, "log_end", end, "commit_index", commit)
		},
	})
	if err != nil {
		err = membershipError(err)
		l.log.Info("AddRaftVoter failed", "voter", id, "directory", addr.DirectoryID, "error", err)
		return fail(err)
	}
	return resp
}

// removeRaftVoter removes a voter (KIP-853). A zero directory id matches
// the voter of that id whatever its directory. When the voter to remove
// is this leader, it hands leadership over first and the request is
// forwarded to the new active controller, which removes it.
func (l *Listener) removeRaftVoter(ctx context.Context, c *kafkawire.Conn, req *kmsg.RemoveRaftVoterRequest) *kmsg.RemoveRaftVoterResponse {
	resp := req.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
	fail := func(err error) *kmsg.RemoveRaftVoterResponse {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return resp
	}
	if err := l.checkClusterID(req.ClusterID); err != nil {
		return fail(err)
	}
	if req.VoterID < 0 {
		return fail(kafkaErr(kerr.InvalidRequest, "VoterId %d is not a node id", req.VoterID))
	}
	dir := ""
	if req.VoterDirectoryID != ([16]byte{}) {
		dir = directoryText(req.VoterDirectoryID)
	}
	ctx, cancel := l.requestContext(ctx, 0)
	defer cancel()
	if l.standby() {
		if r := l.forwardMembership(ctx, c, req); r != nil {
			return r.(*kmsg.RemoveRaftVoterResponse)
		}
		return fail(l.notController())
	}
	id := strconv.Itoa(int(req.VoterID))
	err := l.node.Voter.RemoveVoter(ctx, id, dir)
	if errors.Is(err, voter.ErrHandedOver) {
		if r := l.forwardMembership(ctx, c, req); r != nil {
			return r.(*kmsg.RemoveRaftVoterResponse)
		}
		return fail(l.notController())
	}
	if err != nil {
		err = membershipError(err)
		l.log.Info("RemoveRaftVoter failed", "voter", id, "directory", dir, "error", err)
		return fail(err)
	}
	return resp
}

// checkClusterID refuses a request naming another cluster.
func (l *Listener) checkClusterID(id *string) error {
	if cluster := l.clusterID(); id != nil && cluster != "" && *id != cluster {
		return kafkaErr(kerr.InconsistentClusterID, "the request names cluster %q, this is %q", *id, cluster)
	}
	return nil
}

// newVoterAddress is the raft address of the voter an AddRaftVoter
// request adds: its RAFT endpoint, directory id and controller listener.
func (l *Listener) newVoterAddress(req *kmsg.AddRaftVoterRequest) (raftnet.PeerAddress, error) {
	var a raftnet.PeerAddress
	if req.VoterID < 0 {
		return a, kafkaErr(kerr.InvalidRequest, "VoterId %d is not a node id", req.VoterID)
	}
	if req.VoterDirectoryID == ([16]byte{}) {
		return a, kafkaErr(kerr.InvalidRequest, "VoterDirectoryId is required: the directory id the new voter was formatted with")
	}
	a.DirectoryID = directoryText(req.VoterDirectoryID)
	for _, e := range req.Listeners {
		hp := net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
		if e.Host == "" || e.Port == 0 {
			return a, kafkaErr(kerr.InvalidRequest, "listener %q: want a host and a port, got %q", e.Name, hp)
		}
		switch e.Name {
		case RaftEndpoint:
			a.HostPort = hp
		case l.cfg.ControllerListener:
			a.Listener = hp
		}
	}
	if a.HostPort == "" || a.Listener == "" {
		return a, kafkaErr(kerr.InvalidRequest, "Listeners must name the new voter's %s endpoint (its raft address) and its %s listener (its Kafka listener)",
			RaftEndpoint, l.cfg.ControllerListener)
	}
	return a, nil
}

// logEndOf asks the node at p for its last log index with the probe
// DescribeQuorum, and checks that it is the node and directory being
// added: another process at that address must not be taken for it.
func (l *Listener) logEndOf(ctx context.Context, p PeerListener, dir [16]byte) (uint64, error) {
	own, err := l.probe(ctx, p)
	if err != nil {
		return 0, err
	}
	if own.ReplicaDirectoryID != dir {
		return 0, fmt.Errorf("the node at %s is directory %s, not %s", p.addr(), directoryText(own.ReplicaDirectoryID), directoryText(dir))
	}
	if own.LogEndOffset < 0 {
		return 0, nil
	}
	return uint64(own.LogEndOffset), nil
}

// forwardMembership sends a membership change to the active controller
// until one takes it or ctx ends: after a handover the new leader may
// take a moment to be known. Nil when none could be reached.
func (l *Listener) forwardMembership(ctx context.Context, c *kafkawire.Conn, req kmsg.Request) kmsg.Response {
	if l.cfg.NoForward || forwarded(c) {
		return nil
	}
	backoff := 10 * time.Millisecond
	for {
		if resp := l.forward(ctx, c, req); resp != nil && !membershipNotController(resp) {
			return resp
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}

func membershipNotController(resp kmsg.Response) bool {
	switch r := resp.(type) {
	case *kmsg.AddRaftVoterResponse:
		return r.ErrorCode == kerr.NotController.Code
	case *kmsg.RemoveRaftVoterResponse:
		return r.ErrorCode == kerr.NotController.Code
	}
	return false
}

// membershipError gives a membership change's error the code Kafka
// returns for it (KafkaRaftClient's AddVoterHandler and
// RemoveVoterHandler).
func membershipError(err error) error {
	switch {
	case errors.Is(err, voter.ErrChangeInProgress):
		return kafkaErr(kerr.RequestTimedOut, "request timed out waiting for the leader to finish the previous voter change")
	case errors.Is(err, voter.ErrNotCaughtUp):
		return kafkaErr(kerr.RequestTimedOut, "%v; it was removed again, the voters are as they were", err)
	case errors.Is(err, voter.ErrDuplicateVoter):
		return kafkaErr(kerr.DuplicateVoter, "%v", err)
	case errors.Is(err, voter.ErrVoterNotFound):
		return kafkaErr(kerr.VoterNotFound, "%v", err)
	case errors.Is(err, voter.ErrLastVoter):
		return kafkaErr(kerr.InvalidRequest, "%v", err)
	case errors.Is(err, context.DeadlineExceeded):
		return kafkaErr(kerr.RequestTimedOut, "%v", err)
	}
	if errorCode(err) == kerr.NotController.Code {
		return err
	}
	// raft's own refusals: a configuration entry appended meanwhile
	// ("configuration changed since"), or its queue full.
	return kafkaErr(kerr.RequestTimedOut, "%v", err)
}
