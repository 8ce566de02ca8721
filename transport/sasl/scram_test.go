package sasl

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// RFC 7677 section 3 test vector.
const (
	rfcClientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
	rfcSuffix      = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	rfcServerFirst = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	rfcClientFinal = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
	rfcServerFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
	rfcSalt        = "W22ZaJ0SNY7soEsUEjb6gQ=="
)

func rfcStore(t testing.TB) store {
	salt, err := base64.StdEncoding.DecodeString(rfcSalt)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCredential(ScramSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	return store{"user": {c}}
}

func TestRFC7677Vector(t *testing.T) {
	s, err := NewSession(ScramSHA256, false, rfcStore(t).lookup)
	if err != nil {
		t.Fatal(err)
	}
	withNonceSuffix(t, s, rfcSuffix)
	out, done, err := s.Step([]byte(rfcClientFirst))
	if err != nil || done {
		t.Fatalf("client-first: done=%v err=%v", done, err)
	}
	if string(out) != rfcServerFirst {
		t.Fatalf("server-first\n got %s\nwant %s", out, rfcServerFirst)
	}
	if s.User() != "" {
		t.Fatalf("User before done = %q", s.User())
	}
	out, done, err = s.Step([]byte(rfcClientFinal))
	if err != nil || !done {
		t.Fatalf("client-final: done=%v err=%v", done, err)
	}
	if string(out) != rfcServerFinal {
		t.Fatalf("server-final\n got %s\nwant %s", out, rfcServerFinal)
	}
	if s.User() != "user" {
		t.Fatalf("User = %q", s.User())
	}
	if _, _, err := s.Step([]byte(rfcClientFinal)); !errors.Is(err, ErrExchangeFinished) {
		t.Fatalf("Step after done: %v", err)
	}
}

func TestRFC7677WrongPassword(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString(rfcSalt)
	c, err := NewCredential(ScramSHA256, "pencil2", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := NewSession(ScramSHA256, false, store{"user": {c}}.lookup)
	withNonceSuffix(t, s, rfcSuffix)
	if _, _, err := s.Step([]byte(rfcClientFirst)); err != nil {
		t.Fatal(err)
	}
	out, done, err := s.Step([]byte(rfcClientFinal))
	if !errors.Is(err, ErrInvalidCredentials) || done || out != nil {
		t.Fatalf("out=%q done=%v err=%v", out, done, err)
	}
	if s.User() != "" {
		t.Fatalf("User after failure = %q", s.User())
	}
	if _, _, err := s.Step([]byte(rfcClientFinal)); !errors.Is(err, ErrExchangeFinished) {
		t.Fatalf("Step after failure: %v", err)
	}
}

func TestFranzScram(t *testing.T) {
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		other := ScramSHA512
		if mech == ScramSHA512 {
			other = ScramSHA256
		}
		st := store{
			"alice":      {mustCredential(t, mech, "secret", 4096)},
			"odd,na=me":  {mustCredential(t, mech, "p=,w", 8192)},
			"bob":        {mustCredential(t, other, "secret", 4096)},
			"max":        {mustCredential(t, mech, "secret", MaxIterations)},
			"rotated":    {mustCredential(t, other, "new", 4096), mustCredential(t, mech, "old", 4096), mustCredential(t, mech, "new", 4096)},
			"tokenowner": {mustCredential(t, mech, "tok", 4096)},
		}
		tests := []struct {
			name       string
			auth       scram.Auth
			wantErr    error
			wantUser   string
			compareErr bool
		}{
			{name: "success", auth: scram.Auth{User: "alice", Pass: "secret"}, wantUser: "alice"},
			{name: "escaped user name", auth: scram.Auth{User: "odd,na=me", Pass: "p=,w"}, wantUser: "odd,na=me"},
			{name: "max iterations", auth: scram.Auth{User: "max", Pass: "secret"}, wantUser: "max"},
			{name: "authzid equal to user", auth: scram.Auth{Zid: "alice", User: "alice", Pass: "secret"}, wantUser: "alice"},
			{name: "token extension ignored", auth: scram.Auth{User: "tokenowner", Pass: "tok", IsToken: true}, wantUser: "tokenowner"},
			{name: "wrong password", auth: scram.Auth{User: "alice", Pass: "Secret"}, wantErr: ErrInvalidCredentials},
			{name: "unknown user", auth: scram.Auth{User: "mallory", Pass: "secret"}, wantErr: ErrInvalidCredentials},
			{name: "verifier for other mechanism only", auth: scram.Auth{User: "bob", Pass: "secret"}, wantErr: ErrInvalidCredentials},
			{name: "first verifier of mechanism is used", auth: scram.Auth{User: "rotated", Pass: "old"}, wantUser: "rotated"},
			{name: "authzid differs", auth: scram.Auth{Zid: "admin", User: "alice", Pass: "secret"}, wantErr: ErrAuthorizationID},
		}
		for _, tc := range tests {
			t.Run(mech+"/"+tc.name, func(t *testing.T) {
				m := tc.auth.AsSha256Mechanism()
				if mech == ScramSHA512 {
					m = tc.auth.AsSha512Mechanism()
				}
				s, err := NewSession(mech, false, st.lookup)
				if err != nil {
					t.Fatal(err)
				}
				err = drive(m, s)
				if tc.wantErr != nil {
					if !errors.Is(err, tc.wantErr) {
						t.Fatalf("err = %v, want %v", err, tc.wantErr)
					}
					if s.User() != "" {
						t.Fatalf("User after failure = %q", s.User())
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if s.User() != tc.wantUser {
					t.Fatalf("User = %q, want %q", s.User(), tc.wantUser)
				}
			})
		}
	}
}

// An unknown user and a wrong password must fail identically: same
// error text, and only at the final message.
func TestScramUnknownUserIndistinguishable(t *testing.T) {
	st := store{"alice": {mustCredential(t, ScramSHA512, "secret", 4096)}}
	run := func(user, pass string) (serverFirst string, err error) {
		s, _ := NewSession(ScramSHA512, true, st.lookup)
		bare := "n=" + user + ",r=abcdefghijkl"
		out, _, err := s.Step([]byte("n,," + bare))
		if err != nil {
			t.Fatalf("client-first for %q failed: %v", user, err)
		}
		_, _, err = s.Step([]byte(clientFinal(t, ScramSHA512, pass, "n,,", bare, string(out))))
		return string(out), err
	}
	_, wrongPass := run("alice", "nope")
	sf1, unknown := run("mallory", "secret")
	sf2, _ := run("mallory", "other")
	sf3, _ := run("trudy", "secret")
	if wrongPass == nil || unknown == nil || wrongPass.Error() != unknown.Error() {
		t.Fatalf("wrong password: %v; unknown user: %v", wrongPass, unknown)
	}
	if wrongPass.Error() != "authentication failed: invalid credentials" {
		t.Fatalf("error text %q", wrongPass)
	}
	// The fake salt is stable per user, differs between users and looks
	// like a real one (32 bytes, default iterations).
	salt := func(sf string) string { return strings.Split(sf, ",")[1] }
	if salt(sf1) != salt(sf2) || salt(sf1) == salt(sf3) {
		t.Fatalf("fake salts: %s %s %s", sf1, sf2, sf3)
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(salt(sf1), "s="))
	if err != nil || len(b) != DefaultSaltSize || !strings.HasSuffix(sf1, ",i=4096") {
		t.Fatalf("fake server-first %s", sf1)
	}
}

// Even a proof that matches the made-up verifier of an unknown user must
// not authenticate.
func TestScramFakeVerifierNeverMatches(t *testing.T) {
	s, _ := NewSession(ScramSHA256, true, store{}.lookup)
	ss := s.(*scramSession)
	// Make up keys whose password is known: only the unknown-user flag
	// can still reject the proof.
	c := mustCredential(t, ScramSHA256, "known", 4096)
	ss.fakeCredential = func(string, string) Credential { return c }
	bare := "n=ghost,r=nonce"
	out, _, err := s.Step([]byte("n,," + bare))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Step([]byte(clientFinal(t, ScramSHA256, "known", "n,,", bare, string(out))))
	if !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("err = %v", err)
	}
	if !ss.conv.Valid() {
		t.Fatal("xdg-go refused the proof: the unknown-user flag was not what rejected it")
	}
}

func TestScramGS2FlagY(t *testing.T) {
	st := store{"alice": {mustCredential(t, ScramSHA256, "secret", 4096)}}
	for _, gs2 := range []string{"y,,", "n,a=alice,", "y,a=alice,"} {
		s, _ := NewSession(ScramSHA256, false, st.lookup)
		bare := "n=alice,r=0123456789"
		out, _, err := s.Step([]byte(gs2 + bare))
		if err != nil {
			t.Fatalf("%s: %v", gs2, err)
		}
		fin, done, err := s.Step([]byte(clientFinal(t, ScramSHA256, "secret", gs2, bare, string(out))))
		if err != nil || !done || !bytes.HasPrefix(fin, []byte("v=")) {
			t.Fatalf("%s: fin=%q done=%v err=%v", gs2, fin, done, err)
		}
	}
}

func TestScramNonceMismatch(t *testing.T) {
	st := store{"alice": {mustCredential(t, ScramSHA256, "secret", 4096)}}
	for _, tamper := range []func(nonce string) string{
		func(n string) string { return n[:len(n)-1] },                 // truncated
		func(n string) string { return n + "x" },                      // extended
		func(n string) string { return "X" + n[1:] },                  // client part changed
		func(n string) string { return strings.SplitN(n, "Z", 2)[0] }, // client nonce only
	} {
		s, _ := NewSession(ScramSHA256, false, st.lookup)
		withNonceSuffix(t, s, "Zsuffix")
		bare := "n=alice,r=clientnonce"
		out, _, err := s.Step([]byte("n,," + bare))
		if err != nil {
			t.Fatal(err)
		}
		sf := string(out)
		nonce := strings.TrimPrefix(strings.Split(sf, ",")[0], "r=")
		tampered := strings.Replace(sf, "r="+nonce, "r="+tamper(nonce), 1)
		// The proof is computed over the tampered nonce, so only the nonce
		// check can reject it.
		fin := clientFinal(t, ScramSHA256, "secret", "n,,", bare, tampered)
		_, done, err := s.Step([]byte(fin))
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "nonce") || done {
			t.Fatalf("nonce %q: done=%v err=%v", tamper(nonce), done, err)
		}
	}
}

func TestScramMalformedFirst(t *testing.T) {
	st := store{"alice": {mustCredential(t, ScramSHA256, "secret", 4096)}}
	tests := []struct {
		name string
		msg  string
		want error
	}{
		{"empty", "", ErrMalformed},
		{"channel binding required", "p=tls-unique,,n=alice,r=abc", ErrChannelBinding},
		{"bad gs2 flag", "x,,n=alice,r=abc", ErrMalformed},
		{"flag without comma", "n", ErrMalformed},
		{"gs2 header incomplete", "n,a=alice", ErrMalformed},
		{"bad gs2 attribute", "n,b=alice,n=alice,r=abc", ErrMalformed},
		{"empty authzid", "n,a=,n=alice,r=abc", ErrMalformed},
		{"no user", "n,,r=abc", ErrMalformed},
		{"empty user", "n,,n=,r=abc", ErrMalformed},
		{"bad escape", "n,,n=al=2Bice,r=abc", ErrMalformed},
		{"truncated escape", "n,,n=alice=2,r=abc", ErrMalformed},
		{"invalid utf8 user", "n,,n=al\xffice,r=abc", ErrMalformed},
		{"nul in user", "n,,n=al\x00ice,r=abc", ErrMalformed},
		{"no nonce", "n,,n=alice", ErrMalformed},
		{"empty nonce", "n,,n=alice,r=", ErrMalformed},
		{"nonce not printable", "n,,n=alice,r=ab c", ErrMalformed},
		{"nonce wrong attribute", "n,,n=alice,s=abc", ErrMalformed},
		{"mandatory extension", "n,,m=x,n=alice,r=abc", ErrMalformed},
		{"bad extension", "n,,n=alice,r=abc,=x", ErrMalformed},
		{"extension without value", "n,,n=alice,r=abc,tokenauth", ErrMalformed},
		{"extension non-alpha name", "n,,n=alice,r=abc,t0k=1", ErrMalformed},
		{"trailing comma", "n,,n=alice,r=abc,", ErrMalformed},
		{"authzid differs", "n,a=bob,n=alice,r=abc", ErrAuthorizationID},
		{"oversized", "n,,n=alice,r=abc,x=" + strings.Repeat("a", MaxMessageSize), ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := NewSession(ScramSHA256, false, st.lookup)
			out, done, err := s.Step([]byte(tc.msg))
			if !errors.Is(err, tc.want) || done || out != nil {
				t.Fatalf("out=%q done=%v err=%v, want %v", out, done, err, tc.want)
			}
			if _, _, err := s.Step([]byte("c=biws,r=abc,p=AAAA")); !errors.Is(err, ErrExchangeFinished) {
				t.Fatalf("Step after failure: %v", err)
			}
		})
	}
	// Well-formed variants that must be accepted.
	for _, msg := range []string{
		"n,,n=alice,r=abc,tokenauth=true",
		"n,,n=alice,r=abc,ext=,other=x=y",
		"n,,n=al=3Dice,r=abc",
		"y,,n=alice,r=!\"#$%&'()*+-./:;<>?@[]^_`{|}~",
	} {
		s, _ := NewSession(ScramSHA512, false, st.lookup)
		if _, _, err := s.Step([]byte(msg)); err != nil {
			t.Errorf("%q: %v", msg, err)
		}
	}
}

func TestScramMalformedFinal(t *testing.T) {
	st := store{"alice": {mustCredential(t, ScramSHA256, "secret", 4096)}}
	const nonce = "abcSUF"
	good := "c=biws,r=" + nonce
	tests := []struct {
		name string
		msg  string
		want error
	}{
		{"empty", "", ErrMalformed},
		{"no proof", good, ErrMalformed},
		{"proof not last", good + ",p=AAAA,x=y", ErrMalformed},
		{"no channel binding", "r=" + nonce + ",p=AAAA", ErrMalformed},
		{"channel binding not base64", "c=!!,r=" + nonce + ",p=AAAA", ErrMalformed},
		{"channel binding mismatch", "c=eSws,r=" + nonce + ",p=AAAA", ErrMalformed},
		{"no nonce", "c=biws,p=AAAA", ErrMalformed},
		{"nonce mismatch", "c=biws,r=abc,p=AAAA", ErrMalformed},
		{"bad extension", good + ",1=2,p=AAAA", ErrMalformed},
		{"proof not base64", good + ",p=***", ErrMalformed},
		{"proof wrong length", good + ",p=AAAA", ErrMalformed},
		{"proof empty", good + ",p=", ErrMalformed},
		{"oversized", good + ",x=" + strings.Repeat("a", MaxMessageSize) + ",p=AAAA", ErrMalformed},
		{"wrong proof", good + ",p=" + base64.StdEncoding.EncodeToString(make([]byte, 32)), ErrInvalidCredentials},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := NewSession(ScramSHA256, false, st.lookup)
			withNonceSuffix(t, s, "SUF")
			if _, _, err := s.Step([]byte("n,,n=alice,r=abc")); err != nil {
				t.Fatal(err)
			}
			out, done, err := s.Step([]byte(tc.msg))
			if !errors.Is(err, tc.want) || done || out != nil {
				t.Fatalf("out=%q done=%v err=%v, want %v", out, done, err, tc.want)
			}
			if s.User() != "" {
				t.Fatalf("User = %q", s.User())
			}
		})
	}
}

func TestScramIgnoresInvalidStoredCredentials(t *testing.T) {
	good := mustCredential(t, ScramSHA256, "secret", 4096)
	low := good
	low.Iterations = 1024
	high := good
	high.Iterations = MaxIterations + 1
	short := good
	short.StoredKey = short.StoredKey[:16]
	for name, c := range map[string]Credential{"low iterations": low, "high iterations": high, "short key": short} {
		s, _ := NewSession(ScramSHA256, false, store{"alice": {c}}.lookup)
		bare := "n=alice,r=abc"
		out, _, err := s.Step([]byte("n,," + bare))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.HasSuffix(string(out), ",i=1024") {
			t.Fatalf("%s: invalid credential was offered: %s", name, out)
		}
		if _, _, err := s.Step([]byte(clientFinal(t, ScramSHA256, "secret", "n,,", bare, string(out)))); !errors.Is(err, ErrInvalidCredentials) {
			t.Fatalf("%s: err = %v", name, err)
		}
	}
}
