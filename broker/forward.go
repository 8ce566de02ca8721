package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller/configmodel"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

// Admin requests. A client may send any admin request to any broker.
// Those only the active controller can answer (kafkaclient.Forwardable:
// topic, partition, config, ACL, SCRAM, election and reassignment
// requests, DescribeQuorum) the agent forwards to it inside an Envelope
// (Kafka's KIP-590) with the client's principal and address, and relays
// the answer: the controller authorizes the request as that client. The
// agent decides nothing about them; it only translates.
//
// An answer that says NOT_CONTROLLER — on the envelope, or in the
// request's own answer — sends the request again to the controller found
// anew (kafkaclient.Controller.Do), until the request's time is up: the
// request's own timeout, if it has one, plus ForwardTimeout, or until the
// client closes its connection (it gave up, and may have retried through
// another broker). A client never sees NOT_CONTROLLER from a broker; if
// no controller took the request in time it gets REQUEST_TIMED_OUT, which
// it retries.
//
// DescribeConfigs of this broker's own BROKER resource is answered as
// Kafka answers it, by the broker: the controller describes the resource
// from its image (the dynamic broker and cluster-default configs, record
// type 20, which the agent has no copy of), and the agent overlays its
// static settings (Config.StaticConfigs) with configmodel.OverlayStatic.
//
// Forwarded requests go over ForwardConns connections of their own, not
// the one the agent heartbeats on, so that a slow admin request never
// holds back a heartbeat.

// forwarder is the agent's pool of connections to the active controller
// for forwarded requests.
type forwarder struct {
	idle chan *kafkaclient.Controller
	all  []*kafkaclient.Controller
}

func newForwarder(n int, mk func() *kafkaclient.Controller) *forwarder {
	f := &forwarder{idle: make(chan *kafkaclient.Controller, n)}
	for range n {
		c := mk()
		f.all = append(f.all, c)
		f.idle <- c
	}
	return f
}

func (f *forwarder) close() {
	for _, c := range f.all {
		c.Close()
	}
}

// forwardTimeout is the time a forwarded request is given beyond its own
// timeout, for finding the controller and relaying.
func (a *Agent) forwardDeadline(req kmsg.Request) time.Duration {
	var ms int32
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		ms = r.TimeoutMillis
	case *kmsg.DeleteTopicsRequest:
		ms = r.TimeoutMillis
	case *kmsg.CreatePartitionsRequest:
		ms = r.TimeoutMillis
	case *kmsg.ElectLeadersRequest:
		ms = r.TimeoutMillis
	case *kmsg.AlterPartitionAssignmentsRequest:
		ms = r.TimeoutMillis
	case *kmsg.ListPartitionReassignmentsRequest:
		ms = r.TimeoutMillis
	}
	return a.cfg.ForwardTimeout + time.Duration(max(ms, 0))*time.Millisecond
}

// principal is who the client on c is, as the agent authenticated it:
// the user it logged in as with SASL, the name its verified certificate
// gives, or ANONYMOUS.
func principal(c *kafkawire.Conn) string {
	if user := clientAuthOf(c).user; user != "" {
		return "User:" + user
	}
	if c != nil && c.TLS != nil && len(c.TLS.PeerCertificates) > 0 {
		if id, err := tlsconfig.PeerIdentity(c.TLS); err == nil {
			return id.Principal()
		}
	}
	return "User:ANONYMOUS"
}

// Principal is who the client on c is, as the agent authenticated it (see
// principal): what the embedding broker's data path authorizes and logs.
func Principal(c *kafkawire.Conn) string { return principal(c) }

// forward sends req to the active controller as the client on c sent it
// and returns the controller's answer.
func (a *Agent) forward(ctx context.Context, c *kafkawire.Conn, req kmsg.Request) kmsg.Response {
	if a.fwd == nil {
		return errorAnswer(req, kerr.UnknownServerError.Code, "this broker is configured without controllers")
	}
	ctx, cancel := context.WithTimeout(ctx, a.forwardDeadline(req))
	defer cancel()
	if c != nil && c.Gone != nil {
		// A client that closed its connection has given up on the
		// request and may have sent it again elsewhere: forwarding it
		// later would apply it after the client has moved on (a delete
		// arriving after the topic was created again).
		go func() {
			select {
			case <-c.Gone:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	var ip net.IP
	clientID := ""
	if c != nil {
		clientID = c.ClientID
		if ta, ok := c.Remote.(*net.TCPAddr); ok {
			ip = ta.IP
		}
	}
	a.log.Debug("forwarding a request to the active controller", "api", kmsg.NameForKey(req.Key()), "client", clientID)
	env := kafkaclient.Envelope(req, clientID, principal(c), ip)
	var ctl *kafkaclient.Controller
	select {
	case ctl = <-a.fwd.idle:
	case <-ctx.Done():
		return errorAnswer(req, kerr.RequestTimedOut.Code, "no connection to the controller was free in time")
	}
	defer func() { a.fwd.idle <- ctl }()
	var inner kmsg.Response
	_, uncertain, err := ctl.DoUncertain(ctx, env, func(r kmsg.Response) error {
		resp, err := kafkaclient.OpenEnvelope(r.(*kmsg.EnvelopeResponse), req)
		if err != nil {
			return err
		}
		if kafkaclient.ForwardedNotController(resp) {
			return fmt.Errorf("%w: %s answered NOT_CONTROLLER", kafkaclient.ErrNotController, kmsg.NameForKey(req.Key()))
		}
		inner = resp
		return nil
	})
	if err == nil {
		if r, ok := req.(*kmsg.DescribeConfigsRequest); ok {
			a.overlayStatic(r, inner.(*kmsg.DescribeConfigsResponse))
		}
		if uncertain && refusedChange(inner) {
			// An earlier attempt went out and got no answer (the
			// controller failed over, say): it may have been applied,
			// and this refusal (the topic exists, or is gone) may be
			// its doing. The client must not read it as "nothing
			// happened"; a timeout says the outcome is unknown, and
			// the client tries again.
			a.log.Debug("a change refused after an unanswered attempt: answered as timed out", "api", kmsg.NameForKey(req.Key()), "client", clientID)
			return errorAnswer(req, kerr.RequestTimedOut.Code, "an earlier attempt of this request went to the controller and got no answer; it may have been applied")
		}
		return inner
	}
	var ee *kafkaclient.EnvelopeError
	switch {
	case errors.As(err, &ee):
		a.log.Warn("the controller refused a forwarded request", "api", kmsg.NameForKey(req.Key()), "error", err)
		return errorAnswer(req, ee.Code, err.Error())
	case c != nil && isClosed(c.Gone):
		a.log.Debug("the client closed its connection: forwarding its request given up", "api", kmsg.NameForKey(req.Key()), "client", clientID)
		return errorAnswer(req, kerr.RequestTimedOut.Code, "the client closed its connection")
	case ctx.Err() != nil || errors.Is(err, kafkaclient.ErrNotController):
		a.log.Debug("no controller took a forwarded request in time", "api", kmsg.NameForKey(req.Key()), "error", err)
		return errorAnswer(req, kerr.RequestTimedOut.Code, "no active controller took the request in time")
	}
	a.log.Warn("forwarding a request to the controller failed", "api", kmsg.NameForKey(req.Key()), "error", err)
	return errorAnswer(req, kerr.UnknownServerError.Code, err.Error())
}

// isClosed reports whether ch is closed; a nil ch never is.
func isClosed(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// overlayStatic puts the agent's static settings into the description of
// its own broker resource in resp.
func (a *Agent) overlayStatic(req *kmsg.DescribeConfigsRequest, resp *kmsg.DescribeConfigsResponse) {
	if len(a.cfg.StaticConfigs) == 0 {
		return
	}
	self := strconv.Itoa(int(a.cfg.BrokerID))
	for i := range resp.Resources {
		r := &resp.Resources[i]
		if r.ResourceType == kmsg.ConfigResourceTypeBroker && r.ResourceName == self && r.ErrorCode == 0 {
			configmodel.OverlayStatic(r.Configs, a.cfg.StaticConfigs)
		}
	}
}
