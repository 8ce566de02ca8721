package kafkawire

import "sync/atomic"

// LimitCounts counts, since the Server started, the connections each
// limit closed or held back.
type LimitCounts struct {
	// ConnsRefused: closed at accept by MaxConns.
	ConnsRefused uint64
	// FramesTooLarge: closed for a frame above MaxFrameBytes.
	FramesTooLarge uint64
	// UnauthenticatedFramesTooLarge: closed for a frame above
	// MaxUnauthenticatedFrameBytes before the connection authenticated.
	UnauthenticatedFramesTooLarge uint64
	// ReadTimeouts: closed for a frame not complete within ReadTimeout.
	ReadTimeouts uint64
	// IdleTimeouts: closed after IdleTimeout without a request, or held
	// back that long by MaxQueuedBytes.
	IdleTimeouts uint64
	// WriteTimeouts: closed for a response not written within
	// WriteTimeout.
	WriteTimeouts uint64
	// HandshakeFailures: TLS handshakes that failed or timed out.
	HandshakeFailures uint64
	// InFlightPauses: connections whose reading was paused at
	// MaxInFlight while the client had sent more (once per connection).
	InFlightPauses uint64
	// QueuedBytesPauses: connections whose reading was paused because
	// their next bytes would have gone past MaxQueuedBytes (once per
	// connection).
	QueuedBytesPauses uint64
}

type limitCounters struct {
	connsRefused, framesTooLarge, unauthenticatedFramesTooLarge, readTimeouts, idleTimeouts, writeTimeouts, handshakeFailures, inFlightPauses, queuedBytesPauses atomic.Uint64
}

// Limits reports how often each limit was hit.
func (s *Server) Limits() LimitCounts {
	c := &s.stats
	return LimitCounts{
		ConnsRefused:                  c.connsRefused.Load(),
		FramesTooLarge:                c.framesTooLarge.Load(),
		UnauthenticatedFramesTooLarge: c.unauthenticatedFramesTooLarge.Load(),
		ReadTimeouts:                  c.readTimeouts.Load(),
		IdleTimeouts:                  c.idleTimeouts.Load(),
		WriteTimeouts:                 c.writeTimeouts.Load(),
		HandshakeFailures:             c.handshakeFailures.Load(),
		InFlightPauses:                c.inFlightPauses.Load(),
		QueuedBytesPauses:             c.queuedBytesPauses.Load(),
	}
}
