package sasl

import (
	"errors"
	"fmt"
)

// MaxMessageSize is the largest client message a Session accepts.
const MaxMessageSize = 64 << 10

// Errors returned by Session.Step and NewSession. Malformed-message errors
// wrap ErrMalformed and say what is wrong with the message.
var (
	// ErrInvalidCredentials is returned for a wrong password and for an
	// unknown user alike.
	ErrInvalidCredentials = errors.New("authentication failed: invalid credentials")
	// ErrMalformed is wrapped by every error about a client message that
	// does not follow the mechanism's syntax.
	ErrMalformed = errors.New("sasl: malformed client message")
	// ErrAuthorizationID is returned when a client asks to act as another
	// identity than the one it authenticates as.
	ErrAuthorizationID = errors.New("sasl: authorization id must be empty or equal to the user name")
	// ErrChannelBinding is returned when a SCRAM client requires channel
	// binding, which is not supported.
	ErrChannelBinding = errors.New("sasl: channel binding is not supported")
	// ErrExchangeFinished is returned by Step once the exchange succeeded
	// or failed.
	ErrExchangeFinished = errors.New("sasl: authentication exchange already finished")
	// ErrUnsupportedMechanism is returned by NewSession for a mechanism
	// this package does not serve.
	ErrUnsupportedMechanism = errors.New("sasl: unsupported mechanism")
	// ErrPlainRequiresTLS is returned by NewSession for PLAIN on a
	// connection that is not encrypted.
	ErrPlainRequiresTLS = errors.New("sasl: PLAIN is only allowed on TLS connections")
)

// Session is one authentication exchange on one connection.
type Session interface {
	// Step consumes the client's next message and returns the server's
	// reply. done is true when authentication succeeded (User is then
	// valid). An error means authentication failed and ends the exchange;
	// it never reveals whether the user exists. Step after success or
	// failure returns ErrExchangeFinished.
	Step(clientMessage []byte) (serverMessage []byte, done bool, err error)
	// User is the authenticated user name (after done).
	User() string
}

// NewSession starts a server exchange for mechanism. tls says whether the
// connection is encrypted: PLAIN is refused when it is not. An unknown
// mechanism or a nil lookup is an error.
func NewSession(mechanism string, tls bool, lookup Lookup) (Session, error) {
	if lookup == nil {
		return nil, errors.New("sasl: nil credential lookup")
	}
	switch mechanism {
	case ScramSHA256, ScramSHA512:
		return newScramSession(mechanism, lookup), nil
	case Plain:
		if !tls {
			return nil, ErrPlainRequiresTLS
		}
		return &plainSession{lookup: lookup}, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnsupportedMechanism, mechanism)
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}
