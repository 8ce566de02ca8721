package sasl

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha512"
	"sync"
)

// fakeKey is the per-process secret from which the verifier presented for
// an unknown user is derived. Deriving it (rather than drawing a fresh
// salt per attempt) makes the salt of an unknown user as stable as a real
// one across attempts, so repeating the first message does not tell the
// two apart; keeping the key secret makes the salt unpredictable.
var fakeKey = sync.OnceValue(func() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
})

// fakeIterations is the iteration count shown for unknown users: Kafka's
// default, which most real verifiers use too.
const fakeIterations = MinIterations

// fakeCredential returns a verifier for user that no password matches.
func fakeCredential(mechanism, user string) Credential {
	n := HashSize(mechanism)
	derive := func(label string) []byte {
		m := hmac.New(sha512.New, fakeKey())
		m.Write([]byte(label))
		m.Write([]byte{0})
		m.Write([]byte(mechanism))
		m.Write([]byte{0})
		m.Write([]byte(user))
		return m.Sum(nil)[:n]
	}
	return Credential{
		Mechanism:  mechanism,
		Salt:       derive("salt")[:DefaultSaltSize],
		StoredKey:  derive("stored key"),
		ServerKey:  derive("server key"),
		Iterations: fakeIterations,
	}
}
