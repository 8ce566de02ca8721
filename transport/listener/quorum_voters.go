package listener

import (
	"net"
	"sort"
	"strconv"

	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
	"github.com/ctrlquorum/ctrlquorum/voter/meta"
)

// quorumNode is one server of the raft configuration as the listener
// reports it: its id, whether it votes, its directory id and where its
// Kafka listener is (ok false when neither its raft address nor Peers
// say).
type quorumNode struct {
	id       int32
	voter    bool
	dir      [16]byte
	listener PeerListener
	ok       bool
}

// quorum lists the servers of the latest raft configuration, in id
// order. A server's listener is the one its raft address names (a voter
// added with AddRaftVoter, or bootstrapped with directory ids), else the
// one Config.Peers gives for its id. Before this voter knows a
// configuration (a node waiting to be added), Config.Peers is the list.
func (l *Listener) quorum() []quorumNode {
	members, _, err := l.node.Voter.Members()
	if err != nil || len(members) == 0 {
		out := make([]quorumNode, 0, len(l.peerIDs))
		for _, id := range l.peerIDs {
			out = append(out, quorumNode{id: id, voter: true, listener: l.peers[id], ok: true})
		}
		return out
	}
	out := make([]quorumNode, 0, len(members))
	for _, m := range members {
		id := m.NodeID()
		if id < 0 {
			continue
		}
		n := quorumNode{id: id, voter: m.Voter}
		if u, err := meta.ParseUUID(m.Address.DirectoryID); err == nil {
			n.dir = u
		}
		if p, ok := peerListener(id, m.Address); ok {
			n.listener, n.ok = p, true
		} else if p, ok := l.peers[id]; ok {
			n.listener, n.ok = p, true
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// peerListener is the listener a raft address names, if it names one.
func peerListener(id int32, a raftnet.PeerAddress) (PeerListener, bool) {
	if a.Listener == "" {
		return PeerListener{}, false
	}
	host, port, err := net.SplitHostPort(a.Listener)
	pn, perr := strconv.ParseInt(port, 10, 32)
	if err != nil || perr != nil || pn <= 0 || pn > 65535 {
		return PeerListener{}, false
	}
	return PeerListener{NodeID: id, Host: host, Port: int32(pn)}, true
}

// voterListeners are the voters clients are told of: the voters of the
// raft configuration whose listener is known, and this node.
func (l *Listener) voterListeners() []PeerListener {
	var out []PeerListener
	self := false
	for _, n := range l.quorum() {
		if !n.ok || (!n.voter && n.id != l.self) {
			continue
		}
		self = self || n.id == l.self
		out = append(out, n.listener)
	}
	if !self {
		out = append(out, l.peers[l.self])
		sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	}
	return out
}

// peer is where voter id's listener is, as voterListeners says.
func (l *Listener) peer(id int32) (PeerListener, bool) {
	for _, n := range l.quorum() {
		if n.id == id && n.ok {
			return n.listener, true
		}
	}
	p, ok := l.peers[id]
	return p, ok
}

// isVoter reports whether id is a voter of the configuration (or, before
// one is known, of Config.Peers).
func (l *Listener) isVoter(id int32) bool {
	for _, n := range l.quorum() {
		if n.id == id {
			return n.voter
		}
	}
	return false
}

// ownDirectory is this voter's directory id in the wire form, zero when
// it has none.
func (l *Listener) ownDirectory() [16]byte {
	u, _ := meta.ParseUUID(l.node.Voter.DirectoryID())
	return u
}

// directoryText is the text form of a wire directory id.
func directoryText(d [16]byte) string { return meta.UUID(d).String() }
