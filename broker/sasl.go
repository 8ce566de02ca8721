package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
	"github.com/ctrlquorum/ctrlquorum/transport/sasl"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

// Client login. With Config.SASLMechanisms set, the agent's listener
// requires what the voters' listeners require: a connection must log in
// with SASL before any request but ApiVersions, SaslHandshake and
// SaslAuthenticate, unless its verified TLS certificate already
// identifies the client; any other request first closes the connection,
// as a Kafka broker does. PLAIN is offered only on TLS connections.
//
// The credentials (SCRAM verifiers) are in the controllers' log, which a
// broker has no copy of, so the agent does not check them itself: it
// relays the client's SASL messages, one by one, to a voter over a
// connection of its own that logs in as nobody else (see saslRelay), and
// hands back the voter's answers. The voter checks them against its
// committed image exactly as it checks its own clients, so a user logs in
// with the same password at every node, and a refusal (wrong password,
// unknown user, malformed message) comes back with the voter's error.
// When the voter accepted the last message of the mechanism (the one
// message of PLAIN, SCRAM's client-final), the connection is that user's:
// the agent forwards its admin requests in Envelopes with principal
// "User:<name>", and the controller authorizes them as that user.
//
// SaslHandshake v0 is served as on the voters: the tokens then follow as
// bare size-prefixed frames (kafkawire.Session.ReadSASLTokens).

// clientAuth is what the agent knows about one client connection's login,
// kept in its kafkawire.Session.
type clientAuth struct {
	mechanism string
	relay     *saslRelay
	user      string
}

func clientAuthOf(c *kafkawire.Conn) *clientAuth {
	if c == nil || c.Session == nil {
		return &clientAuth{}
	}
	if ca, ok := c.Session.Value.(*clientAuth); ok {
		return ca
	}
	ca := &clientAuth{}
	c.Session.Value = ca
	return ca
}

// saslEnabled reports whether the listener requires clients to log in.
func (a *Agent) saslEnabled() bool { return len(a.cfg.SASLMechanisms) > 0 }

// needsLogin tells the wire server which new connections have yet to log
// in: those whose certificate does not identify the client.
func needsLogin(state *tls.ConnectionState) bool {
	if state == nil || len(state.PeerCertificates) == 0 {
		return true
	}
	_, err := tlsconfig.PeerIdentity(state)
	return err != nil
}

// preAuthAPI reports whether a request may come before the login.
func preAuthAPI(key int16) bool {
	return key == kmsg.ApiVersions.Int16() || key == kmsg.SASLHandshake.Int16() || key == kmsg.SASLAuthenticate.Int16()
}

// saslGate is the listener's handler when SASL is on: it serves the
// login requests and lets nothing else through before the login.
type saslGate struct {
	a    *Agent
	next kafkawire.Handler
}

func (g *saslGate) Handle(ctx context.Context, c *kafkawire.Conn, req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.SASLHandshakeRequest:
		return g.a.saslHandshake(c, r), nil
	case *kmsg.SASLAuthenticateRequest:
		return g.a.saslAuthenticate(ctx, c, r), nil
	}
	if !preAuthAPI(req.Key()) && clientAuthOf(c).user == "" && (c == nil || needsLogin(c.TLS)) {
		return nil, fmt.Errorf("%s before the SASL login (the listener requires one)", kmsg.NameForKey(req.Key()))
	}
	return g.next.Handle(ctx, c, req)
}

// withSASL puts the login in front of the listener's handler.
func (a *Agent) withSASL(wc *kafkawire.Config) {
	if !a.saslEnabled() {
		return
	}
	wc.Handler = &saslGate{a: a, next: wc.Handler}
	wc.NeedsAuthentication = needsLogin
	wc.APIs[kmsg.SASLHandshake.Int16()] = 1
	wc.APIs[kmsg.SASLAuthenticate.Int16()] = 2
}

// mechanismsFor lists the mechanisms offered on c: PLAIN only over TLS.
func (a *Agent) mechanismsFor(c *kafkawire.Conn) []string {
	var out []string
	for _, m := range a.cfg.SASLMechanisms {
		if m == sasl.Plain && (c == nil || c.TLS == nil) {
			continue
		}
		out = append(out, m)
	}
	return out
}

func (a *Agent) saslHandshake(c *kafkawire.Conn, req *kmsg.SASLHandshakeRequest) *kmsg.SASLHandshakeResponse {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	offered := a.mechanismsFor(c)
	resp.SupportedMechanisms = offered
	ca := clientAuthOf(c)
	switch {
	case ca.user != "" || ca.mechanism != "":
		resp.ErrorCode = kerr.IllegalSaslState.Code
	case !slices.Contains(offered, req.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		a.log.Warn("SASL handshake refused: mechanism not offered on this connection", "mechanism", req.Mechanism,
			"offered", offered, "remote", remoteOf(c))
	default:
		ca.mechanism = req.Mechanism
		if req.GetVersion() == 0 && c != nil && c.Session != nil {
			c.Session.ReadSASLTokens(func(token []byte) ([]byte, bool, error) {
				out, done, _, err := a.saslStep(context.Background(), c, ca, token)
				return out, done, err
			})
		}
	}
	return resp
}

func (a *Agent) saslAuthenticate(ctx context.Context, c *kafkawire.Conn, req *kmsg.SASLAuthenticateRequest) *kmsg.SASLAuthenticateResponse {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	out, _, code, err := a.saslStep(ctx, c, clientAuthOf(c), req.SASLAuthBytes)
	if err != nil {
		msg := err.Error()
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		if c != nil && c.Session != nil {
			c.Session.CloseAfterResponse("SASL authentication failed: " + msg)
		}
		return resp
	}
	resp.SASLAuthBytes = out
	return resp
}

// saslStep relays the client's next token to a voter and returns the
// voter's answer; done when the client has logged in. A failure comes
// with the error code SaslAuthenticate answers it with, and ends the
// exchange.
func (a *Agent) saslStep(ctx context.Context, c *kafkawire.Conn, ca *clientAuth, token []byte) (out []byte, done bool, code int16, err error) {
	if ca.user != "" || ca.mechanism == "" {
		return nil, false, kerr.IllegalSaslState.Code, errors.New("SaslAuthenticate without a SaslHandshake choosing a mechanism first")
	}
	if ca.relay == nil {
		ca.relay = &saslRelay{a: a, mechanism: ca.mechanism}
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	out, done, code, err = ca.relay.step(ctx, token)
	if err != nil {
		ca.relay.close()
		a.log.Warn("SASL authentication failed", "mechanism", ca.mechanism, "remote", remoteOf(c), "error", err)
		return nil, false, code, err
	}
	if done {
		ca.user, ca.relay = ca.relay.user, nil
		if c != nil && c.Session != nil {
			c.Session.SetAuthenticated()
		}
		a.log.Info("client authenticated", "principal", "User:"+ca.user, "mechanism", ca.mechanism, "remote", remoteOf(c))
	}
	return out, done, 0, nil
}

// saslRelay is one client's SASL exchange relayed to a voter, over a
// connection that the agent opens for it (without the agent's own login)
// and closes when the exchange ends.
type saslRelay struct {
	a         *Agent
	mechanism string
	conn      *kafkaclient.Conn
	// expiry closes conn when the exchange has not ended in time, so
	// that a client that starts logging in and goes quiet (or away)
	// does not hold a connection to a voter.
	expiry *time.Timer
	steps  int
	user   string
}

// step sends token to the voter and returns its answer.
func (r *saslRelay) step(ctx context.Context, token []byte) ([]byte, bool, int16, error) {
	if len(token) > sasl.MaxMessageSize {
		return nil, false, kerr.SaslAuthenticationFailed.Code, fmt.Errorf("%w: message of %d bytes exceeds %d", sasl.ErrMalformed, len(token), sasl.MaxMessageSize)
	}
	if r.steps == 0 {
		user, err := clientUser(r.mechanism, token)
		if err != nil {
			return nil, false, kerr.SaslAuthenticationFailed.Code, err
		}
		r.user = user
		if err := r.open(ctx); err != nil {
			return nil, false, kerr.SaslAuthenticationFailed.Code, fmt.Errorf("no voter could check the login: %w", err)
		}
	}
	r.steps++
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SASLAuthBytes = token
	if err := r.conn.Pick(req, 0); err != nil {
		return nil, false, kerr.SaslAuthenticationFailed.Code, err
	}
	resp, err := r.conn.Request(ctx, req)
	if err != nil {
		return nil, false, kerr.SaslAuthenticationFailed.Code, fmt.Errorf("relaying the login to a voter: %w", err)
	}
	ar := resp.(*kmsg.SASLAuthenticateResponse)
	if ar.ErrorCode != 0 {
		msg := kerr.ErrorForCode(ar.ErrorCode).Error()
		if ar.ErrorMessage != nil {
			msg = *ar.ErrorMessage
		}
		return nil, false, ar.ErrorCode, errors.New(msg)
	}
	done := r.steps == stepsOf(r.mechanism)
	if done {
		r.close()
	}
	return ar.SASLAuthBytes, done, 0, nil
}

// stepsOf is the number of client messages of a mechanism's exchange.
func stepsOf(mechanism string) int {
	if mechanism == sasl.Plain {
		return 1
	}
	return 2 // SCRAM: client-first, client-final
}

// open connects to the first voter that answers and names the mechanism
// in a SaslHandshake.
func (r *saslRelay) open(ctx context.Context) error {
	opts := r.a.controllerOptions()
	opts.SASL = nil // the client logs in, not the agent
	var errs []error
	for _, addr := range r.a.cfg.Controllers {
		conn, err := kafkaclient.Dial(ctx, addr, opts)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = r.mechanism
		if err = conn.Pick(hs, 1); err == nil {
			var resp kmsg.Response
			if resp, err = conn.Request(ctx, hs); err == nil {
				err = kerr.ErrorForCode(resp.(*kmsg.SASLHandshakeResponse).ErrorCode)
			}
		}
		if err != nil {
			_ = conn.Close()
			errs = append(errs, fmt.Errorf("%s: SASL handshake: %w", addr, err))
			continue
		}
		r.conn = conn
		r.expiry = time.AfterFunc(2*r.a.cfg.RequestTimeout, func() { _ = conn.Close() })
		return nil
	}
	if len(errs) == 0 {
		return errors.New("this broker is configured without controllers")
	}
	return errors.Join(errs...)
}

func (r *saslRelay) close() {
	if r.expiry != nil {
		r.expiry.Stop()
	}
	if r.conn != nil {
		_ = r.conn.Close()
		r.conn = nil
	}
}

// clientUser is the user name a mechanism's first client message logs in
// as: PLAIN's authcid, SCRAM's n= attribute (unescaped). The voter
// verifies the message; this only reads the name it verified.
func clientUser(mechanism string, msg []byte) (string, error) {
	s := string(msg)
	if mechanism == sasl.Plain {
		parts := strings.Split(s, "\x00")
		if len(parts) != 3 || parts[1] == "" {
			return "", fmt.Errorf("%w: PLAIN message must be authzid NUL authcid NUL password", sasl.ErrMalformed)
		}
		return parts[1], nil
	}
	attrs := strings.SplitN(s, ",", 4)
	if len(attrs) < 4 {
		return "", fmt.Errorf("%w: client-first message lacks the user name or the nonce attribute", sasl.ErrMalformed)
	}
	name, ok := strings.CutPrefix(attrs[2], "n=")
	if !ok || name == "" {
		return "", fmt.Errorf("%w: client-first message lacks the user name", sasl.ErrMalformed)
	}
	return strings.NewReplacer("=2C", ",", "=3D", "=").Replace(name), nil
}

func remoteOf(c *kafkawire.Conn) string {
	if c == nil || c.Remote == nil {
		return ""
	}
	return c.Remote.String()
}
