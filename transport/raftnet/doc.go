// Package raftnet is the raft network between voters: a raft.StreamLayer
// over TCP (NewTCPStreamLayer) or mutual TLS (NewTLSStreamLayer), and
// hashicorp/raft's NetworkTransport over it (NewRaftTransport).
//
// A stream layer dials from the IP it listens on, so that several voters
// sharing a host on loopback addresses (the fault-injection tests cut the
// traffic between 127.0.0.x hosts) can be told apart by source address.
// Over TLS a voter accepts and dials only certificates naming a configured
// voter, and every handshake finishes, under a timeout and a cap on those
// in progress, before raft sees the connection: a peer that stalls its
// handshake holds neither raft's accept loop nor its connection pool.
// Close closes every connection still open.
package raftnet
