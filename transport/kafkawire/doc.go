// Package kafkawire serves the Kafka wire protocol: length-prefixed frames,
// request headers v0–v2, ApiVersions negotiation and dispatch of decoded
// requests (github.com/twmb/franz-go/pkg/kmsg types) to a Handler. The
// controller's listener and the broker agent's listener are both built on
// it; the protocol logic of each lives with them.
//
// A connection serves one request at a time, in order, as a Kafka broker
// does: responses must go back in request order, and the controller's
// answers are cheap to compute in sequence. By default the next frame is
// read only once the previous one is answered; Config.MaxInFlight lets a
// connection's reader run a few frames ahead, and past it the server stops
// reading from that connection. Anything malformed — a frame larger than
// the limit, a header that does not parse, an API key or version the
// handler does not serve — closes that connection with a log line; only
// ApiVersions answers an unknown version, with UNSUPPORTED_VERSION and the
// versions it does serve, as the protocol requires so that clients can
// negotiate down. After a SaslHandshake v0 the handler may switch a
// connection to raw SASL tokens (Session.ReadSASLTokens): size-prefixed
// tokens without request headers, both ways, until the login finishes.
//
// Limits against hostile or broken clients: a frame's size is checked
// before anything is allocated for it (MaxFrameBytes), and its body is
// read as it arrives, so a client holds about what it sent rather than
// what it announced; a connection that starts a frame, or a TLS
// handshake, and stalls is closed after ReadTimeout; one with no request
// for IdleTimeout is closed, and one that stops reading its responses
// after WriteTimeout; connections beyond MaxConns are closed at accept.
// Across all connections, the bytes of frames being read or waiting to be
// handled are bounded (MaxQueuedBytes): past it the server stops reading
// from the connections that want more, until requests are handled. Where
// connections must log in (Config.NeedsAuthentication), frames are bounded
// much lower until the handler says the connection authenticated
// (MaxUnauthenticatedFrameBytes). Each hit is logged with the limit's name
// and value, and counted (Server.Limits).
//
// Serve takes any listener: given a tls.NewListener, each connection
// completes its handshake (within ReadTimeout) before its first request,
// and handlers find the handshake's state, the client's verified
// certificates among it, in Conn.TLS.
package kafkawire
