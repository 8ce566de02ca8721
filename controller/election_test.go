package controller

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ctrlquorum/ctrlquorum/raftlog"
)

// ids builds an expected id list; an empty call gives the empty, non-nil
// slice that Elect returns for an empty set.
func ids(v ...int32) []int32 {
	if v == nil {
		return []int32{}
	}
	return v
}

func set(v ...int32) BrokerSet { return NewBrokerSet(v...) }

const none = raftlog.NoLeader

type electCase struct {
	name    string
	s       Strategy
	in      ElectionInput
	want    Election
	wantErr error // nil, or the sentinel errors.Is must match
}

func electionCases() []electCase {
	return []electCase{
		// Offline.
		{
			name: "offline/leader dead, next ISR member in assignment order",
			s:    OfflineElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2, 3), ISR: ids(1, 2, 3), Leader: 1},
				Live:      set(2, 3),
			},
			want: Election{Leader: 2, ISR: ids(2, 3), Receivers: ids(2, 3)},
		},
		{
			name: "offline/assignment order picks the leader, ISR order is kept",
			s:    OfflineElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2, 3), ISR: ids(3, 1, 2), Leader: 1},
				Live:      set(2, 3),
			},
			want: Election{Leader: 2, ISR: ids(3, 2), Receivers: ids(2, 3)},
		},
		{
			name: "offline/live replica outside the ISR is skipped",
			s:    OfflineElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2, 3), ISR: ids(1, 3), Leader: 1},
				Live:      set(2, 3),
			},
			want: Election{Leader: 3, ISR: ids(3), Receivers: ids(2, 3)},
		},
		{
			name: "offline/no current leader",
			s:    OfflineElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2), ISR: ids(2), Leader: none},
				Live:      set(1, 2),
			},
			want: Election{Leader: 2, ISR: ids(2), Receivers: ids(1, 2)},
		},
		{
			name: "offline/clean leader wins even with unclean enabled",
			s:    OfflineElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2, 3), ISR: ids(3), Leader: none},
				Live:      set(1, 2, 3),
				Unclean:   true,
			},
			want: Election{Leader: 3, ISR: ids(3), Receivers: ids(1, 2, 3)},
		},
		{
			name: "offline/shutting-down brokers are not excluded",
			s:    OfflineElection,
			in: ElectionInput{
				Partition:    PartitionView{Replicas: ids(1, 2), ISR: ids(1, 2), Leader: none},
				Live:         set(1, 2),
				ShuttingDown: set(1),
			},
			want: Election{Leader: 1, ISR: ids(1, 2), Receivers: ids(1, 2)},
		},
		{
			name: "offline/last ISR member gone: leaderless, ISR keeps it",
			s:    OfflineElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2), ISR: ids(1), Leader: 1},
				Live:      set(2),
			},
			want:    Election{Leader: none, ISR: ids(1), Receivers: ids()},
			wantErr: ErrNoEligibleLeader,
		},
		{
			name: "offline/several ISR members gone at once: all kept",
			s:    OfflineElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2, 3), ISR: ids(2, 1), Leader: 2},
				Live:      set(3),
			},
			want:    Election{Leader: none, ISR: ids(2, 1), Receivers: ids()},
			wantErr: ErrNoEligibleLeader,
		},
		{
			name: "offline/already leaderless stays so",
			s:    OfflineElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2), ISR: ids(1), Leader: none},
				Live:      set(2),
			},
			want:    Election{Leader: none, ISR: ids(1), Receivers: ids()},
			wantErr: ErrNoEligibleLeader,
		},
		{
			name: "offline/unclean picks first live replica, ISR is the leader",
			s:    OfflineElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2, 3), ISR: ids(1), Leader: 1},
				Live:      set(3, 2),
				Unclean:   true,
			},
			want: Election{Leader: 2, ISR: ids(2), Receivers: ids(2, 3), Unclean: true},
		},
		{
			name: "offline/unclean with nothing live keeps the ISR",
			s:    OfflineElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2, 3), ISR: ids(1), Leader: 1},
				Live:      set(4),
				Unclean:   true,
			},
			want:    Election{Leader: none, ISR: ids(1), Receivers: ids()},
			wantErr: ErrNoEligibleLeader,
		},
		{
			name: "offline/empty ISR, unclean off",
			s:    OfflineElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2), ISR: ids(), Leader: none},
				Live:      set(1, 2),
			},
			want:    Election{Leader: none, ISR: ids(), Receivers: ids()},
			wantErr: ErrNoEligibleLeader,
		},
		{
			name: "offline/empty ISR, unclean on",
			s:    OfflineElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2), ISR: nil, Leader: none},
				Live:      set(2),
				Unclean:   true,
			},
			want: Election{Leader: 2, ISR: ids(2), Receivers: ids(2), Unclean: true},
		},
		{
			name: "offline/nil live set means nothing is live",
			s:    OfflineElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2), ISR: ids(1, 2), Leader: 1},
			},
			want:    Election{Leader: none, ISR: ids(1, 2), Receivers: ids()},
			wantErr: ErrNoEligibleLeader,
		},
		{
			name: "offline/live ISR member that is not a replica cannot lead",
			s:    OfflineElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1), ISR: ids(9), Leader: 1},
				Live:      set(9),
			},
			want:    Election{Leader: none, ISR: ids(9), Receivers: ids()},
			wantErr: ErrNoEligibleLeader,
		},

		// Preferred.
		{
			name: "preferred/moves leadership to the first replica, ISR unchanged",
			s:    PreferredElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2, 3), ISR: ids(2, 3, 1), Leader: 2},
				Live:      set(1, 2, 3),
			},
			want: Election{Leader: 1, ISR: ids(2, 3, 1), Receivers: ids(1, 2, 3)},
		},
		{
			name: "preferred/receivers are only the live replicas",
			s:    PreferredElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2, 3), ISR: ids(1, 2, 3), Leader: 2},
				Live:      set(1, 2),
			},
			want: Election{Leader: 1, ISR: ids(1, 2, 3), Receivers: ids(1, 2)},
		},
		{
			name: "preferred/no current leader",
			s:    PreferredElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(3, 1), ISR: ids(1, 3), Leader: none},
				Live:      set(1, 3),
			},
			want: Election{Leader: 3, ISR: ids(1, 3), Receivers: ids(3, 1)},
		},
		{
			name: "preferred/already leader",
			s:    PreferredElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2), ISR: ids(1, 2), Leader: 1},
				Live:      set(1, 2),
			},
			want:    Election{Leader: 1, ISR: ids(1, 2), Receivers: ids()},
			wantErr: ErrElectionNotNeeded,
		},
		{
			name: "preferred/already leader though its broker is gone",
			s:    PreferredElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2), ISR: ids(1, 2), Leader: 1},
				Live:      set(2),
			},
			want:    Election{Leader: 1, ISR: ids(1, 2), Receivers: ids()},
			wantErr: ErrElectionNotNeeded,
		},
		{
			name: "preferred/not live",
			s:    PreferredElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2), ISR: ids(1, 2), Leader: 2},
				Live:      set(2),
			},
			want:    Election{Leader: 2, ISR: ids(1, 2), Receivers: ids()},
			wantErr: ErrPreferredNotAvailable,
		},
		{
			name: "preferred/live but not in ISR",
			s:    PreferredElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2), ISR: ids(2), Leader: 2},
				Live:      set(1, 2),
			},
			want:    Election{Leader: 2, ISR: ids(2), Receivers: ids()},
			wantErr: ErrPreferredNotAvailable,
		},
		{
			name: "preferred/not in ISR even with unclean enabled",
			s:    PreferredElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2), ISR: ids(2), Leader: 2},
				Live:      set(1, 2),
				Unclean:   true,
			},
			want:    Election{Leader: 2, ISR: ids(2), Receivers: ids()},
			wantErr: ErrPreferredNotAvailable,
		},
		{
			name: "preferred/empty ISR",
			s:    PreferredElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2), ISR: ids(), Leader: none},
				Live:      set(1, 2),
			},
			want:    Election{Leader: none, ISR: ids(), Receivers: ids()},
			wantErr: ErrPreferredNotAvailable,
		},
		{
			name: "preferred/no replicas",
			s:    PreferredElection,
			in: ElectionInput{
				Partition: PartitionView{Leader: none},
				Live:      set(1),
			},
			want:    Election{Leader: none, ISR: ids(), Receivers: ids()},
			wantErr: ErrPreferredNotAvailable,
		},

		// Reassigned.
		{
			name: "reassigned/first target replica live and in ISR",
			s:    ReassignedElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2, 3, 4, 5, 6), ISR: ids(1, 2, 3, 4, 5), Leader: 1, Target: ids(4, 5, 6)},
				Live:      set(1, 2, 3, 4, 5, 6),
			},
			want: Election{Leader: 4, ISR: ids(1, 2, 3, 4, 5), Receivers: ids(4, 5, 6)},
		},
		{
			name: "reassigned/target order, not ISR or assignment order",
			s:    ReassignedElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 5, 6), ISR: ids(5, 6, 1), Leader: 1, Target: ids(6, 5)},
				Live:      set(1, 5, 6),
			},
			want: Election{Leader: 6, ISR: ids(5, 6, 1), Receivers: ids(6, 5)},
		},
		{
			name: "reassigned/skips a dead target and one outside the ISR",
			s:    ReassignedElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 4, 5, 6), ISR: ids(1, 4, 6), Leader: 1, Target: ids(4, 5, 6)},
				Live:      set(1, 5, 6),
			},
			want: Election{Leader: 6, ISR: ids(1, 4, 6), Receivers: ids(4, 5, 6)},
		},
		{
			name: "reassigned/no current leader",
			s:    ReassignedElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2), ISR: ids(2), Leader: none, Target: ids(2)},
				Live:      set(2),
			},
			want: Election{Leader: 2, ISR: ids(2), Receivers: ids(2)},
		},
		{
			name: "reassigned/none qualifies",
			s:    ReassignedElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2, 3, 4), ISR: ids(1, 2, 3), Leader: 1, Target: ids(3, 4)},
				Live:      set(1, 2, 4),
			},
			want:    Election{Leader: 1, ISR: ids(1, 2, 3), Receivers: ids()},
			wantErr: ErrNoEligibleLeader,
		},
		{
			name: "reassigned/empty target",
			s:    ReassignedElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2), ISR: ids(1, 2), Leader: 1},
				Live:      set(1, 2),
			},
			want:    Election{Leader: 1, ISR: ids(1, 2), Receivers: ids()},
			wantErr: ErrNoEligibleLeader,
		},
		{
			name: "reassigned/empty ISR",
			s:    ReassignedElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2), ISR: ids(), Leader: none, Target: ids(2)},
				Live:      set(1, 2),
			},
			want:    Election{Leader: none, ISR: ids(), Receivers: ids()},
			wantErr: ErrNoEligibleLeader,
		},

		// ControlledShutdown.
		{
			name: "shutdown/leadership moves off the shutting-down leader",
			s:    ControlledShutdownElection,
			in: ElectionInput{
				Partition:    PartitionView{Replicas: ids(1, 2, 3), ISR: ids(1, 2, 3), Leader: 1},
				Live:         set(1, 2, 3),
				ShuttingDown: set(1),
			},
			want: Election{Leader: 2, ISR: ids(2, 3), Receivers: ids(1, 2, 3)},
		},
		{
			name: "shutdown/assignment order picks, ISR order is kept",
			s:    ControlledShutdownElection,
			in: ElectionInput{
				Partition:    PartitionView{Replicas: ids(1, 2, 3), ISR: ids(3, 1, 2), Leader: 1},
				Live:         set(1, 2, 3),
				ShuttingDown: set(1),
			},
			want: Election{Leader: 2, ISR: ids(3, 2), Receivers: ids(1, 2, 3)},
		},
		{
			name: "shutdown/several brokers shutting down",
			s:    ControlledShutdownElection,
			in: ElectionInput{
				Partition:    PartitionView{Replicas: ids(1, 2, 3), ISR: ids(1, 2, 3), Leader: 1},
				Live:         set(1, 2, 3),
				ShuttingDown: set(1, 2),
			},
			want: Election{Leader: 3, ISR: ids(3), Receivers: ids(1, 2, 3)},
		},
		{
			name: "shutdown/dead ISR member is skipped but stays in the ISR",
			s:    ControlledShutdownElection,
			in: ElectionInput{
				Partition:    PartitionView{Replicas: ids(1, 2, 3), ISR: ids(1, 2, 3), Leader: 1},
				Live:         set(1, 3),
				ShuttingDown: set(1),
			},
			want: Election{Leader: 3, ISR: ids(2, 3), Receivers: ids(1, 3)},
		},
		{
			name: "shutdown/replica outside the ISR cannot take over",
			s:    ControlledShutdownElection,
			in: ElectionInput{
				Partition:    PartitionView{Replicas: ids(1, 2), ISR: ids(1), Leader: 1},
				Live:         set(1, 2),
				ShuttingDown: set(1),
			},
			want:    Election{Leader: 1, ISR: ids(1), Receivers: ids()},
			wantErr: ErrNoEligibleLeader,
		},
		{
			name: "shutdown/single replica shutting down",
			s:    ControlledShutdownElection,
			in: ElectionInput{
				Partition:    PartitionView{Replicas: ids(1), ISR: ids(1), Leader: 1},
				Live:         set(1),
				ShuttingDown: set(1),
			},
			want:    Election{Leader: 1, ISR: ids(1), Receivers: ids()},
			wantErr: ErrNoEligibleLeader,
		},
		{
			name: "shutdown/empty ISR",
			s:    ControlledShutdownElection,
			in: ElectionInput{
				Partition:    PartitionView{Replicas: ids(1, 2), ISR: ids(), Leader: none},
				Live:         set(1, 2),
				ShuttingDown: set(1),
			},
			want:    Election{Leader: none, ISR: ids(), Receivers: ids()},
			wantErr: ErrNoEligibleLeader,
		},
		{
			name: "shutdown/no current leader",
			s:    ControlledShutdownElection,
			in: ElectionInput{
				Partition:    PartitionView{Replicas: ids(1, 2), ISR: ids(1, 2), Leader: none},
				Live:         set(1, 2),
				ShuttingDown: set(1),
			},
			want: Election{Leader: 2, ISR: ids(2), Receivers: ids(1, 2)},
		},
		{
			name: "shutdown/nil shutting-down set",
			s:    ControlledShutdownElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2), ISR: ids(2, 1), Leader: 1},
				Live:      set(1, 2),
			},
			want: Election{Leader: 1, ISR: ids(2, 1), Receivers: ids(1, 2)},
		},

		// NoOp.
		{
			name: "noop/keeps leader and ISR, receivers are the assignment",
			s:    NoOpElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2, 3), ISR: ids(2, 1), Leader: 2},
				Live:      set(2),
			},
			want: Election{Leader: 2, ISR: ids(2, 1), Receivers: ids(1, 2, 3)},
		},
		{
			name: "noop/leaderless with empty ISR and nothing live",
			s:    NoOpElection,
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2), Leader: none},
			},
			want: Election{Leader: none, ISR: ids(), Receivers: ids(1, 2)},
		},

		// Not a strategy.
		{
			name: "zero strategy",
			s:    Strategy(0),
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1, 2), ISR: ids(1, 2), Leader: 1},
				Live:      set(1, 2),
			},
			want:    Election{Leader: 1, ISR: ids(1, 2), Receivers: ids()},
			wantErr: ErrUnknownStrategy,
		},
		{
			name: "out-of-range strategy",
			s:    Strategy(42),
			in: ElectionInput{
				Partition: PartitionView{Replicas: ids(1), ISR: ids(1), Leader: none},
			},
			want:    Election{Leader: none, ISR: ids(1), Receivers: ids()},
			wantErr: ErrUnknownStrategy,
		},
	}
}

func clonePartition(p PartitionView) PartitionView {
	return PartitionView{
		Replicas: slices.Clone(p.Replicas),
		ISR:      slices.Clone(p.ISR),
		Leader:   p.Leader,
		Target:   slices.Clone(p.Target),
	}
}

func TestElect(t *testing.T) {
	for _, tc := range electionCases() {
		t.Run(tc.name, func(t *testing.T) {
			before := clonePartition(tc.in.Partition)
			got, err := Elect(tc.s, tc.in)

			if tc.wantErr == nil && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error = %v, want %v", err, tc.wantErr)
				}
				var ee *ElectionError
				if !errors.As(err, &ee) || ee.Strategy != tc.s || ee.Detail == "" {
					t.Fatalf("error %v is not an *ElectionError for %v with detail", err, tc.s)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Elect(%v) =\n  %+v\nwant\n  %+v", tc.s, got, tc.want)
			}

			// The input must be untouched, and the output must not alias
			// it: scribbling on the result must leave the input intact.
			if !reflect.DeepEqual(tc.in.Partition, before) {
				t.Fatalf("input mutated: %+v, was %+v", tc.in.Partition, before)
			}
			for _, s := range [][]int32{got.ISR, got.Receivers} {
				for i := range s {
					s[i] = -99
				}
			}
			if !reflect.DeepEqual(tc.in.Partition, before) {
				t.Fatalf("result aliases input: %+v, was %+v", tc.in.Partition, before)
			}

			// Same input, same answer.
			again, err2 := Elect(tc.s, ElectionInput{
				Partition: clonePartition(before), Live: tc.in.Live,
				ShuttingDown: tc.in.ShuttingDown, Unclean: tc.in.Unclean,
			})
			if !reflect.DeepEqual(again, tc.want) || (err == nil) != (err2 == nil) ||
				(err != nil && err.Error() != err2.Error()) {
				t.Fatalf("not deterministic: %+v / %v vs %+v / %v", again, err2, tc.want, err)
			}
		})
	}
}

// Every strategy must have at least one success and one failure case above,
// except NoOp, which cannot fail.
func TestElectCoverage(t *testing.T) {
	ok := map[Strategy]bool{}
	failed := map[Strategy]bool{}
	for _, tc := range electionCases() {
		if tc.wantErr == nil {
			ok[tc.s] = true
		} else {
			failed[tc.s] = true
		}
	}
	for _, s := range []Strategy{OfflineElection, PreferredElection, ReassignedElection, ControlledShutdownElection, NoOpElection} {
		if !ok[s] {
			t.Errorf("%v: no success case", s)
		}
		if s != NoOpElection && !failed[s] {
			t.Errorf("%v: no failure case", s)
		}
	}
}

func TestElectionErrorMessage(t *testing.T) {
	_, err := Elect(PreferredElection, ElectionInput{
		Partition: PartitionView{Replicas: ids(4, 2), ISR: ids(2), Leader: 2},
		Live:      set(2, 4),
	})
	const want = "Preferred election: preferred leader not available: preferred replica 4 is not in ISR [2]"
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
	_, err = Elect(OfflineElection, ElectionInput{
		Partition: PartitionView{Replicas: ids(1, 2), ISR: ids(1), Leader: 1},
		Live:      set(2),
	})
	if err == nil || !strings.Contains(err.Error(), "unclean election is disabled") {
		t.Fatalf("offline error %v does not say unclean election is off", err)
	}
}

func TestStrategyString(t *testing.T) {
	for s, want := range map[Strategy]string{
		OfflineElection:            "Offline",
		PreferredElection:          "Preferred",
		ReassignedElection:         "Reassigned",
		ControlledShutdownElection: "ControlledShutdown",
		NoOpElection:               "NoOp",
		Strategy(0):                "Strategy(0)",
		Strategy(6):                "Strategy(6)",
	} {
		if got := s.String(); got != want {
			t.Errorf("Strategy(%d).String() = %q, want %q", uint8(s), got, want)
		}
		if s.Valid() != !strings.HasPrefix(want, "Strategy(") {
			t.Errorf("Strategy(%d).Valid() = %v", uint8(s), s.Valid())
		}
	}
}

func TestShrinkISR(t *testing.T) {
	tests := []struct {
		name string
		isr  []int32
		gone Brokers
		want []int32
	}{
		{"one of several leaves", ids(3, 1, 2), set(1), ids(3, 2)},
		{"several leave, order kept", ids(3, 1, 2), set(1, 3), ids(2)},
		{"last member stays", ids(2), set(2), ids(2)},
		{"all leave at once: all stay", ids(2, 1), set(1, 2), ids(2, 1)},
		{"nobody gone", ids(1, 2), set(), ids(1, 2)},
		{"nil gone set", ids(1, 2), nil, ids(1, 2)},
		{"empty ISR", nil, set(1), ids()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(tc.isr)
			got := ShrinkISR(tc.isr, tc.gone)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ShrinkISR(%v) = %v, want %v", tc.isr, got, tc.want)
			}
			for i := range got {
				got[i] = -99
			}
			if !slices.Equal(tc.isr, before) {
				t.Fatalf("input changed or aliased: %v, was %v", tc.isr, before)
			}
		})
	}
}

func TestBrokerSet(t *testing.T) {
	in := []int32{5, 1, 3, 1, 5}
	s := NewBrokerSet(in...)
	in[0] = 100
	if got := s.IDs(); !slices.Equal(got, []int32{1, 3, 5}) {
		t.Fatalf("IDs = %v", got)
	}
	if s.Len() != 3 || !s.Has(3) || s.Has(2) || s.Has(100) {
		t.Fatalf("membership wrong: %v", s)
	}
	if got := s.String(); got != "[1,3,5]" {
		t.Fatalf("String = %q", got)
	}
	w := s.With(2, 9, 3)
	if !slices.Equal(w.IDs(), []int32{1, 2, 3, 5, 9}) || !slices.Equal(s.IDs(), []int32{1, 3, 5}) {
		t.Fatalf("With: %v (original now %v)", w, s)
	}
	wo := w.Without(1, 9, 42)
	if !slices.Equal(wo.IDs(), []int32{2, 3, 5}) || !slices.Equal(w.IDs(), []int32{1, 2, 3, 5, 9}) {
		t.Fatalf("Without: %v (original now %v)", wo, w)
	}
	if e := s.Without(1, 3, 5); e.Len() != 0 || e.IDs() != nil || e.String() != "[]" {
		t.Fatalf("emptied set: %v", e)
	}
	var zero BrokerSet
	if zero.Has(0) || zero.Len() != 0 {
		t.Fatal("zero set not empty")
	}
	got := s.IDs()
	got[0] = 77
	if !s.Has(1) || s.Has(77) {
		t.Fatal("IDs aliases the set")
	}
}
