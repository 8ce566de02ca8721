package controller

import (
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// quorumManager owns the records about the controller quorum itself:
// the controller epoch, which every activation raises with a
// ControllerEpoch record and an import may raise further. Feature levels
// are the featuresManager's (features.go), membership changes raft's (the
// voter package). It owns no state beyond the image; its handlers return
// the epoch the loop sends requests under (effects.epoch).
type quorumManager struct {
	nodeID int32
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
