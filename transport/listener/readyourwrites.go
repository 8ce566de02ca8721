package listener

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// Read your writes (see controller/readyourwrites.go, where the waits
// are decided). The listener only says which requests are reads and
// which are changes, bounds the waits, and carries the read-index round
// trip between voters.

// readIndexClientID marks the DescribeQuorum a standby sends the active
// voter to learn its read index, answered in HighWatermark.
const readIndexClientID = "ctrlquorum-read-index"

// isRead tells the requests a standby answers from its own image only
// once it holds what the active controller had applied (see freshRead).
func isRead(key int16) bool {
	switch key {
	case kmsg.Metadata.Int16(), kmsg.DescribeConfigs.Int16(), kmsg.DescribeACLs.Int16(),
		kmsg.ListPartitionReassignments.Int16(), kmsg.DescribeCluster.Int16(), kmsg.DescribeUserSCRAMCredentials.Int16():
		return true
	}
	return false
}

// writeTimeout tells the admin changes whose answer waits for the live
// brokers to acknowledge what they were sent, and the request's own
// timeout (0: none, RequestTimeout applies).
func writeTimeout(req kmsg.Request) (millis int32, isWrite bool) {
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		return r.TimeoutMillis, !r.ValidateOnly
	case *kmsg.DeleteTopicsRequest:
		return r.TimeoutMillis, true
	case *kmsg.CreatePartitionsRequest:
		return r.TimeoutMillis, !r.ValidateOnly
	case *kmsg.ElectLeadersRequest:
		return r.TimeoutMillis, true
	case *kmsg.AlterPartitionAssignmentsRequest:
		return r.TimeoutMillis, true
	case *kmsg.AlterConfigsRequest:
		return 0, !r.ValidateOnly
	case *kmsg.IncrementalAlterConfigsRequest:
		return 0, !r.ValidateOnly
	case *kmsg.UpdateFeaturesRequest:
		return r.TimeoutMillis, !r.ValidateOnly
	case *kmsg.CreateACLsRequest, *kmsg.DeleteACLsRequest, *kmsg.AlterUserSCRAMCredentialsRequest:
		return 0, true
	}
	return 0, false
}

// freshRead returns the active controller's answer to a read this voter
// cannot answer fresh from its own image (see controller.Node.AwaitRead),
// or nil to answer it here. Without an answer from the active controller
// within PeerTimeout (none is known, an election, it is unreachable) the
// read is answered here after waiting what is left of that time for the
// image to catch up.
func (l *Listener) freshRead(ctx context.Context, c *kafkawire.Conn, req kmsg.Request) kmsg.Response {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.PeerTimeout)
	defer cancel()
	err := l.node.AwaitRead(ctx)
	var behind *controller.ReadBehindError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &behind):
		if resp := l.forward(ctx, c, req); resp != nil {
			return resp
		}
		err = l.node.FSM.WaitApplied(ctx, behind.Index)
	}
	if err != nil {
		l.log.Debug("read answered without the active controller's read index", "api", kmsg.NameForKey(req.Key()), "error", err)
	}
	return nil
}

// awaitBrokers holds the answer to a change until the live brokers have
// acknowledged the metadata they were sent, within the request's timeout;
// past it the change, committed, is answered all the same and the
// brokers still behind are named in a warning.
func (l *Listener) awaitBrokers(ctx context.Context, req kmsg.Request, millis int32) {
	ctx, cancel := l.requestContext(ctx, millis)
	defer cancel()
	var behind *controller.BrokersBehindError
	if err := l.node.AwaitBrokers(ctx); errors.As(err, &behind) {
		l.log.Warn("answering a change before every live broker acknowledged its metadata", "api", kmsg.NameForKey(req.Key()),
			"brokers", fmt.Sprint(behind.Brokers), "error", behind.Err)
	}
}

// askReadIndex is the node's ReadIndexSource: a DescribeQuorum marked
// readIndexClientID to the active voter, whose HighWatermark is its read
// index.
func (l *Listener) askReadIndex(ctx context.Context) (uint64, error) {
	id := l.activeID()
	p, ok := l.peer(id)
	if id < 0 || id == l.self || !ok {
		return 0, fmt.Errorf("no other voter is known to be active (active id %d)", id)
	}
	resp, err := l.callVoterKept(ctx, p, readIndexClientID, quorumRequest())
	if err != nil {
		return 0, err
	}
	qr := resp.(*kmsg.DescribeQuorumResponse)
	if err := kerr.ErrorForCode(qr.ErrorCode); err != nil {
		return 0, fmt.Errorf("voter %d: %w", id, err)
	}
	if len(qr.Topics) != 1 || len(qr.Topics[0].Partitions) != 1 || qr.Topics[0].Partitions[0].HighWatermark < 0 {
		return 0, fmt.Errorf("voter %d answered no read index", id)
	}
	return uint64(qr.Topics[0].Partitions[0].HighWatermark), nil
}

// quorumRequest is a DescribeQuorum of the controllers' log.
func quorumRequest() *kmsg.DescribeQuorumRequest {
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.SetVersion(req.MaxVersion())
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = metadataTopic
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	return req
}

// readIndexAnswer answers a standby's read-index DescribeQuorum with the
// node's ReadIndex in HighWatermark, or NOT_CONTROLLER.
func (l *Listener) readIndexAnswer(c *kafkawire.Conn, resp *kmsg.DescribeQuorumResponse) *kmsg.DescribeQuorumResponse {
	idx, err := l.node.ReadIndex()
	if err != nil {
		err := l.notController()
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return resp
	}
	rt := kmsg.NewDescribeQuorumResponseTopic()
	rt.Topic = metadataTopic
	rp := kmsg.NewDescribeQuorumResponseTopicPartition()
	rp.LeaderID = l.self
	rp.HighWatermark = int64(idx)
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	return resp
}
