package sasl

import (
	"crypto/subtle"
	"strings"
	"unicode/utf8"
)

// plainSession is the server side of a PLAIN exchange: a single message
// "authzid NUL authcid NUL password", checked against the user's SCRAM
// verifiers.
type plainSession struct {
	lookup   Lookup
	finished bool
	user     string // set on success only
}

func (p *plainSession) User() string { return p.user }

func (p *plainSession) Step(msg []byte) ([]byte, bool, error) {
	if p.finished {
		return nil, false, ErrExchangeFinished
	}
	p.finished = true
	if len(msg) > MaxMessageSize {
		return nil, false, malformed("message of %d bytes exceeds %d", len(msg), MaxMessageSize)
	}
	parts := strings.Split(string(msg), "\x00")
	if len(parts) != 3 {
		return nil, false, malformed("PLAIN message must be authzid NUL authcid NUL password")
	}
	authzid, authcid, password := parts[0], parts[1], parts[2]
	if authcid == "" {
		return nil, false, malformed("empty PLAIN user name")
	}
	if password == "" {
		return nil, false, malformed("empty PLAIN password")
	}
	if !utf8.ValidString(authzid) || !utf8.ValidString(authcid) || !utf8.ValidString(password) {
		return nil, false, malformed("PLAIN message is not valid UTF-8")
	}
	if authzid != "" && authzid != authcid {
		return nil, false, ErrAuthorizationID
	}
	if !verifyPassword(p.lookup(authcid), authcid, password) {
		return nil, false, ErrInvalidCredentials
	}
	p.user = authcid
	return nil, true, nil
}

// verifyPassword reports whether password matches any of creds. Without
// a usable verifier it still runs one PBKDF2 derivation, so an unknown
// user costs about as much as a wrong password.
func verifyPassword(creds []Credential, user, password string) bool {
	tried := false
	for i := range creds {
		c := &creds[i]
		if !c.valid() {
			continue
		}
		tried = true
		if matches(c, password) {
			return true
		}
	}
	if !tried {
		c := fakeCredential(ScramSHA512, user)
		matches(&c, password)
	}
	return false
}

// matches recomputes StoredKey from password with c's parameters and
// compares it with c.StoredKey in constant time.
func matches(c *Credential, password string) bool {
	sc, err := storedCredentials(c.Mechanism, password, c.Salt, c.Iterations)
	return err == nil && subtle.ConstantTimeCompare(sc.StoredKey, c.StoredKey) == 1
}
