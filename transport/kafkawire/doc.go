// Package kafkawire serves the Kafka wire protocol: length-prefixed frames,
// request headers v0–v2, ApiVersions negotiation and dispatch of decoded
// requests (github.com/twmb/franz-go/pkg/kmsg types) to a Handler. The
// controller's listener and the broker agent's listener are both built on
// it; the protocol logic of each lives with them.
//
// A connection serves one request at a time, in order, as a Kafka broker
// does: responses must go back in request order, and the controller's
// answers are cheap to compute in sequence. Anything malformed — a frame
// larger than the limit, a header that does not parse, an API key or
// version the handler does not serve — closes that connection with a log
// line; only ApiVersions answers an unknown version, with
// UNSUPPORTED_VERSION and the versions it does serve, as the protocol
// requires so that clients can negotiate down.
package kafkawire
