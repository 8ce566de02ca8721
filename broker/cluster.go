package broker

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The cluster as a client of a broker sees it: the live brokers of the
// last UpdateMetadata, and a live broker as controller, as Kafka's KRaft
// brokers answer. The controller voters are not in it: a client sends its
// admin requests to the broker it is told is the controller, and brokers
// forward what only the controller answers (forward.go).

// clientControllerLocked is the ControllerID a client is given: this
// broker when it is live, else the live broker with the lowest id, -1
// when none is known. a.mu is held.
func (a *Agent) clientControllerLocked() int32 {
	for _, b := range a.brokers {
		if b.ID == a.cfg.BrokerID {
			return b.ID
		}
	}
	if len(a.brokers) > 0 {
		return a.brokers[0].ID
	}
	return -1
}

// describeCluster answers from the cache: the live brokers, a live broker
// as controller. A client that asks a broker for the controllers
// (EndpointType 2, KIP-919's --bootstrap-controller) is told it asked the
// wrong kind of node, as a Kafka broker tells it. A broker knows no
// fenced broker, so IncludeFencedBrokers adds none.
func (a *Agent) describeCluster(req *kmsg.DescribeClusterRequest) *kmsg.DescribeClusterResponse {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ClusterID = a.cfg.ClusterID
	if req.Version >= 1 {
		resp.EndpointType = req.EndpointType
		switch req.EndpointType {
		case 1:
		case 2:
			resp.ErrorCode = kerr.MismatchedEndpointType.Code
			msg := "this is a broker: ask a controller listener for the controllers"
			resp.ErrorMessage = &msg
			return resp
		default:
			resp.ErrorCode = kerr.UnsupportedEndpointType.Code
			msg := "endpoint type " + strconv.Itoa(int(req.EndpointType)) + " is not one of 1 (brokers) and 2 (controllers)"
			resp.ErrorMessage = &msg
			return resp
		}
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	resp.ControllerID = a.clientControllerLocked()
	for _, b := range a.brokers {
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack = b.ID, b.Host, b.Port, b.Rack
		resp.Brokers = append(resp.Brokers, rb)
	}
	return resp
}
