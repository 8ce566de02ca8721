package server

import (
	"context"
	"net"
	"testing"
	"time"
)

// A node's own connections leave from its own address, so that a peer —
// and a firewall rule in the partition tests — sees which node it is.
func TestLocalDialerBindsTheNodeAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.5:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Voter: true, RaftAddr: "127.0.0.2:9093", BrokerListener: "127.0.0.9:9092"}, "127.0.0.2"},
		{Config{Broker: true, BrokerListener: "127.0.0.3:9092"}, "127.0.0.3"},
		{Config{Voter: true, RaftAddr: "0.0.0.0:9093"}, "127.0.0.1"}, // wildcard: the kernel picks
	} {
		d := (&Server{cfg: tc.cfg}).localDialer()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		ac, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		got := ac.RemoteAddr().(*net.TCPAddr).IP.String()
		c.Close()
		ac.Close()
		if got != tc.want && !(tc.want == "127.0.0.1" && net.ParseIP(got).IsLoopback()) {
			t.Errorf("%+v: connection from %s, want %s", tc.cfg, got, tc.want)
		}
	}
}
