package server

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// sendOversizedFrame opens a TCP connection to addr and announces a frame
// of size bytes: the server must close the connection without waiting for
// the frame's body.
func sendOversizedFrame(t *testing.T, addr string, size uint32) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], size)
	if _, err := c.Write(hdr[:]); err != nil {
		t.Fatal(err)
	}
	// The deadline only keeps a limit that does not work from hanging the
	// test: the server closes at once or waits for the body forever.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("%s: after announcing a %d-byte frame: read %d bytes, %v; want the connection closed", addr, size, n, err)
	}
}

// TestListenerLimits starts a node with both roles whose two Kafka
// listeners take frames of at most 1024 bytes: a connection announcing a
// larger frame is closed by each, and counted, while the broker still
// registers through the controller's listener and an admin client is
// still served.
func TestListenerLimits(t *testing.T) {
	cfg := oneNode(t)
	cfg.ListenerLimits = WireLimits{MaxFrameBytes: 1024, MaxInFlight: 2}
	cfg.BrokerListenerLimits = WireLimits{MaxFrameBytes: 1024}
	lis := cfg.Listener
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })

	sendOversizedFrame(t, lis, 4096)
	if got := s.Listener.WireLimits().FramesTooLarge; got != 1 {
		t.Fatalf("controller listener: FramesTooLarge = %d, want 1", got)
	}
	sendOversizedFrame(t, s.Agent.Addr(), 4096)
	if got := s.Agent.WireLimits().FramesTooLarge; got != 1 {
		t.Fatalf("broker listener: FramesTooLarge = %d, want 1", got)
	}

	createOnBroker(t, s, "small-frames")
	if got := s.Listener.WireLimits().FramesTooLarge + s.Agent.WireLimits().FramesTooLarge; got != 2 {
		t.Fatalf("FramesTooLarge = %d after ordinary traffic, want still 2", got)
	}
}

func TestValidateWireLimits(t *testing.T) {
	for _, tc := range []struct {
		field, msg string
		mod        func(*Config)
	}{
		{"ListenerLimits.MaxFrameBytes", "-1 is negative", func(c *Config) { c.ListenerLimits.MaxFrameBytes = -1 }},
		{"ListenerLimits.MaxFrameBytes", "100 is below 1024 bytes", func(c *Config) { c.ListenerLimits.MaxFrameBytes = 100 }},
		{"ListenerLimits.IdleTimeout", "-1s is negative", func(c *Config) { c.ListenerLimits.IdleTimeout = -time.Second }},
		{"BrokerListenerLimits.MaxInFlight", "1025 is above 1024", func(c *Config) { c.BrokerListenerLimits.MaxInFlight = 1025 }},
		{"BrokerListenerLimits.MaxConns", "-3 is negative", func(c *Config) { c.BrokerListenerLimits.MaxConns = -3 }},
		{"RaftHandshakeTimeout", "is negative", func(c *Config) { c.RaftHandshakeTimeout = -1 }},
		{"RaftMaxHandshakes", "is negative", func(c *Config) { c.RaftMaxHandshakes = -1 }},
	} {
		c := Config{NodeID: 1001, Voter: true, RaftAddr: "127.0.0.1:9093", Listener: "127.0.0.1:9092", DataDir: "/d",
			Voters: []VoterPeer{{1001, "127.0.0.1:9093", "127.0.0.1:9092"}}}
		tc.mod(&c)
		var fe *FieldError
		if err := c.Validate(); !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Msg, tc.msg) {
			t.Errorf("Validate() = %v, want a FieldError on %s saying %q", err, tc.field, tc.msg)
		}
	}
}
