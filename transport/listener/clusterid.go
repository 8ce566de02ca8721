package listener

import "github.com/ctrlquorum/ctrlquorum/fsm"

// clusterID is the cluster id this voter reports and checks requests
// against: the one the log recorded, else the node's own (Config.ClusterID,
// its data directory's), which is the same on a cluster formatted as one.
// It takes the FSM's read lock: inside a View, use clusterIDOf.
func (l *Listener) clusterID() string {
	var id string
	l.node.FSM.View(func(im *fsm.Image) { id = l.clusterIDOf(im) })
	return id
}

// clusterIDOf is clusterID for a caller that holds the image.
func (l *Listener) clusterIDOf(im *fsm.Image) string {
	if id := im.ClusterID(); id != "" {
		return id
	}
	return l.cfg.ClusterID
}
