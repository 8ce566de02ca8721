package controller

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// BrokerInfo is what replica placement needs to know about a broker.
type BrokerInfo struct {
	ID int32
	// Rack is the broker's rack; empty means the broker did not say.
	Rack string
}

// Errors of AssignReplicas. They are plain sentinels wrapped with a detail
// message; match them with errors.Is. Kafka error codes:
//
//	ErrInvalidPartitions        INVALID_PARTITIONS
//	ErrInvalidReplicationFactor INVALID_REPLICATION_FACTOR
//	ErrInconsistentRacks        UNKNOWN_SERVER_ERROR with this message, as
//	                            ZooKeeper-mode Kafka answered: the cluster's
//	                            rack configuration is at fault, not the
//	                            request, so no client-side code fits
//	ErrInvalidBrokerList        a bug in the caller (duplicate or negative
//	                            broker id); UNKNOWN_SERVER_ERROR
var (
	ErrInvalidPartitions        = errors.New("invalid number of partitions")
	ErrInvalidReplicationFactor = errors.New("invalid replication factor")
	ErrInconsistentRacks        = errors.New("not all brokers have rack information")
	ErrInvalidBrokerList        = errors.New("invalid broker list")
)

// AssignReplicas places the replicas of a number of new partitions, numbered
// from firstPartitionID, on brokers. Result index i is partition
// firstPartitionID+i, its replicas listed preferred leader first.
//
// It reproduces Kafka's AdminUtils.assignReplicasToBrokers, so a cluster
// moved here lays out new topics the way operators are used to, and so the
// layout can be checked against Kafka's own published examples:
//
//   - Brokers are taken in ascending id order whatever order they are given
//     in, so the result does not depend on how the caller collected them.
//   - Without racks, partition p's first replica is broker (p+startIndex)
//     mod n, and the followers sit at a distance from it that shifts by one
//     every n partitions. Leaders are thus spread evenly, and the followers
//     of one broker's partitions are not all on the same next broker, so a
//     broker failure spreads its load instead of doubling one neighbour's.
//   - With racks on every broker, the same walk runs over a list that
//     alternates racks, and a follower is skipped while it would put a
//     second replica on a rack when another rack still has none, or a
//     second replica on a broker when another broker still has none. Each
//     partition thus spans min(replicationFactor, racks) racks.
//
// startIndex replaces Kafka's random start so that every controller computes
// the same layout: the caller derives it from something committed (the
// topic's name or id, or ContinuationStartIndex when adding partitions). It
// is taken modulo the number of brokers, so any int, negative included, is
// fine; for 0 <= startIndex < len(brokers) the result equals Kafka's for the
// same fixed start index. firstPartitionID is 0 for a new topic and the
// current partition count when adding partitions: it moves the follower
// shift the way Kafka does, so added partitions continue the pattern.
func AssignReplicas(brokers []BrokerInfo, partitions int32, replicationFactor int16, startIndex int, firstPartitionID int32) ([][]int32, error) {
	if partitions <= 0 {
		return nil, fmt.Errorf("%w: number of partitions must be larger than 0, got %d", ErrInvalidPartitions, partitions)
	}
	if firstPartitionID < 0 {
		return nil, fmt.Errorf("%w: first partition id %d is negative", ErrInvalidPartitions, firstPartitionID)
	}
	if int64(firstPartitionID)+int64(partitions) > math.MaxInt32+1 {
		return nil, fmt.Errorf("%w: %d partitions from id %d overflow the partition id range",
			ErrInvalidPartitions, partitions, firstPartitionID)
	}
	if replicationFactor <= 0 {
		return nil, fmt.Errorf("%w: replication factor must be larger than 0, got %d", ErrInvalidReplicationFactor, replicationFactor)
	}
	sorted, err := sortBrokers(brokers)
	if err != nil {
		return nil, err
	}
	if int(replicationFactor) > len(sorted) {
		return nil, fmt.Errorf("%w: replication factor %d is larger than the number of available brokers (%d)",
			ErrInvalidReplicationFactor, replicationFactor, len(sorted))
	}

	var withoutRack []int32
	for _, b := range sorted {
		if b.Rack == "" {
			withoutRack = append(withoutRack, b.ID)
		}
	}
	n := len(sorted)
	start := ((startIndex % n) + n) % n
	switch len(withoutRack) {
	case n:
		ids := make([]int32, n)
		for i, b := range sorted {
			ids[i] = b.ID
		}
		return assignRackUnaware(ids, int(partitions), int(replicationFactor), start, int(firstPartitionID)), nil
	case 0:
		return assignRackAware(sorted, int(partitions), int(replicationFactor), start, int(firstPartitionID)), nil
	default:
		return nil, fmt.Errorf("%w: brokers %v have no rack while %d others do; rack-aware placement needs all or none",
			ErrInconsistentRacks, withoutRack, n-len(withoutRack))
	}
}

// ContinuationStartIndex is the startIndex that makes AssignReplicas, when
// adding partitions to an existing topic, continue the topic's layout the way
// Kafka's addPartitions does: the position of the first broker whose id is at
// least the preferred leader of partition 0 (0 if there is none).
func ContinuationStartIndex(brokers []BrokerInfo, partition0Leader int32) int {
	ids := make([]int32, len(brokers))
	for i, b := range brokers {
		ids[i] = b.ID
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	i, _ := slices.BinarySearch(ids, partition0Leader)
	if i == len(ids) {
		return 0
	}
	return i
}

func sortBrokers(brokers []BrokerInfo) ([]BrokerInfo, error) {
	sorted := slices.Clone(brokers)
	slices.SortStableFunc(sorted, func(a, b BrokerInfo) int { return cmp.Compare(a.ID, b.ID) })
	for i, b := range sorted {
		if b.ID < 0 {
			return nil, fmt.Errorf("%w: negative broker id %d", ErrInvalidBrokerList, b.ID)
		}
		if i > 0 && sorted[i-1].ID == b.ID {
			return nil, fmt.Errorf("%w: broker %d listed more than once", ErrInvalidBrokerList, b.ID)
		}
	}
	return sorted, nil
}

// followerIndex is the position of a partition's (j+2)-th replica. The
// distance from the first replica is 1 + (shift+j) mod (n-1): never 0, so a
// follower never lands on the leader, and distinct for distinct j < n-1.
func followerIndex(first, shift, j, n int) int {
	return (first + 1 + (shift+j)%(n-1)) % n
}

func assignRackUnaware(ids []int32, partitions, rf, start, firstID int) [][]int32 {
	n := len(ids)
	out := make([][]int32, partitions)
	shift := start
	for i := range partitions {
		pid := firstID + i
		if pid > 0 && pid%n == 0 {
			shift++
		}
		first := (pid + start) % n
		replicas := make([]int32, 0, rf)
		replicas = append(replicas, ids[first])
		for j := range rf - 1 {
			replicas = append(replicas, ids[followerIndex(first, shift, j, n)])
		}
		out[i] = replicas
	}
	return out
}

// rackAlternated lists brokers taking one from each rack in turn, racks in
// name order and brokers within a rack in id order, so that consecutive
// positions are on different racks for as long as the racks last. It also
// returns the number of racks.
func rackAlternated(sorted []BrokerInfo) ([]BrokerInfo, int) {
	// Stable, so each rack's brokers keep their id order.
	byRack := slices.Clone(sorted)
	slices.SortStableFunc(byRack, func(a, b BrokerInfo) int { return strings.Compare(a.Rack, b.Rack) })
	// Rack r's brokers are byRack[starts[r]:starts[r+1]].
	starts := make([]int, 0, 8)
	for i, b := range byRack {
		if i == 0 || b.Rack != byRack[i-1].Rack {
			starts = append(starts, i)
		}
	}
	racks := len(starts)
	starts = append(starts, len(byRack))
	out := make([]BrokerInfo, 0, len(sorted))
	for round := 0; len(out) < len(sorted); round++ {
		for r := range racks {
			if i := starts[r] + round; i < starts[r+1] {
				out = append(out, byRack[i])
			}
		}
	}
	return out, racks
}

func assignRackAware(sorted []BrokerInfo, partitions, rf, start, firstID int) [][]int32 {
	arranged, numRacks := rackAlternated(sorted)
	n := len(arranged)
	out := make([][]int32, partitions)
	shift := start
	for i := range partitions {
		pid := firstID + i
		if pid > 0 && pid%n == 0 {
			shift++
		}
		first := (pid + start) % n
		leader := arranged[first]
		replicas := make([]int32, 0, rf)
		replicas = append(replicas, leader.ID)
		racksUsed := []string{leader.Rack}
		// k walks every follower position in turn (period n-1, all brokers
		// but the leader); since rf <= n, an acceptable broker is always
		// found within one period, so the loop ends.
		k := 0
		for range rf - 1 {
			for {
				b := arranged[followerIndex(first, shift*numRacks, k, n)]
				k++
				rackTaken := slices.Contains(racksUsed, b.Rack)
				brokerTaken := slices.Contains(replicas, b.ID)
				if (!rackTaken || len(racksUsed) == numRacks) && (!brokerTaken || len(replicas) == n) {
					replicas = append(replicas, b.ID)
					if !rackTaken {
						racksUsed = append(racksUsed, b.Rack)
					}
					break
				}
			}
		}
		out[i] = replicas
	}
	return out
}

// PartitionAssignment is one partition of an explicit assignment, as the
// CreateTopics request carries it. CreatePartitions lists replica sets
// without ids; number them from the current partition count.
type PartitionAssignment struct {
	Partition int32
	Replicas  []int32
}

// AssignmentRules are what an explicit assignment is checked against.
type AssignmentRules struct {
	// FirstPartitionID is the first id the assignment must cover: 0 for a
	// new topic, the current partition count when adding partitions.
	FirstPartitionID int32
	// Partitions, when positive, is how many partitions the assignment must
	// cover; 0 means as many as it lists.
	Partitions int32
	// ReplicationFactor, when positive, is the number of replicas every
	// partition must have (the topic's, when adding partitions); 0 means
	// any, as long as every partition has the same.
	ReplicationFactor int16
	// Brokers are the registered brokers; nil means none is known.
	Brokers Brokers
}

// ErrInvalidReplicaAssignment is matched (errors.Is) by every error
// ValidateAssignment returns; it maps to Kafka's INVALID_REPLICA_ASSIGNMENT.
// The reasons below narrow it down; each also matches it.
var ErrInvalidReplicaAssignment = errors.New("invalid replica assignment")

var (
	ErrDuplicatePartition            error = &assignmentReason{"duplicate partition"}
	ErrNonContiguousPartitions       error = &assignmentReason{"partition ids not contiguous"}
	ErrEmptyReplicaList              error = &assignmentReason{"empty replica list"}
	ErrDuplicateReplica              error = &assignmentReason{"duplicate replica"}
	ErrUnknownBroker                 error = &assignmentReason{"unknown broker"}
	ErrInconsistentReplicationFactor error = &assignmentReason{"inconsistent replication factor"}
)

// assignmentReason is a sentinel that also matches
// ErrInvalidReplicaAssignment, so the controller can map every reason to one
// Kafka code while tests and logs can still tell them apart.
type assignmentReason struct{ msg string }

func (r *assignmentReason) Error() string { return r.msg }
func (r *assignmentReason) Unwrap() error { return ErrInvalidReplicaAssignment }

// AssignmentError is what ValidateAssignment returns. Its message names the
// partition and broker at fault, because it goes back to the client that
// wrote the assignment and is all they have to fix it.
type AssignmentError struct {
	// Partition at fault, or -1 when the problem is not about one partition.
	Partition int32
	// Broker at fault, or -1 when the problem is not about one broker.
	Broker int32
	// Reason is one of the Err... reasons above.
	Reason error
	Detail string
}

func (e *AssignmentError) Error() string {
	return fmt.Sprintf("%v: %s", ErrInvalidReplicaAssignment, e.Detail)
}

func (e *AssignmentError) Unwrap() error { return e.Reason }

// ValidateAssignment checks an explicit replica assignment from CreateTopics
// or CreatePartitions before anything is committed: a bad one must be
// refused as a whole, not half applied. It reports the first problem found,
// walking the assignment in the order given (the order the client wrote it,
// so the message points at what they would look at first), checking each
// partition for: a repeated id, an id outside the range the rules allow, an
// empty replica list, a broker listed twice, an unregistered broker, and a
// replica count that differs from the rules' or from the first partition's.
// Then it checks that no id in the range is missing.
func ValidateAssignment(assignment []PartitionAssignment, rules AssignmentRules) error {
	first := int64(rules.FirstPartitionID)
	if first < 0 {
		return &AssignmentError{Partition: -1, Broker: -1, Reason: ErrNonContiguousPartitions,
			Detail: fmt.Sprintf("first partition id %d is negative", first)}
	}
	count := int64(len(assignment))
	if rules.Partitions > 0 {
		count = int64(rules.Partitions)
	}
	if count == 0 {
		return &AssignmentError{Partition: -1, Broker: -1, Reason: ErrNonContiguousPartitions,
			Detail: "the assignment lists no partitions"}
	}
	end := first + count // exclusive
	if end > math.MaxInt32+1 {
		return &AssignmentError{Partition: -1, Broker: -1, Reason: ErrNonContiguousPartitions,
			Detail: fmt.Sprintf("%d partitions from id %d overflow the partition id range", count, first)}
	}

	wantRF := int(rules.ReplicationFactor)
	rfFrom := "the topic's replication factor"
	seen := make(map[int32]bool, len(assignment))
	for _, pa := range assignment {
		p := pa.Partition
		if seen[p] {
			return &AssignmentError{Partition: p, Broker: -1, Reason: ErrDuplicatePartition,
				Detail: fmt.Sprintf("partition %d is assigned more than once", p)}
		}
		seen[p] = true
		if int64(p) < first || int64(p) >= end {
			return &AssignmentError{Partition: p, Broker: -1, Reason: ErrNonContiguousPartitions,
				Detail: fmt.Sprintf("partition %d is outside %d..%d: partition ids must be contiguous from %d",
					p, first, end-1, first)}
		}
		if len(pa.Replicas) == 0 {
			return &AssignmentError{Partition: p, Broker: -1, Reason: ErrEmptyReplicaList,
				Detail: fmt.Sprintf("partition %d has an empty replica list", p)}
		}
		for i, b := range pa.Replicas {
			if slices.Contains(pa.Replicas[:i], b) {
				return &AssignmentError{Partition: p, Broker: b, Reason: ErrDuplicateReplica,
					Detail: fmt.Sprintf("partition %d lists broker %d more than once", p, b)}
			}
			if !has(rules.Brokers, b) {
				return &AssignmentError{Partition: p, Broker: b, Reason: ErrUnknownBroker,
					Detail: fmt.Sprintf("partition %d lists broker %d, but no such broker is registered", p, b)}
			}
		}
		if wantRF <= 0 {
			wantRF = len(pa.Replicas)
			rfFrom = fmt.Sprintf("partition %d", p)
			continue
		}
		if len(pa.Replicas) != wantRF {
			return &AssignmentError{Partition: p, Broker: -1, Reason: ErrInconsistentReplicationFactor,
				Detail: fmt.Sprintf("partition %d has %d replicas, but %s has %d", p, len(pa.Replicas), rfFrom, wantRF)}
		}
	}
	// No repeats and all inside [first, end): any shortfall is a gap.
	if int64(len(seen)) < count {
		for id := first; id < end; id++ {
			if !seen[int32(id)] {
				return &AssignmentError{Partition: int32(id), Broker: -1, Reason: ErrNonContiguousPartitions,
					Detail: fmt.Sprintf("partition %d has no assignment: partition ids must be contiguous from %d", id, first)}
			}
		}
	}
	return nil
}
