// Package report runs every checker over a finished run and writes its
// report folder:
//
//	seed.txt              the seed, and the command that replays the schedule
//	schedule.txt          the faults as scheduled
//	history.jsonl         every admin call: invoke, complete, outcome
//	observations.jsonl    every control request each broker agent accepted or refused
//	faults.jsonl          the fault timeline as it happened
//	timeline.txt          the same, readable
//	samples.jsonl         partition leadership samples
//	hashes.json           each voter's final state hash and index
//	final.json            the final read of the topics
//	brokermeta.json       the last read of every broker agent's metadata and the active controller's
//	produces.jsonl        every produce of the data workload: value, partition, outcome, offset
//	consumed.jsonl        every record the data workload's consumers read during the run
//	datafinal.json        the data partitions at the end: final read, each replica's log
//	linearizability.html  porcupine's visualization, faults drawn on it
//	summary.json          ops, faults, violations, recovery times
//	summary.txt           the same, readable
//
// Load reads a folder back, so a run can be checked again.
package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/check"
	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/nemesis"
)

// Run is everything a run produced.
type Run struct {
	Seed     uint64        `json:"seed"`
	Duration time.Duration `json:"duration"`
	// Nemesis is the -nemesis flag's value; Schedule the faults drawn.
	Nemesis  string   `json:"nemesis"`
	Schedule []string `json:"schedule,omitempty"`
	// Skipped says which nemeses did not run and why (no root, …).
	Skipped []string  `json:"skipped,omitempty"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`

	Ops          []history.Op                 `json:"-"`
	Observations []history.Observation        `json:"-"`
	Faults       []history.FaultEvent         `json:"-"`
	Samples      []history.ClusterSample      `json:"-"`
	Hashes       map[string]history.VoterHash `json:"-"`
	Final        check.FinalRead              `json:"-"`
	// BrokerMeta is the brokers' metadata read after the final heal
	// (brokermeta.json), nil when it was not read.
	BrokerMeta *check.BrokerMetadataRead `json:"-"`
	// Snapshots are each voter's raft snapshots, counted in its log.
	Snapshots []check.VoterSnapshots `json:"snapshots,omitempty"`
	// Data is the data workload's history, nil for a run without it.
	Data *DataRun `json:"-"`
}

// DataRun is what the data workload produced and read.
type DataRun struct {
	Produces []history.Produce
	Consumed []history.Record
	Final    history.DataFinal
}

// Options tune Check.
type Options struct {
	// LinearizabilityTimeout bounds the linearizability check (default
	// one minute); a check that does not finish in it fails.
	LinearizabilityTimeout time.Duration
	// MaxRecovery makes a slower recovery a violation (0: none).
	MaxRecovery time.Duration
	// DeletionBound is how long after the last heal a deletion may still
	// run (default check.DefaultDeletionBound).
	DeletionBound time.Duration
}

// Checked is the outcome of every checker.
type Checked struct {
	Results    []check.Result   `json:"results"`
	Recoveries []check.Recovery `json:"recoveries"`
	// Data are the data workload's figures, nil without it.
	Data *check.DataFigures `json:"data,omitempty"`
}

// Result is the named checker's result, and whether there is one.
func (c Checked) Result(checker string) (check.Result, bool) {
	for _, r := range c.Results {
		if r.Checker == checker {
			return r, true
		}
	}
	return check.Result{}, false
}

// Valid reports whether no checker found a violation.
func (c Checked) Valid() bool { return check.Valid(c.Results) }

// Violations counts them over every checker.
func (c Checked) Violations() int {
	n := 0
	for _, r := range c.Results {
		n += len(r.Violations)
	}
	return n
}

// Check runs every checker over run; porcupine's visualization goes to
// dir/linearizability.html when dir is not "".
func Check(run Run, dir string, opt Options) Checked {
	lo := check.LinearizabilityOptions{Timeout: opt.LinearizabilityTimeout, Faults: run.Faults}
	if dir != "" {
		lo.HTMLPath = filepath.Join(dir, "linearizability.html")
	}
	var c Checked
	c.Results = append(c.Results,
		check.Linearizability(run.Ops, lo),
		check.LostWrites(run.Ops, run.Final),
		check.OneLeaderPerEpoch(run.Observations),
		check.ControllerEpochFencing(run.Observations),
		check.EpochsMonotonic(run.Observations),
		check.StateHashes(run.Hashes),
		check.BrokerMetadata(run.BrokerMeta),
		check.Snapshots(run.Snapshots, check.SnapshotOptions{Duration: run.Duration, VoterFaults: voterFaults(run.Faults)}),
	)
	rec, recs := check.RecoveryTimes(run.Faults, run.Ops, run.Samples, check.RecoveryOptions{Max: opt.MaxRecovery, End: run.Ended})
	c.Results = append(c.Results, rec, check.DeletionsFinish(run.Ops, run.Faults, run.Final, opt.DeletionBound))
	c.Recoveries = recs
	if d := run.Data; d != nil {
		c.Results = append(c.Results,
			check.DataAcknowledged(d.Produces, d.Final),
			check.DataReplicasAgree(d.Final),
			check.DataNoPhantoms(d.Produces, d.Consumed, d.Final),
			check.DataReadsStable(d.Consumed, d.Final),
		)
		f := check.Figures(d.Produces, d.Consumed, d.Final)
		c.Data = &f
	}
	return c
}

// voterFaults counts the faults applied to voters (every kind but the
// broker ones).
func voterFaults(faults []history.FaultEvent) int {
	n := 0
	for _, e := range faults {
		if e.Phase == history.Start && e.Error == "" && !nemesis.Kind(e.Kind).Broker() {
			n++
		}
	}
	return n
}

// Dir creates a new report folder under base, named after the run's start
// and seed, and returns its path.
func Dir(base string, seed uint64, started time.Time) (string, error) {
	name := fmt.Sprintf("%s-seed%d", started.UTC().Format("20060102-150405"), seed)
	dir := filepath.Join(base, name)
	for i := 2; ; i++ {
		err := os.MkdirAll(base, 0o755)
		if err == nil {
			err = os.Mkdir(dir, 0o755)
		}
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
		dir = filepath.Join(base, fmt.Sprintf("%s-%d", name, i))
	}
}

// Summary is summary.json.
type Summary struct {
	Run         Run              `json:"run"`
	Valid       bool             `json:"valid"`
	Ops         int              `json:"ops"`
	OpsByKind   map[string]int   `json:"ops_by_kind"`
	Outcomes    map[string]int   `json:"outcomes"`
	Faults      int              `json:"faults"`
	FaultsKind  map[string]int   `json:"faults_by_kind"`
	FaultErrors int              `json:"fault_errors"`
	Violations  int              `json:"violations"`
	Results     []check.Result   `json:"results"`
	Recoveries  []check.Recovery `json:"recoveries"`
	// Data are the data workload's figures (records acknowledged, read
	// back, lost, …), nil without it.
	Data *check.DataFigures `json:"data,omitempty"`
}

func summarize(run Run, c Checked) Summary {
	s := Summary{Run: run, Valid: c.Valid(), Ops: len(run.Ops), OpsByKind: map[string]int{}, Outcomes: map[string]int{},
		FaultsKind: map[string]int{}, Violations: c.Violations(), Results: c.Results, Recoveries: c.Recoveries, Data: c.Data}
	for _, op := range run.Ops {
		s.OpsByKind[string(op.Kind)]++
		key := string(op.Outcome)
		if op.Outcome == history.Fail {
			key += " " + op.ErrorName()
		}
		s.Outcomes[key]++
	}
	for _, e := range run.Faults {
		if e.Phase == history.Start {
			s.Faults++
			s.FaultsKind[e.Kind]++
		}
		if e.Error != "" {
			s.FaultErrors++
		}
	}
	return s
}

// Text is summary.txt.
func (s Summary) Text() string {
	var b strings.Builder
	verdict := "VALID"
	if !s.Valid {
		verdict = fmt.Sprintf("INVALID: %d violations", s.Violations)
	}
	fmt.Fprintf(&b, "%s\n\n", verdict)
	fmt.Fprintf(&b, "seed %d, %s, nemesis %q, %s → %s\n", s.Run.Seed, s.Run.Duration, s.Run.Nemesis,
		s.Run.Started.Format(time.RFC3339), s.Run.Ended.Format(time.RFC3339))
	for _, sk := range s.Run.Skipped {
		fmt.Fprintf(&b, "skipped: %s\n", sk)
	}
	fmt.Fprintf(&b, "\n%d ops:%s\n", s.Ops, counts(s.OpsByKind))
	fmt.Fprintf(&b, "outcomes:%s\n", counts(s.Outcomes))
	if d := s.Data; d != nil {
		fmt.Fprintf(&b, "data: %d records acknowledged, %d read back, %d lost", d.Acknowledged, d.ReadBack, d.Lost)
		if d.Unverified > 0 {
			fmt.Fprintf(&b, ", %d unverified (the final read of their partition is incomplete)", d.Unverified)
		}
		fmt.Fprintf(&b, ", %d unknown outcome, %d failed (%d produces to %d partitions; %d records consumed during the run, %d in the final read; %d duplicated by a producer's retry)\n",
			d.Unknown, d.Failed, d.Produces, d.Partitions, d.Consumed, d.Final, d.Retried)
	}
	fmt.Fprintf(&b, "%d faults:%s", s.Faults, counts(s.FaultsKind))
	if s.FaultErrors > 0 {
		fmt.Fprintf(&b, " (%d fault events with errors, see timeline.txt)", s.FaultErrors)
	}
	b.WriteString("\n\ncheckers:\n")
	for _, r := range s.Results {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	if len(s.Recoveries) > 0 {
		b.WriteString("\nrecovery after each heal:\n")
		for _, r := range s.Recoveries {
			b.WriteString("  " + r.String() + "\n")
		}
	}
	return b.String()
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s %d,", k, m[k])
	}
	return strings.TrimSuffix(b.String(), ",")
}

// Write writes the whole report folder for run (Check's HTML included when
// c came from Check(run, dir, …)) and returns the summary.
func Write(dir string, run Run, c Checked) (Summary, error) {
	s := summarize(run, c)
	var errs []error
	put := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	putJSON := func(name string, v any) {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			return
		}
		put(name, append(b, '\n'))
	}
	put("seed.txt", fmt.Appendf(nil, "%d\n\nreplay the schedule: make jepsen SEED=%d DURATION=%s NEMESIS=%s\n", run.Seed, run.Seed, run.Duration, run.Nemesis))
	put("schedule.txt", []byte(strings.Join(run.Schedule, "\n")+"\n"))
	errs = append(errs,
		history.WriteFile(filepath.Join(dir, "history.jsonl"), run.Ops),
		history.WriteFile(filepath.Join(dir, "observations.jsonl"), run.Observations),
		history.WriteFile(filepath.Join(dir, "faults.jsonl"), run.Faults),
		history.WriteFile(filepath.Join(dir, "samples.jsonl"), run.Samples),
	)
	var tl strings.Builder
	for _, e := range run.Faults {
		tl.WriteString(e.String() + "\n")
	}
	put("timeline.txt", []byte(tl.String()))
	putJSON("hashes.json", run.Hashes)
	putJSON("final.json", run.Final)
	if run.BrokerMeta != nil {
		putJSON("brokermeta.json", run.BrokerMeta)
	}
	if d := run.Data; d != nil {
		errs = append(errs,
			history.WriteFile(filepath.Join(dir, "produces.jsonl"), d.Produces),
			history.WriteFile(filepath.Join(dir, "consumed.jsonl"), d.Consumed))
		putJSON("datafinal.json", d.Final)
	}
	putJSON("run.json", run)
	putJSON("summary.json", s)
	put("summary.txt", []byte(s.Text()))
	return s, errors.Join(errs...)
}

// Load reads a report folder back into a Run.
func Load(dir string) (Run, error) {
	var run Run
	var errs []error
	readJSON := func(name string, v any) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err == nil {
			err = json.Unmarshal(b, v)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	readJSON("run.json", &run)
	readJSON("hashes.json", &run.Hashes)
	readJSON("final.json", &run.Final)
	// A folder from before the broker-metadata check has none.
	if _, err := os.Stat(filepath.Join(dir, "brokermeta.json")); err == nil {
		run.BrokerMeta = &check.BrokerMetadataRead{}
		readJSON("brokermeta.json", run.BrokerMeta)
	}
	// A folder from before the data workload has none of its files.
	if _, err := os.Stat(filepath.Join(dir, "datafinal.json")); err == nil {
		run.Data = &DataRun{}
		readJSON("datafinal.json", &run.Data.Final)
		var err error
		if run.Data.Produces, err = history.ReadFile[history.Produce](filepath.Join(dir, "produces.jsonl")); err != nil {
			errs = append(errs, err)
		}
		if run.Data.Consumed, err = history.ReadFile[history.Record](filepath.Join(dir, "consumed.jsonl")); err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	if run.Ops, err = history.ReadFile[history.Op](filepath.Join(dir, "history.jsonl")); err != nil {
		errs = append(errs, err)
	}
	if run.Observations, err = history.ReadFile[history.Observation](filepath.Join(dir, "observations.jsonl")); err != nil {
		errs = append(errs, err)
	}
	if run.Faults, err = history.ReadFile[history.FaultEvent](filepath.Join(dir, "faults.jsonl")); err != nil {
		errs = append(errs, err)
	}
	if run.Samples, err = history.ReadFile[history.ClusterSample](filepath.Join(dir, "samples.jsonl")); err != nil {
		errs = append(errs, err)
	}
	return run, errors.Join(errs...)
}
