package sasl

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl/plain"
)

func TestPlainRequiresTLS(t *testing.T) {
	s, err := NewSession(Plain, false, store{}.lookup)
	if !errors.Is(err, ErrPlainRequiresTLS) || s != nil {
		t.Fatalf("session=%v err=%v", s, err)
	}
	if _, err := NewSession(Plain, true, store{}.lookup); err != nil {
		t.Fatal(err)
	}
}

func TestFranzPlain(t *testing.T) {
	st := store{
		"alice":   {mustCredential(t, ScramSHA256, "secret", 4096)},
		"bob":     {mustCredential(t, ScramSHA512, "hunter2", 8192)},
		"carol":   {mustCredential(t, ScramSHA256, "old", 4096), mustCredential(t, ScramSHA512, "new", 4096)},
		"broken":  {{Mechanism: ScramSHA256, Iterations: 4096}},
		"nocreds": {},
	}
	tests := []struct {
		name     string
		auth     plain.Auth
		wantErr  error
		wantUser string
	}{
		{name: "sha256 verifier", auth: plain.Auth{User: "alice", Pass: "secret"}, wantUser: "alice"},
		{name: "sha512 verifier", auth: plain.Auth{User: "bob", Pass: "hunter2"}, wantUser: "bob"},
		{name: "first of several verifiers", auth: plain.Auth{User: "carol", Pass: "old"}, wantUser: "carol"},
		{name: "second of several verifiers", auth: plain.Auth{User: "carol", Pass: "new"}, wantUser: "carol"},
		{name: "authzid equal to authcid", auth: plain.Auth{Zid: "alice", User: "alice", Pass: "secret"}, wantUser: "alice"},
		{name: "wrong password", auth: plain.Auth{User: "alice", Pass: "secreT"}, wantErr: ErrInvalidCredentials},
		{name: "password of another user", auth: plain.Auth{User: "alice", Pass: "hunter2"}, wantErr: ErrInvalidCredentials},
		{name: "unknown user", auth: plain.Auth{User: "mallory", Pass: "secret"}, wantErr: ErrInvalidCredentials},
		{name: "user without verifiers", auth: plain.Auth{User: "nocreds", Pass: "secret"}, wantErr: ErrInvalidCredentials},
		{name: "unusable verifier", auth: plain.Auth{User: "broken", Pass: "secret"}, wantErr: ErrInvalidCredentials},
		{name: "authzid differs", auth: plain.Auth{Zid: "admin", User: "alice", Pass: "secret"}, wantErr: ErrAuthorizationID},
	}
	var wrongPass, unknown string
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSession(Plain, true, st.lookup)
			if err != nil {
				t.Fatal(err)
			}
			err = drive(tc.auth.AsMechanism(), s)
			switch tc.name {
			case "wrong password":
				wrongPass = err.Error()
			case "unknown user":
				unknown = err.Error()
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if s.User() != "" {
					t.Fatalf("User after failure = %q", s.User())
				}
			} else if err != nil {
				t.Fatal(err)
			} else if s.User() != tc.wantUser {
				t.Fatalf("User = %q, want %q", s.User(), tc.wantUser)
			}
			if _, _, err := s.Step([]byte("\x00alice\x00secret")); !errors.Is(err, ErrExchangeFinished) {
				t.Fatalf("Step after end: %v", err)
			}
		})
	}
	if wrongPass == "" || wrongPass != unknown {
		t.Fatalf("wrong password error %q, unknown user error %q", wrongPass, unknown)
	}
}

func TestPlainMalformed(t *testing.T) {
	st := store{"alice": {mustCredential(t, ScramSHA256, "secret", 4096)}}
	tests := []struct {
		name string
		msg  string
		want error
	}{
		{"empty", "", ErrMalformed},
		{"one field", "alice", ErrMalformed},
		{"two fields", "alice\x00secret", ErrMalformed},
		{"four fields", "\x00alice\x00sec\x00ret", ErrMalformed},
		{"empty authcid", "\x00\x00secret", ErrMalformed},
		{"empty password", "\x00alice\x00", ErrMalformed},
		{"invalid utf8", "\x00alice\x00sec\xffret", ErrMalformed},
		{"oversized", "\x00alice\x00" + strings.Repeat("p", MaxMessageSize), ErrMalformed},
		{"authzid differs", "bob\x00alice\x00secret", ErrAuthorizationID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := NewSession(Plain, true, st.lookup)
			out, done, err := s.Step([]byte(tc.msg))
			if !errors.Is(err, tc.want) || done || out != nil {
				t.Fatalf("out=%q done=%v err=%v, want %v", out, done, err, tc.want)
			}
			if _, _, err := s.Step([]byte("\x00alice\x00secret")); !errors.Is(err, ErrExchangeFinished) {
				t.Fatalf("Step after failure: %v", err)
			}
		})
	}
}
