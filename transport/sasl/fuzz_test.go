package sasl

import (
	"bytes"
	"encoding/base64"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/xdg-go/scram"
)

// FuzzScramServer drives the SCRAM server of both mechanisms two ways.
//
// With arbitrary client-first and client-final messages (first, final),
// Step never panics, refuses with one of this package's errors in a short
// UTF-8 message, and authenticates only with the proof a holder of the
// password computes over that very exchange, answering with the matching
// server signature (both computed here independently of the server).
//
// With a real client, xdg-go's, whose nonce is fuzzed: with the right
// password it logs in whenever the nonce is one RFC 5802 allows (and
// verifies the server's signature), and never otherwise; with a wrong
// password, or as an unknown user, it never logs in, and the first message
// is answered alike and the last refused as ErrInvalidCredentials.
func FuzzScramServer(f *testing.F) {
	st := rfcStore(f)
	c512, err := NewCredential(ScramSHA512, "pencil", st["user"][0].Salt, 4096)
	if err != nil {
		f.Fatal(err)
	}
	st["user"] = append(st["user"], c512)

	mechs := []string{ScramSHA256, ScramSHA512}
	logins := []scramLogin{{user: "user", pass: "pencil", ok: true}, {user: "user", pass: "pencil2"}, {user: "ghost", pass: "pencil"}}
	// One client per login keeps its derived keys: PBKDF2 runs once.
	clients := map[string][]*scram.Client{}
	for _, mech := range mechs {
		for _, l := range logins {
			c, err := hashGen(mech).NewClientUnprepped(l.user, l.pass, "")
			if err != nil {
				f.Fatal(err)
			}
			clients[mech] = append(clients[mech], c)
		}
	}

	f.Add([]byte(rfcClientFirst), []byte(rfcClientFinal), "rOprNGfwEbeRWgbNEkqO")
	f.Add([]byte("y,a=user,n=user,r=abc,tokenauth=true"), []byte("c=eSxhPXVzZXIs,r=abc"+rfcSuffix+",p=AAAA"), "")
	f.Add([]byte("n,,n=us=2Cer,r=x"), []byte("c=biws,r=x"+rfcSuffix+",ext=1,p="), "x,tokenauth=true")
	f.Add([]byte("p=tls-unique,,n=user,r=abc"), []byte(""), "a b")
	f.Add([]byte("n,,n=ghost,r=abc"), []byte("c=biws,r=abc"+rfcSuffix+",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="), ",")
	f.Add([]byte(""), []byte(",p=,p=,"), "\x00\xff")

	f.Fuzz(func(t *testing.T, first, final []byte, nonce string) {
		for _, mech := range mechs {
			scramArbitrary(t, st.lookup, mech, first, final)
			for i, l := range logins {
				scramRealClient(t, st.lookup, mech, clients[mech][i], l, nonce)
			}
		}
	})
}

type scramLogin struct {
	user, pass string
	ok         bool // the password is user's
}

func scramArbitrary(t *testing.T, lookup Lookup, mech string, first, final []byte) {
	s, err := NewSession(mech, false, lookup)
	if err != nil {
		t.Fatal(err)
	}
	withNonceSuffix(t, s, rfcSuffix)
	serverFirst, done, err := s.Step(first)
	if done {
		t.Fatal("done after client-first")
	}
	if err != nil {
		checkRefusal(t, err)
		if serverFirst != nil {
			t.Fatalf("reply %q with error %v", serverFirst, err)
		}
		if _, _, err := s.Step(final); !errors.Is(err, ErrExchangeFinished) {
			t.Fatalf("Step after failure: %v", err)
		}
		return
	}
	if !bytes.HasPrefix(serverFirst, []byte("r=")) {
		t.Fatalf("server-first %q", serverFirst)
	}
	out, done, err := s.Step(final)
	switch {
	case err != nil:
		checkRefusal(t, err)
		if out != nil || done || s.User() != "" {
			t.Fatalf("failure with out=%q done=%v user=%q", out, done, s.User())
		}
	case !done || !bytes.HasPrefix(out, []byte("v=")):
		t.Fatalf("success with out=%q done=%v", out, done)
	case s.User() != "user":
		t.Fatalf("authenticated as %q", s.User())
	default:
		// The proof must be the one "pencil" gives over this exchange:
		// client-first without the gs2 header (which ends at the second
		// comma), server-first, client-final without the proof.
		i := bytes.IndexByte(first, ',')
		j := i + 1 + bytes.IndexByte(first[i+1:], ',')
		p := bytes.LastIndex(final, []byte(",p="))
		if i < 0 || j <= i || p < 0 {
			t.Fatalf("authenticated without a gs2 header or a proof: %q %q", first, final)
		}
		authMessage := string(first[j+1:]) + "," + string(serverFirst) + "," + string(final[:p])
		proof, sig := proofAndSignature(t, mech, "pencil", string(serverFirst), authMessage)
		sent, err := base64.StdEncoding.DecodeString(string(final[p+3:]))
		if err != nil || !bytes.Equal(sent, proof) {
			t.Fatalf("authenticated with a proof no holder of the password computed: %q %q", first, final)
		}
		if string(out) != "v="+base64.StdEncoding.EncodeToString(sig) {
			t.Fatalf("server-final %q, want the signature of %q", out, authMessage)
		}
	}
	if _, _, err := s.Step(final); !errors.Is(err, ErrExchangeFinished) {
		t.Fatalf("third Step: %v", err)
	}
}

func scramRealClient(t *testing.T, lookup Lookup, mech string, cl *scram.Client, l scramLogin, nonce string) {
	allowed := nonce != ""
	for i := 0; i < len(nonce); i++ {
		if c := nonce[i]; c < 0x21 || c > 0x7e || c == ',' {
			allowed = false
		}
	}
	s, err := NewSession(mech, false, lookup)
	if err != nil {
		t.Fatal(err)
	}
	conv := cl.WithNonceGenerator(func() string { return nonce }).NewConversation()
	clientFirst, err := conv.Step("")
	if err != nil {
		t.Fatalf("client-first: %v", err)
	}
	serverFirst, _, err := s.Step([]byte(clientFirst))
	if err != nil {
		checkRefusal(t, err)
		if allowed {
			t.Fatalf("%s %+v: client-first %q refused: %v", mech, l, clientFirst, err)
		}
		return
	}
	clientFinal, err := conv.Step(string(serverFirst))
	if err != nil {
		if allowed {
			t.Fatalf("%s %+v: xdg-go's client refused server-first %q: %v", mech, l, serverFirst, err)
		}
		return
	}
	serverFinal, done, err := s.Step([]byte(clientFinal))
	switch {
	case l.ok && allowed:
		if err != nil || !done || s.User() != l.user {
			t.Fatalf("%s %+v, nonce %q: done=%v user=%q err=%v", mech, l, nonce, done, s.User(), err)
		}
		if _, err := conv.Step(string(serverFinal)); err != nil || !conv.Valid() {
			t.Fatalf("%s: xdg-go's client refused server-final %q: %v", mech, serverFinal, err)
		}
	case err == nil || done || s.User() != "":
		t.Fatalf("%s %+v, nonce %q: logged in (done=%v user=%q err=%v)", mech, l, nonce, done, s.User(), err)
	case allowed && !errors.Is(err, ErrInvalidCredentials):
		t.Fatalf("%s %+v: %v, want %v", mech, l, err, ErrInvalidCredentials)
	default:
		checkRefusal(t, err)
	}
}

// checkRefusal requires an error the listener can send as it is: one of
// this package's, in a short UTF-8 message.
func checkRefusal(t *testing.T, err error) {
	t.Helper()
	known := false
	for _, e := range []error{ErrMalformed, ErrInvalidCredentials, ErrChannelBinding, ErrAuthorizationID} {
		known = known || errors.Is(err, e)
	}
	if msg := err.Error(); !known || len(msg) > 256 || !utf8.ValidString(msg) {
		t.Fatalf("refusal %q (%T)", msg, err)
	}
}

func FuzzPlainServer(f *testing.F) {
	st := rfcStore(f)
	f.Add([]byte("\x00user\x00pencil"))
	f.Add([]byte("user\x00user\x00pencil"))
	f.Add([]byte("\x00\x00"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		s, _ := NewSession(Plain, true, st.lookup)
		out, done, err := s.Step(msg)
		if out != nil || (err == nil) != done {
			t.Fatalf("out=%q done=%v err=%v", out, done, err)
		}
		if done && s.User() != "user" {
			t.Fatalf("authenticated as %q", s.User())
		}
	})
}
