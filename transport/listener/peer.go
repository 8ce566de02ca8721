package listener

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// forwardClientID prefixes the client id of a request one voter forwards
// to another. A voter never forwards such a request again: two voters that
// each believe the other is active must not bounce it between them.
const forwardClientID = "ctrlquorum-forward"

func clientID(c *kafkawire.Conn) string {
	if c == nil {
		return ""
	}
	return c.ClientID
}

func forwarded(c *kafkawire.Conn) bool { return strings.HasPrefix(clientID(c), forwardClientID) }

// maxPeerResponse bounds a response read from another voter.
const maxPeerResponse = 100 << 20

// call sends one request, at the version it carries, to a Kafka-protocol
// listener on a connection of its own and returns the decoded response.
// The voters run the same listener, so a request one could decode the
// other can too, at the same version: no ApiVersions round is needed.
// Calls between voters are rare (forwarded config changes, quorum
// probes), which is why each dials afresh rather than keeping a pool.
func call(ctx context.Context, addr, clientID string, req kmsg.Request) (kmsg.Response, error) {
	return callWith(ctx, nil, addr, clientID, req)
}

// callWith is call over a connection from dial (plain TCP when nil).
func callWith(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr, clientID string, req kmsg.Request) (kmsg.Response, error) {
	return callAuth(ctx, dial, nil, addr, clientID, req)
}

// callAuth is callWith that first authenticates with mech when it is not
// nil (SaslHandshake v1, then SaslAuthenticate until the mechanism is
// done), for listeners that require SASL.
func callAuth(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), mech kgosasl.Mechanism, addr, clientID string, req kmsg.Request) (kmsg.Response, error) {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()

	r := bufio.NewReader(conn)
	if mech != nil {
		if err := authenticate(ctx, conn, r, mech, addr, clientID); err != nil {
			return nil, fmt.Errorf("SASL %s: %w", mech.Name(), err)
		}
	}
	return roundTrip(conn, r, 1, clientID, req)
}

func authenticate(ctx context.Context, conn net.Conn, r *bufio.Reader, mech kgosasl.Mechanism, addr, clientID string) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = mech.Name()
	resp, err := roundTrip(conn, r, 1, clientID, hs)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.(*kmsg.SASLHandshakeResponse).ErrorCode); err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(addr)
	session, msg, err := mech.Authenticate(ctx, host)
	if err != nil {
		return err
	}
	for corr := int32(2); ; corr++ {
		ar := kmsg.NewPtrSASLAuthenticateRequest()
		ar.SetVersion(1)
		ar.SASLAuthBytes = msg
		resp, err := roundTrip(conn, r, corr, clientID, ar)
		if err != nil {
			return err
		}
		a := resp.(*kmsg.SASLAuthenticateResponse)
		if err := kerr.ErrorForCode(a.ErrorCode); err != nil {
			return err
		}
		done, next, err := session.Challenge(a.SASLAuthBytes)
		if err != nil || done {
			return err
		}
		msg = next
	}
}

// roundTrip writes one request and reads its response.
func roundTrip(conn net.Conn, r *bufio.Reader, correlationID int32, clientID string, req kmsg.Request) (kmsg.Response, error) {
	flexible := req.IsFlexible()
	msg := make([]byte, 4, 256)
	msg = binary.BigEndian.AppendUint16(msg, uint16(req.Key()))
	msg = binary.BigEndian.AppendUint16(msg, uint16(req.GetVersion()))
	msg = binary.BigEndian.AppendUint32(msg, uint32(correlationID))
	msg = binary.BigEndian.AppendUint16(msg, uint16(len(clientID)))
	msg = append(msg, clientID...)
	if flexible {
		msg = append(msg, 0) // no tagged fields
	}
	msg = req.AppendTo(msg)
	binary.BigEndian.PutUint32(msg, uint32(len(msg)-4))
	if _, err := conn.Write(msg); err != nil {
		return nil, err
	}

	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > maxPeerResponse {
		return nil, fmt.Errorf("response of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	if int32(binary.BigEndian.Uint32(body)) != correlationID {
		return nil, errors.New("response correlation id mismatch")
	}
	body = body[4:]
	var err error
	// ApiVersions answers with a v0 response header even when flexible.
	if flexible && req.Key() != 18 {
		if body, err = skipTags(body); err != nil {
			return nil, err
		}
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errors.New("bad tagged field count")
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		if _, k = binary.Uvarint(b); k <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, errors.New("bad tagged field size")
		}
		b = b[k+int(size):]
	}
	return b, nil
}

// forward sends a request to the active controller and returns its
// answer, or nil when there is no active controller to send it to
// (unknown, this voter, or unreachable).
func (l *Listener) forward(ctx context.Context, c *kafkawire.Conn, req kmsg.Request) kmsg.Response {
	id := l.activeID()
	p, ok := l.peers[id]
	if id < 0 || id == l.self || !ok {
		return nil
	}
	// The client's principal rides along, for the active voter to
	// authorize the request as the client (it trusts it only from a
	// voter's certificate).
	resp, err := callAuth(ctx, l.cfg.Dial, l.cfg.Security.PeerSASL, p.addr(), fmt.Sprintf("%s/%d/%s", forwardClientID, l.self, l.identify(c).principal), req)
	if err != nil {
		l.log.Debug("forwarding to the active controller failed", "api", kmsg.NameForKey(req.Key()), "active", id, "error", err)
		return nil
	}
	return resp
}
