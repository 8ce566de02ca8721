package controller

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func plainBrokers(idList ...int32) []BrokerInfo {
	out := make([]BrokerInfo, len(idList))
	for i, id := range idList {
		out[i] = BrokerInfo{ID: id}
	}
	return out
}

func rackBrokers(racks map[int32]string) []BrokerInfo {
	out := make([]BrokerInfo, 0, len(racks))
	for id, r := range racks {
		out = append(out, BrokerInfo{ID: id, Rack: r})
	}
	// Map order is random: AssignReplicas must not care, and the
	// determinism test relies on that.
	return out
}

func mustAssign(t *testing.T, brokers []BrokerInfo, partitions int32, rf int16, start int, first int32) [][]int32 {
	t.Helper()
	got, err := AssignReplicas(brokers, partitions, rf, start, first)
	if err != nil {
		t.Fatalf("AssignReplicas(%d partitions, rf %d, start %d, first %d): %v", partitions, rf, start, first, err)
	}
	return got
}

// Kafka's own published expectations (AdminUtilsTest.testReplicaAssignment):
// the layout must match so that topics look as operators expect.
func TestAssignReplicasMatchesKafkaRackUnaware(t *testing.T) {
	got := mustAssign(t, plainBrokers(0, 1, 2, 3, 4), 10, 3, 0, 0)
	want := [][]int32{
		{0, 1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 0}, {4, 0, 1},
		{0, 2, 3}, {1, 3, 4}, {2, 4, 0}, {3, 0, 1}, {4, 1, 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

// AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers.
func TestAssignReplicasMatchesKafkaRackAware(t *testing.T) {
	racks := map[int32]string{0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
	got := mustAssign(t, rackBrokers(racks), 7, 3, 0, 0)
	want := [][]int32{
		{0, 3, 1}, {3, 1, 5}, {1, 5, 4}, {5, 4, 2}, {4, 2, 0}, {2, 0, 3}, {0, 4, 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

func TestRackAlternated(t *testing.T) {
	racks := map[int32]string{0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
	for _, tc := range []struct {
		drop int32
		want []int32
	}{
		{-1, []int32{0, 3, 1, 5, 4, 2}},
		{5, []int32{0, 3, 1, 4, 2}},
	} {
		m := map[int32]string{}
		for id, r := range racks {
			if id != tc.drop {
				m[id] = r
			}
		}
		sorted, err := sortBrokers(rackBrokers(m))
		if err != nil {
			t.Fatal(err)
		}
		arranged, numRacks := rackAlternated(sorted)
		var got []int32
		for _, b := range arranged {
			got = append(got, b.ID)
		}
		if !slices.Equal(got, tc.want) || numRacks != 3 {
			t.Errorf("without %d: got %v (%d racks), want %v (3 racks)", tc.drop, got, numRacks, tc.want)
		}
	}
}

type layout struct {
	leaders  map[int32]int
	replicas map[int32]int
}

// checkLayout verifies what must hold for every assignment and returns the
// per-broker counts for the spread checks.
func checkLayout(t *testing.T, got [][]int32, brokers []BrokerInfo, partitions int32, rf int16) layout {
	t.Helper()
	known := map[int32]bool{}
	for _, b := range brokers {
		known[b.ID] = true
	}
	if len(got) != int(partitions) {
		t.Fatalf("%d partitions, want %d", len(got), partitions)
	}
	l := layout{leaders: map[int32]int{}, replicas: map[int32]int{}}
	for p, rs := range got {
		if len(rs) != int(rf) {
			t.Fatalf("partition %d: %v has %d replicas, want %d", p, rs, len(rs), rf)
		}
		for i, b := range rs {
			if !known[b] {
				t.Fatalf("partition %d: unknown broker %d in %v", p, b, rs)
			}
			if slices.Contains(rs[:i], b) {
				t.Fatalf("partition %d: broker %d twice in %v", p, b, rs)
			}
			l.replicas[b]++
		}
		l.leaders[rs[0]]++
	}
	return l
}

func spread(counts map[int32]int, brokers []BrokerInfo) (lo, hi int) {
	lo = math.MaxInt
	for _, b := range brokers {
		c := counts[b.ID]
		lo = min(lo, c)
		hi = max(hi, c)
	}
	return lo, hi
}

func TestAssignReplicasSpreadRackUnaware(t *testing.T) {
	for n := 1; n <= 7; n++ {
		brokers := make([]BrokerInfo, n)
		for i := range brokers {
			brokers[i] = BrokerInfo{ID: int32(10 + 3*i)} // ids need not be dense
		}
		for rf := int16(1); int(rf) <= n; rf++ {
			for _, partitions := range []int32{1, 2, int32(n), int32(n) + 1, 3 * int32(n), 3*int32(n) + 2, 50} {
				for start := 0; start < n; start++ {
					name := fmt.Sprintf("n=%d/rf=%d/p=%d/start=%d", n, rf, partitions, start)
					got := mustAssign(t, brokers, partitions, rf, start, 0)
					l := checkLayout(t, got, brokers, partitions, rf)
					if lo, hi := spread(l.leaders, brokers); hi-lo > 1 {
						t.Errorf("%s: leaders per broker range %d..%d: %v", name, lo, hi, got)
					}
					lo, hi := spread(l.replicas, brokers)
					if partitions%int32(n) == 0 && lo != hi {
						t.Errorf("%s: replicas per broker range %d..%d, want equal: %v", name, lo, hi, got)
					}
					if hi-lo > int(rf) {
						t.Errorf("%s: replicas per broker range %d..%d: %v", name, lo, hi, got)
					}
				}
			}
		}
	}
}

// The point of the shifting follower: the partitions one broker leads do
// not all put their second replica on the same broker.
func TestAssignReplicasFollowerShift(t *testing.T) {
	brokers := plainBrokers(0, 1, 2, 3, 4)
	got := mustAssign(t, brokers, 20, 2, 0, 0)
	followersOf0 := map[int32]bool{}
	for _, rs := range got {
		if rs[0] == 0 {
			followersOf0[rs[1]] = true
		}
	}
	if len(followersOf0) != 4 {
		t.Fatalf("broker 0's partitions have followers %v, want all four other brokers: %v", followersOf0, got)
	}
}

func TestAssignReplicasRackAware(t *testing.T) {
	layouts := []struct {
		name     string
		racks    map[int32]string
		balanced bool // same number of brokers on every rack
	}{
		{"3 racks x 2", map[int32]string{0: "a", 1: "b", 2: "b", 3: "c", 4: "c", 5: "a"}, true},
		{"2 racks x 3", map[int32]string{1: "r1", 2: "r1", 3: "r1", 4: "r2", 5: "r2", 6: "r2"}, true},
		{"4 racks x 1", map[int32]string{7: "w", 8: "x", 9: "y", 10: "z"}, true},
		{"uneven racks", map[int32]string{0: "a", 1: "a", 2: "a", 3: "b", 4: "c", 5: "c"}, false},
		{"one rack", map[int32]string{0: "only", 1: "only", 2: "only"}, true},
	}
	for _, lt := range layouts {
		brokers := rackBrokers(lt.racks)
		numRacks := len(slices.Compact(slices.Sorted(mapValues(lt.racks))))
		n := len(brokers)
		for rf := int16(1); int(rf) <= n; rf++ {
			for _, partitions := range []int32{1, int32(n), int32(n) + 1, 4 * int32(n), 37} {
				for start := 0; start < n; start++ {
					name := fmt.Sprintf("%s/rf=%d/p=%d/start=%d", lt.name, rf, partitions, start)
					got := mustAssign(t, brokers, partitions, rf, start, 0)
					l := checkLayout(t, got, brokers, partitions, rf)
					if lo, hi := spread(l.leaders, brokers); hi-lo > 1 {
						t.Errorf("%s: leaders per broker range %d..%d: %v", name, lo, hi, got)
					}
					if lt.balanced && partitions%int32(n) == 0 {
						if lo, hi := spread(l.replicas, brokers); lo != hi {
							t.Errorf("%s: replicas per broker range %d..%d, want equal: %v", name, lo, hi, got)
						}
					}
					for p, rs := range got {
						var racks []string
						for _, b := range rs {
							racks = append(racks, lt.racks[b])
						}
						distinct := len(slices.Compact(slices.Sorted(slices.Values(racks))))
						if want := min(int(rf), numRacks); distinct != want {
							t.Errorf("%s: partition %d %v spans %d racks, want %d", name, p, rs, distinct, want)
						}
					}
				}
			}
		}
	}
}

func mapValues(m map[int32]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

func TestAssignReplicasDeterministic(t *testing.T) {
	racks := map[int32]string{0: "a", 1: "b", 2: "b", 3: "c", 4: "c", 5: "a"}
	plain := plainBrokers(5, 3, 1, 0, 4, 2)
	for _, brokers := range [][]BrokerInfo{plain, rackBrokers(racks)} {
		want := mustAssign(t, brokers, 24, 3, 4, 0)
		for range 20 {
			// Same brokers in another order (rackBrokers shuffles through
			// map iteration; rotate the plain list by hand).
			other := rackBrokers(racks)
			if brokers[0].Rack == "" {
				other = append(slices.Clone(plain[2:]), plain[:2]...)
			}
			if got := mustAssign(t, other, 24, 3, 4, 0); !reflect.DeepEqual(got, want) {
				t.Fatalf("different result for the same brokers in another order:\n%v\n%v", got, want)
			}
		}
	}
}

func TestAssignReplicasStartIndex(t *testing.T) {
	brokers := plainBrokers(0, 1, 2, 3, 4)
	base := mustAssign(t, brokers, 12, 3, 2, 0)
	if base[0][0] != 2 || base[1][0] != 3 {
		t.Fatalf("start 2 should make broker 2 lead partition 0: %v", base)
	}
	for _, equiv := range []int{7, 12, -3, -8, math.MaxInt, math.MinInt} { // all ≡ 2 mod 5
		if got := mustAssign(t, brokers, 12, 3, equiv, 0); !reflect.DeepEqual(got, base) {
			t.Errorf("start %d: %v, want the same as start 2: %v", equiv, got, base)
		}
	}
}

func TestAssignReplicasAddingPartitions(t *testing.T) {
	// A topic with partition 0 on [2,3,0,1] over brokers 0..3 grows to 7
	// partitions, as in Kafka's AddPartitionsTest.testReplicaPlacementAllServers:
	// the new leaders continue the round robin from broker 2.
	brokers := plainBrokers(3, 1, 0, 2)
	start := ContinuationStartIndex(brokers, 2)
	if start != 2 {
		t.Fatalf("ContinuationStartIndex = %d, want 2", start)
	}
	got := mustAssign(t, brokers, 6, 4, start, 1)
	var leaders []int32
	for _, rs := range got {
		leaders = append(leaders, rs[0])
		if !slices.Equal(slices.Sorted(slices.Values(rs)), []int32{0, 1, 2, 3}) {
			t.Errorf("replicas %v, want all four brokers", rs)
		}
	}
	if want := []int32{3, 0, 1, 2, 3, 0}; !slices.Equal(leaders, want) {
		t.Fatalf("leaders of partitions 1..6 = %v, want %v", leaders, want)
	}

	// The follower shift moves at absolute partition ids that are multiples
	// of the broker count, as in Kafka: partitions 5..9 of a 5-broker
	// topic get the same layout whether they are added later or created
	// together with 0..4.
	five := plainBrokers(0, 1, 2, 3, 4)
	all := mustAssign(t, five, 10, 3, 0, 0)
	tail := mustAssign(t, five, 5, 3, 0, 5)
	if !reflect.DeepEqual(tail, all[5:]) {
		t.Fatalf("partitions 5..9 added later %v, created at once %v", tail, all[5:])
	}
}

func TestContinuationStartIndex(t *testing.T) {
	brokers := plainBrokers(10, 30, 20, 40)
	for _, tc := range []struct {
		leader int32
		want   int
	}{
		{10, 0}, {20, 1}, {30, 2}, {40, 3},
		{25, 2}, // leader's broker is gone: the next id up
		{5, 0},
		{50, 0}, // nothing at or above: wrap to the start
	} {
		if got := ContinuationStartIndex(brokers, tc.leader); got != tc.want {
			t.Errorf("ContinuationStartIndex(leader %d) = %d, want %d", tc.leader, got, tc.want)
		}
	}
	if got := ContinuationStartIndex(nil, 3); got != 0 {
		t.Errorf("no brokers: %d, want 0", got)
	}
}

func TestAssignReplicasErrors(t *testing.T) {
	three := plainBrokers(1, 2, 3)
	tests := []struct {
		name       string
		brokers    []BrokerInfo
		partitions int32
		rf         int16
		first      int32
		want       error
		mention    string
	}{
		{"zero partitions", three, 0, 1, 0, ErrInvalidPartitions, "got 0"},
		{"negative partitions", three, -4, 1, 0, ErrInvalidPartitions, "got -4"},
		{"negative first partition", three, 1, 1, -1, ErrInvalidPartitions, "-1"},
		{"partition id overflow", three, 2, 1, math.MaxInt32, ErrInvalidPartitions, "overflow"},
		{"zero replication factor", three, 1, 0, 0, ErrInvalidReplicationFactor, "got 0"},
		{"negative replication factor", three, 1, -1, 0, ErrInvalidReplicationFactor, "got -1"},
		{"replication factor above brokers", three, 1, 4, 0, ErrInvalidReplicationFactor, "brokers (3)"},
		{"no brokers", nil, 1, 1, 0, ErrInvalidReplicationFactor, "brokers (0)"},
		{"some brokers without rack", []BrokerInfo{{1, "a"}, {2, ""}, {3, "b"}, {4, ""}}, 1, 1, 0, ErrInconsistentRacks, "[2 4]"},
		{"duplicate broker", []BrokerInfo{{1, ""}, {2, ""}, {1, ""}}, 1, 1, 0, ErrInvalidBrokerList, "broker 1"},
		{"negative broker id", []BrokerInfo{{-1, ""}, {2, ""}}, 1, 1, 0, ErrInvalidBrokerList, "-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AssignReplicas(tc.brokers, tc.partitions, tc.rf, 0, tc.first)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error = %v, want %v", err, tc.want)
			}
			if got != nil {
				t.Fatalf("assignment %v returned with error", got)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("error %q does not mention %q", err, tc.mention)
			}
		})
	}
}

func TestAssignReplicasDoesNotMutateInput(t *testing.T) {
	brokers := []BrokerInfo{{3, "b"}, {1, "a"}, {2, "b"}, {0, "a"}}
	before := slices.Clone(brokers)
	mustAssign(t, brokers, 8, 2, 1, 0)
	if !slices.Equal(brokers, before) {
		t.Fatalf("brokers reordered: %v, was %v", brokers, before)
	}
}

func TestValidateAssignment(t *testing.T) {
	registered := set(1, 2, 3, 4)
	newTopic := AssignmentRules{Brokers: registered}
	pa := func(p int32, rs ...int32) PartitionAssignment { return PartitionAssignment{Partition: p, Replicas: rs} }

	tests := []struct {
		name      string
		asg       []PartitionAssignment
		rules     AssignmentRules
		want      error // nil, or the reason
		partition int32
		broker    int32
		mention   []string
	}{
		{name: "valid new topic", asg: []PartitionAssignment{pa(0, 1, 2), pa(1, 2, 3), pa(2, 3, 1)}, rules: newTopic},
		{name: "valid, listed out of order", asg: []PartitionAssignment{pa(2, 3, 1), pa(0, 1, 2), pa(1, 2, 3)}, rules: newTopic},
		{name: "valid single replica", asg: []PartitionAssignment{pa(0, 4)}, rules: newTopic},
		{
			name:  "valid added partitions",
			asg:   []PartitionAssignment{pa(3, 4, 1), pa(4, 1, 2)},
			rules: AssignmentRules{FirstPartitionID: 3, Partitions: 2, ReplicationFactor: 2, Brokers: registered},
		},
		{
			name:  "duplicate partition",
			asg:   []PartitionAssignment{pa(0, 1), pa(1, 2), pa(0, 3)},
			rules: newTopic, want: ErrDuplicatePartition, partition: 0, broker: -1,
			mention: []string{"partition 0"},
		},
		{
			name:  "gap in partition ids",
			asg:   []PartitionAssignment{pa(0, 1), pa(2, 2)},
			rules: newTopic, want: ErrNonContiguousPartitions, partition: 2, broker: -1,
			mention: []string{"partition 2", "0..1"},
		},
		{
			name:  "negative partition id",
			asg:   []PartitionAssignment{pa(-1, 1), pa(0, 2)},
			rules: newTopic, want: ErrNonContiguousPartitions, partition: -1, broker: -1,
			mention: []string{"partition -1"},
		},
		{
			name:  "not starting from zero",
			asg:   []PartitionAssignment{pa(1, 1), pa(2, 2)},
			rules: newTopic, want: ErrNonContiguousPartitions, partition: 2, broker: -1,
			mention: []string{"partition 2", "contiguous from 0"},
		},
		{
			name:  "added partitions must start at the current count",
			asg:   []PartitionAssignment{pa(2, 1), pa(3, 2)},
			rules: AssignmentRules{FirstPartitionID: 3, Brokers: registered}, want: ErrNonContiguousPartitions,
			partition: 2, broker: -1, mention: []string{"partition 2", "contiguous from 3"},
		},
		{
			name:  "fewer partitions than required",
			asg:   []PartitionAssignment{pa(3, 1), pa(5, 2)},
			rules: AssignmentRules{FirstPartitionID: 3, Partitions: 3, Brokers: registered}, want: ErrNonContiguousPartitions,
			partition: 4, broker: -1, mention: []string{"partition 4 has no assignment"},
		},
		{
			name:  "more partitions than required",
			asg:   []PartitionAssignment{pa(0, 1), pa(1, 2), pa(2, 3)},
			rules: AssignmentRules{Partitions: 2, Brokers: registered}, want: ErrNonContiguousPartitions,
			partition: 2, broker: -1, mention: []string{"partition 2"},
		},
		{
			name: "no partitions", asg: nil, rules: newTopic,
			want: ErrNonContiguousPartitions, partition: -1, broker: -1, mention: []string{"no partitions"},
		},
		{
			name: "negative first partition id", asg: []PartitionAssignment{pa(0, 1)},
			rules: AssignmentRules{FirstPartitionID: -2, Brokers: registered},
			want:  ErrNonContiguousPartitions, partition: -1, broker: -1, mention: []string{"-2"},
		},
		{
			name: "partition count overflows ids", asg: []PartitionAssignment{pa(math.MaxInt32-1, 1)},
			rules: AssignmentRules{FirstPartitionID: math.MaxInt32 - 1, Partitions: 3, Brokers: registered},
			want:  ErrNonContiguousPartitions, partition: -1, broker: -1, mention: []string{"overflow"},
		},
		{
			name:  "empty replica list",
			asg:   []PartitionAssignment{pa(0, 1), pa(1)},
			rules: newTopic, want: ErrEmptyReplicaList, partition: 1, broker: -1,
			mention: []string{"partition 1", "empty"},
		},
		{
			name:  "duplicate replica",
			asg:   []PartitionAssignment{pa(0, 1, 2), pa(1, 3, 2, 3)},
			rules: newTopic, want: ErrDuplicateReplica, partition: 1, broker: 3,
			mention: []string{"partition 1", "broker 3"},
		},
		{
			name:  "unknown broker",
			asg:   []PartitionAssignment{pa(0, 1, 2), pa(1, 2, 7)},
			rules: newTopic, want: ErrUnknownBroker, partition: 1, broker: 7,
			mention: []string{"partition 1", "broker 7", "registered"},
		},
		{
			name:  "no brokers known",
			asg:   []PartitionAssignment{pa(0, 1)},
			rules: AssignmentRules{}, want: ErrUnknownBroker, partition: 0, broker: 1,
			mention: []string{"partition 0", "broker 1"},
		},
		{
			name:  "replication factor differs between partitions",
			asg:   []PartitionAssignment{pa(0, 1, 2), pa(1, 2, 3), pa(2, 4)},
			rules: newTopic, want: ErrInconsistentReplicationFactor, partition: 2, broker: -1,
			mention: []string{"partition 2 has 1 replicas", "partition 0 has 2"},
		},
		{
			name:  "replication factor differs from the topic's",
			asg:   []PartitionAssignment{pa(3, 1, 2, 3)},
			rules: AssignmentRules{FirstPartitionID: 3, ReplicationFactor: 2, Brokers: registered},
			want:  ErrInconsistentReplicationFactor, partition: 3, broker: -1,
			mention: []string{"partition 3 has 3 replicas", "replication factor has 2"},
		},
		{
			name:  "first problem in listing order is reported",
			asg:   []PartitionAssignment{pa(1, 9), pa(0, 1, 1)},
			rules: newTopic, want: ErrUnknownBroker, partition: 1, broker: 9,
			mention: []string{"broker 9"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateAssignment(tc.asg, tc.rules)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !errors.Is(err, ErrInvalidReplicaAssignment) {
				t.Fatalf("error = %v, want %v (and ErrInvalidReplicaAssignment)", err, tc.want)
			}
			var ae *AssignmentError
			if !errors.As(err, &ae) {
				t.Fatalf("error %v is not an *AssignmentError", err)
			}
			if ae.Partition != tc.partition || ae.Broker != tc.broker {
				t.Fatalf("blames partition %d broker %d, want %d %d (%v)", ae.Partition, ae.Broker, tc.partition, tc.broker, err)
			}
			if !strings.HasPrefix(err.Error(), "invalid replica assignment: ") {
				t.Fatalf("message %q", err)
			}
			for _, m := range tc.mention {
				if !strings.Contains(err.Error(), m) {
					t.Fatalf("message %q does not mention %q", err, m)
				}
			}
		})
	}
}

func TestAssignmentReasonsAreDistinct(t *testing.T) {
	reasons := []error{ErrDuplicatePartition, ErrNonContiguousPartitions, ErrEmptyReplicaList,
		ErrDuplicateReplica, ErrUnknownBroker, ErrInconsistentReplicationFactor}
	for i, a := range reasons {
		if !errors.Is(a, ErrInvalidReplicaAssignment) {
			t.Errorf("%v does not match ErrInvalidReplicaAssignment", a)
		}
		if a.Error() == "" {
			t.Errorf("reason %d has no text", i)
		}
		for j, b := range reasons {
			if i != j && errors.Is(a, b) {
				t.Errorf("%v matches %v", a, b)
			}
		}
	}
}

// What AssignReplicas produces must pass ValidateAssignment.
func TestAssignReplicasOutputValidates(t *testing.T) {
	brokers := plainBrokers(1, 2, 3, 4, 5)
	got := mustAssign(t, brokers, 9, 3, 3, 4)
	asg := make([]PartitionAssignment, len(got))
	for i, rs := range got {
		asg[i] = PartitionAssignment{Partition: int32(4 + i), Replicas: rs}
	}
	err := ValidateAssignment(asg, AssignmentRules{FirstPartitionID: 4, Partitions: 9, ReplicationFactor: 3, Brokers: set(1, 2, 3, 4, 5)})
	if err != nil {
		t.Fatal(err)
	}
}
