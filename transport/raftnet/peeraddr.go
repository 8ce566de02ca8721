package raftnet

import (
	"fmt"
	"net"
	"strings"
)

// PeerAddress is what a voter's entry in raft's configuration holds as its
// address: the host:port peers dial, and, for a voter that has a storage
// identity, its directory id and the host:port of its Kafka-protocol
// listener. Raft stores the address as an opaque string in its log and
// snapshots, so the configuration itself is the replicated record of each
// voter's directory and endpoints, as KRaft's VotersRecord is.
//
// Its text form is the host:port alone (a legacy address, written by a
// release that had no directory ids, or by a voter without one) or the
// host:port followed by parameters:
//
//	10.0.0.4:9093?dir=Xl9rEOEoRkSAi3lxfHTvIQ&listener=10.0.0.4:9092
//
// The stream layer dials the host:port and, when the address names a
// directory, asks the peer to confirm it is that directory (see
// StreamLayer.SetIdentity): a node formatted again after its disk was
// lost has another directory id and is refused as the voter it replaces.
type PeerAddress struct {
	// HostPort is where the voter's raft listens.
	HostPort string
	// DirectoryID is the voter's directory id (a Kafka Uuid in its text
	// form); empty for a legacy address.
	DirectoryID string
	// Listener is the host:port of the voter's Kafka-protocol listener;
	// empty when the address does not say.
	Listener string
}

// String is the text form raft stores.
func (a PeerAddress) String() string {
	var params []string
	if a.DirectoryID != "" {
		params = append(params, "dir="+a.DirectoryID)
	}
	if a.Listener != "" {
		params = append(params, "listener="+a.Listener)
	}
	if len(params) == 0 {
		return a.HostPort
	}
	return a.HostPort + "?" + strings.Join(params, "&")
}

// Legacy reports whether the address names no directory.
func (a PeerAddress) Legacy() bool { return a.DirectoryID == "" }

// ParsePeerAddress reads an address in the form String writes. An unknown
// parameter is an error: an address written by a later release is not
// silently half understood.
func ParsePeerAddress(s string) (PeerAddress, error) {
	hostPort, query, hasQuery := strings.Cut(s, "?")
	a := PeerAddress{HostPort: hostPort}
	if _, _, err := net.SplitHostPort(hostPort); err != nil {
		return a, fmt.Errorf("raft address %q: %w", s, err)
	}
	if !hasQuery {
		return a, nil
	}
	for _, kv := range strings.Split(query, "&") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" {
			return a, fmt.Errorf("raft address %q: parameter %q is not key=value", s, kv)
		}
		switch k {
		case "dir":
			if a.DirectoryID != "" {
				return a, fmt.Errorf("raft address %q: dir given twice", s)
			}
			if strings.ContainsAny(v, "?&=") {
				return a, fmt.Errorf("raft address %q: directory id %q", s, v)
			}
			a.DirectoryID = v
		case "listener":
			if a.Listener != "" {
				return a, fmt.Errorf("raft address %q: listener given twice", s)
			}
			if _, _, err := net.SplitHostPort(v); err != nil {
				return a, fmt.Errorf("raft address %q: listener: %w", s, err)
			}
			a.Listener = v
		default:
			return a, fmt.Errorf("raft address %q: unknown parameter %q", s, k)
		}
	}
	return a, nil
}
