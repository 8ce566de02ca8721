package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/check"
	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// sampleRun is a small run with one lost creation and one stale epoch
// accepted; everything else is in order.
func sampleRun() Run {
	ops := []history.Op{
		{ID: 1, Client: 0, Kind: history.Create, Topic: "kept", Args: history.Args{Partitions: 1, ReplicationFactor: 3}, Invoke: at(0), Complete: at(10), Outcome: history.OK, Result: &history.Result{TopicID: "k1"}},
		{ID: 2, Client: 1, Kind: history.Create, Topic: "lost", Args: history.Args{Partitions: 1, ReplicationFactor: 3}, Invoke: at(0), Complete: at(10), Outcome: history.OK, Result: &history.Result{TopicID: "l1"}},
		{ID: 3, Client: 0, Kind: history.Describe, Topic: "kept", Invoke: at(20), Complete: at(30), Outcome: history.OK, Result: &history.Result{TopicID: "k1", Partitions: 1}},
		{ID: 4, Client: 1, Kind: history.Delete, Topic: "kept", Invoke: at(1500), Outcome: history.Unknown, Error: "i/o timeout"},
		{ID: 5, Client: 0, Kind: history.Create, Topic: "other", Args: history.Args{Partitions: 1, ReplicationFactor: 3}, Invoke: at(1600), Complete: at(1700), Outcome: history.Fail, Code: kerr.NotController.Code},
		{ID: 6, Client: 0, Kind: history.Create, Topic: "other", Args: history.Args{Partitions: 1, ReplicationFactor: 3}, Invoke: at(1800), Complete: at(1900), Outcome: history.OK, Result: &history.Result{TopicID: "o1"}},
	}
	obs := []history.Observation{
		{Broker: 1, Incarnation: "a", Seq: 1, Time: at(5), Request: history.UpdateMetadata, ControllerEpoch: 2, Partition: -1, Accepted: true},
		{Broker: 1, Incarnation: "a", Seq: 2, Time: at(6), Request: history.UpdateMetadata, ControllerEpoch: 1, Partition: -1, Accepted: true},
	}
	faults := []history.FaultEvent{
		{Fault: 1, Kind: "kill", Phase: history.Start, Time: at(1000), Nodes: []int{2}, Detail: "kill -9 the voter on 127.0.0.2"},
		{Fault: 1, Kind: "kill", Phase: history.Heal, Time: at(1600), Nodes: []int{2}, Detail: "restart the voter"},
	}
	return Run{
		Seed: 42, Duration: time.Minute, Nemesis: "kill", Schedule: []string{"fault 1 kill at +1s for 600ms hosts [2]"},
		Skipped: []string{"partition-leader: not root"}, Started: at(0), Ended: at(3000),
		Ops: ops, Observations: obs, Faults: faults,
		Samples: []history.ClusterSample{{Time: at(2000), Live: []int32{1, 2, 3}, Partitions: []history.PartitionSample{{Topic: "kept", Partition: 0, Leader: 1, ISR: []int32{1, 2}}}}},
		Hashes:  map[string]history.VoterHash{"1": {Index: 9, Hash: "ab"}, "2": {Index: 9, Hash: "ab"}, "3": {Index: 9, Hash: "ab"}},
		Final: check.FinalRead{Time: at(2500), Topics: map[string]history.TopicInfo{"kept": {Name: "kept", TopicID: "k1"}, "other": {Name: "other", TopicID: "o1"}},
			Probed: at(2600)},
	}
}

func TestReportFolder(t *testing.T) {
	run := sampleRun()
	base := t.TempDir()
	dir, err := Dir(base, run.Seed, run.Started)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(dir) != "20300102-030405-seed42" {
		t.Errorf("dir = %s", dir)
	}
	if again, err := Dir(base, run.Seed, run.Started); err != nil || again == dir {
		t.Errorf("a second run with the same start and seed got %s, %v", again, err)
	}
	c := Check(run, dir, Options{})
	s, err := Write(dir, run, c)
	if err != nil {
		t.Fatal(err)
	}
	if s.Valid || s.Violations != 2 || s.Ops != 6 || s.Faults != 1 || s.Outcomes["fail NOT_CONTROLLER"] != 1 {
		t.Fatalf("summary: %+v", s)
	}
	byName := map[string]check.Result{}
	for _, r := range c.Results {
		byName[r.Checker] = r
	}
	if byName["lost-writes"].Valid || byName["controller-epoch-fencing"].Valid || !byName["linearizability"].Valid || !byName["recovery"].Valid {
		t.Fatalf("results:\n%s", s.Text())
	}
	if len(c.Recoveries) != 1 || c.Recoveries[0].AdminOp != 6 || c.Recoveries[0].Admin != 300*time.Millisecond {
		t.Fatalf("recoveries = %+v", c.Recoveries)
	}
	for _, name := range []string{"seed.txt", "schedule.txt", "history.jsonl", "observations.jsonl", "faults.jsonl", "timeline.txt",
		"samples.jsonl", "hashes.json", "final.json", "linearizability.html", "summary.json", "summary.txt"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	txt, _ := os.ReadFile(filepath.Join(dir, "summary.txt"))
	for _, want := range []string{"INVALID: 2 violations", "seed 42", `acknowledged creation of "lost" lost`,
		"controller epoch 1 after accepting epoch 2", "first successful call after 300ms (#6)", "skipped: partition-leader: not root"} {
		if !strings.Contains(string(txt), want) {
			t.Errorf("summary.txt lacks %q:\n%s", want, txt)
		}
	}
	seed, _ := os.ReadFile(filepath.Join(dir, "seed.txt"))
	if !strings.HasPrefix(string(seed), "42\n") || !strings.Contains(string(seed), "make jepsen SEED=42") {
		t.Errorf("seed.txt = %q", seed)
	}
	var js Summary
	b, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err := json.Unmarshal(b, &js); err != nil || js.Valid || js.Violations != 2 || js.Run.Seed != 42 {
		t.Errorf("summary.json: %v %+v", err, js)
	}

	// The folder alone is enough to check the run again.
	back, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Ops) != 6 || len(back.Observations) != 2 || len(back.Faults) != 2 || len(back.Samples) != 1 || back.Seed != 42 ||
		!reflect.DeepEqual(back.Hashes, run.Hashes) || len(back.Final.Topics) != 2 || !back.Ended.Equal(run.Ended) {
		t.Fatalf("loaded run: %+v", back)
	}
	again := Check(back, "", Options{})
	if again.Violations() != 2 || again.Valid() {
		t.Fatalf("re-checking the loaded run: %d violations", again.Violations())
	}
}

// TestReportBrokerMetadataAndSnapshots: a ghost topic in a broker's cache
// and a long run whose followers installed no snapshot are violations in
// summary.txt, with the checkers' figures, and both survive a reload.
func TestReportBrokerMetadataAndSnapshots(t *testing.T) {
	run := sampleRun()
	run.Duration = 5 * time.Minute
	part := []check.MetaPartition{{Partition: 0, Leader: 1, LeaderEpoch: 2, Replicas: []int32{1}, ISR: []int32{1}}}
	run.BrokerMeta = &check.BrokerMetadataRead{
		Controller: check.MetadataView{Node: 1001, Brokers: []int32{1, 2}, Topics: []check.MetaTopic{{Name: "kept", ID: "k1", Partitions: part}}},
		Brokers: []check.MetadataView{
			{Node: 1, Topics: []check.MetaTopic{{Name: "kept", ID: "k1", Partitions: part}}},
			{Node: 2, Topics: []check.MetaTopic{{Name: "kept", ID: "k1", Partitions: part}, {Name: "gone", ID: "g1", Partitions: part}}},
		},
		Reads: 4, Waited: 30 * time.Second,
	}
	run.Snapshots = []check.VoterSnapshots{{Voter: "1", Taken: 9}, {Voter: "2", Taken: 8, Sent: 1}, {Voter: "3", Taken: 9}}
	dir := t.TempDir()
	s, err := Write(dir, run, Check(run, dir, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Violations != 4 {
		t.Errorf("%d violations, want the sample's 2, a ghost topic and no snapshot installed:\n%s", s.Violations, s.Text())
	}
	for _, want := range []string{`broker 2: ghost topic "gone" (id g1, 1 partitions)`,
		"2 brokers read, 1 topics and 1 partitions of the active controller 1001 compared with each",
		"snapshots: FAILED (1 violations) — 26 snapshots taken, 0 installed on a follower",
		"no snapshot was installed on a follower in a run of 5m0s with 1 voter faults"} {
		if !strings.Contains(s.Text(), want) {
			t.Errorf("summary.txt lacks %q:\n%s", want, s.Text())
		}
	}
	back, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.BrokerMeta, run.BrokerMeta) || !reflect.DeepEqual(back.Snapshots, run.Snapshots) {
		t.Fatalf("loaded broker metadata %+v, snapshots %+v", back.BrokerMeta, back.Snapshots)
	}
	if again := Check(back, "", Options{}); again.Violations() != 4 {
		t.Errorf("re-checking the loaded run: %d violations", again.Violations())
	}
}

// TestReportData: the data workload's figures are in summary.txt, a lost
// acknowledged record is a violation there, and its files survive a
// reload.
func TestReportData(t *testing.T) {
	run := sampleRun()
	read := []history.Record{{Topic: "d", Partition: 0, Offset: 0, Value: "a"}}
	run.Data = &DataRun{
		Produces: []history.Produce{
			{ID: 1, Topic: "d", Value: "a", Invoke: at(0), Complete: at(5), Outcome: history.OK, Offset: 0, Writes: 1},
			{ID: 2, Topic: "d", Value: "b", Invoke: at(6), Complete: at(9), Outcome: history.OK, Offset: 1, Writes: 1},
			{ID: 3, Topic: "d", Value: "c", Invoke: at(10), Outcome: history.Unknown, Offset: -1, Writes: 1},
		},
		Consumed: read,
		Final: history.DataFinal{Time: at(2000), Partitions: []history.DataPartition{{Topic: "d", Leader: 1, Replicas: []int32{1}, ISR: []int32{1},
			HighWatermark: 1, Read: read}},
			Replicas: []history.ReplicaLog{{Broker: 1, Topic: "d", End: 1, Records: read}}},
	}
	dir := t.TempDir()
	s, err := Write(dir, run, Check(run, dir, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"data: 2 records acknowledged, 1 read back, 1 lost, 1 unknown outcome, 0 failed",
		`data-acknowledged: FAILED (1 violations)`, `lost: d-0 "b" was acknowledged at offset 1`, "data-replicas-agree: ok"} {
		if !strings.Contains(s.Text(), want) {
			t.Errorf("summary.txt lacks %q:\n%s", want, s.Text())
		}
	}
	back, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if back.Data == nil || !reflect.DeepEqual(back.Data.Final, run.Data.Final) || len(back.Data.Produces) != 3 || len(back.Data.Consumed) != 1 {
		t.Fatalf("loaded data: %+v", back.Data)
	}
	if again := Check(back, "", Options{}); again.Data == nil || again.Data.Lost != 1 {
		t.Errorf("re-checking the loaded run: %+v", again.Data)
	}
}
