// Package logstore keeps a voter's raft log on disk in append-only segment
// files, with a checksum per entry and a single fdatasync per append.
//
// Why not bolt: a bolt commit syncs twice (the data pages, then the meta
// page), and hashicorp/raft writes the leader's entry before it sends it, so
// every commit waited on four syncs in a row — two on the leader, two on the
// follower that completes the quorum. Those syncs were most of the commit
// latency the controller saw. An append-only file needs one.
//
// Layout: dir/00000000000000000001.seg, … each named after the index of its
// first entry, plus a LOCK file held with flock while the store is open.
// Every entry is one frame (see frame.go). An append writes all its frames
// with one write and syncs once; a segment that would grow past
// Options.SegmentBytes is cut back to its frames and the append starts a new
// one. The active segment's file runs on in zeros past its frames, made a
// chunk at a time by the appends that need the room: overwriting bytes the
// file already holds makes the sync cheaper (see zeroAhead).
//
// Crashes: an append is acknowledged only after its sync returned, so the
// only data a crash can damage is the unacknowledged end of the last
// segment. Open drops exactly that shape of damage — a partial or torn
// frame followed by nothing but zeros — and logs what it dropped. Damage
// anywhere else (a bad frame followed by good data, a damaged older
// segment, a frame with the wrong index) is not explained by a crash; Open
// refuses it with an error naming the file and offset rather than guess
// which entries are real.
//
// Deletes follow raft's two shapes: compaction from the front frees whole
// segments, and a follower's conflicting tail is cut with a truncate that is
// synced before DeleteRange returns.
package logstore
