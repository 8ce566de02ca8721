package sasl

import (
	"strings"
	"unicode/utf8"

	"github.com/xdg-go/scram"
)

type scramState int

const (
	scramWantFirst scramState = iota
	scramWantFinal
	scramDone
	scramFailed
)

// scramSession is the server side of a SCRAM-SHA-256 or SCRAM-SHA-512
// exchange: client-first → server-first, client-final → server-final.
//
// github.com/xdg-go/scram runs the exchange: it parses both client
// messages, draws the server nonce, checks the channel-binding header, the
// nonce and the proof, and computes the server signature. The session
// gives it the user's verifier (or a made-up one for an unknown user),
// enforces the rules of RFC 5802's grammar that its parser lets through,
// refuses what Kafka refuses, and maps its errors onto this package's.
type scramSession struct {
	mechanism string
	lookup    Lookup
	state     scramState
	conv      *scram.ServerConversation

	// nonceSuffix, when set, replaces the random server nonce suffix
	// (test vectors need a known one).
	nonceSuffix func() string
	// fakeCredential makes up the verifier shown for an unknown user
	// (tests replace it to make one whose password they know).
	fakeCredential func(mechanism, user string) Credential

	user string // set once the first message is accepted
	fake bool   // the verifier was made up for an unknown user

	// What the final message of a client that repeats its nonce is
	// checked against (see finalRepeatedNonce): the verifier shown, the
	// gs2 header and bare part of the client-first message, and the
	// server-first message with its nonce.
	cred                   Credential
	gs2, firstBare, sFirst string
	nonce                  string
}

func newScramSession(mechanism string, lookup Lookup) *scramSession {
	return &scramSession{mechanism: mechanism, lookup: lookup, fakeCredential: fakeCredential}
}

func (s *scramSession) User() string {
	if s.state != scramDone {
		return ""
	}
	return s.user
}

func (s *scramSession) Step(msg []byte) ([]byte, bool, error) {
	var (
		out  string
		done bool
		err  error
	)
	switch {
	case s.state != scramWantFirst && s.state != scramWantFinal:
		return nil, false, ErrExchangeFinished
	case len(msg) > MaxMessageSize:
		err = malformed("message of %d bytes exceeds %d", len(msg), MaxMessageSize)
	case s.state == scramWantFirst:
		out, err = s.first(string(msg))
		s.state = scramWantFinal
	default:
		out, err = s.final(string(msg))
		s.state, done = scramDone, true
	}
	if err != nil {
		s.state = scramFailed
		return nil, false, err
	}
	return []byte(out), done, nil
}

func (s *scramSession) first(msg string) (string, error) {
	// Kafka offers no SCRAM-PLUS mechanism, so a client that requires
	// channel binding is refused whatever binding it names.
	if strings.HasPrefix(msg, "p=") {
		return "", ErrChannelBinding
	}
	srv, err := hashGen(s.mechanism).NewServer(s.credential)
	if err != nil {
		return "", err
	}
	if s.nonceSuffix != nil {
		srv.WithNonceGenerator(s.nonceSuffix)
	}
	s.conv = srv.NewConversation()
	out, err := s.conv.Step(msg)
	if err != nil {
		return "", refused("client-first", err)
	}
	if err := checkClientFirst(msg, s.conv.Username(), s.conv.AuthzID()); err != nil {
		return "", err
	}
	s.user = s.conv.Username()
	// checkClientFirst saw the gs2 header and the user attribute.
	i := strings.IndexByte(msg, ',')
	j := i + 1 + strings.IndexByte(msg[i+1:], ',')
	s.gs2, s.firstBare, s.sFirst = msg[:j+1], msg[j+1:], out
	s.nonce, _, _ = strings.Cut(strings.TrimPrefix(out, "r="), ",")
	return out, nil
}

// credential is xdg-go's credential lookup: the user's first usable
// verifier for this mechanism. It never fails: an unknown user gets a
// verifier no password matches, so that the first message is answered
// alike for every user name (xdg-go would answer e=unknown-user).
func (s *scramSession) credential(user string) (scram.StoredCredentials, error) {
	c, found := Credential{}, false
	for _, x := range s.lookup(user) {
		if x.Mechanism == s.mechanism && x.valid() {
			c, found = x, true
			break
		}
	}
	if !found {
		c, s.fake = s.fakeCredential(s.mechanism, user), true
	}
	s.cred = c
	return scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations},
		StoredKey:  c.StoredKey,
		ServerKey:  c.ServerKey,
	}, nil
}

func (s *scramSession) final(msg string) (string, error) {
	// xdg-go takes whatever lies between the nonce and the proof as
	// extensions without looking at it.
	if attrs := strings.Split(msg, ","); len(attrs) >= 3 {
		if err := checkExtensions(attrs[2 : len(attrs)-1]); err != nil {
			return "", err
		}
		if r, ok := strings.CutPrefix(attrs[1], "r="); ok && r != s.nonce && strings.HasSuffix(r, s.nonce) {
			return s.finalRepeatedNonce(msg)
		}
	}
	out, err := s.conv.Step(msg)
	switch {
	case out == scram.ErrInvalidProof:
		return "", ErrInvalidCredentials
	case err != nil:
		return "", refused("client-final", err)
	case s.fake || !s.conv.Valid():
		// A proof that matches a made-up verifier still proves nothing.
		return "", ErrInvalidCredentials
	}
	return out, nil
}

// checkClientFirst enforces on a client-first message that xdg-go has
// accepted (so it has a gs2 header, "n=" and "r=") what RFC 5802 requires
// and xdg-go's parser lets through: a user name and an authorization id
// that are non-empty UTF-8 without NUL, a nonce of printable ASCII, and
// extensions of the form name=value (Kafka's tokenauth=true among them,
// accepted and ignored). As in Kafka, an authorization id must be the
// user name.
func checkClientFirst(msg, user, authzid string) error {
	attrs := strings.Split(msg, ",")
	if len(attrs) < 4 {
		return malformed("client-first message lacks the user name or the nonce attribute")
	}
	if attrs[1] != "" {
		if err := checkName(authzid); err != nil {
			return malformed("authorization id: %v", err)
		}
	}
	if err := checkName(user); err != nil {
		return malformed("user name: %v", err)
	}
	nonce, ok := strings.CutPrefix(attrs[3], "r=")
	if !ok {
		return malformed("client-first message lacks the nonce attribute")
	}
	if err := checkNonce(nonce); err != nil {
		return err
	}
	if err := checkExtensions(attrs[4:]); err != nil {
		return err
	}
	if authzid != "" && authzid != user {
		return ErrAuthorizationID
	}
	return nil
}

// refused reports a message xdg-go refused. Its reason can quote the
// client's message whole; it is cut short, as this package quotes at most
// a few bytes of what a client sent.
func refused(message string, err error) error {
	const max = 96
	reason := err.Error()
	if len(reason) > max {
		reason = reason[:max] + "…"
	}
	return malformed("%s message: %s", message, strings.ToValidUTF8(reason, "\uFFFD"))
}

// checkName requires a decoded saslname to be non-empty UTF-8 without NUL.
func checkName(s string) error {
	if s == "" {
		return errEmptyName
	}
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return errBadName
	}
	return nil
}

type nameError string

func (e nameError) Error() string { return string(e) }

const (
	errEmptyName = nameError("empty name")
	errBadName   = nameError("name is not valid UTF-8 or contains NUL")
)

// checkNonce requires a non-empty nonce of printable ASCII other than ",".
func checkNonce(n string) error {
	if n == "" {
		return malformed("empty nonce")
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; c < 0x21 || c > 0x7e || c == ',' {
			return malformed("nonce contains a character outside printable ASCII")
		}
	}
	return nil
}

// checkExtensions accepts attributes of the form name=value with an
// alphabetic name (as Kafka's tokenauth=true) and ignores their meaning.
func checkExtensions(attrs []string) error {
	for _, a := range attrs {
		eq := strings.IndexByte(a, '=')
		if eq < 1 {
			return malformed("extension %.16q is not of the form name=value", a)
		}
		for i := 0; i < eq; i++ {
			if c := a[i] | 0x20; c < 'a' || c > 'z' {
				return malformed("extension name %.16q is not alphabetic", a[:eq])
			}
		}
		if strings.IndexByte(a, 0) >= 0 {
			return malformed("extension contains NUL")
		}
	}
	return nil
}
