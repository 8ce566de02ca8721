package raftlog

// TypeClusterID is the record that keeps the cluster's id in the log.
const TypeClusterID RecordType = 21

// MaxClusterIDBytes bounds a ClusterID's text.
const MaxClusterIDBytes = 256

// ClusterID records the cluster's id, as `ctrlnode format` made it (or as a
// directory of the release before formats was adopted with), so that every
// voter's image, every snapshot and every node formatted later to join
// agree on it. The active controller writes it once, when the image has
// none; it applies only to an image without one or with the same one, so
// the first one committed stays. It is written from level 2 on.
type ClusterID struct {
	_msgpack struct{} `msgpack:",as_array"`
	ID       string
}

func (*ClusterID) Type() RecordType { return TypeClusterID }
