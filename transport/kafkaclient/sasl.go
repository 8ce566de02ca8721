package kafkaclient

import (
	"context"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// authenticate runs the SASL exchange of opts.SASL, if any, right after
// the ApiVersions negotiation: SaslHandshake v1 names the mechanism, then
// SaslAuthenticate carries its messages until the mechanism is done. A
// listener that requires SASL closes the connection on any other request
// first. Without ApiVersions both go at v1, which every SASL listener
// since Kafka 1.0 serves.
func (c *Conn) authenticate(ctx context.Context) error {
	mech := c.opts.SASL
	if mech == nil {
		return nil
	}
	if _, offered := c.Version(kmsg.SASLHandshake.Int16()); c.opts.SASLIfOffered && !c.opts.NoApiVersions && !offered {
		return nil
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = mech.Name()
	if err := c.pickSASL(hs, 1); err != nil {
		return err
	}
	resp, err := c.Request(ctx, hs)
	if err != nil {
		return fmt.Errorf("SASL handshake: %w", err)
	}
	if err := kerr.ErrorForCode(resp.(*kmsg.SASLHandshakeResponse).ErrorCode); err != nil {
		return fmt.Errorf("SASL handshake for %s: %w (the listener offers %v)", mech.Name(), err,
			resp.(*kmsg.SASLHandshakeResponse).SupportedMechanisms)
	}
	host, _, _ := net.SplitHostPort(c.addr)
	session, msg, err := mech.Authenticate(ctx, host)
	if err != nil {
		return fmt.Errorf("SASL %s: %w", mech.Name(), err)
	}
	for {
		ar := kmsg.NewPtrSASLAuthenticateRequest()
		ar.SASLAuthBytes = msg
		if err := c.pickSASL(ar, 0); err != nil {
			return err
		}
		resp, err := c.Request(ctx, ar)
		if err != nil {
			return fmt.Errorf("SASL authenticate: %w", err)
		}
		a := resp.(*kmsg.SASLAuthenticateResponse)
		if err := kerr.ErrorForCode(a.ErrorCode); err != nil {
			if a.ErrorMessage != nil {
				return fmt.Errorf("SASL %s: %w: %s", mech.Name(), err, *a.ErrorMessage)
			}
			return fmt.Errorf("SASL %s: %w", mech.Name(), err)
		}
		done, next, err := session.Challenge(a.SASLAuthBytes)
		if err != nil {
			return fmt.Errorf("SASL %s: %w", mech.Name(), err)
		}
		if done {
			return nil
		}
		msg = next
	}
}

// pickSASL sets the version of a SASL request: the highest both sides
// know (at least minVersion), or v1 on a connection without ApiVersions.
func (c *Conn) pickSASL(req kmsg.Request, minVersion int16) error {
	if c.opts.NoApiVersions {
		req.SetVersion(1)
		return nil
	}
	if err := c.Pick(req, minVersion); err != nil {
		return fmt.Errorf("SASL: %w", err)
	}
	return nil
}
