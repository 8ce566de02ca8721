package server

import (
	"time"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// WireLimits are the limits of one Kafka-protocol listener's wire server;
// each is documented at the kafkawire.Config field of the same name. A
// zero field keeps kafkawire's default. A limit added to kafkawire.Config
// is a field here, a line in apply and one in validate.
type WireLimits struct {
	MaxFrameBytes int32
	IdleTimeout   time.Duration
	ReadTimeout   time.Duration
	WriteTimeout  time.Duration
	MaxConns      int
	MaxInFlight   int
	// MaxQueuedBytes and MaxUnauthenticatedFrameBytes bound what hostile
	// or broken clients can make a listener hold in memory.
	MaxQueuedBytes               int64
	MaxUnauthenticatedFrameBytes int32
}

// apply copies the limits into a wire server's configuration; it is the
// Wire hook of listener.Config and broker.Config.
func (l WireLimits) apply(c *kafkawire.Config) {
	c.MaxFrameBytes = l.MaxFrameBytes
	c.IdleTimeout = l.IdleTimeout
	c.ReadTimeout = l.ReadTimeout
	c.WriteTimeout = l.WriteTimeout
	c.MaxConns = l.MaxConns
	c.MaxInFlight = l.MaxInFlight
	c.MaxQueuedBytes = l.MaxQueuedBytes
	c.MaxUnauthenticatedFrameBytes = l.MaxUnauthenticatedFrameBytes
}

const (
	// MinFrameBytes is the smallest MaxFrameBytes accepted: below it the
	// ordinary requests of Kafka clients (a Metadata request naming a few
	// topics, a small CreateTopics) would close their connections.
	MinFrameBytes = 1024
	// MaxInFlightLimit is the largest MaxInFlight accepted: each
	// connection sets aside a queue of that many frames when it opens, so
	// a huge value would cost memory per connection before any request.
	MaxInFlightLimit = 1024
)

// validate reports the first limit out of range, naming it as
// field.Name.
func (l WireLimits) validate(field string) error {
	for _, f := range []struct {
		name     string
		v        any
		negative bool
	}{
		{"MaxFrameBytes", l.MaxFrameBytes, l.MaxFrameBytes < 0},
		{"IdleTimeout", l.IdleTimeout, l.IdleTimeout < 0},
		{"ReadTimeout", l.ReadTimeout, l.ReadTimeout < 0},
		{"WriteTimeout", l.WriteTimeout, l.WriteTimeout < 0},
		{"MaxConns", l.MaxConns, l.MaxConns < 0},
		{"MaxInFlight", l.MaxInFlight, l.MaxInFlight < 0},
		{"MaxQueuedBytes", l.MaxQueuedBytes, l.MaxQueuedBytes < 0},
		{"MaxUnauthenticatedFrameBytes", l.MaxUnauthenticatedFrameBytes, l.MaxUnauthenticatedFrameBytes < 0},
	} {
		if f.negative {
			return fieldErr(field+"."+f.name, "%v is negative", f.v)
		}
	}
	if l.MaxFrameBytes != 0 && l.MaxFrameBytes < MinFrameBytes {
		return fieldErr(field+".MaxFrameBytes", "%d is below %d bytes, too small for ordinary client requests", l.MaxFrameBytes, MinFrameBytes)
	}
	if l.MaxUnauthenticatedFrameBytes != 0 && l.MaxUnauthenticatedFrameBytes < MinFrameBytes {
		return fieldErr(field+".MaxUnauthenticatedFrameBytes", "%d is below %d bytes, too small for a SASL handshake", l.MaxUnauthenticatedFrameBytes, MinFrameBytes)
	}
	if l.MaxQueuedBytes != 0 && l.MaxFrameBytes != 0 && l.MaxQueuedBytes < int64(l.MaxFrameBytes) {
		return fieldErr(field+".MaxQueuedBytes", "%d is below MaxFrameBytes (%d): a frame of the largest size could never be read", l.MaxQueuedBytes, l.MaxFrameBytes)
	}
	if l.MaxInFlight > MaxInFlightLimit {
		return fieldErr(field+".MaxInFlight", "%d is above %d (each connection sets aside a queue of that many frames)", l.MaxInFlight, MaxInFlightLimit)
	}
	return nil
}
