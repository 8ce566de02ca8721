package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/check"
	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/nemesis"
	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/report"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit/lossyfs"
)

// cluster is what the nemesis acts on: the run's processes and, inside a
// namespace, its network.
type cluster struct {
	procs *procs
	net   *network // nil on the host's loopback
	col   *collector
	cl    *kgo.Client
	rng   *lockedRand
	disks *disks // nil unless the run has the power-loss nemesis
	// layout and dataDir are where the voters listen and keep their
	// data, for the replace-voter nemesis (replace_test.go).
	layout  layout
	dataDir string
	replace replacements
}

var _ nemesis.Cluster = (*cluster)(nil)

// Leader finds the active controller's host. It waits out an election
// for up to 15 s: a leader-targeted fault that finds none is not applied
// and never healed, which the recovery checker reports.
func (c *cluster) Leader(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, id, err := controllerMetadata(ctx, c.cl, []string{}, c.rng.IntN)
	if err != nil {
		return 0, err
	}
	return hostOfVoter(id), nil
}

// crash kills a process after reading its agent's records once more.
func (c *cluster) crash(ctx context.Context, name string) error {
	p := c.procs.get(name)
	if p.running() && !p.isPaused() {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_ = c.col.collect(cctx, name)
		cancel()
	}
	kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return p.kill(kctx)
}

func (c *cluster) restart(name string) error {
	p := c.procs.get(name)
	if p.running() {
		return nil
	}
	return p.start()
}

func checkHost(host int) error {
	if host < 1 || host > 3 {
		return fmt.Errorf("no host %d", host)
	}
	return nil
}

func soloName(id int) (string, error) {
	h := hostOfSolo(id)
	if err := checkHost(h); err != nil {
		return "", fmt.Errorf("broker %d does not run alone in a process (brokers 4-6 do)", id)
	}
	return brokerName(h), nil
}

func (c *cluster) Kill(ctx context.Context, host int) error {
	if err := checkHost(host); err != nil {
		return err
	}
	return c.crash(ctx, voterName(host))
}

func (c *cluster) Restart(_ context.Context, host int) error {
	if err := checkHost(host); err != nil {
		return err
	}
	return c.restart(voterName(host))
}

func (c *cluster) Pause(_ context.Context, host int) error {
	if err := checkHost(host); err != nil {
		return err
	}
	return c.procs.get(voterName(host)).signal(syscall.SIGSTOP)
}

func (c *cluster) Resume(_ context.Context, host int) error {
	if err := checkHost(host); err != nil {
		return err
	}
	return c.procs.get(voterName(host)).signal(syscall.SIGCONT)
}

var errNoNamespace = errors.New("network partitions need the run's network namespace")

func (c *cluster) Cut(_ context.Context, cuts []nemesis.Cut) error {
	if c.net == nil {
		return errNoNamespace
	}
	return c.net.cut(cuts)
}

func (c *cluster) Heal(context.Context) error {
	if c.net == nil {
		return nil
	}
	return c.net.heal()
}

func (c *cluster) CrashBroker(ctx context.Context, id int) error {
	name, err := soloName(id)
	if err != nil {
		return err
	}
	return c.crash(ctx, name)
}

func (c *cluster) RestartBroker(_ context.Context, id int) error {
	name, err := soloName(id)
	if err != nil {
		return err
	}
	return c.restart(name)
}

// SetHeartbeats stops (SIGSTOP) or resumes (SIGCONT) a broker-only
// process: stopped, it neither heartbeats nor answers control requests.
func (c *cluster) SetHeartbeats(_ context.Context, id int, on bool) error {
	name, err := soloName(id)
	if err != nil {
		return err
	}
	sig := syscall.SIGSTOP
	if on {
		sig = syscall.SIGCONT
	}
	return c.procs.get(name).signal(sig)
}

// PowerLoss cuts the power of host's disk, then kills its voter: what the
// voter had not synced is lost (or a prefix of it kept), as the cut's
// report says.
func (c *cluster) PowerLoss(ctx context.Context, host int, keepPrefix bool, seed uint64) (string, error) {
	if err := checkHost(host); err != nil {
		return "", err
	}
	fs, err := c.disks.get(host)
	if err != nil {
		return "", err
	}
	p := c.procs.get(voterName(host))
	if p.running() && !p.isPaused() {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_ = c.col.collect(cctx, p.spec.name)
		cancel()
	}
	// The voter may exit of its disk's errors before the kill reaches
	// it: that exit is this fault's.
	p.expectExit()
	mode := lossyfs.DropUnsynced
	if keepPrefix {
		mode = lossyfs.KeepPrefix
	}
	report, cutErr := fs.Cut(mode, rand.New(rand.NewPCG(seed, 0x706f776572)))
	kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	killErr := p.kill(kctx)
	if cutErr != nil {
		return "", errors.Join(cutErr, killErr)
	}
	return report.String(), killErr
}

// PowerRestore brings host's disk back on what survived the cut and
// restarts its voter.
func (c *cluster) PowerRestore(ctx context.Context, host int) error {
	if err := checkHost(host); err != nil {
		return err
	}
	name := voterName(host)
	kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := c.procs.get(name).kill(kctx) // gone already, unless the fault failed half way
	cancel()
	if err != nil {
		return err
	}
	if err := c.disks.remount(ctx, host); err != nil {
		return err
	}
	return c.restart(name)
}

// runSettings are the knobs of one run besides Config.
type runSettings struct {
	bin        string
	reportBase string
	// ns is the namespace the test runs in, nil on the host's loopback.
	ns        *nemesis.Namespace
	workers   int
	opTimeout time.Duration
	// env is added to every process's environment.
	env []string
}

// waitUntil polls cond every 100 ms until it holds or timeout passes, and
// returns its last answer ("" when it held).
func waitUntil(timeout time.Duration, cond func() string) string {
	deadline := time.Now().Add(timeout)
	for {
		why := cond()
		if why == "" || time.Now().After(deadline) {
			return why
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runJepsen is one run (runCluster) that fails t on any violation, on a
// fault not healed cleanly, and on a process that exited on its own or
// reported a data race.
func runJepsen(t *testing.T, cfg Config, schedule []nemesis.Fault, rs runSettings) {
	out := runCluster(t, cfg, schedule, rs)
	for _, u := range out.unexpected {
		t.Errorf("process failure: %s", u)
	}
	for _, e := range out.faults {
		if e.Phase == history.Heal && e.Error != "" {
			t.Errorf("fault %d (%s) was not healed cleanly: %s", e.Fault, e.Kind, e.Error)
		}
	}
	if out.ops == 0 {
		t.Error("the workload made no calls")
	}
	if !out.checked.Valid() {
		for _, r := range out.checked.Results {
			for _, v := range r.Violations {
				t.Errorf("violation: %s", v)
			}
		}
		t.Errorf("%d violations; report in %s", out.checked.Violations(), out.dir)
	}
}

// runOutcome is what a run found.
type runOutcome struct {
	dir     string
	checked report.Checked
	// unexpected are processes that exited on their own or reported a
	// data race.
	unexpected []string
	faults     []history.FaultEvent
	ops        int
}

// runCluster is one run: start the processes, run the workloads and the
// nemesis for cfg.Duration, heal, wait for recovery, read the final state,
// check everything and write the report folder.
func runCluster(t *testing.T, cfg Config, schedule []nemesis.Fault, rs runSettings) runOutcome {
	started := time.Now()
	dir, err := report.Dir(rs.reportBase, cfg.Seed, started)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report folder: %s", dir)

	base, err := freeBase(cfg.Voters)
	if err != nil {
		t.Fatal(err)
	}
	l := layout{hosts: cfg.Voters, base: base}
	dataDir := t.TempDir()
	specs := l.specs(dataDir)
	// With the power-loss nemesis every voter's data directory is a lossy
	// file system, mounted before the voters start and aborted after
	// they are dead (the cleanup registered first runs last).
	var dk *disks
	if slices.ContainsFunc(cfg.Kinds, nemesis.Kind.Disk) {
		if dk, err = mountDisks(dataDir, t.TempDir(), cfg.Voters); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := dk.abortAll(); err != nil {
				t.Errorf("unmounting the voters' disks: %v", err)
			}
		})
		t.Logf("voters' data directories on lossy file systems under %s", dataDir)
	}
	if err := l.formatVoters(dataDir); err != nil {
		t.Fatal(err)
	}
	var gid func(int) uint32
	var netw *network
	if rs.ns != nil {
		netw = &network{ns: rs.ns}
		if err := netw.setup(cfg.Voters); err != nil {
			t.Fatalf("namespace %s: %v", rs.ns.Name, err)
		}
		gid = natGID
	}
	ps, err := newProcs(rs.bin, filepath.Join(dir, "logs"), specs, gid, rs.env)
	if err != nil {
		t.Fatal(err)
	}
	unhook := nemesis.OnInterrupt(func() {
		ps.stopAll()
		_ = dk.abortAll()
	})
	t.Cleanup(func() {
		unhook()
		ps.stopAll()
	})
	for _, p := range ps.all {
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
	}

	reader, err := newClient(l.listeners(), "jepsen-reader")
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	rng := newLockedRand(cfg.Seed)
	allBrokers := l.brokerIDs()
	liveAll := func(s history.ClusterSample) string {
		var missing []int32
		for _, b := range allBrokers {
			if !slices.Contains(s.Live, b) {
				missing = append(missing, b)
			}
		}
		if len(missing) > 0 {
			return fmt.Sprintf("brokers %v not live in the active controller's metadata", missing)
		}
		return ""
	}
	up := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		defer cancel()
		if nr := notReady(ctx, specs); len(nr) > 0 {
			return "not ready: " + strings.Join(nr, "; ")
		}
		resp, _, err := controllerMetadata(ctx, reader, []string{}, rng.IntN)
		if err != nil {
			return err.Error()
		}
		return liveAll(clusterSample(time.Now(), resp, ours))
	}
	if why := waitUntil(2*time.Minute, up); why != "" {
		t.Fatalf("the cluster did not come up in 2m: %s (logs in %s)", why, ps.logDir)
	}
	t.Logf("cluster up in %s: voters %v, brokers %v, %s", time.Since(started).Round(time.Millisecond), l.listeners(), allBrokers,
		map[bool]string{true: "inside namespace " + nsName(rs.ns), false: "on the host's loopback"}[rs.ns != nil])

	// The data topics, created before any fault.
	cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
	err = createDataTopics(cctx, reader)
	ccancel()
	if err != nil {
		t.Fatal(err)
	}

	histFile, err := os.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	faultFile, err := os.Create(filepath.Join(dir, "faults.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	produceFile, err := os.Create(filepath.Join(dir, "produces.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	rec := history.NewRecorder(histFile)
	dr := &dataRecorder{now: rec.Now, sink: produceFile}
	timeline := nemesis.NewTimeline(rec.Now, faultFile)
	col := newCollector(specs)
	smp := &sampler{}
	bgStop := make(chan struct{})
	bgDone := make(chan struct{}, 2)
	go func() { col.poll(ps, time.Second, bgStop); bgDone <- struct{}{} }()
	go func() { smp.run(reader, rec.Now, rng.IntN, 500*time.Millisecond, bgStop); bgDone <- struct{}{} }()
	stopBackground := func() {
		select {
		case <-bgStop:
			return
		default:
		}
		close(bgStop)
		<-bgDone
		<-bgDone
	}
	defer stopBackground()

	c := &cluster{procs: ps, net: netw, col: col, cl: reader, rng: rng, disks: dk, layout: l, dataDir: dataDir}
	runner := &nemesis.Runner{Cluster: c, Timeline: timeline, Hosts: cfg.Voters, Logf: t.Logf}
	names := topicNames{Start: rec.Now(), Every: 10 * time.Second, Width: 6, Step: 2}
	var workers []*worker
	for i := 0; i < rs.workers; i++ {
		w, err := newWorker(i, l.listeners(), rec, cfg.Seed, names, allBrokers, rs.opTimeout)
		if err != nil {
			t.Fatal(err)
		}
		workers = append(workers, w)
	}

	runStart := time.Now()
	nctx, ncancel := context.WithTimeout(context.Background(), cfg.Duration+2*time.Minute)
	defer ncancel()
	runnerDone := make(chan error, 1)
	go func() { runnerDone <- runner.Run(nctx, schedule) }()
	wl := startWorkload(workers)
	defer wl.halt()
	dl, err := startDataLoad(l.brokerListeners(), dr, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.halt()

	// Progress every 10 s until the schedule is done and the duration
	// has passed.
	progress := time.NewTicker(10 * time.Second)
	end := time.NewTimer(cfg.Duration)
	nemesisDone := false
	for ended := false; !ended || !nemesisDone; {
		select {
		case err := <-runnerDone:
			nemesisDone = true
			if err != nil {
				t.Errorf("nemesis: %v", err)
			}
		case <-end.C:
			ended = true
		case <-progress.C:
			t.Logf("+%s: %s; %s", time.Since(runStart).Round(time.Second), opCounts(rec.Ops()), dr.counts())
		}
	}
	progress.Stop()
	t.Logf("+%s: workload and nemesis done: %s; %s", time.Since(runStart).Round(time.Second), opCounts(rec.Ops()), dr.counts())

	// Heal whatever is left (nothing, if every heal worked).
	if netw != nil {
		if err := netw.heal(); err != nil {
			t.Errorf("final heal: %v", err)
		}
	}
	for _, p := range ps.all {
		switch {
		case p.isPaused():
			if err := p.signal(syscall.SIGCONT); err != nil {
				t.Errorf("final heal: %v", err)
			}
		case !p.running():
			if p.spec.voter != 0 {
				if err := dk.ensureMounted(p.spec.host); err != nil {
					t.Errorf("final heal: %v", err)
					continue
				}
			}
			if err := p.start(); err != nil {
				t.Errorf("final heal: %v", err)
			}
		}
	}

	// Wait for recovery: every node ready, every broker live, every
	// partition that can be led led, and a change acknowledged since the
	// last heal. The workload keeps running meanwhile.
	var lastHeal time.Time
	for _, e := range timeline.Events() {
		if e.Phase == history.Heal && e.Time.After(lastHeal) {
			lastHeal = e.Time
		}
	}
	healed := rec.Now()
	recovered := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		defer cancel()
		if nr := notReady(ctx, specs); len(nr) > 0 {
			return "not ready: " + strings.Join(nr, "; ")
		}
		s, ok := smp.last()
		if !ok || !s.Time.After(healed) {
			return "no leadership sample since the heal"
		}
		if why := liveAll(s); why != "" {
			return why
		}
		if p, ok := unled(s); ok {
			return "partition " + p + " has a live ISR member but no live leader"
		}
		if !dr.ackedSince(lastHeal) {
			return "no record acknowledged since the last heal"
		}
		for _, op := range rec.Ops() {
			if op.Outcome == history.OK && op.Kind.Mutating() && op.Complete.After(lastHeal) {
				return ""
			}
		}
		return "no change acknowledged since the last heal"
	}
	if why := waitUntil(2*time.Minute, recovered); why != "" {
		t.Errorf("the cluster did not recover within 2m of the end of the faults: %s", why)
	} else {
		t.Logf("recovered %s after the end of the faults", (rec.Now().Sub(healed)).Round(time.Millisecond))
	}
	wl.halt()
	dl.halt()

	// The data partitions once their followers caught up (every replica
	// in the ISR), read whole through their leaders.
	dataStates, why := awaitFullISR(reader, rng.IntN, time.Minute)
	var dataNotes []string
	if why != "" {
		dataNotes = append(dataNotes, "the data partitions' ISRs were not full within 1m of the workload's end: "+why)
	}
	dataFinal := history.DataFinal{Partitions: finalDataRead(l.brokerListeners(), dataStates, time.Minute)}
	dataFinal.Time = rec.Now()

	// The final read, recorded like any other call.
	final := check.FinalRead{Topics: map[string]history.TopicInfo{}}
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	pend := rec.Invoke(rs.workers, history.List, "", history.Args{})
	read(rctx, reader, pend, nil, rng.IntN)
	rcancel()
	for _, op := range rec.Ops() {
		if op.ID != pend.ID() {
			continue
		}
		if op.Outcome != history.OK || op.Result == nil {
			t.Errorf("final read: %s", op)
			break
		}
		final.Time = op.Complete
		for _, ti := range op.Result.Topics {
			final.Topics[ti.Name] = ti
		}
	}
	// Deletions finish once the faults are over: probe until none runs or
	// each has had its bound (check.DeletionsFinish).
	final.Deleting, final.Probed = awaitDeletions(reader, rec.Ops(), lastHeal, check.DefaultDeletionBound, rec.Now, rng.IntN, t.Logf)

	// The voters' state hashes, once they are at one index.
	var hashes map[string]history.VoterHash
	waitUntil(time.Minute, func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		defer cancel()
		var errs []string
		hashes, errs = stateHashes(ctx, specs)
		if len(errs) > 0 {
			return strings.Join(errs, "; ")
		}
		if !agree(hashes, cfg.Voters) {
			return fmt.Sprint(hashes)
		}
		return ""
	})

	// Every broker agent's metadata against the active controller's, read
	// until they agree: the agents' caches follow the voters, now at one
	// index, by the controller's UpdateMetadata requests.
	var brokerMeta *check.BrokerMetadataRead
	if mr, err := newMetaReader(l.brokerAgents(), reader, l.listeners(), rng.IntN); err != nil {
		t.Errorf("reading the brokers' metadata: %v", err)
	} else {
		brokerMeta = mr.settle(30 * time.Second)
		mr.close()
	}

	// Every agent's records, one last time.
	stopBackground()
	for _, p := range ps.all {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := col.collect(ctx, p.spec.name); err != nil {
			t.Errorf("final read of %s's control log: %v", p.spec.name, err)
		}
		cancel()
	}
	ended := rec.Now()
	// Every process stops, and each replica's log is read from its
	// broker's data directory.
	ps.stopAll()
	dataFinal.Replicas = readReplicaLogs(dataDir, allBrokers)
	produces, consumed := dr.all()
	if err := errors.Join(rec.SinkErr(), dr.sinkErr, histFile.Close(), faultFile.Close(), produceFile.Close()); err != nil {
		t.Errorf("writing the history as it happened: %v", err)
	}

	snapshots, snapErrs := voterSnapshots(ps)
	run := report.Run{Seed: cfg.Seed, Duration: cfg.Duration, Nemesis: cfg.Nemesis, Skipped: cfg.Skipped, Started: started, Ended: ended,
		Ops: rec.Ops(), Observations: col.observations(), Faults: timeline.Events(), Samples: smp.all(), Hashes: hashes, Final: final,
		BrokerMeta: brokerMeta, Snapshots: snapshots,
		Data: &report.DataRun{Produces: produces, Consumed: consumed, Final: dataFinal}}
	for _, f := range schedule {
		run.Schedule = append(run.Schedule, f.String())
	}
	lt := max(time.Minute, cfg.Duration/5)
	checked := report.Check(run, dir, report.Options{LinearizabilityTimeout: lt})
	session, _ := time.ParseDuration(sessionTimeout)
	checked.Results = append(checked.Results, checkRefusalFences(ps.logDir, specs, run.Faults, ended, session))
	summary, err := report.Write(dir, run, checked)
	if err != nil {
		t.Errorf("writing the report: %v", err)
	}
	var notes []string
	notes = append(notes, fmt.Sprintf("%d control-request records from %d agent lifetimes; %d leadership samples (%d reads without an answer)",
		len(run.Observations), col.lifetimes(), len(run.Samples), smp.misses))
	notes = append(notes, col.notes()...)
	notes = append(notes, dataNotes...)
	for _, e := range snapErrs {
		notes = append(notes, "counting snapshots: "+e)
	}
	unexpected := append(ps.unexpectedExits(), ps.races()...)
	for _, u := range unexpected {
		notes = append(notes, "PROCESS FAILURE: "+u)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte(strings.Join(notes, "\n")+"\n"), 0o644); err != nil {
		t.Errorf("writing notes: %v", err)
	}
	t.Logf("summary (%s):\n%s\n%s", filepath.Join(dir, "summary.txt"), summary.Text(), strings.Join(notes, "\n"))
	return runOutcome{dir: dir, checked: checked, unexpected: unexpected, faults: run.Faults, ops: len(run.Ops)}
}

func nsName(ns *nemesis.Namespace) string {
	if ns == nil {
		return ""
	}
	return ns.Name
}

// unled returns a partition of the sample that has a live ISR member but
// no live leader.
func unled(s history.ClusterSample) (string, bool) {
	for _, p := range s.Partitions {
		leadable := false
		for _, b := range p.ISR {
			if slices.Contains(s.Live, b) {
				leadable = true
			}
		}
		if leadable && (p.Leader < 0 || !slices.Contains(s.Live, p.Leader)) {
			return fmt.Sprintf("%s-%d", p.Topic, p.Partition), true
		}
	}
	return "", false
}

// opCounts is "N ops (ok X, fail Y, unknown Z)".
func opCounts(ops []history.Op) string {
	by := map[history.Outcome]int{}
	for _, op := range ops {
		by[op.Outcome]++
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, by[history.Outcome(k)]))
	}
	return fmt.Sprintf("%d ops (%s)", len(ops), strings.Join(parts, ", "))
}
