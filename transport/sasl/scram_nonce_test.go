package sasl

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// librdkafkaFinal is the client-final message librdkafka sends: its
// client nonce, then the whole nonce of the server-first message (which
// starts with the client nonce already), and its proof over that.
func librdkafkaFinal(t *testing.T, mech, pass, gs2, cnonce, bare, serverFirst string) (msg string, serverSig []byte) {
	t.Helper()
	nonce, _, _ := parseServerFirst(t, serverFirst)
	without := "c=" + base64.StdEncoding.EncodeToString([]byte(gs2)) + ",r=" + cnonce + nonce
	proof, sig := proofAndSignature(t, mech, pass, serverFirst, bare+","+serverFirst+","+without)
	return without + ",p=" + base64.StdEncoding.EncodeToString(proof), sig
}

// TestScramClientNonceRepeated: a client-final message whose nonce is
// the server's with the client nonce once more in front (librdkafka's;
// Kafka accepts a final nonce that ends with the server's) logs in with
// the right password and answers the server signature the client
// expects; a wrong password, an unknown user, a channel binding that is
// not the first message's header and a proof of the wrong size are
// refused.
func TestScramClientNonceRepeated(t *testing.T) {
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		st := store{"alice": {mustCredential(t, mech, "secret", 4096)}}
		const cnonce = "Q-pEN9yG>SfJ;}ry|Gf22]~nY||u`VIQ"
		start := func(user, gs2 string) (*scramSession, string, string) {
			s, _ := NewSession(mech, false, st.lookup)
			bare := "n=" + user + ",r=" + cnonce
			out, _, err := s.Step([]byte(gs2 + bare))
			if err != nil {
				t.Fatal(err)
			}
			return s.(*scramSession), bare, string(out)
		}
		for _, gs2 := range []string{"n,,", "n,a=alice,"} {
			s, bare, sf := start("alice", gs2)
			fin, sig := librdkafkaFinal(t, mech, "secret", gs2, cnonce, bare, sf)
			out, done, err := s.Step([]byte(fin))
			if err != nil || !done || string(out) != "v="+base64.StdEncoding.EncodeToString(sig) || s.User() != "alice" {
				t.Fatalf("%s %q: out=%q done=%v user=%q err=%v", mech, gs2, out, done, s.User(), err)
			}
		}
		refusals := []struct {
			name, user, pass string
			edit             func(string) string
			want             error
		}{
			{"wrong password", "alice", "wrong", nil, ErrInvalidCredentials},
			{"unknown user", "ghost", "secret", nil, ErrInvalidCredentials},
			{"channel binding", "alice", "secret", func(m string) string { return strings.Replace(m, "c=biws", "c=eSws", 1) }, ErrMalformed},
			{"short proof", "alice", "secret", func(m string) string { return m[:strings.LastIndex(m, ",p=")] + ",p=AAAA" }, ErrMalformed},
			{"no proof", "alice", "secret", func(m string) string { return m[:strings.LastIndex(m, ",p=")] + ",x=y" }, ErrMalformed},
		}
		for _, r := range refusals {
			s, bare, sf := start(r.user, "n,,")
			fin, _ := librdkafkaFinal(t, mech, r.pass, "n,,", cnonce, bare, sf)
			if r.edit != nil {
				fin = r.edit(fin)
			}
			out, done, err := s.Step([]byte(fin))
			if !errors.Is(err, r.want) || done || out != nil || s.User() != "" {
				t.Fatalf("%s %s: out=%q done=%v user=%q err=%v, want %v", mech, r.name, out, done, s.User(), err, r.want)
			}
		}
	}
}
