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
	} {
		if f.negative {
			return fieldErr(field+"."+f.name, "%v is negative", f.v)
		}
	}
	if l.MaxFrameBytes != 0 && l.MaxFrameBytes < MinFrameBytes {
		return fieldErr(field+".MaxFrameBytes", "%d is below %d bytes, too small for ordinary client requests", l.MaxFrameBytes, MinFrameBytes)
	}
	if l.MaxInFlight > MaxInFlightLimit {
		return fieldErr(field+".MaxInFlight", "%d is above %d (each connection sets aside a queue of that many frames)", l.MaxInFlight, MaxInFlightLimit)
	}
	return nil
}
