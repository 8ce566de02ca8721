package broker_test

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// TestWireLimitsReachTheListener: Config.Wire sets the listener's limits,
// and the agent's handler stays in place: a frame above the configured
// size closes the connection, and clients are still served.
func TestWireLimitsReachTheListener(t *testing.T) {
	a := startAgent(t, broker.Config{BrokerID: 1, Wire: func(c *kafkawire.Config) {
		c.MaxFrameBytes = 1024
		c.Handler, c.APIs = nil, nil // the agent keeps its own
	}})
	c, err := net.Dial("tcp", a.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 4096)
	if _, err := c.Write(hdr[:]); err != nil {
		t.Fatal(err)
	}
	// The deadline only keeps a broken limit from hanging the test.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after a 4096-byte frame header on a 1024-byte listener: read %d bytes, %v; want the connection closed", n, err)
	}
	if got := a.WireLimits().FramesTooLarge; got != 1 {
		t.Fatalf("FramesTooLarge = %d, want 1", got)
	}
	clientMetadata(t, a.Addr()) // fails the test if the agent does not answer
}
