package sasl

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"hash"
	"strconv"
	"strings"
	"unicode/utf8"
)

// serverNonceSize is the number of random bytes appended (base64 encoded)
// to the client's nonce.
const serverNonceSize = 24

type scramState int

const (
	scramWantFirst scramState = iota
	scramWantFinal
	scramDone
	scramFailed
)

// scramSession is the server side of a SCRAM-SHA-256 or SCRAM-SHA-512
// exchange: client-first → server-first, client-final → server-final.
type scramSession struct {
	mechanism string
	hash      func() hash.Hash
	lookup    Lookup
	state     scramState

	// nonceSuffix, when set, replaces the random server nonce suffix
	// (test vectors need a known one).
	nonceSuffix func() string

	user            string
	cred            Credential
	fake            bool   // cred was made up for an unknown user
	gs2Header       string // e.g. "n,,"
	clientFirstBare string
	serverFirst     string
	nonce           string // client nonce + server suffix
}

func newScramSession(mechanism string, lookup Lookup) *scramSession {
	return &scramSession{mechanism: mechanism, hash: hashFunc(mechanism), lookup: lookup}
}

func (s *scramSession) User() string {
	if s.state != scramDone {
		return ""
	}
	return s.user
}

func (s *scramSession) Step(msg []byte) ([]byte, bool, error) {
	var (
		out  []byte
		done bool
		err  error
	)
	switch s.state {
	case scramWantFirst, scramWantFinal:
	default:
		return nil, false, ErrExchangeFinished
	}
	if len(msg) > MaxMessageSize {
		s.state = scramFailed
		return nil, false, malformed("message of %d bytes exceeds %d", len(msg), MaxMessageSize)
	}
	if s.state == scramWantFirst {
		out, err = s.first(string(msg))
		s.state = scramWantFinal
	} else {
		out, err = s.final(string(msg))
		s.state, done = scramDone, true
	}
	if err != nil {
		s.state = scramFailed
		return nil, false, err
	}
	return out, done, nil
}

// first handles
//
//	client-first-message = gs2-header client-first-message-bare
//	gs2-header           = gs2-cbind-flag "," [ "a=" saslname ] ","
//	client-first-message-bare = "n=" saslname "," "r=" c-nonce ["," extensions]
func (s *scramSession) first(msg string) ([]byte, error) {
	if msg == "" {
		return nil, malformed("empty client-first message")
	}
	switch {
	case strings.HasPrefix(msg, "n,"), strings.HasPrefix(msg, "y,"):
	case strings.HasPrefix(msg, "p="):
		return nil, ErrChannelBinding
	default:
		return nil, malformed("client-first message must start with gs2 flag \"n,\" or \"y,\"")
	}
	i := strings.IndexByte(msg[2:], ',')
	if i < 0 {
		return nil, malformed("incomplete gs2 header")
	}
	var authzid string
	if field := msg[2 : 2+i]; field != "" {
		if !strings.HasPrefix(field, "a=") {
			return nil, malformed("unexpected gs2 header attribute %.16q", field)
		}
		var err error
		if authzid, err = unescapeSaslname(field[2:]); err != nil {
			return nil, malformed("authorization id: %v", err)
		}
	}
	s.gs2Header = msg[:2+i+1]
	s.clientFirstBare = msg[len(s.gs2Header):]

	attrs := strings.Split(s.clientFirstBare, ",")
	if strings.HasPrefix(attrs[0], "m=") {
		return nil, malformed("mandatory extensions are not supported")
	}
	if !strings.HasPrefix(attrs[0], "n=") {
		return nil, malformed("client-first message lacks the user name attribute")
	}
	user, err := unescapeSaslname(attrs[0][2:])
	if err != nil {
		return nil, malformed("user name: %v", err)
	}
	if len(attrs) < 2 || !strings.HasPrefix(attrs[1], "r=") {
		return nil, malformed("client-first message lacks the nonce attribute")
	}
	clientNonce := attrs[1][2:]
	if err := checkNonce(clientNonce); err != nil {
		return nil, err
	}
	if err := checkExtensions(attrs[2:]); err != nil {
		return nil, err
	}
	if authzid != "" && authzid != user {
		return nil, ErrAuthorizationID
	}

	s.user = user
	s.fake = true
	for _, c := range s.lookup(user) {
		if c.Mechanism == s.mechanism && c.valid() {
			s.cred, s.fake = c, false
			break
		}
	}
	if s.fake {
		s.cred = fakeCredential(s.mechanism, user)
	}

	var suffix string
	if s.nonceSuffix != nil {
		suffix = s.nonceSuffix()
	} else {
		b := make([]byte, serverNonceSize)
		rand.Read(b)
		suffix = base64.RawStdEncoding.EncodeToString(b)
	}
	s.nonce = clientNonce + suffix
	s.serverFirst = "r=" + s.nonce +
		",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) +
		",i=" + strconv.Itoa(s.cred.Iterations)
	return []byte(s.serverFirst), nil
}

// final handles
//
//	client-final-message = "c=" base64(gs2-header) "," "r=" nonce ["," extensions] "," "p=" base64(proof)
//
// and answers "v=" base64(ServerSignature) when the proof is right.
func (s *scramSession) final(msg string) ([]byte, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, malformed("client-final message lacks the proof attribute")
	}
	withoutProof, proofB64 := msg[:i], msg[i+3:]
	if strings.IndexByte(proofB64, ',') >= 0 {
		return nil, malformed("proof must be the last attribute of the client-final message")
	}
	attrs := strings.Split(withoutProof, ",")
	if !strings.HasPrefix(attrs[0], "c=") {
		return nil, malformed("client-final message lacks the channel binding attribute")
	}
	cbind, err := base64.StdEncoding.DecodeString(attrs[0][2:])
	if err != nil || string(cbind) != s.gs2Header {
		return nil, malformed("channel binding attribute does not match the gs2 header")
	}
	if len(attrs) < 2 || !strings.HasPrefix(attrs[1], "r=") {
		return nil, malformed("client-final message lacks the nonce attribute")
	}
	if attrs[1][2:] != s.nonce {
		return nil, malformed("nonce does not match the server nonce")
	}
	if err := checkExtensions(attrs[2:]); err != nil {
		return nil, err
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil {
		return nil, malformed("proof is not valid base64")
	}
	if len(proof) != len(s.cred.StoredKey) {
		return nil, malformed("proof is %d bytes, want %d", len(proof), len(s.cred.StoredKey))
	}

	authMessage := []byte(s.clientFirstBare + "," + s.serverFirst + "," + withoutProof)
	// ClientKey = ClientProof XOR HMAC(StoredKey, AuthMessage); the client
	// knows the password iff H(ClientKey) == StoredKey.
	key := hmacSum(s.hash, s.cred.StoredKey, authMessage)
	for j := range key {
		key[j] ^= proof[j]
	}
	ok := subtle.ConstantTimeCompare(storedKey(s.hash, key), s.cred.StoredKey) == 1
	if !ok || s.fake {
		return nil, ErrInvalidCredentials
	}
	sig := hmacSum(s.hash, s.cred.ServerKey, authMessage)
	return []byte("v=" + base64.StdEncoding.EncodeToString(sig)), nil
}

// unescapeSaslname decodes a saslname: UTF-8 without "," or NUL, where
// "=2C" stands for "," and "=3D" for "=". It must not be empty.
func unescapeSaslname(s string) (string, error) {
	if s == "" {
		return "", errEmptyName
	}
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return "", errBadName
	}
	if strings.IndexByte(s, '=') < 0 {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", errBadEscape
		}
		i += 2
	}
	return b.String(), nil
}

type nameError string

func (e nameError) Error() string { return string(e) }

const (
	errEmptyName = nameError("empty name")
	errBadName   = nameError("name is not valid UTF-8 or contains NUL")
	errBadEscape = nameError("\"=\" must be followed by \"2C\" or \"3D\"")
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
