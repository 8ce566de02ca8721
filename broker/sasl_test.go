package broker

import (
	"errors"
	"testing"

	"github.com/ctrlquorum/ctrlquorum/transport/sasl"
)

// TestClientUser: the user name a login is for is read from the first
// client message as the voter reads it (SCRAM's escapes undone, PLAIN's
// authcid), and a message without one is refused as malformed.
func TestClientUser(t *testing.T) {
	ok := []struct{ mech, msg, user string }{
		{sasl.ScramSHA512, "n,,n=admin,r=abc", "admin"},
		{sasl.ScramSHA256, "n,a=al=2Cice,n=al=2Cice,r=abc,ext=1", "al,ice"},
		{sasl.ScramSHA256, "y,,n=a=3Db,r=abc", "a=b"},
		{sasl.Plain, "\x00bob\x00secret", "bob"},
		{sasl.Plain, "bob\x00bob\x00secret", "bob"},
	}
	for _, c := range ok {
		if got, err := clientUser(c.mech, []byte(c.msg)); err != nil || got != c.user {
			t.Errorf("clientUser(%s, %q) = %q, %v; want %q", c.mech, c.msg, got, err, c.user)
		}
	}
	bad := []struct{ mech, msg string }{
		{sasl.ScramSHA512, ""},
		{sasl.ScramSHA512, "n,,r=abc"},
		{sasl.ScramSHA512, "n,,n=,r=abc"},
		{sasl.ScramSHA512, "n,,x=admin,r=abc"},
		{sasl.Plain, "bob\x00secret"},
		{sasl.Plain, "\x00\x00secret"},
	}
	for _, c := range bad {
		if got, err := clientUser(c.mech, []byte(c.msg)); !errors.Is(err, sasl.ErrMalformed) {
			t.Errorf("clientUser(%s, %q) = %q, %v; want a malformed-message error", c.mech, c.msg, got, err)
		}
	}
}
