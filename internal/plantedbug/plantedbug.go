// Package plantedbug switches on one of the bugs the jepsen run plants to
// show that its data checkers catch them (integration/jepsen,
// TestJepsenPlantedBugs). A bug is on only in a binary built with
// `-tags plantedbugs` and only when the environment variable Env names
// it: in any other build On is false whatever the environment, so no
// setting can turn a bug on in a production binary.
package plantedbug

// Env names the bug to switch on, in a binary built with the tag.
const Env = "CTRLQUORUM_PLANTED_BUG"

// Bug is one planted bug.
type Bug string

const (
	// NoTruncation: a follower of a new leader epoch never truncates its
	// log to the leader's end of its epoch (KIP-101 switched off), so the
	// tail an old leader wrote and never committed stays beside the new
	// leader's records at the same offsets.
	NoTruncation Bug = "no-truncation"
	// EarlyAck: an acks=all produce is answered once the leader has
	// appended it, before the ISR has it.
	EarlyAck Bug = "early-ack"
	// UncleanElection: the active controller elects a live replica
	// outside the ISR whenever it can — when a leader is lost, and when a
	// broker outside a partition's ISR comes back — an unclean election
	// nobody asked for. Only the active controller's decision changes:
	// the records it writes are applied as any others.
	UncleanElection Bug = "unclean-election"
)

// Bugs are every planted bug.
var Bugs = []Bug{NoTruncation, EarlyAck, UncleanElection}
