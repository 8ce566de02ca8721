// Package voter runs one controller voter: a hashicorp/raft node whose log
// lives in the log store Config.Store names and whose term and vote live in
// a bolt file (raftlog.OpenStores), whose snapshots live in files next to
// them, and
// whose peers are reached over the TCP stream layer of package transport.
//
// # What a voter is
//
// Every controller replica is a voter. All voters apply the same committed
// log entries, in the same order, to their own FSM (package fsm), so every
// voter holds the same metadata image. Exactly one voter at a time is the
// raft leader; the node that embeds the voter runs the active controller
// only while LeaderEvents says it leads, and writes every decision through
// Apply before acting on it. A decision that is not committed did not
// happen: a new leader never has to reconstruct in-flight transitions of its
// predecessor, and failover cost does not depend on how much metadata there
// is.
//
// # Lifecycle
//
// Start opens the stores, the transport and raft. A data directory written
// by `ctrlnode format` (package voter/meta) must belong to this node id; if
// it holds no raft state yet, the cluster is bootstrapped from the initial
// voters written at format and from nothing else, and a directory formatted
// without initial voters waits to be added by the leader. No process starts
// a voter on an unformatted directory (server.Start refuses it), so a node
// whose disk was wiped never makes up a quorum configuration of its own:
// it must be formatted again, which gives it a new directory id. Only
// in-process clusters (votertest, benchmarks) start on an unformatted
// directory, and bootstrap from Config.Peers, the full list of voters
// including this one. Every voter of a new cluster is given the same list,
// which is safe: they all write the same configuration as entry 1. On a
// directory that already holds state the voter resumes from its log and
// latest snapshot; membership is whatever the log says, so a restarted
// node cannot silently redefine the cluster.
//
// Shutdown stops raft, then the transport, then closes the stores. It is
// not graceful for the cluster: a leader that shuts down leaves the others to
// notice through election timeouts. For a planned stop call
// TransferLeadership first, which hands leadership to an up-to-date follower
// and so avoids the election gap.
//
// # Membership
//
// The leader changes the voter set one change at a time (membership.go):
// AddVoter adds a node as a non-voter, waits for its log to reach the
// commit index and promotes it; RemoveVoter removes a voter, handing
// leadership over first when it is the leader itself. Each voter's
// address in the configuration names its directory id
// (raftnet.PeerAddress), and the stream layer refuses connections meant
// for another directory (Config.DirectoryID), so a node formatted again
// after a lost disk never takes part as the voter it replaces.
//
// # Leadership notifications
//
// Raft reports leadership changes on Config.NotifyCh and blocks its own main
// loop while nobody receives from it. The voter therefore drains that channel
// itself, at all times, and republishes the latest value on LeaderEvents,
// a channel holding at most one pending value. A slow consumer loses
// intermediate values but always sees the current one, and raft never waits
// for the controller.
//
// # Timeouts
//
// The defaults suit a LAN: 1 s heartbeat and election timeouts, as in
// hashicorp/raft. Tests on loopback pass FastTimeouts, which settles
// elections in well under a second while tolerating a loaded CI host.
//
// # Replication
//
// The transport turns off hashicorp/raft's pipelined replication (see
// transport.NewRaftTransport): in the raft version used here it can wedge
// replication to one follower and make Shutdown hang. Entries still travel
// in batches of up to MaxAppendEntries per round trip.
package voter
