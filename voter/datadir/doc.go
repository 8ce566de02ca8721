// Package datadir reads a voter's data directory offline, with no raft
// running and without changing it: its raft log in whichever store holds
// it (segments, raft-wal or bolt; see raftlog.ReadLog), each entry decoded
// (a command's batch of records, a configuration's servers), and its
// snapshots, each checked against the checksum raft wrote and decoded into
// an image with its state hash. Replay builds the image the directory
// holds, as a voter starting on it would.
//
// It is what `ctrlnode log dump` prints and `ctrlnode log verify` checks
// (Kafka's kafka-dump-log --cluster-metadata-decoder and
// kafka-metadata-shell do the same for KRaft's log), and what the on-disk
// compatibility fixtures are read with.
package datadir
