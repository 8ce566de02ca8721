package sasl

import (
	"bytes"
	"errors"
	"testing"
)

func FuzzScramServer(f *testing.F) {
	st := rfcStore(f)
	c512, err := NewCredential(ScramSHA512, "pencil", st["user"][0].Salt, 4096)
	if err != nil {
		f.Fatal(err)
	}
	st["user"] = append(st["user"], c512)

	f.Add([]byte(rfcClientFirst), []byte(rfcClientFinal))
	f.Add([]byte("y,a=user,n=user,r=abc,tokenauth=true"), []byte("c=eSxhPXVzZXIs,r=abc"+rfcSuffix+",p=AAAA"))
	f.Add([]byte("n,,n=us=2Cer,r=x"), []byte("c=biws,r=x"+rfcSuffix+",ext=1,p="))
	f.Add([]byte("p=tls-unique,,n=user,r=abc"), []byte(""))
	f.Add([]byte("n,,n=ghost,r=abc"), []byte("c=biws,r=abc"+rfcSuffix+",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	f.Add([]byte(""), []byte(",p=,p=,"))

	f.Fuzz(func(t *testing.T, first, final []byte) {
		for _, mech := range []string{ScramSHA256, ScramSHA512} {
			s, err := NewSession(mech, false, st.lookup)
			if err != nil {
				t.Fatal(err)
			}
			withNonceSuffix(t, s, rfcSuffix)
			out, done, err := s.Step(first)
			if done {
				t.Fatal("done after client-first")
			}
			if err != nil {
				if out != nil {
					t.Fatalf("reply %q with error %v", out, err)
				}
				if _, _, err := s.Step(final); !errors.Is(err, ErrExchangeFinished) {
					t.Fatalf("Step after failure: %v", err)
				}
				continue
			}
			if !bytes.HasPrefix(out, []byte("r=")) {
				t.Fatalf("server-first %q", out)
			}
			out, done, err = s.Step(final)
			switch {
			case err != nil:
				if out != nil || done || s.User() != "" {
					t.Fatalf("failure with out=%q done=%v user=%q", out, done, s.User())
				}
			case !done || !bytes.HasPrefix(out, []byte("v=")):
				t.Fatalf("success with out=%q done=%v", out, done)
			case s.User() != "user":
				t.Fatalf("authenticated as %q", s.User())
			}
			if _, _, err := s.Step(final); !errors.Is(err, ErrExchangeFinished) {
				t.Fatalf("third Step: %v", err)
			}
		}
	})
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
