// Package meta reads and writes a data directory's storage identity:
// the meta.properties file that `ctrlnode format` writes before a node
// first starts, as Kafka's `kafka-storage format` does.
//
// # What it holds
//
//	version=1
//	cluster.id=MkU3OEVBNTcwNTJENDM2Qg
//	node.id=1001
//	directory.id=Xl9rEOEoRkSAi3lxfHTvIQ
//	initial.voters=1001@10.0.0.1:9093:Xl9rEOEoRkSAi3lxfHTvIQ,1002@…
//
// The cluster id names the cluster the directory belongs to; the node id
// the node that may use it; the directory id this copy of the node's data.
// The directory id is new at every format: a node whose disk was lost and
// which is formatted again comes back under the same node id but another
// directory id, so that the quorum can tell it from the voter it replaces
// (which voted in terms it no longer remembers) and refuse it as that voter.
// The initial voters are the quorum a new cluster starts with; a directory
// formatted to join an existing quorum names none.
//
// # Lifecycle
//
// Format writes the file once (Write). Every start reads it (Read): a
// directory without it is ErrUnformatted, and a node refuses to start on
// it, and on one whose cluster id or node id is not its own. A voter whose
// directory holds no raft state yet bootstraps raft's configuration from
// InitialVoters, and from nothing else: there is no path by which an empty
// directory makes up a quorum of its own, which is what made a wiped voter
// rejoin silently under its old identity. Once the raft log exists it is
// the only record of membership and InitialVoters is not read again.
//
// A directory written by a release that had no meta.properties (raft state
// but no file) is adopted by the node that finds it: the file is written
// for it with a fresh directory id, so that a rolling upgrade needs no
// manual step.
//
// Ids are Kafka Uuids (UUID): 16 bytes printed as 22 characters of
// URL-safe base64 without padding.
//
// Write replaces the file atomically (a temporary file, fsync, rename,
// fsync of the directory), so a crash leaves the old file or the new one,
// never a torn one.
package meta
