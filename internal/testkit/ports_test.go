package testkit

import (
	"net"
	"testing"
)

func TestBindOutsideEphemeral(t *testing.T) {
	tried := 0
	ln := BindOutsideEphemeral(t, "127.0.0.1", func(addr string) (net.Listener, error) {
		tried++
		return net.Listen("tcp", addr)
	})
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	if port < 10000 || port >= ephemeralLow() {
		t.Fatalf("bound port %d, want one in [10000, %d)", port, ephemeralLow())
	}
	// A port already taken is passed over.
	ln2 := BindOutsideEphemeral(t, "127.0.0.1", func(addr string) (net.Listener, error) {
		if tried == 1 {
			tried++
			return net.Listen("tcp", ln.Addr().String())
		}
		return net.Listen("tcp", addr)
	})
	defer ln2.Close()
	if ln2.Addr().String() == ln.Addr().String() {
		t.Fatal("bound the same address twice")
	}
}
