// Package partlog is the log of one partition replica on a broker: Kafka
// record batches kept exactly as the producer sent them (offsets and
// leader epoch filled in by the leader), in segment files with an offset
// index, a leader-epoch cache, truncation, and recovery after a crash.
//
// # On disk
//
// A partition's directory holds, per segment, NNNNNNNNNNNNNNNNNNNN.log
// (the record batches, back to back, in Kafka's v2 format: the file is
// what Kafka's own segment of the same batches would be) and
// NNNNNNNNNNNNNNNNNNNN.index (a sparse offset index: 8-byte entries of
// the batch's base offset relative to the segment's, and its byte
// position, one every IndexIntervalBytes, as Kafka's .index), the name
// being the segment's base offset; leader-epoch-checkpoint (Kafka's text
// format: version, count, then "epoch startOffset" lines); and
// partition.metadata, the topic id the directory belongs to.
//
// Only a batch's header is read (kmsg.RecordBatch): base offset, length,
// partition leader epoch, magic (2 only), CRC-32C (checked on every
// append and on recovery), last offset delta and timestamps. Records
// inside a batch are never decoded; compressed batches are stored as
// they come.
//
// # Durability
//
// Writes go to the page cache; the fsync policy says when they reach the
// disk, with Kafka's per-topic settings: FlushMessages (flush.messages)
// syncs once that many records were appended since the last sync (1:
// before every append returns), FlushInterval (flush.ms) syncs a log
// whose oldest unsynced record is that old (checked by MaybeFlush, which
// the owner calls on a timer). Zero for both is Kafka's default: no sync
// on the append path at all, only when a segment is rolled and on Close.
//
// The trade-off is Kafka's: a process crash (kill -9) loses nothing
// either way, as the page cache survives it; a power loss or kernel
// crash loses the unsynced tail of every replica it hits. With the
// default, acks=all data survives as long as not every in-sync replica
// loses power before syncing: the durability comes from replication,
// and a replica that lost its tail is truncated and refilled from the
// leader. FlushMessages=1 survives any power loss at the cost of one
// fdatasync per append.
//
// # Retention
//
// DeleteRetained deletes whole closed segments from the front, by the
// largest timestamp of their batches (retention.ms) or to keep the log
// within retention.bytes, and only below the high watermark; the log
// start offset moves to the first segment kept and the epoch cache
// forgets what starts before it (retention.go). SetRoll changes
// segment.bytes and segment.ms (the age of a segment's first batch) of an
// open log. TruncateFullyAndStartAt empties a follower's log to start at
// its leader's log start.
//
// # Recovery
//
// Open scans the last segment batch by batch and cuts the file at the
// first batch that is torn or fails its CRC (what a crash mid-write
// leaves); its index is rebuilt from the scan. Earlier segments were
// synced when the next one was rolled; their indexes are checked and
// rebuilt if damaged. Epoch cache entries past the recovered end are
// dropped, and epochs of recovered batches missing from the cache are
// added back from the batch headers.
package partlog
