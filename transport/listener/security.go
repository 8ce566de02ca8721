package listener

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	kgosasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
	"github.com/ctrlquorum/ctrlquorum/transport/sasl"
	"github.com/ctrlquorum/ctrlquorum/transport/tlsconfig"
)

// Client security. Who a connection is (its principal) comes from, in
// order: a completed SASL exchange ("User:<name>"), a verified TLS client
// certificate ("User:<common name>"), or nothing ("User:ANONYMOUS").
//
// Authentication. With SASL mechanisms configured, a connection must
// authenticate before anything but ApiVersions, SaslHandshake and
// SaslAuthenticate, unless its TLS client certificate already did; any
// other request first closes the connection, as a Kafka broker does.
// SCRAM verifiers come from the replicated log, so every voter accepts
// the same credentials. PLAIN is offered only on TLS connections: the
// password would otherwise cross the network in the clear.
//
// Authorization is enforced when authentication is configured, when
// Security.Authorize is set, or as soon as the log holds any rule; with
// none of these (dev mode) everything is allowed, as before. When it is
// enforced, a request is allowed if no Deny rule and some Allow rule
// matches (package authz), or the principal is a super user. Voters'
// certificates are super users (they forward requests and probe each
// other); brokers' certificates may do the broker-to-controller requests
// for their own id (CLUSTER_ACTION), which authorizeBroker already ties to
// the certificate. Every denial is logged with the principal, operation,
// resource and the reason.
//
// Forwarded requests travel in an Envelope with the principal of the
// client that sent them; the active voter takes it from there only from a
// connection allowed CLUSTER_ACTION on the cluster (see envelope.go), so a
// client cannot claim someone else's identity by wrapping its request. On
// TLS listeners the brokers' and voters' certificates are allowed; on a
// SASL listener without TLS, give the voters PeerSASL credentials, and
// the brokers SASL credentials, of a super user.
//
// Bootstrap. On a SASL listener nobody can authenticate before the first
// credential exists. BootstrapUsers are created by the active voter when
// the log holds no SCRAM credential at all (a new cluster), the way
// Kafka's storage format adds its first SCRAM users; from then on
// credentials are managed over the wire (ctrlnode scram).

// SecurityConfig configures client authentication and authorization.
type SecurityConfig struct {
	// SASLMechanisms enables SASL with these mechanisms (SCRAM-SHA-256,
	// SCRAM-SHA-512, PLAIN). Empty: no SASL, and connections are who
	// their certificate says, or anonymous.
	SASLMechanisms []string
	// SuperUsers are principals ("User:admin") allowed everything.
	SuperUsers []string
	// Authorize enforces the rules even when no SASL mechanism is
	// configured and the log holds no rule (everything denied but to
	// super users and voters).
	Authorize bool
	// PeerSASL authenticates this voter's own calls to the other voters'
	// listeners (forwarded requests, quorum probes) when they require
	// SASL; its principal should be a super user. Nil: none.
	PeerSASL kgosasl.Mechanism
	// BootstrapUsers are created when the log holds no SCRAM credential.
	BootstrapUsers []BootstrapUser
}

// BootstrapUser is a SCRAM credential to create in a new cluster.
type BootstrapUser struct {
	Name      string
	Password  string
	Mechanism string // SCRAM-SHA-256 or SCRAM-SHA-512
}

// SecurityCounts counts, since the listener started, logins and denials.
type SecurityCounts struct {
	// Authentications: SASL exchanges that logged a client in.
	Authentications uint64
	// AuthenticationFailures: SASL exchanges refused (wrong password,
	// unknown user, malformed message, mechanism not offered).
	AuthenticationFailures uint64
	// Denials: operations refused by authorization (one per resource).
	Denials uint64
	// Unauthenticated: connections closed for a request before logging in.
	Unauthenticated uint64
}

type securityCounters struct {
	auths, authFailures, denials, unauthenticated atomic.Uint64
}

// SecurityCounts reports the listener's login and authorization counts.
func (l *Listener) SecurityCounts() SecurityCounts {
	return SecurityCounts{Authentications: l.secStats.auths.Load(), AuthenticationFailures: l.secStats.authFailures.Load(),
		Denials: l.secStats.denials.Load(), Unauthenticated: l.secStats.unauthenticated.Load()}
}

// WireLimits reports how often the wire server's limits were hit.
func (l *Listener) WireLimits() kafkawire.LimitCounts { return l.srv.Limits() }

// anonymous is the principal of a connection that authenticated nothing.
const anonymous = "User:ANONYMOUS"

// connAuth is what the listener knows about one connection's client.
type connAuth struct {
	// mechanism is what SaslHandshake chose; session the exchange in
	// progress; user the authenticated name once it finished.
	mechanism string
	session   sasl.Session
	user      string
	// cert is what the connection's verified certificate says, read once
	// (a connection keeps its certificate); certRead tells whether it was.
	cert     tlsconfig.Identity
	hasCert  bool
	certRead bool
	// envelopePrincipal is the principal of a request taken out of an
	// Envelope (see envelope.go): the client the forwarding node served.
	envelopePrincipal string
}

func authOf(c *kafkawire.Conn) *connAuth {
	if c == nil || c.Session == nil {
		return &connAuth{}
	}
	if a, ok := c.Session.Value.(*connAuth); ok {
		return a
	}
	a := &connAuth{}
	c.Session.Value = a
	return a
}

// identity is a connection's principal, with what its certificate says.
type identity struct {
	principal string
	cert      tlsconfig.Identity
	hasCert   bool
	// authenticated is false for a connection that proved nothing.
	authenticated bool
}

func (l *Listener) identify(c *kafkawire.Conn) identity {
	id := identity{principal: anonymous, cert: tlsconfig.NoIdentity}
	a := authOf(c)
	if !a.certRead {
		a.certRead = true
		if c != nil {
			a.cert, a.hasCert = certIdentity(c.TLS)
		}
	}
	if a.hasCert {
		id.cert, id.hasCert, id.authenticated = a.cert, true, true
		id.principal = a.cert.Principal()
	}
	if a.user != "" {
		id.principal, id.authenticated = "User:"+a.user, true
	}
	if a.envelopePrincipal != "" {
		// Served from an envelope, whose sender envelope() trusted.
		id.principal, id.authenticated = a.envelopePrincipal, true
	}
	return id
}

// certIdentity is who a connection's verified client certificate says
// the client is, if it says.
func certIdentity(state *tls.ConnectionState) (tlsconfig.Identity, bool) {
	if state == nil || len(state.PeerCertificates) == 0 {
		return tlsconfig.NoIdentity, false
	}
	id, err := tlsconfig.PeerIdentity(state)
	return id, err == nil
}

// needsLogin tells the wire server which new connections of a SASL
// listener have yet to authenticate, and so may send only small frames
// (kafkawire.Config.MaxUnauthenticatedFrameBytes) until they do: those
// whose certificate does not already identify the client.
func needsLogin(state *tls.ConnectionState) bool {
	_, ok := certIdentity(state)
	return !ok
}

func (l *Listener) saslEnabled() bool { return len(l.cfg.Security.SASLMechanisms) > 0 }

// preAuthAPIs are the requests a connection may send before it
// authenticated on a SASL listener.
func preAuthAPI(key int16) bool {
	return key == kmsg.SASLHandshake.Int16() || key == kmsg.SASLAuthenticate.Int16() || key == kmsg.ApiVersions.Int16()
}

// mechanismsFor lists the mechanisms offered on this connection: PLAIN
// only over TLS.
func (l *Listener) mechanismsFor(c *kafkawire.Conn) []string {
	var out []string
	for _, m := range l.cfg.Security.SASLMechanisms {
		if m == sasl.Plain && (c == nil || c.TLS == nil) {
			continue
		}
		out = append(out, m)
	}
	return out
}

func (l *Listener) saslHandshake(c *kafkawire.Conn, req *kmsg.SASLHandshakeRequest) *kmsg.SASLHandshakeResponse {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	offered := l.mechanismsFor(c)
	resp.SupportedMechanisms = offered
	a := authOf(c)
	switch {
	case a.user != "" || a.session != nil:
		resp.ErrorCode = kerr.IllegalSaslState.Code
	case !contains(offered, req.Mechanism):
		l.secStats.authFailures.Add(1)
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		l.log.Warn("SASL handshake refused: mechanism not offered on this connection", "mechanism", req.Mechanism,
			"offered", offered, "remote", remoteOf(c))
	default:
		a.mechanism = req.Mechanism
		if req.GetVersion() == 0 && c != nil && c.Session != nil {
			// v0 (Kafka serves it, and librdkafka logs in only where it
			// is offered): the tokens follow as bare size-prefixed
			// frames instead of SaslAuthenticate requests.
			c.Session.ReadSASLTokens(func(token []byte) ([]byte, bool, error) {
				out, done, _, err := l.saslStep(c, a, token)
				return out, done, err
			})
		}
	}
	return resp
}

func (l *Listener) saslAuthenticate(c *kafkawire.Conn, req *kmsg.SASLAuthenticateRequest) *kmsg.SASLAuthenticateResponse {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	out, _, code, err := l.saslStep(c, authOf(c), req.SASLAuthBytes)
	if err != nil {
		msg := err.Error()
		resp.ErrorCode, resp.ErrorMessage = code.Code, &msg
		if c != nil && c.Session != nil {
			c.Session.CloseAfterResponse("SASL authentication failed: " + msg)
		}
		return resp
	}
	resp.SASLAuthBytes = out
	return resp
}

// saslStep takes the client's next token of the mechanism its handshake
// chose, in a SaslAuthenticate or as a raw v0 token, and returns the
// server's; done when the client has logged in. A failure is counted and
// comes with the error code SaslAuthenticate answers it with.
func (l *Listener) saslStep(c *kafkawire.Conn, a *connAuth, token []byte) (out []byte, done bool, code *kerr.Error, err error) {
	fail := func(code *kerr.Error, err error) ([]byte, bool, *kerr.Error, error) {
		l.secStats.authFailures.Add(1)
		return nil, false, code, err
	}
	if a.user != "" || a.mechanism == "" {
		return fail(kerr.IllegalSaslState, errors.New("SaslAuthenticate without a SaslHandshake choosing a mechanism first"))
	}
	if a.session == nil {
		s, err := sasl.NewSession(a.mechanism, c != nil && c.TLS != nil, l.scramLookup)
		if err != nil {
			return fail(kerr.UnsupportedSaslMechanism, err)
		}
		a.session = s
	}
	out, done, err = a.session.Step(token)
	if err != nil {
		l.log.Warn("SASL authentication failed", "mechanism", a.mechanism, "remote", remoteOf(c), "error", err)
		return fail(kerr.SaslAuthenticationFailed, err)
	}
	if done {
		a.user, a.session = a.session.User(), nil
		if c != nil && c.Session != nil {
			c.Session.SetAuthenticated()
		}
		l.secStats.auths.Add(1)
		l.log.Info("client authenticated", "principal", "User:"+a.user, "mechanism", a.mechanism, "remote", remoteOf(c))
	}
	return out, done, nil, nil
}

// scramLookup reads a user's verifiers from the committed image.
func (l *Listener) scramLookup(user string) []sasl.Credential {
	var out []sasl.Credential
	for _, c := range l.securityState().ScramCredentials(user) {
		out = append(out, sasl.Credential{Mechanism: c.Mechanism.String(), Salt: c.Salt, StoredKey: c.StoredKey,
			ServerKey: c.ServerKey, Iterations: int(c.Iterations)})
	}
	return out
}

// securityState is the committed image's credentials and rules, read
// without the image's lock: every request needs them.
func (l *Listener) securityState() *fsm.Security { return l.node.FSM.Security() }

func remoteOf(c *kafkawire.Conn) string {
	if c == nil || c.Remote == nil {
		return ""
	}
	return c.Remote.String()
}

func hostOf(c *kafkawire.Conn) string {
	if c == nil || c.Remote == nil {
		return ""
	}
	if h, _, err := net.SplitHostPort(c.Remote.String()); err == nil {
		return h
	}
	return c.Remote.String()
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// bootstrapUsers creates BootstrapUsers once this voter is active and the
// log holds no SCRAM credential, then returns. It stops with the
// listener.
func (l *Listener) bootstrapUsers() {
	defer close(l.bootstrapDone)
	users := l.cfg.Security.BootstrapUsers
	var ups []controller.ScramUpsert
	for _, u := range users {
		cred, err := sasl.NewCredential(u.Mechanism, u.Password, nil, sasl.MinIterations*2)
		if err != nil {
			l.log.Error("bootstrap SCRAM user not created", "user", u.Name, "error", err)
			return
		}
		m := rl.ScramSHA256
		if u.Mechanism == sasl.ScramSHA512 {
			m = rl.ScramSHA512
		}
		ups = append(ups, controller.ScramUpsert{User: u.Name, Mechanism: m, Iterations: int32(cred.Iterations),
			Salt: cred.Salt, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey})
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-l.stop.Done():
			return
		case <-tick.C:
		}
		if len(l.securityState().Users()) > 0 {
			return
		}
		if l.standby() {
			continue
		}
		ctx, cancel := context.WithTimeout(l.stop, 10*time.Second)
		res := l.node.Controller.AlterScramCredentials(ctx, nil, ups)
		cancel()
		failed := false
		for user, err := range res {
			if err != nil {
				failed = true
				l.log.Warn("bootstrap SCRAM user not created yet", "user", user, "error", err)
			} else {
				l.log.Info("bootstrap SCRAM user created (the log held no SCRAM credential)", "user", user)
			}
		}
		if !failed {
			return
		}
	}
}
