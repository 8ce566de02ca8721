package metrics

import (
	"github.com/ctrlquorum/ctrlquorum/fsm"
)

// ImageStats are the cluster-wide figures of one image.
type ImageStats struct {
	AppliedIndex    uint64
	ControllerEpoch int32
	ControllerNode  int32
	// MetadataVersion is the finalized metadata.version of the image.
	MetadataVersion int

	ActiveBrokers, FencedBrokers, ShuttingDownBrokers int
	Topics, Partitions                                int
	// OfflinePartitions have no leader; PreferredImbalance are led by
	// another replica than the first of their assignment. Topics queued
	// for deletion count in neither, as in Kafka.
	OfflinePartitions, PreferredImbalance int
	ReassigningPartitions                 int
	DeletingTopics                        int
}

// ReadImageStats scans the committed image of f. It holds the image's read
// lock for the scan: about a millisecond per 100k partitions.
func ReadImageStats(f *fsm.FSM) ImageStats {
	var st ImageStats
	f.View(func(im *fsm.Image) {
		st.AppliedIndex = im.AppliedIndex()
		st.ControllerEpoch, st.ControllerNode = im.ControllerEpoch()
		st.MetadataVersion = int(im.Features().MetadataLevel())
		for _, b := range im.Brokers() {
			switch {
			case b.Fenced:
				st.FencedBrokers++
			default:
				st.ActiveBrokers++
			}
			if b.ShuttingDown {
				st.ShuttingDownBrokers++
			}
		}
		st.Topics = im.NumTopics()
		st.Partitions = im.NumPartitions()
		im.ForEachTopic(func(t *fsm.Topic) bool {
			if t.Deleting {
				st.DeletingTopics++
				return true
			}
			st.ReassigningPartitions += len(t.Reassignments)
			im.EachPartition(t.ID, func(_ int32, p *fsm.Partition) bool {
				if p.Leader < 0 {
					st.OfflinePartitions++
				} else if len(p.Replicas) > 0 && p.Replicas[0] != p.Leader {
					st.PreferredImbalance++
				}
				return true
			})
			return true
		})
	})
	return st
}
