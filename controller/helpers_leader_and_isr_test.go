package controller

// leaderAndIsrStates copies a LeaderAndIsr's partition states, for tests that
// compare or sort them as values.
func leaderAndIsrStates(l *LeaderAndIsr) []PartitionState {
	out := make([]PartitionState, 0, len(l.Partitions))
	for _, ps := range l.Partitions {
		out = append(out, *ps)
	}
	return out
}
