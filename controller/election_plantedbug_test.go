package controller

import (
	"reflect"
	"testing"

	"github.com/ctrlquorum/ctrlquorum/internal/plantedbug"
)

// TestPlantedUncleanElection: with the planted unclean-election bug on (a
// build with -tags plantedbugs), an offline election takes a live replica
// outside the ISR over a live ISR member; in any other build the variable
// changes nothing.
func TestPlantedUncleanElection(t *testing.T) {
	t.Setenv(plantedbug.Env, string(plantedbug.UncleanElection))
	in := ElectionInput{Partition: PartitionView{Replicas: ids(1, 2, 3), ISR: ids(1, 2), Leader: 1}, Live: set(2, 3)}
	got, err := Elect(OfflineElection, in)
	if err != nil {
		t.Fatal(err)
	}
	want := Election{Leader: 2, ISR: ids(2), Receivers: ids(2, 3)}
	if plantedbug.Built {
		want = Election{Leader: 3, ISR: ids(3), Receivers: ids(2, 3), Unclean: true}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("built with the tag: %v; Elect = %+v, want %+v", plantedbug.Built, got, want)
	}
}
