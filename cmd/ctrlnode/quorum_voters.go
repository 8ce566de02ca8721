package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/listener"
	"github.com/ctrlquorum/ctrlquorum/voter/meta"
)

// The membership commands, like kafka-metadata-quorum's add-controller,
// remove-controller and describe: AddRaftVoter, RemoveRaftVoter and
// DescribeQuorum sent to the active controller.

// parseDirectoryID reads a directory id in Kafka's Uuid text form (as
// meta.properties and `ctrlnode format` print it).
func parseDirectoryID(flag, s string) ([16]byte, error) {
	u, err := meta.ParseUUID(s)
	if err != nil {
		return u, usageErr("--%s: %v (the directory.id of the node's meta.properties)", flag, err)
	}
	return u, nil
}

func directoryText(d [16]byte) string {
	if meta.UUID(d).IsZero() {
		return ""
	}
	return meta.UUID(d).String()
}

func hostPort(flag, s string) (string, uint16, error) {
	host, port, err := net.SplitHostPort(s)
	p, perr := strconv.ParseUint(port, 10, 16)
	if err != nil || perr != nil || host == "" || p == 0 {
		return "", 0, usageErr("--%s %q is not host:port", flag, s)
	}
	return host, uint16(p), nil
}

type voterChange struct {
	Op          string `json:"op"`
	ID          int32  `json:"id"`
	DirectoryID string `json:"directory_id,omitempty"`
	Raft        string `json:"raft,omitempty"`
	Listener    string `json:"listener,omitempty"`
	ElapsedMs   int64  `json:"elapsed_ms"`
	Error       string `json:"error,omitempty"`
}

func quorumAddVoter(args []string, stdout, stderr io.Writer) int {
	c := newCLI("quorum add-voter", "--id ID --directory-id DIR --raft HOST:PORT --listener HOST:PORT [flags]", `
Adds a controller voter (AddRaftVoter, as kafka-metadata-quorum
add-controller). The node must run already: formatted to join (ctrlnode
format without initial voters), started with ctrlnode run, waiting to be
added. The active controller adds it as a non-voter, which receives a
snapshot and the log, and promotes it to voter once its log reaches the
commit index; the command returns when the promotion is committed. Its
catch-up is printed on stderr every --progress. If the node does not
catch up within --timeout it is taken out again and the voters are as
they were. One voter change runs at a time: another one in progress is
REQUEST_TIMED_OUT, as in Kafka.`, stdout, stderr)
	c.timeout = 5 * time.Minute
	c.fs.Lookup("timeout").DefValue = "5m0s"
	c.fs.Lookup("timeout").Value.Set("5m")
	id := c.fs.Int("id", -1, "the new voter's node id (node.id)")
	dir := c.fs.String("directory-id", "", "the new voter's directory id (directory.id of its meta.properties)")
	raftAddr := c.fs.String("raft", "", "host:port the other voters reach its raft at (raft.advertise, else raft.listener)")
	kafka := c.fs.String("listener", "", "host:port of its Kafka listener (listener.advertise, else listener)")
	progress := c.fs.Duration("progress", 2*time.Second, "how often the catch-up is printed on stderr (0: never)")
	if code, done := c.parse(args); done {
		return code
	}
	if *id < 0 || *id > 1<<31-1 {
		return c.fail(usageErr("--id is required: the new voter's node id"))
	}
	d, err := parseDirectoryID("directory-id", *dir)
	if err != nil {
		return c.fail(err)
	}
	rh, rp, err := hostPort("raft", *raftAddr)
	if err != nil {
		return c.fail(err)
	}
	lh, lp, err := hostPort("listener", *kafka)
	if err != nil {
		return c.fail(err)
	}
	req := kmsg.NewPtrAddRaftVoterRequest()
	// The controller's deadline falls a little before the command's, so
	// that its answer (REQUEST_TIMED_OUT, the voters as they were) arrives
	// in time to be printed.
	req.VoterID, req.VoterDirectoryID, req.AckWhenCommitted = int32(*id), d, true
	req.TimeoutMillis = int32(min(c.timeout*9/10, time.Duration(math.MaxInt32)*time.Millisecond).Milliseconds())
	for _, e := range []struct {
		name string
		host string
		port uint16
	}{{listener.RaftEndpoint, rh, rp}, {"CONTROLLER", lh, lp}} {
		ep := kmsg.NewAddRaftVoterRequestListener()
		ep.Name, ep.Host, ep.Port = e.name, e.host, e.port
		req.Listeners = append(req.Listeners, ep)
	}
	ctx, cancel := c.context()
	defer cancel()
	start := time.Now()
	stopProgress := func() {}
	if *progress > 0 {
		stopProgress = c.showCatchUp(ctx, int32(*id), *progress)
	}
	_, err = c.toController(ctx, req, func(r kmsg.Response) error {
		resp := r.(*kmsg.AddRaftVoterResponse)
		return membershipErr(resp.ErrorCode, resp.ErrorMessage)
	})
	stopProgress()
	out := voterChange{Op: "add-voter", ID: int32(*id), DirectoryID: *dir, Raft: *raftAddr, Listener: *kafka, ElapsedMs: time.Since(start).Milliseconds()}
	return c.reportChange(out, err)
}

func quorumRemoveVoter(args []string, stdout, stderr io.Writer) int {
	c := newCLI("quorum remove-voter", "--id ID [--directory-id DIR] [flags]", `
Removes a controller voter (RemoveRaftVoter, as kafka-metadata-quorum
remove-controller). --directory-id names which copy of the node is
removed: after a lost disk, the node formatted again has a new directory
id and the old one is what to remove; without it the voter of that id is
removed whatever its directory. Removing the active controller's voter
has it hand leadership to another voter first. The removed node leaves
the quorum and can be stopped.`, stdout, stderr)
	id := c.fs.Int("id", -1, "the voter's node id")
	dir := c.fs.String("directory-id", "", "the voter's directory id, as ctrlnode quorum describe lists it")
	if code, done := c.parse(args); done {
		return code
	}
	if *id < 0 || *id > 1<<31-1 {
		return c.fail(usageErr("--id is required: the voter's node id"))
	}
	req := kmsg.NewPtrRemoveRaftVoterRequest()
	req.VoterID = int32(*id)
	if *dir != "" {
		d, err := parseDirectoryID("directory-id", *dir)
		if err != nil {
			return c.fail(err)
		}
		req.VoterDirectoryID = d
	}
	ctx, cancel := c.context()
	defer cancel()
	start := time.Now()
	_, err := c.toController(ctx, req, func(r kmsg.Response) error {
		resp := r.(*kmsg.RemoveRaftVoterResponse)
		return membershipErr(resp.ErrorCode, resp.ErrorMessage)
	})
	return c.reportChange(voterChange{Op: "remove-voter", ID: int32(*id), DirectoryID: *dir, ElapsedMs: time.Since(start).Milliseconds()}, err)
}

// errNotControllerRetry has an answer sent again to the active
// controller found anew.
var errNotControllerRetry = kafkaclient.ErrNotController

func membershipErr(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err == nil {
		return nil
	}
	if errors.Is(err, kerr.NotController) {
		return fmt.Errorf("%w: %s", errNotControllerRetry, itemError(err, deref(msg)))
	}
	return fmt.Errorf("%s", itemError(err, deref(msg)))
}

func (c *cli) reportChange(out voterChange, err error) int {
	if err != nil {
		out.Error = err.Error()
	}
	if c.json {
		c.printJSON(out)
		if err != nil {
			return exitFailed
		}
		return exitOK
	}
	if err != nil {
		return c.fail(err)
	}
	switch out.Op {
	case "add-voter":
		fmt.Fprintf(c.stdout, "voter %d (directory %s) added in %s\n", out.ID, out.DirectoryID, time.Duration(out.ElapsedMs)*time.Millisecond)
	default:
		fmt.Fprintf(c.stdout, "voter %d removed in %s\n", out.ID, time.Duration(out.ElapsedMs)*time.Millisecond)
	}
	return exitOK
}

// showCatchUp prints, every interval, where the voter being added is:
// not yet in the configuration, an observer catching up (its log end
// against the high watermark), or a voter. It describes the quorum on a
// connection of its own; the returned function stops it.
func (c *cli) showCatchUp(ctx context.Context, id int32, every time.Duration) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	poller := *c
	poller.ctl = nil
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			qctx, qcancel := context.WithTimeout(ctx, every)
			resp, _, err := poller.describeQuorumOnly(qctx)
			qcancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				fmt.Fprintf(c.stderr, "voter %d: quorum not described: %v\n", id, err)
				continue
			}
			p := resp.Topics[0].Partitions[0]
			state := fmt.Sprintf("not in the configuration yet (high watermark %d)", p.HighWatermark)
			for _, o := range p.Observers {
				if o.ReplicaID == id {
					if o.LogEndOffset < 0 {
						state = fmt.Sprintf("catching up: log end not known yet, high watermark %d", p.HighWatermark)
					} else {
						state = fmt.Sprintf("catching up: log end %d of %d (lag %d)", o.LogEndOffset, p.HighWatermark, max(0, p.HighWatermark-o.LogEndOffset))
					}
				}
			}
			for _, v := range p.CurrentVoters {
				if v.ReplicaID == id {
					state = "promoted to voter, waiting for the commit"
				}
			}
			fmt.Fprintf(c.stderr, "voter %d: %s\n", id, state)
		}
	}()
	return func() {
		cancel()
		<-done
		if poller.ctl != nil {
			poller.ctl.Close()
		}
	}
}

// quorumNodeRow is one server of the quorum as describe prints it.
type quorumNodeRow struct {
	ID                 int32  `json:"id"`
	DirectoryID        string `json:"directory_id"`
	Role               string `json:"role"` // Leader, Follower, Observer
	LogEndOffset       int64  `json:"log_end_offset"`
	Lag                int64  `json:"lag"`
	LastFetchAgoMs     *int64 `json:"last_fetch_ago_ms"`
	LastCaughtUpAgoMs  *int64 `json:"last_caught_up_ago_ms"`
	Listener           string `json:"listener,omitempty"`
	LastFetchTimestamp int64  `json:"last_fetch_timestamp"`
}

type quorumDescription struct {
	ClusterID     string          `json:"cluster_id"`
	LeaderID      int32           `json:"leader_id"`
	LeaderEpoch   int32           `json:"leader_epoch"`
	HighWatermark int64           `json:"high_watermark"`
	Voters        []quorumNodeRow `json:"voters"`
	Observers     []quorumNodeRow `json:"observers"`
}

func quorumDescribeVoters(args []string, stdout, stderr io.Writer) int {
	c := newCLI("quorum describe", "[flags]", `
Lists the quorum's voters and observers (voters being added, still
catching up) from the active controller (DescribeQuorum), each with its
directory id, role, log end, lag behind the high watermark (the commit
index), the time since its last fetch and since it was last caught up,
and its Kafka listener. A voter with no directory id has a legacy
address, from a release before directory ids.`, stdout, stderr)
	if code, done := c.parse(args); done {
		return code
	}
	ctx, cancel := c.context()
	defer cancel()
	resp, cluster, err := c.describeQuorum(ctx)
	if err != nil {
		return c.fail(err)
	}
	p := resp.Topics[0].Partitions[0]
	listeners := map[int32]string{}
	for _, n := range resp.Nodes {
		if len(n.Listeners) > 0 {
			listeners[n.NodeID] = net.JoinHostPort(n.Listeners[0].Host, strconv.Itoa(int(n.Listeners[0].Port)))
		}
	}
	now := time.Now().UnixMilli()
	rows := func(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState, observer bool) []quorumNodeRow {
		out := []quorumNodeRow{}
		for _, r := range rs {
			row := quorumNodeRow{ID: r.ReplicaID, DirectoryID: directoryText(r.ReplicaDirectoryID), Role: "Follower",
				LogEndOffset: r.LogEndOffset, Lag: -1, Listener: listeners[r.ReplicaID], LastFetchTimestamp: r.LastFetchTimestamp}
			switch {
			case observer:
				row.Role = "Observer"
			case r.ReplicaID == p.LeaderID:
				row.Role = "Leader"
			}
			if r.LogEndOffset >= 0 {
				row.Lag = max(0, p.HighWatermark-r.LogEndOffset)
			}
			if r.LastFetchTimestamp > 0 {
				ago := max(0, now-r.LastFetchTimestamp)
				row.LastFetchAgoMs = &ago
			}
			if r.LastCaughtUpTimestamp > 0 {
				ago := max(0, now-r.LastCaughtUpTimestamp)
				row.LastCaughtUpAgoMs = &ago
			}
			out = append(out, row)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
		return out
	}
	d := quorumDescription{ClusterID: cluster, LeaderID: p.LeaderID, LeaderEpoch: p.LeaderEpoch, HighWatermark: p.HighWatermark,
		Voters: rows(p.CurrentVoters, false), Observers: rows(p.Observers, true)}
	if c.json {
		c.printJSON(d)
		return exitOK
	}
	ago := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return strconv.FormatInt(*p, 10) + " ms ago"
	}
	fmt.Fprintf(c.stdout, "ClusterId: %s  LeaderId: %d  LeaderEpoch: %d  HighWatermark: %d\n\n", orDash(d.ClusterID), d.LeaderID, d.LeaderEpoch, d.HighWatermark)
	var t [][]string
	for _, r := range append(append([]quorumNodeRow{}, d.Voters...), d.Observers...) {
		t = append(t, []string{strconv.Itoa(int(r.ID)), orDash(r.DirectoryID), r.Role, strconv.FormatInt(r.LogEndOffset, 10),
			strconv.FormatInt(r.Lag, 10), ago(r.LastFetchAgoMs), ago(r.LastCaughtUpAgoMs), orDash(r.Listener)})
	}
	c.table([]string{"NODE", "DIRECTORY-ID", "ROLE", "LOG-END", "LAG", "LAST-FETCH", "LAST-CAUGHT-UP", "LISTENER"}, t)
	return exitOK
}
