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
// only data a crash can damage is the last append, and of it the disk may
// have kept any pages in any order. Every frame names the first entry of
// the append that wrote it, so Open can tell: damage with no valid frame of
// a later append after it is that torn append, and Open drops it and logs
// what it dropped; damage followed by a later append's frame lies in data
// that was synced, and Open refuses it with an error naming the file and
// offset rather than guess which entries are real. So do a damaged segment
// that is not the last and a frame with the wrong index. One case cannot be
// told apart: damage inside the last acknowledged append, with nothing
// after it, reads like a torn append and is dropped.
//
// Deletes follow raft's two shapes: compaction from the front frees whole
// segments, and a follower's conflicting tail is cut with a truncate that is
// synced before DeleteRange returns.
package logstore
