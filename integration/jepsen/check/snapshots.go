package check

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// VoterSnapshots counts one voter's raft snapshots over a run, read from
// its log across its restarts (CountSnapshots).
type VoterSnapshots struct {
	Voter string `json:"voter"`
	// Taken are the snapshots this voter took of its own state.
	Taken int `json:"taken"`
	// Installed are the snapshots a leader sent this voter that it
	// installed as a follower (InstallSnapshot).
	Installed int `json:"installed"`
	// Sent are the InstallSnapshot calls this voter began as leader.
	Sent int `json:"sent"`
	// Restored are the snapshots this voter restored its state from at a
	// start.
	Restored int `json:"restored"`
	// Failed are raft's errors about snapshots, by message.
	Failed map[string]int `json:"failed,omitempty"`
}

// The lines hashicorp/raft v1.8.0 logs (at info level, errors at error
// level) about snapshots, after the logger's name ("…raft: ").
var (
	snapshotTaken     = "snapshot complete up to"   // takeSnapshot, once the snapshot is written and the log compacted
	snapshotInstalled = "Installed remote snapshot" // installSnapshot on a follower, once restored
	snapshotSent      = "installing snapshot on"    // sendLatestSnapshot on the leader, before the RPC
	snapshotRestored  = "restored from snapshot"    // restoreSnapshot at a start
	snapshotFailures  = []string{
		"failed to take snapshot", "failed to install snapshot", "failed to send snapshot to", "failed to restore snapshot",
		"failed to copy snapshot", "failed to receive whole snapshot", "failed to finalize snapshot", "installSnapshot rejected to",
	}
)

// CountSnapshots counts the snapshot lines of a voter's log.
func CountSnapshots(voter string, r io.Reader) (VoterSnapshots, error) {
	c := VoterSnapshots{Voter: voter}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		_, msg, ok := strings.Cut(line, "raft: ")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(msg, snapshotTaken):
			c.Taken++
		case strings.HasPrefix(msg, snapshotInstalled):
			c.Installed++
		case strings.HasPrefix(msg, snapshotSent):
			c.Sent++
		case strings.HasPrefix(msg, snapshotRestored):
			c.Restored++
		default:
			for _, f := range snapshotFailures {
				if strings.HasPrefix(msg, f) {
					if c.Failed == nil {
						c.Failed = map[string]int{}
					}
					c.Failed[f]++
				}
			}
		}
	}
	return c, sc.Err()
}

// SnapshotOptions are what Snapshots needs to know of the run.
type SnapshotOptions struct {
	Duration time.Duration
	// VoterFaults counts the faults that stopped a voter or cut it off:
	// only they leave a follower behind the leader's snapshot.
	VoterFaults int
}

// InstallPeriod is how often a run with voter faults must have had a
// follower install a snapshot: the run's voters snapshot every few
// hundred entries and keep few behind, so a follower down or cut off for
// seconds falls behind the leader's log.
const InstallPeriod = 5 * time.Minute

// Snapshots reports each voter's snapshots taken and installed. A run of
// at least InstallPeriod with voter faults fails unless followers
// installed at least one snapshot per InstallPeriod: without installs the
// run did not test a follower catching up from a snapshot.
func Snapshots(counts []VoterSnapshots, opt SnapshotOptions) Result {
	r := newResult("snapshots")
	if len(counts) == 0 {
		r.Inconclusive = "no voter log was read"
		return r
	}
	var parts []string
	taken, installed := 0, 0
	for _, c := range counts {
		parts = append(parts, fmt.Sprintf("voter %s: %d taken, %d installed (%d sent as leader, %d restored at a start)",
			c.Voter, c.Taken, c.Installed, c.Sent, c.Restored))
		taken += c.Taken
		installed += c.Installed
		for _, msg := range slices.Sorted(maps.Keys(c.Failed)) {
			r.Notes = append(r.Notes, fmt.Sprintf("voter %s logged %q %d times", c.Voter, msg, c.Failed[msg]))
		}
	}
	r.Checked = fmt.Sprintf("%d snapshots taken, %d installed on a follower; %s", taken, installed, strings.Join(parts, "; "))
	want := int(opt.Duration / InstallPeriod)
	switch {
	case installed >= want && installed > 0:
	case opt.VoterFaults == 0:
		r.Notes = append(r.Notes, fmt.Sprintf("%d snapshots installed on a follower; no fault stopped or cut off a voter", installed))
	case want == 0:
		r.Notes = append(r.Notes, fmt.Sprintf("no snapshot was installed on a follower (a run of %s; one of %s or more needs one)", opt.Duration, InstallPeriod))
	default:
		what := fmt.Sprintf("only %d snapshots were installed", installed)
		if installed == 0 {
			what = "no snapshot was installed"
		}
		r.add(Violation{Partition: -1, Description: fmt.Sprintf("%s on a follower in a run of %s with %d voter faults; want at least %d (one per %s): no follower caught up from a snapshot as often as the run's snapshot settings should make it",
			what, opt.Duration, opt.VoterFaults, want, InstallPeriod)})
	}
	return r
}
