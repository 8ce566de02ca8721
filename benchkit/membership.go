package benchkit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
	"github.com/ctrlquorum/ctrlquorum/voter"
	"github.com/ctrlquorum/ctrlquorum/voter/meta"
)

// RunMembership measures the quorum's membership changes against the image
// size, on a fresh three-voter cluster per size N (Config.Partitions, with
// Config.Brokers live brokers):
//
//   - add a voter: from AddVoter to the promotion committed, the node
//     joining with an empty directory. Its leader has just taken a
//     snapshot and kept no log behind it, so the node is sent the whole
//     image (InstallSnapshot, restored into its FSM) and then the log, as
//     a node joining a long-running cluster is;
//   - remove a voter: from RemoveVoter to the configuration without it
//     committed.
//
// The snapshot's size is in the note. Config.Runs repeats each size on a
// fresh cluster; figures are medians.
func RunMembership(ctx context.Context, cfg Config) (Report, error) {
	cfg.defaults()
	start := time.Now()
	rep := Report{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Voters: 3, Brokers: cfg.Brokers, Runs: cfg.Runs}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "ctrlnode-bench-")
		if err != nil {
			return rep, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	var col collector
	phase := func(format string, args ...any) {
		cfg.Progress(fmt.Sprintf("[%s] ", time.Since(start).Round(time.Second)) + fmt.Sprintf(format, args...))
	}
	for run := 1; run <= cfg.Runs; run++ {
		for _, n := range cfg.Partitions {
			phase("run %d: membership changes at %d partitions", run, n)
			if err := membershipAt(ctx, cfg, filepath.Join(dir, fmt.Sprintf("run%d-members-%d", run, n)), n, &col, phase); err != nil {
				return rep, fmt.Errorf("membership at %d partitions: %w", n, err)
			}
		}
	}
	rep.Results = col.results()
	rep.Took = time.Since(start)
	return rep, nil
}

func membershipAt(ctx context.Context, cfg Config, dir string, n int, col *collector, phase func(string, ...any)) error {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c, err := startWithBrokers(wctx, cfg, dir, nil)
	if err != nil {
		return err
	}
	defer c.shutdown()
	_, node, err := c.active(wctx)
	if err != nil {
		return err
	}
	floor, err := rawRaftFloor(node, cfg.FloorSamples)
	if err != nil {
		return err
	}
	lctx, lcancel := context.WithTimeout(ctx, 30*time.Minute)
	defer lcancel()
	if err := loadWithProgress(lctx, c, cfg, n, phase); err != nil {
		return err
	}

	_, node, err = c.active(wctx)
	if err != nil {
		return err
	}
	// A snapshot with no log kept behind it: the new voter can only be
	// caught up by installing it.
	r := node.Voter.Raft()
	rc := r.ReloadableConfig()
	rc.TrailingLogs = 0
	if err := r.ReloadConfig(rc); err != nil {
		return err
	}
	snapStart := time.Now()
	if err := r.Snapshot().Error(); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	snapTook := time.Since(snapStart)
	var snapBytes int64
	if metas, err := node.Voter.Snapshots(); err == nil && len(metas) > 0 {
		snapBytes = metas[0].Size
	}
	phase("  leader snapshot of %d bytes in %v", snapBytes, snapTook.Round(time.Millisecond))

	addrs, err := freeAddrs(1)
	if err != nil {
		return err
	}
	dirID := meta.NewUUID().String()
	joiner, err := controller.StartNode(controller.NodeConfig{
		NodeID: 4, RaftAddr: addrs[0], DataDir: filepath.Join(dir, "voter-4"), Logger: c.log, SessionTimeout: c.session,
		Voter: func(vc *voter.Config) { vc.DirectoryID = dirID },
	})
	if err != nil {
		return err
	}
	defer joiner.Shutdown()

	actx, acancel := context.WithTimeout(ctx, 30*time.Minute)
	defer acancel()
	lastProgress := time.Now()
	t0 := time.Now()
	err = node.Voter.AddVoter(actx, voter.AddVoterRequest{
		ID: "4", Address: raftnet.PeerAddress{HostPort: addrs[0], DirectoryID: dirID}, PollInterval: 5 * time.Millisecond,
		LogEnd: func(context.Context) (uint64, error) { return joiner.Voter.Raft().LastIndex(), nil },
		Progress: func(end, commit uint64, _ error) {
			if time.Since(lastProgress) >= cfg.ProgressEvery {
				lastProgress = time.Now()
				phase("  new voter catching up: log end %d of %d", end, commit)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("add a voter: %w", err)
	}
	added := time.Since(t0)
	if installed, err := joiner.Voter.Snapshots(); err != nil || len(installed) == 0 || joiner.FSM.AppliedIndex() < installed[0].Index {
		return fmt.Errorf("the new voter was promoted without installing the leader's snapshot (%d snapshots, %v)", len(installed), err)
	}
	col.add(fmt.Sprintf("add-voter-%d", n), Result{Scenario: "add a voter (snapshot install + catch-up)", Partitions: n, Unit: "ms"},
		sample{v: ms(added), floorMs: ms(floor), load: loadAverage(), note: fmt.Sprintf("snapshot of %d MiB", snapBytes>>20)})
	phase("  voter added in %v", added.Round(time.Millisecond))

	t1 := time.Now()
	if err := node.Voter.RemoveVoter(actx, "4", dirID); err != nil {
		return fmt.Errorf("remove a voter: %w", err)
	}
	removed := time.Since(t1)
	col.add(fmt.Sprintf("remove-voter-%d", n), Result{Scenario: "remove a voter", Partitions: n, Unit: "ms"},
		sample{v: ms(removed), floorMs: ms(floor), load: loadAverage()})
	phase("  voter removed in %v", removed.Round(time.Millisecond))
	return nil
}
