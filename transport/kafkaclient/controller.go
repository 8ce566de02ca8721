package kafkaclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Node is a node of the cluster as a Metadata answer lists it.
type Node struct {
	ID   int32
	Host string
	Port int32
}

// Addr is the node's host:port.
func (n Node) Addr() string { return net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port))) }

// ErrNotController is wrapped by the errors of answers that say the node
// asked is not, or no longer, the active controller. A check passed to
// Controller.Do returns it (wrapped) to have the request sent again to
// the controller found anew.
var ErrNotController = errors.New("not the active controller")

// NotController returns an error wrapping ErrNotController and the Kafka
// error when code is NOT_CONTROLLER, and nil otherwise: the check of an
// answer's error code for Controller.Do.
func NotController(code int16) error {
	if err := kerr.ErrorForCode(code); errors.Is(err, kerr.NotController) {
		return fmt.Errorf("%w: %v", ErrNotController, err)
	}
	return nil
}

// ControllerConfig configures a Controller.
type ControllerConfig struct {
	// Bootstrap are host:port addresses of the cluster's listeners.
	Bootstrap []string
	// Options are those of every connection, to the bootstrap addresses
	// and to the controller.
	Options Options
	// Permanent, if set, returns the error to stop on when a connection
	// failed with err in a way that every node and every retry will
	// repeat (a refused login), and nil for an error worth retrying.
	Permanent func(err error) error
	// Found, if set, is told each controller found.
	Found func(Node)
}

// Controller is a connection to a cluster's active controller. It finds
// the controller by asking the bootstrap addresses, one after another
// (see ask): a voter for the controllers (DescribeCluster, endpoint type
// 2), a broker for Metadata (brokers and controller only); the answer's
// ControllerID and that node's entry in its list give the controller's
// address. A node
// that is not itself the bootstrap address asked is asked again, and must
// name itself: a standby's view may be behind. The connection is kept
// until a request on it fails or its answer says NOT_CONTROLLER; the next
// request finds the controller again. Requests are serialized.
type Controller struct {
	cfg ControllerConfig

	mu   sync.Mutex
	conn *Conn
	node Node
	// voters are the controller voters the node named when it was found
	// through DescribeCluster of the controllers, nil when it was found
	// through Metadata (a broker).
	voters map[int32]bool
	next   int // where the next search starts
	// clusterID is the cluster id the last node asked reported, nil
	// before one did.
	clusterID atomic.Pointer[string]
}

// ClusterID is the cluster id the nodes asked for the active controller
// reported in their DescribeCluster or Metadata answers, "" until one
// did: a broker that was not given one takes the controllers'.
func (c *Controller) ClusterID() string {
	if id := c.clusterID.Load(); id != nil {
		return *id
	}
	return ""
}

// NewController returns a Controller; it connects on the first request.
func NewController(cfg ControllerConfig) *Controller {
	cfg.Bootstrap = append([]string(nil), cfg.Bootstrap...)
	return &Controller{cfg: cfg}
}

// Request sends req to the active controller, found first when there is
// no connection, at the highest version both sides know, once. An error,
// or an answer saying NOT_CONTROLLER (see notControllerAnswer), forgets
// the connection; the answer is returned as it came.
func (c *Controller) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	resp, _, err := c.request(ctx, req)
	return resp, err
}

// request is Request that also says whether the answer was
// NOT_CONTROLLER, and returns a *findError when no controller was found.
func (c *Controller) request(ctx context.Context, req kmsg.Request) (kmsg.Response, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		if err := c.findLocked(ctx); err != nil {
			return nil, false, err
		}
	}
	if err := c.conn.Pick(req, 0); err != nil {
		c.dropLocked()
		return nil, false, err
	}
	resp, err := c.conn.Request(ctx, req)
	if err != nil {
		c.dropLocked()
		return nil, false, &unansweredError{err: err}
	}
	notCtrl := notControllerAnswer(resp, c.node.ID, c.voters)
	if notCtrl {
		c.dropLocked()
	}
	return resp, notCtrl, nil
}

// retryInterval is the pause of Do between attempts.
const retryInterval = 200 * time.Millisecond

// Do is Request until the active controller takes req, or ctx ends: it
// finds the controller again while none is known (an election), after a
// request that broke the connection or could not reach the node, and
// after an answer that says NOT_CONTROLLER, by its top-level code (see
// notControllerAnswer) or by check, which inspects the answer and returns
// an error wrapping ErrNotController to have it sent again. Any other
// error of check is returned. A failure that Permanent names ends Do at
// once.
func (c *Controller) Do(ctx context.Context, req kmsg.Request, check func(kmsg.Response) error) (kmsg.Response, error) {
	resp, _, err := c.DoUncertain(ctx, req, check)
	return resp, err
}

// unansweredError is a request that went out on a connection to the
// controller and got no answer: the controller may have taken it.
type unansweredError struct{ err error }

func (e *unansweredError) Error() string { return e.err.Error() }
func (e *unansweredError) Unwrap() error { return e.err }

// DoUncertain is Do, and also reports whether an attempt before the one
// whose answer it returns went out and got no answer (a connection that
// broke, a timeout): the controller may have taken that one, so an error
// in the answer (TOPIC_ALREADY_EXISTS to a creation, say) may be the
// earlier attempt's doing.
func (c *Controller) DoUncertain(ctx context.Context, req kmsg.Request, check func(kmsg.Response) error) (resp kmsg.Response, uncertain bool, err error) {
	var earlier error // the attempt before this one's failure
	for {
		var notCtrl bool
		resp, notCtrl, err = c.request(ctx, req)
		var ue *unansweredError
		if errors.As(err, &ue) {
			uncertain = true
		}
		var fe *findError
		switch {
		case errors.As(err, &fe):
			if fe.stop != nil {
				return nil, uncertain, fe.stop
			}
		case err != nil:
			if !retriable(err) || ctx.Err() != nil {
				return nil, uncertain, err
			}
		case notCtrl:
			err = fmt.Errorf("%w: %s answered NOT_CONTROLLER", ErrNotController, kmsg.NameForKey(req.Key()))
		case check != nil:
			if err = check(resp); err != nil {
				if !errors.Is(err, ErrNotController) || ctx.Err() != nil {
					return nil, uncertain, err
				}
				c.Invalidate()
			}
		}
		if err == nil {
			return resp, uncertain, nil
		}
		select {
		case <-ctx.Done():
			// An attempt that ctx cut short (a dial or an answer still
			// awaited) says only that time ran out; what the one before
			// it met (a refusal, a closed connection) is what to report.
			if earlier != nil && cutShort(err) {
				err = fmt.Errorf("%w; the attempt before: %v", err, earlier)
			}
			if fe != nil {
				return nil, uncertain, fmt.Errorf("%w (%v)", ctx.Err(), err)
			}
			return nil, uncertain, err
		case <-time.After(retryInterval):
		}
		earlier = err
	}
}

// cutShort reports whether err, or every failure of a search for the
// controller, is a context's or a deadline's end.
func cutShort(err error) bool {
	var fe *findError
	if errors.As(err, &fe) {
		for _, e := range fe.errs {
			if !cutShort(e) {
				return false
			}
		}
		return len(fe.errs) > 0
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, os.ErrDeadlineExceeded)
}

// retriable reports whether a request that failed with err may go again,
// to the controller found anew: the connection had broken (the node
// closed it, as its process does when it dies, or reset it), the node
// could not be reached, or the request timed out.
func retriable(err error) bool {
	var op *net.OpError
	return errors.Is(err, ErrBroken) || errors.As(err, &op) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// Invalidate forgets the connection: the next request finds the
// controller again.
func (c *Controller) Invalidate() {
	c.mu.Lock()
	c.dropLocked()
	c.mu.Unlock()
}

// Close closes the connection; a later request opens a new one.
func (c *Controller) Close() { c.Invalidate() }

func (c *Controller) dropLocked() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}

// findError is a search that found no controller, with the error of each
// address tried, and the one Permanent named if it stopped the search.
type findError struct {
	errs []error
	stop error
}

func (e *findError) Error() string {
	return fmt.Sprintf("no active controller found: %v", errors.Join(e.errs...))
}

func (e *findError) Unwrap() []error { return e.errs }

// findLocked asks each bootstrap address in turn, from c.next, for the
// active controller and connects to it.
func (c *Controller) findLocked(ctx context.Context) error {
	var errs []error
	n := len(c.cfg.Bootstrap)
	if n == 0 {
		return &findError{errs: []error{errors.New("no bootstrap address")}}
	}
	for i := 0; i < n; i++ {
		addr := c.cfg.Bootstrap[(c.next+i)%n]
		conn, node, voters, err := c.ask(ctx, addr)
		if err != nil {
			errs = append(errs, err)
			if stop := c.permanent(err); stop != nil {
				return &findError{errs: errs, stop: stop}
			}
			continue
		}
		if conn.Addr() != node.Addr() {
			_ = conn.Close()
			var named Node
			conn, named, voters, err = c.ask(ctx, node.Addr())
			if err == nil && named.ID != node.ID {
				_ = conn.Close()
				err = fmt.Errorf("%w: node %d names %d", ErrNotController, node.ID, named.ID)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("controller %d at %s: %w", node.ID, node.Addr(), err))
				if stop := c.permanent(err); stop != nil {
					return &findError{errs: errs, stop: stop}
				}
				continue
			}
		}
		// Start the next search elsewhere, so a bootstrap address that
		// keeps pointing at a dead node is not the only one asked.
		c.next = (c.next + i + 1) % n
		c.conn, c.node, c.voters = conn, node, voters
		if c.cfg.Found != nil {
			c.cfg.Found(node)
		}
		return nil
	}
	c.next = (c.next + 1) % n
	return &findError{errs: errs}
}

func (c *Controller) permanent(err error) error {
	if c.cfg.Permanent == nil {
		return nil
	}
	return c.cfg.Permanent(err)
}

// ask connects to addr and asks it for the active controller. The
// connection is returned open when the answer names one, with the
// controller voters when the answer listed them.
//
// A node that serves DescribeCluster v1+ is asked for the controllers
// (endpoint type 2, KIP-919): a voter names the active one among the
// voters. A broker answers that with MISMATCHED_ENDPOINT_TYPE, and is
// asked for Metadata instead, whose controller is a broker that forwards
// what only the controller answers; so is a node without DescribeCluster
// v1.
func (c *Controller) ask(ctx context.Context, addr string) (*Conn, Node, map[int32]bool, error) {
	conn, err := Dial(ctx, addr, c.cfg.Options)
	if err != nil {
		return nil, Node{}, nil, err
	}
	if v, ok := conn.Version(kmsg.DescribeCluster.Int16()); ok && v >= 1 {
		dc := kmsg.NewPtrDescribeClusterRequest()
		dc.SetVersion(v)
		dc.EndpointType = 2
		resp, err := conn.Request(ctx, dc)
		if err != nil {
			_ = conn.Close()
			return nil, Node{}, nil, fmt.Errorf("describe cluster from %s: %w", addr, err)
		}
		r := resp.(*kmsg.DescribeClusterResponse)
		if r.ErrorCode == 0 {
			if r.ClusterID != "" {
				id := r.ClusterID
				c.clusterID.Store(&id)
			}
			voters := map[int32]bool{}
			for _, b := range r.Brokers {
				voters[b.NodeID] = true
			}
			for _, b := range r.Brokers {
				if b.NodeID == r.ControllerID && r.ControllerID >= 0 {
					return conn, Node{ID: b.NodeID, Host: b.Host, Port: b.Port}, voters, nil
				}
			}
			_ = conn.Close()
			return nil, Node{}, nil, fmt.Errorf("%s knows no active controller", addr)
		}
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{} // brokers and controller only
	if err := conn.Pick(md, 1); err != nil {
		_ = conn.Close()
		return nil, Node{}, nil, err
	}
	resp, err := conn.Request(ctx, md)
	if err != nil {
		_ = conn.Close()
		return nil, Node{}, nil, fmt.Errorf("metadata from %s: %w", addr, err)
	}
	mr := resp.(*kmsg.MetadataResponse)
	if mr.ClusterID != nil && *mr.ClusterID != "" {
		id := *mr.ClusterID
		c.clusterID.Store(&id)
	}
	for _, b := range mr.Brokers {
		if b.NodeID == mr.ControllerID && mr.ControllerID >= 0 {
			return conn, Node{ID: b.NodeID, Host: b.Host, Port: b.Port}, nil, nil
		}
	}
	_ = conn.Close()
	return nil, Node{}, nil, fmt.Errorf("%s knows no active controller", addr)
}

// notControllerAnswer reports whether resp, the controller self's answer,
// says it is not the active controller: a Metadata answer, or a
// DescribeCluster answer listing the controllers, naming another
// controller, or the NOT_CONTROLLER code — at the
// top level, or, for the admin answers without a top-level code, in the
// first item, where franz-go's kgo reads it. voters are the controller
// voters when self is one, nil when self is a broker: a voter's Metadata
// names a live broker as controller while there is one, and says that
// the voter is not active only by naming another voter, or none.
func notControllerAnswer(resp kmsg.Response, self int32, voters map[int32]bool) bool {
	notController := kerr.NotController.Code
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		if voters != nil {
			return r.ControllerID != self && (r.ControllerID < 0 || voters[r.ControllerID])
		}
		return r.ControllerID != self
	case *kmsg.DescribeClusterResponse:
		// Only the controllers' list (endpoint type 2) names the active
		// controller; the brokers' names a broker.
		return r.ErrorCode == notController || (r.ErrorCode == 0 && r.Version >= 1 && r.EndpointType == 2 && r.ControllerID != self)
	case *kmsg.CreateTopicsResponse:
		return firstCode(r.Topics, func(t kmsg.CreateTopicsResponseTopic) int16 { return t.ErrorCode }) == notController
	case *kmsg.DeleteTopicsResponse:
		return firstCode(r.Topics, func(t kmsg.DeleteTopicsResponseTopic) int16 { return t.ErrorCode }) == notController
	case *kmsg.CreatePartitionsResponse:
		return firstCode(r.Topics, func(t kmsg.CreatePartitionsResponseTopic) int16 { return t.ErrorCode }) == notController
	case *kmsg.ElectLeadersResponse:
		if r.ErrorCode == 0 && len(r.Topics) > 0 {
			return firstCode(r.Topics[0].Partitions, func(p kmsg.ElectLeadersResponseTopicPartition) int16 { return p.ErrorCode }) == notController
		}
	}
	return topLevelCode(resp) == notController
}

// topLevelCode is the ErrorCode field of an answer that has one at its
// top level (BrokerHeartbeat, AlterPartition, DescribeQuorum, …), and 0
// for the others.
func topLevelCode(resp kmsg.Response) int16 {
	v := reflect.ValueOf(resp)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return 0
	}
	f := v.Elem().FieldByName("ErrorCode")
	if !f.IsValid() || f.Kind() != reflect.Int16 {
		return 0
	}
	return int16(f.Int())
}

// firstCode is the error code of the first item, 0 when there is none.
func firstCode[T any](items []T, code func(T) int16) int16 {
	if len(items) == 0 {
		return 0
	}
	return code(items[0])
}
