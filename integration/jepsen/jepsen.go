// Package jepsen is the jepsen-style test of ctrlquorum (the workload, the
// faults and every checker are described in integration/jepsen/README.md):
// three ctrlnode voters and six brokers with partition data as separate
// processes on 127.0.0.1–3, faults from a seeded schedule, concurrent admin
// clients and producers and a consumer whose every call and record is
// recorded, and checkers over the result.
//
//	history/  the record of a run: admin calls, agents' control-request
//	          decisions, the fault timeline, leadership samples (JSON lines)
//	check/    the checkers: linearizability (porcupine), lost writes, one
//	          leader per epoch, controller-epoch fencing, epochs never going
//	          back, equal state hashes, the brokers' metadata against the
//	          controller's, snapshots installed, recovery time after each
//	          heal, deletions that finish; and over the data: acknowledged
//	          records read back at their offsets, replicas agreeing below
//	          the high watermark, no record never sent, committed reads
//	          that stay
//	nemesis/  the seeded fault schedule, the runner that applies it, and the
//	          network namespace with iptables partitions
//	report/   the report folder of a run, and reading it back
//
// Run it with `make jepsen` (see README.md in this folder).
package jepsen

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"time"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/nemesis"
)

// Config is a run's settings, from the test flags.
type Config struct {
	Duration time.Duration
	Seed     uint64
	// Nemesis is the flag as given; Kinds the nemeses that will run.
	Nemesis string
	Kinds   []nemesis.Kind
	// Skipped says which nemeses will not run, and why.
	Skipped []string
	// Voters, hosts 1..Voters; broker agents by id.
	Voters  int
	Brokers []int
}

// NewConfig checks the flags. A zero seed picks one at random. netErr is
// why network faults cannot run here (nemesis.Available()), or nil; the
// partition nemeses are then left out and the reason kept in Skipped.
func NewConfig(duration time.Duration, seed uint64, nemeses string, netErr error) (Config, error) {
	if duration <= 0 {
		return Config{}, fmt.Errorf("-duration must be positive, got %s", duration)
	}
	kinds, err := nemesis.ParseKinds(nemeses)
	if err != nil {
		return Config{}, fmt.Errorf("-nemesis: %w", err)
	}
	for seed == 0 {
		seed = rand.Uint64() % 1_000_000_000
	}
	c := Config{Duration: duration, Seed: seed, Nemesis: nemeses, Kinds: kinds, Voters: 3, Brokers: []int{1, 2, 3, 4}}
	if netErr != nil {
		kept, dropped := nemesis.WithoutNetwork(kinds)
		for _, k := range dropped {
			c.Skipped = append(c.Skipped, fmt.Sprintf("%s skipped: %v", k, netErr))
		}
		c.Kinds = kept
	}
	return c, nil
}

// WithoutDisk leaves out the nemeses that need lossy file systems
// (power-loss) when diskErr says the host cannot mount them, each with a
// note in Skipped.
func (c Config) WithoutDisk(diskErr error) Config {
	if diskErr == nil {
		return c
	}
	kept, dropped := nemesis.WithoutDisk(c.Kinds)
	for _, k := range dropped {
		c.Skipped = append(c.Skipped, fmt.Sprintf("%s skipped: %v", k, diskErr))
	}
	c.Kinds = kept
	return c
}

// Schedule draws the run's faults.
func (c Config) Schedule() ([]nemesis.Fault, error) {
	return nemesis.Generate(nemesis.Config{Seed: c.Seed, Duration: c.Duration, Kinds: c.Kinds, Hosts: c.Voters, Brokers: c.Brokers})
}

// ProbeRun reports whether the ctrlnode binary at bin has the `run`
// command the harness starts its processes with, or why not.
func ProbeRun(bin string) error {
	var out bytes.Buffer
	cmd := exec.Command(bin, "help", "run")
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return fmt.Errorf("cannot run %s: %w", bin, err)
	}
	if err != nil || !strings.Contains(out.String(), "usage: ctrlnode run") {
		first, _, _ := strings.Cut(strings.TrimSpace(out.String()), "\n")
		return fmt.Errorf("`ctrlnode run` is not available in this build (`ctrlnode help run`: %v, %q)", err, first)
	}
	return nil
}
