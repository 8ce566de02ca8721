package meta

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrFormatted is returned by Format for a directory that already holds a
// meta.properties.
var ErrFormatted = errors.New("data directory is already formatted")

// ErrHasRaftState is returned by Format for a directory that holds raft
// state but no meta.properties: one written by a release from before
// format, which the node adopts when it starts (Adopt).
var ErrHasRaftState = errors.New("data directory holds raft state from a release without meta.properties")

// raftStateNames are the entries a voter's stores create in its data
// directory (raftlog.BoltFile, raftlog.LogDir, raftlog.WALDir, and raft's
// snapshots folder). Their names are kept here rather than imported so that
// this package stays a leaf every other can use.
var raftStateNames = []string{"raft.db", "log", "wal", "snapshots"}

// HasRaftState reports whether dir holds any of a voter's stores. It looks
// at names only: a store that exists but is empty still counts, so that a
// directory is never taken for a new one when it might not be.
func HasRaftState(dir string) (bool, error) {
	for _, n := range raftStateNames {
		_, err := os.Lstat(filepath.Join(dir, n))
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
	}
	return false, nil
}

// ErrNotInitialVoter is returned by Format for initial voters that do not
// name the node being formatted.
var ErrNotInitialVoter = errors.New("the initial voters do not include this node")

// FormatOptions say what `ctrlnode format` writes.
type FormatOptions struct {
	// ClusterID is the cluster's id, a Kafka Uuid; empty makes a new one
	// (for the first node of a new cluster: the others are formatted with
	// the same).
	ClusterID string
	NodeID    int32
	// InitialVoters names the voters a new cluster starts with, this node
	// among them; its directory id there becomes this directory's (as
	// Kafka's --initial-controllers). Empty with Standalone unset: the node
	// joins an existing quorum as a new member and never bootstraps one.
	InitialVoters []Voter
	// Standalone, when set, is this node's raft address, and the cluster
	// starts with this node as its only voter (Kafka's --standalone).
	Standalone string
	// IgnoreFormatted keeps an already formatted directory as it is and
	// returns its properties instead of ErrFormatted (Kafka's
	// --ignore-formatted): a script may format on every start.
	IgnoreFormatted bool
}

// Format writes a new identity into dir (made if missing) and returns it.
// A directory already formatted is refused with ErrFormatted (unless
// IgnoreFormatted), one holding raft state without meta.properties with
// ErrHasRaftState; nothing is written then.
func Format(dir string, o FormatOptions) (Properties, error) {
	old, err := Read(dir)
	switch {
	case err == nil && o.IgnoreFormatted:
		return old, nil
	case err == nil:
		return old, fmt.Errorf("%s: %w (cluster %s, node %d, directory %s)", dir, ErrFormatted, old.ClusterID, old.NodeID, old.DirectoryID)
	case !errors.Is(err, ErrUnformatted):
		return Properties{}, err
	}
	if has, err := HasRaftState(dir); err != nil {
		return Properties{}, err
	} else if has {
		return Properties{}, fmt.Errorf("%s: %w", dir, ErrHasRaftState)
	}
	p := Properties{Version: Version, ClusterID: o.ClusterID, NodeID: o.NodeID}
	if p.ClusterID == "" {
		p.ClusterID = NewUUID().String()
	} else if _, err := ParseUUID(p.ClusterID); err != nil {
		return Properties{}, fmt.Errorf("cluster id: %w", err)
	}
	switch {
	case o.Standalone != "" && len(o.InitialVoters) > 0:
		return Properties{}, errors.New("standalone and initial voters are exclusive: a standalone node is the only initial voter")
	case o.Standalone != "":
		p.DirectoryID = NewUUID()
		vs, err := ParseVoters(Voter{NodeID: o.NodeID, Addr: o.Standalone, DirectoryID: p.DirectoryID}.String())
		if err != nil {
			return Properties{}, fmt.Errorf("standalone: %w", err)
		}
		p.InitialVoters = vs
	case len(o.InitialVoters) > 0:
		for _, v := range o.InitialVoters {
			if v.NodeID == o.NodeID {
				p.DirectoryID = v.DirectoryID
			}
		}
		if p.DirectoryID.IsZero() {
			return Properties{}, fmt.Errorf("%w (node %d): format it without initial voters, and add it to the quorum once it runs", ErrNotInitialVoter, o.NodeID)
		}
		p.InitialVoters = append([]Voter(nil), o.InitialVoters...)
	default:
		p.DirectoryID = NewUUID()
	}
	if err := Write(dir, p); err != nil {
		return Properties{}, err
	}
	return p, nil
}

// Adopt writes the identity of a directory that holds raft state written
// by a release from before meta.properties: clusterID, nodeID, a new
// directory id and no initial voters (the log already records the quorum).
// It refuses a directory that is formatted or holds no raft state.
func Adopt(dir, clusterID string, nodeID int32) (Properties, error) {
	if _, err := Read(dir); err == nil {
		return Properties{}, fmt.Errorf("%s: %w", dir, ErrFormatted)
	} else if !errors.Is(err, ErrUnformatted) {
		return Properties{}, err
	}
	if has, err := HasRaftState(dir); err != nil {
		return Properties{}, err
	} else if !has {
		return Properties{}, fmt.Errorf("%s: %w: there is no raft state to adopt", dir, ErrUnformatted)
	}
	p := Properties{Version: Version, ClusterID: clusterID, NodeID: nodeID, DirectoryID: NewUUID()}
	if err := Write(dir, p); err != nil {
		return Properties{}, err
	}
	return p, nil
}
