package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/ops"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
)

func runQuorum(args []string, stdout, stderr io.Writer) int {
	return dispatch("quorum", "The controller quorum, like kafka-metadata-quorum.sh: describe it, add and remove voters.", []subcommand{
		{"status", "leader, epoch, commit index, voters and the largest follower lag (--status)", func(a []string, o, e io.Writer) int {
			return quorumDescribe("status", a, o, e)
		}},
		{"replication", "each voter's log end, lag and last fetch (--replication)", func(a []string, o, e io.Writer) int {
			return quorumDescribe("replication", a, o, e)
		}},
		{"describe", "voters and observers with directory ids, lag, last fetch and listener", quorumDescribeVoters},
		{"add-voter", "add a voter: joins as an observer, catches up, is promoted (add-controller)", quorumAddVoter},
		{"remove-voter", "remove a voter by id and directory id (remove-controller)", quorumRemoveVoter},
	}, args, stdout, stderr)
}

type voterState struct {
	ID                    int32  `json:"id"`
	Status                string `json:"status"` // Leader or Follower
	LogEndOffset          int64  `json:"log_end_offset"`
	Lag                   int64  `json:"lag"`
	LastFetchTimestamp    int64  `json:"last_fetch_timestamp"`
	LastCaughtUpTimestamp int64  `json:"last_caught_up_timestamp"`
	LastFetchAgoMs        *int64 `json:"last_fetch_ago_ms"`
	LastCaughtUpAgoMs     *int64 `json:"last_caught_up_ago_ms"`
}

type quorumStatus struct {
	ClusterID         string       `json:"cluster_id"`
	LeaderID          int32        `json:"leader_id"`
	LeaderEpoch       int32        `json:"leader_epoch"`
	HighWatermark     int64        `json:"high_watermark"`
	MaxFollowerLag    int64        `json:"max_follower_lag"`
	MaxFollowerLagMs  int64        `json:"max_follower_lag_time_ms"`
	CurrentVoters     []int32      `json:"current_voters"`
	CurrentObservers  []int32      `json:"current_observers"`
	Voters            []voterState `json:"voters"`
	Observers         []voterState `json:"observers"`
	ControllerEpoch   *int32       `json:"controller_epoch,omitempty"`
	ControllerEpochOf string       `json:"-"`
}

// describeQuorum asks the active controller, retrying while leadership
// moves, and returns its answer with the cluster id.
func (c *cli) describeQuorum(ctx context.Context) (*kmsg.DescribeQuorumResponse, string, error) {
	resp, _, err := c.describeQuorumOnly(ctx)
	if err != nil {
		return nil, "", err
	}
	view, err := c.cluster(ctx)
	if err != nil {
		return nil, "", err
	}
	return resp, view.clusterID, nil
}

// describeQuorumOnly is describeQuorum without the cluster id.
func (c *cli) describeQuorumOnly(ctx context.Context) (*kmsg.DescribeQuorumResponse, string, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	r, err := c.toController(ctx, req, func(r kmsg.Response) error {
		resp := r.(*kmsg.DescribeQuorumResponse)
		if err := kafkaclient.NotController(resp.ErrorCode); err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return errors.New("DescribeQuorum: the answer does not describe one partition")
		}
		if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
			if errors.Is(err, kerr.NotLeaderForPartition) {
				return fmt.Errorf("%w: %v", kafkaclient.ErrNotController, err)
			}
			return err
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return r.(*kmsg.DescribeQuorumResponse), "", nil
}

func quorumDescribe(mode string, args []string, stdout, stderr io.Writer) int {
	c := newCLI("quorum "+mode, "[flags]", `
Describes the controller quorum from the active controller (DescribeQuorum).
Offsets are raft log indexes: the high watermark is the commit index, a
voter's lag is the commit index minus its log end. With --http (dev
mode's endpoints by default with dev mode's bootstrap) the committed
controller epoch is shown too.`, stdout, stderr)
	var httpFlag listFlag
	c.fs.Var(&httpFlag, "http", "host:port of a voter's HTTP endpoint, for the controller epoch (repeatable)")
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
	now := time.Now().UnixMilli()
	st := quorumStatus{ClusterID: cluster, LeaderID: p.LeaderID, LeaderEpoch: p.LeaderEpoch, HighWatermark: p.HighWatermark,
		CurrentVoters: []int32{}, CurrentObservers: []int32{}, Voters: []voterState{}, Observers: []voterState{}}
	conv := func(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) []voterState {
		out := []voterState{}
		for _, r := range rs {
			v := voterState{ID: r.ReplicaID, Status: "Follower", LogEndOffset: r.LogEndOffset,
				LastFetchTimestamp: r.LastFetchTimestamp, LastCaughtUpTimestamp: r.LastCaughtUpTimestamp}
			if r.ReplicaID == p.LeaderID {
				v.Status = "Leader"
			}
			if r.LogEndOffset >= 0 {
				v.Lag = max(0, p.HighWatermark-r.LogEndOffset)
			} else {
				v.Lag = -1
			}
			if r.LastFetchTimestamp > 0 {
				ago := max(0, now-r.LastFetchTimestamp)
				v.LastFetchAgoMs = &ago
			}
			if r.LastCaughtUpTimestamp > 0 {
				ago := max(0, now-r.LastCaughtUpTimestamp)
				v.LastCaughtUpAgoMs = &ago
			}
			out = append(out, v)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
		return out
	}
	st.Voters, st.Observers = conv(p.CurrentVoters), conv(p.Observers)
	for _, v := range st.Voters {
		st.CurrentVoters = append(st.CurrentVoters, v.ID)
		if v.Status == "Leader" {
			continue
		}
		if v.Lag < 0 {
			st.MaxFollowerLag = -1
		} else if st.MaxFollowerLag >= 0 {
			st.MaxFollowerLag = max(st.MaxFollowerLag, v.Lag)
		}
		if v.LastCaughtUpAgoMs != nil {
			st.MaxFollowerLagMs = max(st.MaxFollowerLagMs, *v.LastCaughtUpAgoMs)
		}
	}
	for _, o := range st.Observers {
		st.CurrentObservers = append(st.CurrentObservers, o.ID)
	}
	for _, addr := range c.httpAddrs(httpFlag) {
		var h ops.StateHash
		if err := httpGetJSON(ctx, addr, "/state-hash", &h); err == nil {
			e := h.ControllerEpoch
			st.ControllerEpoch = &e
			break
		}
	}
	if c.json {
		c.printJSON(st)
		return exitOK
	}
	if mode == "status" {
		rows := [][]string{
			{"ClusterId:", orDash(st.ClusterID)},
			{"LeaderId:", strconv.Itoa(int(st.LeaderID))},
			{"LeaderEpoch:", strconv.Itoa(int(st.LeaderEpoch))},
			{"HighWatermark:", strconv.FormatInt(st.HighWatermark, 10)},
			{"MaxFollowerLag:", strconv.FormatInt(st.MaxFollowerLag, 10)},
			{"MaxFollowerLagTimeMs:", strconv.FormatInt(st.MaxFollowerLagMs, 10)},
			{"CurrentVoters:", fmt.Sprint(st.CurrentVoters)},
			{"CurrentObservers:", fmt.Sprint(st.CurrentObservers)},
		}
		if st.ControllerEpoch != nil {
			rows = append(rows, []string{"ControllerEpoch:", strconv.Itoa(int(*st.ControllerEpoch))})
		}
		for _, r := range rows {
			fmt.Fprintf(c.stdout, "%-22s %s\n", r[0], r[1])
		}
		fmt.Fprintln(c.stdout)
	}
	var rows [][]string
	ago := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return strconv.FormatInt(*p, 10) + " ms ago"
	}
	for _, v := range st.Voters {
		rows = append(rows, []string{strconv.Itoa(int(v.ID)), strconv.FormatInt(v.LogEndOffset, 10), strconv.FormatInt(v.Lag, 10),
			ago(v.LastFetchAgoMs), ago(v.LastCaughtUpAgoMs), v.Status})
	}
	for _, v := range st.Observers {
		rows = append(rows, []string{strconv.Itoa(int(v.ID)), strconv.FormatInt(v.LogEndOffset, 10), strconv.FormatInt(v.Lag, 10),
			ago(v.LastFetchAgoMs), ago(v.LastCaughtUpAgoMs), "Observer"})
	}
	c.table([]string{"NODE", "LOG-END", "LAG", "LAST-FETCH", "LAST-CAUGHT-UP", "STATUS"}, rows)
	return exitOK
}

type hashRow struct {
	Addr            string `json:"http"`
	Node            int32  `json:"node"`
	Index           uint64 `json:"index"`
	Hash            string `json:"hash"`
	ControllerEpoch int32  `json:"controller_epoch"`
	Error           string `json:"error,omitempty"`
}

func runStateHash(args []string, stdout, stderr io.Writer) int {
	c := newCLI("state-hash", "[--http host:port]... [flags]", `
Reads each voter's state hash (SHA-256 of its metadata image) and the log
index it was taken at from the voters' HTTP endpoints (/state-hash), and
compares them. Voters at the same index must have the same hash. Since the
log moves on, it polls for up to --wait until every voter reports the same
index. Exit code 0 when all agree, 1 when two voters at the same index
differ (or one cannot be read), 4 when they never reached the same index.
There is no Kafka API for this: the voters are named by --http; without it,
dev mode's three are read, and only while the bootstrap addresses are dev
mode's.`, stdout, stderr)
	var httpFlag listFlag
	c.fs.Var(&httpFlag, "http", "host:port of a voter's HTTP endpoint (repeatable; default dev mode's three)")
	wait := c.fs.Duration("wait", 5*time.Second, "how long to wait for every voter to be at the same index")
	if code, done := c.parse(args); done {
		return code
	}
	addrs := c.httpAddrs(httpFlag)
	if len(addrs) == 0 {
		return c.fail(usageErr("the state hash is read from the voters' HTTP endpoints, which the bootstrap addresses %s do not name: give them with --http", c.bootstrap))
	}
	ctx, cancel := c.context()
	defer cancel()
	deadline := time.Now().Add(*wait)
	var rows []hashRow
	for {
		rows = rows[:0]
		for _, a := range addrs {
			var h ops.StateHash
			r := hashRow{Addr: a}
			if err := httpGetJSON(ctx, a, "/state-hash", &h); err != nil {
				r.Error = err.Error()
			} else {
				r.Node, r.Index, r.Hash, r.ControllerEpoch = h.Node, h.Index, h.Hash, h.ControllerEpoch
			}
			rows = append(rows, r)
		}
		same := true
		for _, r := range rows {
			if r.Error != "" || r.Index != rows[0].Index {
				same = false
			}
		}
		if same || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	verdict, code := "agree", exitOK
	byIndex := map[uint64]string{}
	unreadable := 0
	for _, r := range rows {
		if r.Error != "" {
			unreadable++
			continue
		}
		if h, ok := byIndex[r.Index]; ok && h != r.Hash {
			verdict, code = "DIVERGED: voters at the same index have different hashes", exitFailed
		}
		byIndex[r.Index] = r.Hash
	}
	switch {
	case code != exitOK:
	case unreadable == len(rows):
		verdict, code = "no voter could be read", exitUnreachable
	case unreadable > 0:
		verdict, code = "some voters could not be read", exitFailed
	case len(byIndex) > 1:
		verdict, code = "voters at different indexes; no divergence seen", exitNotYet
	}
	if c.json {
		c.printJSON(map[string]any{"voters": rows, "verdict": verdict, "agree": code == exitOK})
	} else {
		var t [][]string
		for _, r := range rows {
			if r.Error != "" {
				t = append(t, []string{r.Addr, "-", "-", "-", r.Error})
				continue
			}
			t = append(t, []string{r.Addr, strconv.Itoa(int(r.Node)), strconv.FormatUint(r.Index, 10), r.Hash, strconv.Itoa(int(r.ControllerEpoch))})
		}
		c.table([]string{"HTTP", "NODE", "INDEX", "HASH", "EPOCH"}, t)
		fmt.Fprintln(c.stdout, verdict)
	}
	return code
}
