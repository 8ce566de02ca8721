package check

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// A voter's log as ctrlnode run writes it, with hashicorp/raft v1.8.0's
// lines about snapshots, across a restart.
const voterLog = `=== start 1 at 2030-01-02T03:04:05Z: ctrlnode run --node-id 1001
2030-01-02T03:04:06.000Z [INFO]  ctrlnode.raft: starting snapshot up to: node=1001 index=300
2030-01-02T03:04:06.010Z [INFO]  ctrlnode.snapshots: creating new snapshot: node=1001 path=/d/snapshots/2-300-1.tmp
2030-01-02T03:04:06.020Z [INFO]  ctrlnode.raft: snapshot complete up to: node=1001 index=300
2030-01-02T03:04:07.000Z [INFO]  ctrlnode.raft: installing snapshot on: node=1001 peer=1002 id=2-300-1 size=912
2030-01-02T03:04:08.000Z [ERROR] ctrlnode.raft: failed to send snapshot to: node=1001 peer="{Voter 1003 127.0.0.3:1}" error="dial tcp: i/o timeout"
=== start 2 at 2030-01-02T03:05:05Z: ctrlnode run --node-id 1001
2030-01-02T03:05:06.000Z [INFO]  ctrlnode.raft: starting restore from snapshot: node=1001 id=2-300-1 last-index=300 last-term=2 size-in-bytes=912
2030-01-02T03:05:06.001Z [INFO]  ctrlnode.raft: restored from snapshot: node=1001 id=2-300-1 last-index=300 last-term=2 size-in-bytes=912
2030-01-02T03:05:09.000Z [INFO]  ctrlnode.raft: copied to local snapshot: node=1001 bytes=1024
2030-01-02T03:05:09.001Z [INFO]  ctrlnode.raft: Installed remote snapshot: node=1001
2030-01-02T03:05:19.000Z [INFO]  ctrlnode.raft: snapshot complete up to: node=1001 index=700
2030-01-02T03:05:19.500Z [INFO]  ctrlnode.controller: a line that mentions snapshot complete up to in passing
`

func TestCountSnapshots(t *testing.T) {
	c, err := CountSnapshots("1001", strings.NewReader(voterLog))
	if err != nil {
		t.Fatal(err)
	}
	want := VoterSnapshots{Voter: "1001", Taken: 2, Installed: 1, Sent: 1, Restored: 1, Failed: map[string]int{"failed to send snapshot to": 1}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got  %+v\nwant %+v", c, want)
	}
}

func TestSnapshots(t *testing.T) {
	counts := []VoterSnapshots{
		{Voter: "1001", Taken: 12, Installed: 0, Sent: 2, Failed: map[string]int{"failed to send snapshot to": 1}},
		{Voter: "1002", Taken: 11, Installed: 2},
		{Voter: "1003", Taken: 12, Installed: 0, Restored: 1},
	}
	r := Snapshots(counts, SnapshotOptions{Duration: 10 * time.Minute, VoterFaults: 20})
	if !r.Valid {
		t.Fatalf("two installs in 10m: %s", r)
	}
	for _, want := range []string{"35 snapshots taken, 2 installed on a follower",
		"voter 1002: 11 taken, 2 installed (0 sent as leader, 0 restored at a start)", `voter 1001 logged "failed to send snapshot to" 1 times`} {
		if !strings.Contains(r.String(), want) {
			t.Errorf("result lacks %q:\n%s", want, r)
		}
	}

	// Too few installs for the run's length, or none.
	if r := Snapshots(counts, SnapshotOptions{Duration: 15 * time.Minute, VoterFaults: 20}); r.Valid ||
		!strings.Contains(r.String(), "only 2 snapshots were installed on a follower in a run of 15m0s with 20 voter faults; want at least 3") {
		t.Errorf("two installs in 15m:\n%s", r)
	}
	none := []VoterSnapshots{{Voter: "1001", Taken: 3}, {Voter: "1002", Taken: 3}, {Voter: "1003", Taken: 3}}
	r = Snapshots(none, SnapshotOptions{Duration: 5 * time.Minute, VoterFaults: 4})
	if r.Valid || len(r.Violations) != 1 || !strings.Contains(r.Violations[0].Description, "no snapshot was installed on a follower in a run of 5m0s") {
		t.Errorf("no install in 5m:\n%s", r)
	}

	// A short run, or one whose faults never stopped a voter, only says so.
	r = Snapshots(none, SnapshotOptions{Duration: 45 * time.Second, VoterFaults: 4})
	if !r.Valid || !strings.Contains(r.String(), "no snapshot was installed on a follower (a run of 45s") {
		t.Errorf("no install in 45s:\n%s", r)
	}
	r = Snapshots(none, SnapshotOptions{Duration: 10 * time.Minute})
	if !r.Valid || !strings.Contains(r.String(), "no fault stopped or cut off a voter") {
		t.Errorf("no install without voter faults:\n%s", r)
	}
	if r := Snapshots(nil, SnapshotOptions{Duration: time.Minute}); !r.Valid || r.Inconclusive == "" {
		t.Errorf("no logs: %s", r)
	}
}
