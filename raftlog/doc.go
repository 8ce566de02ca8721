// Package raftlog defines what the controller writes to its Raft log: the
// record types of the metadata image, their versioned msgpack encoding, the
// batch of records that forms one log entry, and the setup of the on-disk log
// store.
//
// Every record is encoded as
//
//	type byte | version byte | msgpack body
//
// and a log entry is a batch of such records. The FSM applies an entry's
// records in order under one write lock, so a reader of the image sees
// them all at once: the image before the entry, or after all of it. The
// entry is not all or nothing, though: each record either applies whole
// or, if it breaks one of the FSM's rules, is refused and changes
// nothing, on every voter alike, and the entry's other records still
// apply. A record that names many partitions or replicas is whole too: a
// PartitionChanges applies all of its changes or, if one of them is
// refused, none.
//
// The type byte and version are explicit rather than implied by msgpack so
// that a binary meeting a record it does not know (a newer type, or a newer
// version of a known type) can refuse it with a precise error instead of
// decoding a partial value: a record that one voter skips and another applies
// means divergent replicas, so the FSM stops the node instead.
//
// Feature levels keep a voter from ever meeting such a record (levels.go):
// each record type and version needs a level of the metadata.version
// feature (recordLevels, one line per type), and a record is staged, and
// applied, only when the cluster's finalized level allows it. The level is
// raised only once every voter and broker reads it, so a rolling upgrade
// runs the new build at the old level first and raises the level last.
//
// The package knows nothing about networking or the controller.
package raftlog
