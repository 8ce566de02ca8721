package sender

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
)

// A broker's process that dies while its host stays up shows it at once:
// its host's kernel closes or resets the process's connections, and its
// port refuses new ones. The sender keeps a connection to every broker it
// has sent to and watches it while idle (kafkaclient.Conn.WaitIdle), so it
// sees the reset as it happens, and then dials the broker's listener. A
// refused dial (ECONNREFUSED, and nothing else: a timeout, a DNS error or
// a failed TLS handshake prove nothing) is reported to the controller,
// which decides whether to fence the broker (controller.ListenerRefused).
// A paused process keeps its connections and its kernel still accepts
// new ones into the listener's backlog; a partition drops packets and
// times out: neither is reported.
//
// The report names the broker epoch of the requests last answered on the
// connection that reset (or, for a connection that never answered one,
// of the requests it was opened for), so a broker that restarted and
// registered again is not fenced by a refusal seen before. After a reset
// the mark stays until a connection to the broker is established again
// (its ApiVersions answered): a refusal the sender's own retries meet
// meanwhile is reported too, once per epoch.

// RefusalHandler is told of a broker's listener refusing a connection
// after a connection to it reset. It must not block.
type RefusalHandler interface {
	HandleListenerRefused(controller.ListenerRefusal)
}

// The controller takes the reports itself.
var _ RefusalHandler = (*controller.Controller)(nil)

// probeAttempts and probeSpacing bound the dials after a reset: a process
// that is exiting may close its connections a moment before its
// listener, so an accepted dial is tried again a little later.
const (
	probeAttempts = 3
	probeSpacing  = 100 * time.Millisecond
	probeTimeout  = time.Second
)

// idleWait waits for work (true) or the pool's end (false). While it
// waits with a connection open it watches the connection, and a
// connection the broker closed or reset is dropped and the broker's
// listener probed.
func (b *brokerSender) idleWait() bool {
	conn := b.conn
	if conn == nil {
		select {
		case <-b.wake:
			return true
		case <-b.p.ctx.Done():
			return false
		}
	}
	wctx, cancel := context.WithCancel(b.p.ctx)
	defer cancel()
	lost := make(chan error, 1)
	go func() { lost <- conn.WaitIdle(wctx) }()
	var err error
	select {
	case <-b.wake:
		cancel()
		err = <-lost
	case err = <-lost:
	case <-b.p.ctx.Done():
		cancel()
		<-lost
		return false
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		b.connLost(err, conn.Addr(), b.connEpoch)
	}
	return b.p.ctx.Err() == nil
}

// connLost drops a connection that failed with err; when the broker
// closed or reset it, the broker's listener is probed.
func (b *brokerSender) connLost(err error, addr string, epoch int64) {
	b.closeConn()
	if !kafkaclient.PeerGone(err) || epoch < 0 {
		b.log.Debug("connection to broker lost", "addr", addr, "error", err)
		return
	}
	b.mu.Lock()
	b.stats.Resets++
	b.mu.Unlock()
	b.log.Debug("connection to broker reset: probing its listener", "addr", addr, "broker_epoch", epoch, "error", err)
	b.resetEpoch, b.resetAddr = epoch, addr
	b.probe()
}

// probe dials the listener of the broker whose connection reset: a
// refusal is reported, a timeout or another error ends the probe with
// nothing proven, and an accepted connection is closed and the dial tried
// again after probeSpacing, up to probeAttempts.
func (b *brokerSender) probe() {
	dial := b.p.cfg.ProbeDial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	for i := 0; i < probeAttempts && b.resetEpoch >= 0; i++ {
		if i > 0 {
			t := time.NewTimer(probeSpacing)
			select {
			case <-t.C:
			case <-b.p.ctx.Done():
				t.Stop()
				return
			}
		}
		ctx, cancel := context.WithTimeout(b.p.ctx, min(probeTimeout, b.p.cfg.DialTimeout))
		nc, err := dial(ctx, "tcp", b.resetAddr)
		cancel()
		if err == nil {
			_ = nc.Close()
			continue
		}
		b.dialFailed(err, b.resetAddr)
		return
	}
}

// dialFailed reports a refused dial of the listener of a broker whose
// connection reset, once per broker epoch.
func (b *brokerSender) dialFailed(err error, addr string) {
	if b.resetEpoch < 0 || addr != b.resetAddr || !kafkaclient.Refused(err) || b.reportedEpoch == b.resetEpoch {
		return
	}
	b.reportedEpoch = b.resetEpoch
	b.mu.Lock()
	b.stats.Refusals++
	b.mu.Unlock()
	b.log.Debug("broker's listener refused a connection after its connection reset: reporting it", "addr", addr, "broker_epoch", b.resetEpoch)
	if h := b.p.cfg.Refusals; h != nil {
		h.HandleListenerRefused(controller.ListenerRefusal{BrokerID: b.id, BrokerEpoch: b.resetEpoch, Addr: addr})
	}
}

// connected clears the reset mark: the broker answers again.
func (b *brokerSender) connected() { b.resetEpoch, b.resetAddr = -1, "" }
