package listener

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
)

// keptConns are connections to the other voters kept open for the
// read-index round trip, which every read at a standby makes: dialling,
// and logging in on a SASL listener, for each would cost more than the
// answer. One connection per voter carries one round trip at a time; a
// connection that fails is dropped and the next call dials again.
type keptConns struct {
	mu     sync.Mutex
	conns  map[string]*keptConn
	closed bool
}

type keptConn struct {
	// token is held while a round trip is in flight, so that a caller
	// waiting for it can give up with its context.
	token chan struct{}
	conn  *kafkaclient.Conn
}

// callVoterKept is callVoter on the voter's kept connection.
func (l *Listener) callVoterKept(ctx context.Context, p PeerListener, clientID string, req kmsg.Request) (kmsg.Response, error) {
	k := &l.kept
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil, context.Canceled
	}
	if k.conns == nil {
		k.conns = map[string]*keptConn{}
	}
	kc := k.conns[p.addr()]
	if kc == nil {
		kc = &keptConn{token: make(chan struct{}, 1)}
		k.conns[p.addr()] = kc
	}
	k.mu.Unlock()
	select {
	case kc.token <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-kc.token }()
	// A kept connection may have been broken since its last use (the
	// voter restarted): a failure on it is tried once more on a new
	// connection, or the first read after a restart would be answered
	// without the read index.
	reused := kc.conn != nil
	resp, err := l.roundTripKept(ctx, kc, p, clientID, req)
	if err != nil && reused && ctx.Err() == nil {
		resp, err = l.roundTripKept(ctx, kc, p, clientID, req)
	}
	return resp, err
}

// roundTripKept sends req on kc's connection, dialled first if there is
// none; a failed request drops the connection. kc's token is held.
func (l *Listener) roundTripKept(ctx context.Context, kc *keptConn, p PeerListener, clientID string, req kmsg.Request) (kmsg.Response, error) {
	k := &l.kept
	if kc.conn == nil {
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = time.Now().Add(peerCallTimeout)
		}
		opts := kafkaclient.Options{ClientID: clientID, Dial: l.cfg.Dial, SASL: l.cfg.Security.PeerSASL, NoApiVersions: true,
			MaxResponseBytes: maxPeerResponse, DialTimeout: max(time.Until(deadline), time.Nanosecond)}
		conn, err := kafkaclient.Dial(ctx, p.addr(), opts)
		if err != nil {
			return nil, err
		}
		k.mu.Lock()
		if k.closed {
			k.mu.Unlock()
			_ = conn.Close()
			return nil, context.Canceled
		}
		kc.conn = conn
		k.mu.Unlock()
	}
	resp, err := kc.conn.RequestAs(ctx, clientID, req)
	if err != nil {
		_ = kc.conn.Close()
		k.mu.Lock()
		kc.conn = nil
		k.mu.Unlock()
	}
	return resp, err
}

// close closes the kept connections; later calls fail.
func (k *keptConns) close() {
	k.mu.Lock()
	k.closed = true
	var conns []*kafkaclient.Conn
	for _, kc := range k.conns {
		if kc.conn != nil {
			conns = append(conns, kc.conn)
		}
	}
	k.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}
