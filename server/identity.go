package server

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ctrlquorum/ctrlquorum/voter/meta"
)

// checkIdentity reads the voter's data directory's meta.properties and
// refuses to go on with a directory that is not this node's: one never
// formatted, one formatted for another node id, or for another cluster id
// than the cluster.id setting. A directory written by a release from
// before meta.properties (raft state, no file) is adopted. The cluster id
// found is the node's from then on.
func (s *Server) checkIdentity() (meta.Properties, error) {
	cfg := &s.cfg
	p, err := meta.Read(cfg.DataDir)
	if errors.Is(err, meta.ErrUnformatted) {
		p, err = s.adopt()
	}
	if err != nil {
		return p, err
	}
	if p.NodeID != cfg.NodeID {
		return p, fmt.Errorf("data directory %s belongs to node %d, not to node %d (node.id): "+
			"point data.dir at node %d's own directory, or give this node an empty one and format it with `ctrlnode format`",
			cfg.DataDir, p.NodeID, cfg.NodeID, cfg.NodeID)
	}
	if cfg.ClusterID != "" && cfg.ClusterID != p.ClusterID {
		return p, fmt.Errorf("data directory %s belongs to cluster %s, but cluster.id is %s: "+
			"remove the cluster.id setting (the directory's is used), or point data.dir at a directory of cluster %s",
			cfg.DataDir, p.ClusterID, cfg.ClusterID, cfg.ClusterID)
	}
	cfg.ClusterID = p.ClusterID
	return p, nil
}

// adopt writes meta.properties for a directory that holds raft state from
// an earlier release, or says what to do with one that holds nothing.
func (s *Server) adopt() (meta.Properties, error) {
	cfg := &s.cfg
	has, err := meta.HasRaftState(cfg.DataDir)
	if err != nil {
		return meta.Properties{}, err
	}
	if !has {
		return meta.Properties{}, fmt.Errorf("data directory %s is not formatted: run `ctrlnode format` first with this node's settings "+
			"(the voters of a new cluster: --cluster-id ID --initial-voters ID@HOST:PORT:DIRECTORYID,… or --standalone; "+
			"a node joining a running quorum: --cluster-id of that cluster only; see ctrlnode format --help)", cfg.DataDir)
	}
	cluster, from := cfg.ClusterID, "the cluster.id setting"
	if cluster == "" {
		cluster, from = adoptedClusterID(cfg.Voters), "the voters setting"
	}
	p, err := meta.Adopt(cfg.DataDir, cluster, cfg.NodeID)
	if err != nil {
		return p, err
	}
	s.log.Info("adopted a data directory written by a release without meta.properties",
		"dir", cfg.DataDir, "cluster_id", p.ClusterID, "cluster_id_from", from, "directory_id", p.DirectoryID.String())
	return p, nil
}

// adoptedClusterID is the cluster id of a cluster upgraded from a release
// that had none: a hash of its voters, so that every voter, adopting its
// own directory, arrives at the same id without talking to the others
// (the release before meta.properties required the same voters setting
// on every voter).
func adoptedClusterID(voters []VoterPeer) string {
	parts := make([]string, len(voters))
	for i, v := range voters {
		parts[i] = strconv.Itoa(int(v.ID)) + "@" + v.Raft
	}
	sort.Strings(parts)
	sum := sha256.Sum256([]byte("ctrlquorum cluster of voters " + strings.Join(parts, ",")))
	var u meta.UUID
	copy(u[:], sum[:16])
	u[6] = u[6]&0x0f | 0x80 // a name-based (version 8) id, never the reserved ones
	u[8] = u[8]&0x3f | 0x80
	return u.String()
}

// FormatVoters formats the data directories of a new cluster's voters on
// one host (dirs by voter id), as `ctrlnode format --initial-voters` would
// on each: one cluster id (clusterID, or the one a directory already
// holds, or a new one), a directory id per voter, and the same initial
// voters in each. A directory already formatted is kept as it is, with its
// directory id in the others' list; one holding raft state from a release
// without meta.properties is left to be adopted when its node starts. It
// is how `ctrlnode dev` and in-process tests start a cluster.
func FormatVoters(clusterID string, voters []VoterPeer, dirs map[int32]string) ([]meta.Properties, error) {
	existing := map[int32]meta.Properties{}
	for _, v := range voters {
		p, err := meta.Read(dirs[v.ID])
		switch {
		case err == nil:
			existing[v.ID] = p
			if clusterID == "" {
				clusterID = p.ClusterID
			}
		case !errors.Is(err, meta.ErrUnformatted):
			return nil, err
		}
	}
	if clusterID == "" {
		clusterID = meta.NewUUID().String()
	}
	initial := make([]meta.Voter, len(voters))
	for i, v := range voters {
		dir := meta.NewUUID()
		if p, ok := existing[v.ID]; ok {
			dir = p.DirectoryID
		}
		initial[i] = meta.Voter{NodeID: v.ID, Addr: v.Raft, DirectoryID: dir}
	}
	var out []meta.Properties
	for _, v := range voters {
		p, err := meta.Format(dirs[v.ID], meta.FormatOptions{ClusterID: clusterID, NodeID: v.ID, InitialVoters: initial, IgnoreFormatted: true})
		if errors.Is(err, meta.ErrHasRaftState) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("format voter %d: %w", v.ID, err)
		}
		out = append(out, p)
	}
	return out, nil
}
