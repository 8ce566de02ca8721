package sasl

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"testing"

	kfsasl "github.com/twmb/franz-go/pkg/sasl"
)

// store is an in-memory credential store for tests.
type store map[string][]Credential

func (s store) lookup(user string) []Credential { return s[user] }

func mustCredential(t testing.TB, mech, pass string, iters int) Credential {
	t.Helper()
	c, err := NewCredential(mech, pass, nil, iters)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// withNonceSuffix fixes the server nonce suffix of a SCRAM session.
func withNonceSuffix(t testing.TB, s Session, suffix string) {
	t.Helper()
	ss, ok := s.(*scramSession)
	if !ok {
		t.Fatalf("session is %T, not a SCRAM session", s)
	}
	ss.nonceSuffix = func() string { return suffix }
}

// drive runs a franz-go client mechanism against a server session, the
// way the Kafka listener relays SaslAuthenticate bytes.
func drive(mech kfsasl.Mechanism, srv Session) error {
	cli, msg, err := mech.Authenticate(context.Background(), "controller:9093")
	if err != nil {
		return fmt.Errorf("client start: %w", err)
	}
	for round := 0; round < 5; round++ {
		reply, done, err := srv.Step(msg)
		if err != nil {
			return err
		}
		clientDone, next, cerr := cli.Challenge(reply)
		if cerr != nil {
			return fmt.Errorf("client rejected server reply: %v", cerr)
		}
		if done {
			if !clientDone {
				return errors.New("server done but client is not")
			}
			return nil
		}
		if clientDone {
			return errors.New("client done but server is not")
		}
		msg = next
	}
	return errors.New("exchange did not finish")
}

func testHash(mech string) func() hash.Hash {
	if mech == ScramSHA512 {
		return sha512.New
	}
	return sha256.New
}

func testHMAC(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// clientFinal computes a client-final message (RFC 5802 section 3)
// independently of the server code, for hand-built exchanges.
func clientFinal(t testing.TB, mech, pass, gs2, clientFirstBare, serverFirst string) string {
	t.Helper()
	nonce, _, _ := parseServerFirst(t, serverFirst)
	without := "c=" + base64.StdEncoding.EncodeToString([]byte(gs2)) + ",r=" + nonce
	proof, _ := proofAndSignature(t, mech, pass, serverFirst, clientFirstBare+","+serverFirst+","+without)
	return without + ",p=" + base64.StdEncoding.EncodeToString(proof)
}

func parseServerFirst(t testing.TB, serverFirst string) (nonce string, salt []byte, iters int) {
	t.Helper()
	for _, a := range strings.Split(serverFirst, ",") {
		switch {
		case strings.HasPrefix(a, "r="):
			nonce = a[2:]
		case strings.HasPrefix(a, "s="):
			var err error
			if salt, err = base64.StdEncoding.DecodeString(a[2:]); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(a, "i="):
			iters, _ = strconv.Atoi(a[2:])
		}
	}
	return nonce, salt, iters
}

// proofAndSignature computes, independently of the server code, the
// ClientProof a client holding pass sends for authMessage and the
// ServerSignature the server answers with.
func proofAndSignature(t testing.TB, mech, pass, serverFirst, authMessage string) (proof, serverSig []byte) {
	t.Helper()
	_, salt, iters := parseServerFirst(t, serverFirst)
	h := testHash(mech)
	salted, err := pbkdf2.Key(h, pass, salt, iters, h().Size())
	if err != nil {
		t.Fatal(err)
	}
	ck := testHMAC(h, salted, "Client Key")
	d := h()
	d.Write(ck)
	sk := d.Sum(nil)
	proof = testHMAC(h, sk, authMessage)
	for i := range proof {
		proof[i] ^= ck[i]
	}
	return proof, testHMAC(h, testHMAC(h, salted, "Server Key"), authMessage)
}
