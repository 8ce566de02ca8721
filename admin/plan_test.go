package admin

import (
	"reflect"
	"strings"
	"testing"
)

func TestGenerateDrainMovesEveryReplicaOffTheBroker(t *testing.T) {
	cur := []Assignment{
		{"a", 0, []int32{1, 2, 3}},
		{"a", 1, []int32{2, 3, 4}},
		{"a", 2, []int32{3, 1, 2}},
		{"b", 0, []int32{1, 4}},
	}
	plan, moves, err := GenerateDrain(cur, []int32{1, 2, 3, 4, 5}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Partitions) != 3 || len(moves) != 3 {
		t.Fatalf("plan %+v: want the three partitions with a replica on 1", plan)
	}
	for _, p := range plan.Partitions {
		for _, r := range p.Replicas {
			if r == 1 {
				t.Fatalf("%s-%d still has broker 1: %v", p.Topic, p.Partition, p.Replicas)
			}
		}
	}
	// Broker 5 holds nothing: it takes the first replica; position is kept.
	if got := plan.Partitions[0].Replicas; !reflect.DeepEqual(got, []int32{5, 2, 3}) {
		t.Fatalf("a-0 proposed %v, want [5 2 3]", got)
	}
	if err := plan.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestGenerateDrainFailsWithoutRoom(t *testing.T) {
	_, _, err := GenerateDrain([]Assignment{{"a", 0, []int32{1, 2, 3}}}, []int32{1, 2, 3}, 1)
	if err == nil || !strings.Contains(err.Error(), "a-0") {
		t.Fatalf("err = %v, want one naming a-0", err)
	}
}

func TestReadPlanRejectsBadPlans(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"version":2,"partitions":[{"topic":"a","partition":0,"replicas":[1]}]}`, "version 2"},
		{`{"version":1,"partitions":[]}`, "no partitions"},
		{`{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,1]}]}`, "twice"},
		{`{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1]},{"topic":"a","partition":0,"replicas":[2]}]}`, "a-0 is listed twice"},
		{`{"version":1,"partitions":[{"topic":"a","partition":0,"replica":[1]}]}`, "unknown field"},
	} {
		if _, err := ReadPlan(strings.NewReader(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadPlan(%s) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
	p, err := ReadPlan(strings.NewReader(`{"version":1,"partitions":[{"topic":"a","partition":3,"replicas":[2,1]}]}`))
	if err != nil || p.Partitions[0].Partition != 3 {
		t.Fatalf("valid plan: %+v %v", p, err)
	}
}
