package meta

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Voter is one member of the initial quorum: its node id, its raft address
// and the directory id it was (or will be) formatted with.
type Voter struct {
	NodeID      int32
	Addr        string // host:port of its raft listener
	DirectoryID UUID
}

func (v Voter) String() string {
	return strconv.FormatInt(int64(v.NodeID), 10) + "@" + v.Addr + ":" + v.DirectoryID.String()
}

// ParseVoters reads a list of voters in the form of Kafka's
// --initial-controllers (KIP-853): comma-separated ID@HOST:PORT:DIRECTORYID,
// e.g. 1001@10.0.0.1:9093:Xl9rEOEoRkSAi3lxfHTvIQ. An IPv6 host is written in
// brackets. Node ids, addresses and directory ids must each be distinct.
func ParseVoters(s string) ([]Voter, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("no voters: want ID@HOST:PORT:DIRECTORYID[,…]")
	}
	var out []Voter
	ids := map[int32]bool{}
	addrs := map[string]bool{}
	dirs := map[UUID]bool{}
	for _, item := range strings.Split(s, ",") {
		v, err := parseVoter(strings.TrimSpace(item))
		if err != nil {
			return nil, err
		}
		switch {
		case ids[v.NodeID]:
			return nil, fmt.Errorf("voter %d is listed twice", v.NodeID)
		case addrs[v.Addr]:
			return nil, fmt.Errorf("address %s is listed twice", v.Addr)
		case dirs[v.DirectoryID]:
			return nil, fmt.Errorf("directory id %s is listed twice", v.DirectoryID)
		}
		ids[v.NodeID], addrs[v.Addr], dirs[v.DirectoryID] = true, true, true
		out = append(out, v)
	}
	return out, nil
}

func parseVoter(item string) (Voter, error) {
	bad := func(why string) (Voter, error) {
		return Voter{}, fmt.Errorf("voter %q: %s (want ID@HOST:PORT:DIRECTORYID)", item, why)
	}
	id, rest, ok := strings.Cut(item, "@")
	if !ok {
		return bad("no @")
	}
	n, err := strconv.ParseInt(id, 10, 32)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != id {
		return bad("the node id is not a non-negative 32-bit integer")
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return bad("no directory id")
	}
	addr, dir := rest[:i], rest[i+1:]
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || strings.ContainsAny(host, "@,[] \t") {
		return bad("the address is not HOST:PORT")
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 || strconv.FormatUint(p, 10) != port {
		return bad("the port is not 1-65535")
	}
	d, err := ParseUUID(dir)
	if err != nil {
		return bad("directory id " + err.Error())
	}
	return Voter{NodeID: int32(n), Addr: net.JoinHostPort(host, port), DirectoryID: d}, nil
}

// FormatVoters is the inverse of ParseVoters.
func FormatVoters(vs []Voter) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return strings.Join(parts, ",")
}
