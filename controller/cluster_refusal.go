package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// A broker whose process dies while its host stays up shows it at once:
// the kernel resets or closes its connections and its port refuses new
// ones. Kafka waits out the session timeout after any crash; this
// controller fences such a broker as soon as its sender (the I/O side,
// transport/sender) has seen a connection to it reset or closed and then
// had a connection to its registered listener refused. A refusal is proof
// that no process listens there. Nothing else is: a timeout, a DNS error
// or a failed TLS handshake may come from a partition or a paused
// process (whose kernel still accepts connections into the listener's
// backlog), and those still wait for the session to expire.
//
// The decision is the cluster manager's, in an event like any other: the
// refusal names the broker epoch the sender was talking to when the
// connection reset, and only that epoch is fenced, so a refusal seen
// before a broker restarted and registered again never fences the new
// incarnation. The fence is the one a session expiry stages, with its own
// cause in the state-change history. A broker fenced this way that is in
// fact alive (a listener closed by a bug, a firewall that answers with a
// reset) heartbeats and is unfenced again as any fenced broker is.

// ListenerRefusal is the sender's report that a broker's registered
// listener refused a connection after a connection to it reset.
type ListenerRefusal struct {
	BrokerID int32
	// BrokerEpoch is the broker's epoch when the connection reset.
	BrokerEpoch int64
	// Addr is the listener (host:port) that refused.
	Addr string
}

// RefusalOutcome is what the controller made of a ListenerRefusal.
type RefusalOutcome int

const (
	// RefusalFenced: the broker was fenced.
	RefusalFenced RefusalOutcome = iota
	// RefusalFencedAfterShutdown: the broker was fenced after its
	// controlled shutdown, a clean stop rather than a crash.
	RefusalFencedAfterShutdown
	// RefusalStale: the broker has registered again (another epoch) or is
	// no longer registered.
	RefusalStale
	// RefusalAlreadyFenced: nothing to do.
	RefusalAlreadyFenced
	// RefusalOtherAddress: the address is not one the broker registered.
	RefusalOtherAddress
)

func (o RefusalOutcome) String() string {
	return [...]string{"fenced", "fenced after controlled shutdown", "stale broker epoch", "already fenced", "not a registered listener"}[o]
}

// ListenerRefused fences the broker of a refusal when the refusal is
// about its current epoch and a listener it registered, and returns what
// it did once that has committed.
func (c *Controller) ListenerRefused(ctx context.Context, r ListenerRefusal) (RefusalOutcome, error) {
	v, _, err := c.submit(ctx, "listener-refused", func(m *managers, w *work) (eventOutcome, error) {
		return respond(m.cluster.listenerRefused(w, r))
	}, func(v any, _ uint64) any {
		c.refusalCommitted(r, v.(RefusalOutcome))
		return v
	})
	if err != nil {
		return 0, err
	}
	return v.(RefusalOutcome), nil
}

// HandleListenerRefused is ListenerRefused for the sender, which must not
// wait for the controller: the event is queued and its outcome logged.
func (c *Controller) HandleListenerRefused(r ListenerRefusal) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.SessionTimeout+30*time.Second)
		defer cancel()
		if _, err := c.ListenerRefused(ctx, r); err != nil && !errors.Is(err, ErrNotController) {
			c.log.Warn("a broker's refused listener could not be acted on", "broker", r.BrokerID, "epoch", r.BrokerEpoch, "addr", r.Addr, "error", err)
		}
	}()
}

// refusalCommitted logs and counts a fence once it has committed: once per
// fence, however often its event was computed.
func (c *Controller) refusalCommitted(r ListenerRefusal, o RefusalOutcome) {
	switch o {
	case RefusalFenced:
		c.refusalFences.Add(1)
		c.log.Info(fmt.Sprintf("broker %d fenced: its listener %s refused a connection after its connection reset", r.BrokerID, r.Addr),
			"broker", r.BrokerID, "epoch", r.BrokerEpoch)
	case RefusalFencedAfterShutdown:
		c.refusalFences.Add(1)
		c.log.Info(fmt.Sprintf("broker %d fenced after its controlled shutdown: its listener %s is closed", r.BrokerID, r.Addr),
			"broker", r.BrokerID, "epoch", r.BrokerEpoch)
	default:
		c.log.Debug("listener refusal ignored", "broker", r.BrokerID, "epoch", r.BrokerEpoch, "addr", r.Addr, "outcome", o.String())
	}
}

// RefusalFences counts the brokers this node fenced, while active, because
// their listener refused a connection.
func (c *Controller) RefusalFences() int64 { return c.refusalFences.Load() }

// listenerRefused fences the broker of r if r is about its current epoch,
// it is unfenced, and r.Addr is a listener it registered. The fence is
// the one a session expiry stages; only the cause differs.
func (m *clusterManager) listenerRefused(w *work, r ListenerRefusal) (result[RefusalOutcome], error) {
	var res result[RefusalOutcome]
	b := w.img().Broker(r.BrokerID)
	switch {
	case b == nil || b.Epoch != r.BrokerEpoch:
		res.response = RefusalStale
		return res, nil
	case b.Fenced:
		res.response = RefusalAlreadyFenced
		return res, nil
	}
	registered := false
	for _, e := range b.Endpoints {
		registered = registered || net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))) == r.Addr
	}
	if !registered {
		res.response = RefusalOtherAddress
		return res, nil
	}
	res.response = RefusalFenced
	if b.ShuttingDown {
		res.response = RefusalFencedAfterShutdown
		w.because(fmt.Sprintf("broker %d fenced after its controlled shutdown: its listener %s refused a connection", b.ID, r.Addr))
	} else {
		w.because(fmt.Sprintf("broker %d fenced: its listener %s refused a connection after its connection reset", b.ID, r.Addr))
	}
	return res, m.fence(w, b)
}
