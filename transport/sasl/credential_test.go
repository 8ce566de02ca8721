package sasl

import (
	"bytes"
	"errors"
	"testing"
)

func TestHashSize(t *testing.T) {
	for mech, want := range map[string]int{ScramSHA256: 32, ScramSHA512: 64, Plain: 0, "": 0, "SCRAM-SHA-1": 0, "scram-sha-256": 0} {
		if got := HashSize(mech); got != want {
			t.Errorf("HashSize(%q) = %d, want %d", mech, got, want)
		}
	}
}

func TestIterationBounds(t *testing.T) {
	salted := make([]byte, 32)
	for _, tc := range []struct {
		iters int
		ok    bool
	}{
		{0, false}, {-1, false}, {MinIterations - 1, false}, {MinIterations, true},
		{MaxIterations, true}, {MaxIterations + 1, false}, {1 << 30, false},
	} {
		_, err := NewCredential(ScramSHA256, "pw", []byte("salt"), tc.iters)
		if (err == nil) != tc.ok {
			t.Errorf("NewCredential(iterations=%d): err=%v", tc.iters, err)
		}
		_, err = CredentialFromSaltedPassword(ScramSHA256, []byte("salt"), salted, tc.iters)
		if (err == nil) != tc.ok {
			t.Errorf("CredentialFromSaltedPassword(iterations=%d): err=%v", tc.iters, err)
		}
		_, err = SaltedPassword(ScramSHA256, "pw", []byte("salt"), tc.iters)
		if (err == nil) != tc.ok {
			t.Errorf("SaltedPassword(iterations=%d): err=%v", tc.iters, err)
		}
	}
}

func TestCredentialErrors(t *testing.T) {
	if _, err := NewCredential(Plain, "pw", nil, 4096); err == nil {
		t.Error("NewCredential accepted PLAIN")
	}
	if _, err := NewCredential("SCRAM-SHA-1", "pw", nil, 4096); err == nil {
		t.Error("NewCredential accepted SCRAM-SHA-1")
	}
	if _, err := NewCredential(ScramSHA256, "pw", []byte{}, 4096); err == nil {
		t.Error("NewCredential accepted an empty salt")
	}
	if _, err := CredentialFromSaltedPassword(ScramSHA512, []byte("s"), make([]byte, 32), 4096); err == nil {
		t.Error("CredentialFromSaltedPassword accepted a 32-byte SHA-512 salted password")
	}
	if _, err := CredentialFromSaltedPassword(ScramSHA256, nil, make([]byte, 32), 4096); err == nil {
		t.Error("CredentialFromSaltedPassword accepted a nil salt")
	}
	if _, err := NewSession("GSSAPI", true, store{}.lookup); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Errorf("NewSession(GSSAPI): %v", err)
	}
	if _, err := NewSession(ScramSHA256, true, nil); err == nil {
		t.Error("NewSession accepted a nil lookup")
	}
}

func TestNewCredentialAgreesWithSaltedPassword(t *testing.T) {
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		a, err := NewCredential(mech, "correct horse", nil, 4096+17)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Salt) != DefaultSaltSize || a.Mechanism != mech || a.Iterations != 4096+17 {
			t.Fatalf("%s: credential %+v", mech, a)
		}
		if len(a.StoredKey) != HashSize(mech) || len(a.ServerKey) != HashSize(mech) {
			t.Fatalf("%s: key sizes %d %d", mech, len(a.StoredKey), len(a.ServerKey))
		}
		salted, err := SaltedPassword(mech, "correct horse", a.Salt, a.Iterations)
		if err != nil {
			t.Fatal(err)
		}
		b, err := CredentialFromSaltedPassword(mech, a.Salt, salted, a.Iterations)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Salt, b.Salt) || !bytes.Equal(a.StoredKey, b.StoredKey) ||
			!bytes.Equal(a.ServerKey, b.ServerKey) || a.Iterations != b.Iterations || a.Mechanism != b.Mechanism {
			t.Fatalf("%s: NewCredential %+v != CredentialFromSaltedPassword %+v", mech, a, b)
		}
		// Two random salts differ, and so do the verifiers.
		c, _ := NewCredential(mech, "correct horse", nil, 4096+17)
		if bytes.Equal(a.Salt, c.Salt) || bytes.Equal(a.StoredKey, c.StoredKey) {
			t.Fatalf("%s: random salts collided", mech)
		}
		// The salt is copied, not aliased.
		salt := []byte("caller's salt")
		d, _ := CredentialFromSaltedPassword(mech, salt, salted, 4096)
		salt[0] = 'X'
		if d.Salt[0] != 'c' {
			t.Fatalf("%s: salt aliased", mech)
		}
	}
}

// The RFC 7677 verifier, derived from the salted password alone, drives
// the RFC exchange: what AlterUserScramCredentials stores is enough.
func TestCredentialFromSaltedPasswordRFC(t *testing.T) {
	want := rfcStore(t)["user"][0]
	salted, err := SaltedPassword(ScramSHA256, "pencil", want.Salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	c, err := CredentialFromSaltedPassword(ScramSHA256, want.Salt, salted, 4096)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := NewSession(ScramSHA256, false, store{"user": {c}}.lookup)
	withNonceSuffix(t, s, rfcSuffix)
	if _, _, err := s.Step([]byte(rfcClientFirst)); err != nil {
		t.Fatal(err)
	}
	out, done, err := s.Step([]byte(rfcClientFinal))
	if err != nil || !done || string(out) != rfcServerFinal {
		t.Fatalf("out=%q done=%v err=%v", out, done, err)
	}
}
