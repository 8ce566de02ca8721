package controller

import (
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// quorumManager owns the records about the controller quorum itself:
// the controller epoch, which every activation raises with a
// ControllerEpoch record and an import may raise further, and the cluster
// id, which an activation records once. Feature levels
// are the featuresManager's (features.go), membership changes raft's (the
// voter package). It owns no state beyond the image; its handlers return
// the epoch the loop sends requests under (effects.epoch).
type quorumManager struct {
	nodeID int32
	// clusterID is the id recordClusterID writes (Config.ClusterID).
	clusterID string
}

// recordClusterID stages a ClusterID record with this node's cluster id
// when the image has none and the finalized level allows the record: a
// new cluster records it in its first activation, one upgraded from the
// release before in the first activation after its level was raised.
// Every voter of a cluster was formatted with the same id, or adopted the
// same from its settings, so which voter writes it does not matter.
func (m *quorumManager) recordClusterID(w *work) error {
	im := w.img()
	rec := &rl.ClusterID{ID: m.clusterID}
	if cur := im.ClusterID(); cur != "" && m.clusterID != "" && cur != m.clusterID {
		// The log is the cluster's record; this node's data directory
		// was formatted (or adopted) for another cluster.
		w.log.Error("this node's data directory names another cluster than the one its log records: it was formatted for another cluster; remove it from the quorum and format it again with the recorded cluster id",
			"node_cluster_id", m.clusterID, "log_cluster_id", cur)
	}
	if m.clusterID == "" || im.ClusterID() != "" || rl.RecordLevel(rec) > im.Features().MetadataLevel() {
		return nil
	}
	if err := w.stageEach(rec); err != nil {
		return err
	}
	w.log.Info("cluster id recorded in the log", "cluster_id", m.clusterID)
	return nil
}

// activate stages the next controller epoch, held by this node.
func (m *quorumManager) activate(w *work) (result[int32], error) {
	var res result[int32]
	cur, _ := w.img().ControllerEpoch()
	if err := w.stageEach(&rl.ControllerEpoch{Epoch: cur + 1, NodeID: m.nodeID}); err != nil {
		return res, err
	}
	res.response, res.epoch = cur+1, cur+1
	return res, nil
}

// raiseEpoch stages the controller epoch up to to, one ControllerEpoch
// record per step, held by this node, for an import from a cluster whose
// controllers had reached it: the brokers refuse requests of a lower one.
// Nothing is staged when the epoch is there already. When it is raised,
// every live broker hears the new epoch.
func (m *quorumManager) raiseEpoch(w *work, to int32) (result[int32], error) {
	var res result[int32]
	cur, _ := w.img().ControllerEpoch()
	res.response = cur
	for e := cur + 1; e <= to; e++ {
		if err := w.stageEach(&rl.ControllerEpoch{Epoch: e, NodeID: m.nodeID}); err != nil {
			return res, err
		}
	}
	if to > cur {
		res.response, res.epoch = to, to
		w.plan.updateMetadataToAll = true
		w.log.Info("controller epoch raised by import", "from", cur, "to", to)
	}
	return res, nil
}
