package sasl

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"

	"github.com/xdg-go/scram"
)

// Mechanism names, as Kafka spells them in SaslHandshake requests.
const (
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	Plain       = "PLAIN"
)

// MinIterations and MaxIterations bound the PBKDF2 iteration count of a
// SCRAM verifier, as Kafka bounds it.
const MinIterations, MaxIterations = 4096, 16384

// DefaultSaltSize is the size of the random salt NewCredential draws when
// it is given none.
const DefaultSaltSize = 32

// Credential is one user's salted SCRAM verifier for one mechanism.
type Credential struct {
	Mechanism  string // ScramSHA256 or ScramSHA512
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int
}

// Lookup returns the user's verifiers (any mechanisms); none means the
// user is unknown. It must not retain or modify the returned slices after
// returning them.
type Lookup func(user string) []Credential

// HashSize returns the digest size of a SCRAM mechanism's hash (32 for
// SCRAM-SHA-256, 64 for SCRAM-SHA-512) and 0 for any other mechanism.
func HashSize(mechanism string) int {
	switch mechanism {
	case ScramSHA256:
		return sha256.Size
	case ScramSHA512:
		return sha512.Size
	}
	return 0
}

// IsScram reports whether mechanism is one of the SCRAM mechanisms.
func IsScram(mechanism string) bool { return HashSize(mechanism) != 0 }

// Mechanisms returns the mechanisms this package serves, in the order a
// SaslHandshake response lists them.
func Mechanisms() []string { return []string{ScramSHA512, ScramSHA256, Plain} }

// hashGen returns xdg-go's hash for a SCRAM mechanism, nil for any other.
func hashGen(mechanism string) scram.HashGeneratorFcn {
	switch mechanism {
	case ScramSHA256:
		return scram.SHA256
	case ScramSHA512:
		return scram.SHA512
	}
	return nil
}

func checkParams(mechanism string, iterations int) error {
	if !IsScram(mechanism) {
		return fmt.Errorf("sasl: unknown SCRAM mechanism %q", mechanism)
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return fmt.Errorf("sasl: %d iterations out of range [%d, %d]", iterations, MinIterations, MaxIterations)
	}
	return nil
}

// NewCredential derives a verifier for mechanism from a password. A nil
// salt draws a random DefaultSaltSize-byte salt; a non-nil salt must not
// be empty. It fails for an unknown mechanism or an iteration count out of
// [MinIterations, MaxIterations].
func NewCredential(mechanism, password string, salt []byte, iterations int) (Credential, error) {
	if err := checkParams(mechanism, iterations); err != nil {
		return Credential{}, err
	}
	if salt == nil {
		salt = make([]byte, DefaultSaltSize)
		if _, err := rand.Read(salt); err != nil {
			return Credential{}, fmt.Errorf("sasl: drawing salt: %w", err)
		}
	} else if len(salt) == 0 {
		return Credential{}, errors.New("sasl: empty salt")
	}
	sc, err := storedCredentials(mechanism, password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return Credential{
		Mechanism:  mechanism,
		Salt:       append([]byte(nil), salt...),
		StoredKey:  sc.StoredKey,
		ServerKey:  sc.ServerKey,
		Iterations: iterations,
	}, nil
}

// storedCredentials derives a verifier from a password with xdg-go's
// client (GetStoredCredentials: the keys its server checks a proof
// against). The password is used as given, without SASLprep, as Kafka
// uses it.
func storedCredentials(mechanism, password string, salt []byte, iterations int) (scram.StoredCredentials, error) {
	c, err := hashGen(mechanism).NewClientUnprepped("", password, "")
	if err != nil {
		return scram.StoredCredentials{}, err
	}
	sc, err := c.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: iterations})
	if err != nil {
		return scram.StoredCredentials{}, fmt.Errorf("sasl: pbkdf2: %w", err)
	}
	return sc, nil
}

// CredentialFromSaltedPassword derives StoredKey and ServerKey from a
// salted password, PBKDF2(password, salt, iterations) with the mechanism's
// hash, which is what Kafka's AlterUserScramCredentials request carries.
// (xdg-go derives a verifier from the password only, so these two HMACs
// and a hash are done here; a test checks they agree with xdg-go's.)
// The salt is copied. It fails for an unknown mechanism, an iteration
// count out of range, an empty salt or a salted password whose length is
// not the mechanism's hash size.
func CredentialFromSaltedPassword(mechanism string, salt, saltedPassword []byte, iterations int) (Credential, error) {
	if err := checkParams(mechanism, iterations); err != nil {
		return Credential{}, err
	}
	if len(salt) == 0 {
		return Credential{}, errors.New("sasl: empty salt")
	}
	if n := HashSize(mechanism); len(saltedPassword) != n {
		return Credential{}, fmt.Errorf("sasl: %s salted password is %d bytes, want %d", mechanism, len(saltedPassword), n)
	}
	h := hashGen(mechanism)
	hmacSum := func(msg string) []byte {
		m := hmac.New(h, saltedPassword)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	d := h()
	d.Write(hmacSum("Client Key"))
	return Credential{
		Mechanism:  mechanism,
		Salt:       append([]byte(nil), salt...),
		StoredKey:  d.Sum(nil),
		ServerKey:  hmacSum("Server Key"),
		Iterations: iterations,
	}, nil
}

// SaltedPassword computes PBKDF2(password, salt, iterations) with the
// mechanism's hash: the value a Kafka client sends in an
// AlterUserScramCredentials upsertion.
func SaltedPassword(mechanism, password string, salt []byte, iterations int) ([]byte, error) {
	if err := checkParams(mechanism, iterations); err != nil {
		return nil, err
	}
	if len(salt) == 0 {
		return nil, errors.New("sasl: empty salt")
	}
	out, err := pbkdf2.Key(hashGen(mechanism), password, salt, iterations, HashSize(mechanism))
	if err != nil {
		return nil, fmt.Errorf("sasl: pbkdf2: %w", err)
	}
	return out, nil
}

// valid reports whether c can be used to verify a client: a known
// mechanism, keys of the hash size, a salt and an iteration count in
// range. Credentials failing this are ignored, never trusted.
func (c *Credential) valid() bool {
	n := HashSize(c.Mechanism)
	return n != 0 && len(c.StoredKey) == n && len(c.ServerKey) == n && len(c.Salt) > 0 &&
		c.Iterations >= MinIterations && c.Iterations <= MaxIterations
}
