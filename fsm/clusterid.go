package fsm

import (
	"fmt"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// ClusterID is the cluster id the log recorded (a ClusterID record), ""
// before one was written: a log of the release before cluster ids in the
// log, or one whose level does not allow the record yet.
func (im *Image) ClusterID() string { return im.cluster }

func (im *Image) clusterID() string      { return im.cluster }
func (im *Image) setClusterID(id string) { im.cluster = id }

// ClusterID is the cluster id with what the Txn staged.
func (tx *Txn) ClusterID() string { return tx.clusterID() }

func (tx *Txn) clusterID() string {
	if tx.cluster != nil {
		return *tx.cluster
	}
	return tx.base.clusterID()
}

func (tx *Txn) setClusterID(id string) { tx.cluster = &id }

// applyClusterID records the cluster id once: an image without one takes
// it, one with the same keeps it, and another one is refused, so that the
// first id committed is the cluster's for good.
func applyClusterID(im store, r *rl.ClusterID) error {
	switch cur := im.clusterID(); {
	case r.ID == "" || len(r.ID) > rl.MaxClusterIDBytes:
		return fmt.Errorf("%w: cluster id of %d bytes (1 to %d)", ErrInvalidRecord, len(r.ID), rl.MaxClusterIDBytes)
	case cur == "":
		im.setClusterID(r.ID)
	case cur != r.ID:
		return fmt.Errorf("%w: the cluster id is %s already, the record says %s", ErrInvalidRecord, cur, r.ID)
	}
	return nil
}
