// Package raftlog defines what the controller writes to its Raft log: the
// record types of the metadata image, their versioned msgpack encoding, the
// batch of records that forms one log entry, and the setup of the on-disk log
// store.
//
// Every record is encoded as
//
//	type byte | version byte | msgpack body
//
// and a log entry is a batch of such records applied atomically by the FSM.
// The type byte and version are explicit rather than implied by msgpack so
// that a binary meeting a record it does not know (a newer type, or a newer
// version of a known type) can refuse it with a precise error instead of
// decoding a partial value: a record that one voter skips and another applies
// means divergent replicas, so the FSM stops the node instead.
//
// The package knows nothing about networking or the controller.
package raftlog
