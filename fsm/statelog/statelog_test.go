package statelog

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/ctrlquorum/ctrlquorum/fsm"
)

func entry(index uint64, changes ...fsm.StateChange) fsm.EntryChanges {
	return fsm.EntryChanges{Index: index, Term: 3, AppendedAt: time.Unix(1700000000, 0), ControllerEpoch: 2, ControllerNode: 1001, Changes: changes}
}

func replica(topic string, part, broker int32, from, to string) fsm.StateChange {
	return fsm.StateChange{Kind: fsm.ChangeReplica, Topic: topic, Partition: part, Broker: broker, From: from, To: to}
}

func read(t *testing.T, l *Log, f Filter) []string {
	t.Helper()
	var out []string
	if _, err := l.Read(f, func(line Line) bool { out = append(out, fmt.Sprintf("%d %s", line.Index, line.Text())); return true }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAppendFilterAndReplay(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.Append(entry(5, replica("a", 0, 1, "NewReplica", "OnlineReplica"), replica("b", 1, 2, "OnlineReplica", "OfflineReplica"))))
	must(l.Append(entry(7, fsm.StateChange{Kind: fsm.ChangeBroker, Partition: -1, Broker: 2, To: "fenced"})))
	if got, want := read(t, l, Filter{Topic: "b", Partition: -1, Broker: -1}), []string{"7 broker 2 fenced"}; slices.Equal(got, want) {
		t.Fatalf("a topic filter let a broker line through: %q", got)
	}
	if got, want := read(t, l, Filter{Topic: "b", Partition: -1, Broker: -1}), []string{"5 replica b-1 on broker 2: OnlineReplica -> OfflineReplica"}; !slices.Equal(got, want) {
		t.Fatalf("topic b: %q, want %q", got, want)
	}
	if got, want := read(t, l, Filter{Partition: -1, Broker: 2}), []string{"5 replica b-1 on broker 2: OnlineReplica -> OfflineReplica", "7 broker 2 fenced"}; !slices.Equal(got, want) {
		t.Fatalf("broker 2: %q, want %q", got, want)
	}
	if got := read(t, l, Filter{Partition: -1, Broker: -1, Since: 6}); len(got) != 1 {
		t.Fatalf("since 6: %q", got)
	}
	must(l.Close())

	// A restart replays the log from the last snapshot: what the file has
	// is skipped, what it lacks is written.
	l, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	must(l.Append(entry(5, replica("a", 0, 1, "NewReplica", "OnlineReplica"))))
	must(l.Append(entry(7, fsm.StateChange{Kind: fsm.ChangeBroker, Partition: -1, Broker: 2, To: "fenced"})))
	must(l.Append(entry(9, replica("a", 0, 1, "OnlineReplica", "OfflineReplica"))))
	must(l.Restored(8)) // below what the file has: nothing
	must(l.Restored(20))
	got := read(t, l, All)
	want := []string{
		"5 replica a-0 on broker 1: NewReplica -> OnlineReplica",
		"5 replica b-1 on broker 2: OnlineReplica -> OfflineReplica",
		"7 broker 2 fenced",
		"9 replica a-0 on broker 1: OnlineReplica -> OfflineReplica",
		"20 " + (Line{StateChange: fsm.StateChange{Kind: KindRestored}}).Text(),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after replay:\n%q\nwant\n%q", got, want)
	}
	if start, err := l.Start(); err != nil || start != 5 {
		t.Fatalf("start %d, %v; want 5", start, err)
	}
}

func TestRotationKeepsTheNewestFiles(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{MaxFileBytes: 2000, Files: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := uint64(1); i <= 200; i++ {
		if err := l.Append(entry(i, replica("t", int32(i), 1, "OnlineReplica", "OfflineReplica"))); err != nil {
			t.Fatal(err)
		}
	}
	names, _ := os.ReadDir(dir)
	if len(names) != 3 {
		t.Fatalf("%d files, want 3", len(names))
	}
	var indexes []uint64
	if _, err := l.Read(All, func(line Line) bool { indexes = append(indexes, line.Index); return true }); err != nil {
		t.Fatal(err)
	}
	if len(indexes) == 0 || indexes[len(indexes)-1] != 200 || !slices.IsSorted(indexes) || indexes[0] == 1 {
		t.Fatalf("kept indexes %v: want the newest, in order, ending at 200, without the first", indexes)
	}
	for i := 1; i < len(indexes); i++ {
		if indexes[i] != indexes[i-1]+1 {
			t.Fatalf("gap between %d and %d", indexes[i-1], indexes[i])
		}
	}
}

func TestFollowSeesWhatIsWrittenNext(t *testing.T) {
	l, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Append(entry(1, replica("t", 0, 1, "NewReplica", "OnlineReplica"))); err != nil {
		t.Fatal(err)
	}
	got := make(chan Line, 10)
	done := make(chan struct{})
	followed := make(chan error, 1)
	go func() {
		followed <- l.Follow(done, Filter{Topic: "t", Partition: -1, Broker: -1}, func(line Line) bool {
			got <- line
			return line.Index < 3
		})
	}()
	if first := <-got; first.Index != 1 {
		t.Fatalf("first line at %d, want the file's line at 1", first.Index)
	}
	if err := l.Append(entry(2, replica("u", 0, 1, "NewReplica", "OnlineReplica"))); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(entry(3, replica("t", 0, 1, "OnlineReplica", "OfflineReplica"))); err != nil {
		t.Fatal(err)
	}
	if next := <-got; next.Index != 3 || next.To != "OfflineReplica" {
		t.Fatalf("next line %+v, want index 3 (topic u's line filtered out)", next)
	}
	if err := <-followed; err != nil {
		t.Fatal(err)
	}
	close(done)
}
