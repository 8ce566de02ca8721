package benchkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/raftnet"
	"github.com/ctrlquorum/ctrlquorum/voter"
)

// LogStoreVariant is one raft log store configuration the log store
// comparison runs.
type LogStoreVariant struct {
	Name            string
	Store           rl.LogStore
	WALSegmentBytes int // LogStoreWAL only; zero: raft-wal's default
}

func (v LogStoreVariant) options(c *rl.IOCounters) rl.StoreOptions {
	return rl.StoreOptions{LogStore: v.Store, WALSegmentBytes: v.WALSegmentBytes, Counters: c}
}

// The comparison's variants by name: raft-wal with its default segment
// size (64 MiB) and with 16 MiB, package logstore, raft-boltdb.
var logStoreVariants = []LogStoreVariant{
	{Name: "wal", Store: rl.LogStoreWAL},
	{Name: "wal-16m", Store: rl.LogStoreWAL, WALSegmentBytes: 16 << 20},
	{Name: "segments", Store: rl.LogStoreSegments},
	{Name: "bolt", Store: rl.LogStoreBolt},
}

// LogStoreVariants parses a comma-separated list of variant names
// (wal, wal-16m, segments, bolt), or "all".
func LogStoreVariants(names string) ([]LogStoreVariant, error) {
	if strings.TrimSpace(names) == "all" {
		return slices.Clone(logStoreVariants), nil
	}
	var out []LogStoreVariant
	for _, n := range strings.Split(names, ",") {
		n = strings.TrimSpace(n)
		i := slices.IndexFunc(logStoreVariants, func(v LogStoreVariant) bool { return v.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("unknown log store %q (want all, or some of wal, wal-16m, segments, bolt)", n)
		}
		if !slices.ContainsFunc(out, func(v LogStoreVariant) bool { return v.Name == n }) {
			out = append(out, logStoreVariants[i])
		}
	}
	return out, nil
}

// LogStoreConfig sizes the log store comparison. Zero values take the
// defaults.
type LogStoreConfig struct {
	// Variants compared; default all four.
	Variants []LogStoreVariant
	// Rounds: each round runs every variant once, in turn. Default 5.
	Rounds int
	// Batches per variant and round: commits of BatchEntries entries of
	// BatchBytes, about a CreateTopics round. Defaults 200, 27, 700.
	Batches, BatchEntries, BatchBytes int
	// Singles per variant and round: commits of one entry of SingleBytes.
	// Defaults 300 and 100.
	Singles, SingleBytes int
	// Topics also runs the topic creation scenario
	// (Scenarios' Topics, TopicsPerRequest, InFlight) on a fresh cluster
	// of each variant in each round.
	Topics bool
	// Scenarios sizes the topic creation scenario and gives the logger.
	Scenarios Config
	// OpenEntries is the length of the full log whose open time is
	// measured (entries of BatchBytes); default 1 000 000; negative skips
	// it. OpenRounds opens of each, warm and cold; default 3.
	OpenEntries, OpenRounds int
	// Dir holds every store; default a temporary folder, removed after.
	Dir string
}

func (c *LogStoreConfig) defaults() {
	if len(c.Variants) == 0 {
		c.Variants = slices.Clone(logStoreVariants)
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Rounds, 5)
	def(&c.Batches, 200)
	def(&c.BatchEntries, 27)
	def(&c.BatchBytes, 700)
	def(&c.Singles, 300)
	def(&c.SingleBytes, 100)
	def(&c.OpenRounds, 3)
	if c.OpenEntries == 0 {
		c.OpenEntries = 1_000_000
	}
	c.Scenarios.defaults()
}

// Workload is what one kind of commit cost a variant, over every round.
type Workload struct {
	Commits int `json:"commits"`
	// P50 and P99 of the commit latency over every commit of every round;
	// RoundP50 each round's own median, to show the spread.
	P50      time.Duration   `json:"p50_ns"`
	P99      time.Duration   `json:"p99_ns"`
	RoundP50 []time.Duration `json:"round_p50_ns"`
	// Per commit: the process's CPU time (getrusage: all voters of every
	// variant, and the benchmark); the syncs of the variant's stores and
	// the bytes they wrote (rl.IOCounters); what the disk holding them was
	// sent, by every process (/sys/dev/block/…/stat: sectors written,
	// flush requests); and the process's write_bytes (/proc/self/io),
	// which counts each page-cache folio a write dirties whole, up to 1 MiB
	// on a 6.x kernel's ext4, so it measures folio sizes more than writes.
	CPU          time.Duration `json:"cpu_ns"`
	Syncs        float64       `json:"syncs"`
	Bytes        float64       `json:"bytes_written"`
	DiskBytes    float64       `json:"disk_bytes"`
	DiskFlushes  float64       `json:"disk_flushes"`
	ProcessBytes float64       `json:"process_write_bytes"`
	// EntriesPerAppend: how many entries each StoreLogs of the variant's
	// three voters carried.
	EntriesPerAppend float64 `json:"entries_per_append"`
}

// LogStoreResult is one variant's figures.
type LogStoreResult struct {
	Name   string   `json:"name"`
	Batch  Workload `json:"batch"`
	Single Workload `json:"single"`
	// TopicsPerSec is the topic creation rate of each round.
	TopicsPerSec []float64 `json:"topics_per_sec,omitempty"`
	// OpenWarm and OpenCold are the medians of opening the full log (the
	// stores, first and last index, the last entry) with its files in the
	// page cache and evicted from it; OpenBytes its size on disk.
	OpenWarm  time.Duration `json:"open_warm_ns,omitempty"`
	OpenCold  time.Duration `json:"open_cold_ns,omitempty"`
	OpenBytes int64         `json:"open_bytes,omitempty"`
}

// LogStoreReport is the outcome of a comparison.
type LogStoreReport struct {
	CPUs        int              `json:"cpus"`
	Config      LogStoreConfig   `json:"-"`
	Dir         string           `json:"dir"`
	Took        time.Duration    `json:"took_ns"`
	OpenEntries int              `json:"open_entries"`
	Results     []LogStoreResult `json:"results"`
}

type storeCluster struct {
	v        LogStoreVariant
	counters rl.IOCounters
	voters   []*voter.Voter
	disk     string // the stat file of the disk holding the voters' data
}

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) {
	return nopSnapshot{}, nil
}
func (nopFSM) Restore(r io.ReadCloser) error { return r.Close() }

type nopSnapshot struct{}

func (nopSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (nopSnapshot) Release()                             {}

// startStoreCluster starts three voters keeping their logs in v, with
// voter's default raft settings, in dir.
func startStoreCluster(ctx context.Context, dir string, v LogStoreVariant, logger hclog.Logger) (*storeCluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := &storeCluster{v: v, disk: diskStatFile(dir)}
	var streams []*raftnet.StreamLayer
	var peers []raft.Server
	for i := range 3 {
		s, err := raftnet.NewTCPStreamLayer("127.0.0.1:0", "")
		if err != nil {
			for _, prev := range streams {
				_ = prev.Close()
			}
			return nil, err
		}
		streams = append(streams, s)
		peers = append(peers, raft.Server{ID: raft.ServerID(strconv.Itoa(i + 1)), Address: raft.ServerAddress(s.Addr().String())})
	}
	for i := range 3 {
		vt, err := voter.Start(voter.Config{
			NodeID: strconv.Itoa(i + 1), Stream: streams[i], DataDir: filepath.Join(dir, fmt.Sprintf("voter-%d", i+1)),
			Peers: peers, FSM: nopFSM{}, Logger: logger.Named(v.Name), Store: v.options(&c.counters),
		})
		if err != nil {
			for _, s := range streams[i+1:] {
				_ = s.Close()
			}
			c.shutdown()
			return nil, fmt.Errorf("%s: %w", v.Name, err)
		}
		c.voters = append(c.voters, vt)
	}
	if _, err := c.leader(ctx); err != nil {
		c.shutdown()
		return nil, err
	}
	return c, nil
}

func (c *storeCluster) leader(ctx context.Context) (*voter.Voter, error) {
	for {
		for _, v := range c.voters {
			if v.IsLeader() {
				return v, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: no leader: %w", c.v.Name, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (c *storeCluster) shutdown() {
	for _, v := range c.voters {
		_ = v.Shutdown()
	}
}

// commit applies n entries of size bytes at once (raft stores them with
// one append when they reach its loop together) and waits for all.
func (c *storeCluster) commit(ctx context.Context, n, size int, payload []byte) (time.Duration, error) {
	ld, err := c.leader(ctx)
	if err != nil {
		return 0, err
	}
	futures := make([]raft.ApplyFuture, n)
	t0 := time.Now()
	for i := range futures {
		futures[i] = ld.Apply(payload[:size], 10*time.Second)
	}
	for _, f := range futures {
		if err := f.Error(); err != nil {
			return 0, fmt.Errorf("%s: %w", c.v.Name, err)
		}
	}
	return time.Since(t0), nil
}

// usage is what the process, a cluster's stores and the disk had done at
// one time.
type usage struct {
	cpu                              time.Duration
	procWritten                      int64
	syncs, written, appends, entries int64
	diskBytes, diskFlushes           int64
}

func (c *storeCluster) usage() usage {
	u := usage{cpu: processCPU(), procWritten: writeBytes(), syncs: c.counters.Syncs.Load(), written: c.counters.Written.Load(),
		appends: c.counters.Appends.Load(), entries: c.counters.Entries.Load()}
	u.diskBytes, u.diskFlushes = diskStat(c.disk)
	return u
}

// diskStatFile is the block layer's stat file of the disk holding dir.
func diskStatFile(dir string) string {
	var st unix.Stat_t
	if unix.Stat(dir, &st) != nil {
		return ""
	}
	return fmt.Sprintf("/sys/dev/block/%d:%d/stat", unix.Major(st.Dev), unix.Minor(st.Dev))
}

// diskStat reads the bytes written to a disk and its completed flush
// requests (Documentation/block/stat.rst), zeros when it cannot.
func diskStat(file string) (bytes, flushes int64) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) > 6 {
		sectors, _ := strconv.ParseInt(f[6], 10, 64)
		bytes = sectors * 512
	}
	if len(f) > 14 {
		flushes, _ = strconv.ParseInt(f[14], 10, 64)
	}
	return bytes, flushes
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// writeBytes is the process's write_bytes in /proc/self/io: bytes it
// caused to be sent to storage (pages it dirtied), 0 where there is no
// such file.
func writeBytes() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// workloadRun accumulates one variant's workload over the rounds.
type workloadRun struct {
	lat      []time.Duration
	roundP50 []time.Duration
	total    usage // summed over the rounds
}

func (w *workloadRun) run(ctx context.Context, c *storeCluster, commits, entries, size int, payload []byte) error {
	u0 := c.usage()
	lat := make([]time.Duration, 0, commits)
	for range commits {
		d, err := c.commit(ctx, entries, size, payload)
		if err != nil {
			return err
		}
		lat = append(lat, d)
	}
	u1 := c.usage()
	w.lat = append(w.lat, lat...)
	w.roundP50 = append(w.roundP50, percentile(lat, 50))
	t := &w.total
	t.cpu += u1.cpu - u0.cpu
	t.procWritten += u1.procWritten - u0.procWritten
	t.syncs += u1.syncs - u0.syncs
	t.written += u1.written - u0.written
	t.appends += u1.appends - u0.appends
	t.entries += u1.entries - u0.entries
	t.diskBytes += u1.diskBytes - u0.diskBytes
	t.diskFlushes += u1.diskFlushes - u0.diskFlushes
	return nil
}

func (w *workloadRun) result() Workload {
	n := len(w.lat)
	if n == 0 {
		return Workload{}
	}
	t, per := w.total, func(v int64) float64 { return float64(v) / float64(n) }
	out := Workload{Commits: n, P50: percentile(w.lat, 50), P99: percentile(w.lat, 99), RoundP50: w.roundP50,
		CPU: t.cpu / time.Duration(n), Syncs: per(t.syncs), Bytes: per(t.written),
		DiskBytes: per(t.diskBytes), DiskFlushes: per(t.diskFlushes), ProcessBytes: per(t.procWritten)}
	if t.appends > 0 {
		out.EntriesPerAppend = float64(t.entries) / float64(t.appends)
	}
	return out
}

func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

// RunLogStores compares raft log stores on the same load in one run: a
// three-voter cluster per variant (voter's raft settings, real raft over
// loopback TCP, bolt for the term and vote, raft.NewLogCache in front of
// the log, every file under one folder on one disk) all running at once,
// loaded one at a time in rounds (A B C D A B C D …) with commits of
// batches and of single entries; then, if asked, topic creation through
// the Kafka listener on a fresh cluster of each variant, in the same
// rounds; then the open time of each store holding a full log.
func RunLogStores(ctx context.Context, cfg LogStoreConfig) (LogStoreReport, error) {
	cfg.defaults()
	start := time.Now()
	rep := LogStoreReport{CPUs: runtime.NumCPU(), Config: cfg, OpenEntries: max(cfg.OpenEntries, 0)}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "ctrlnode-logstores-")
		if err != nil {
			return rep, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	rep.Dir = dir
	log, phase := cfg.Scenarios.Logger, func(format string, args ...any) {
		cfg.Scenarios.Progress(fmt.Sprintf("[%s] ", time.Since(start).Round(time.Second)) + fmt.Sprintf(format, args...))
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	clusters := make([]*storeCluster, len(cfg.Variants))
	defer func() {
		for _, c := range clusters {
			if c != nil {
				c.shutdown()
			}
		}
	}()
	for i, v := range cfg.Variants {
		c, err := startStoreCluster(wctx, filepath.Join(dir, v.Name), v, log)
		if err != nil {
			return rep, err
		}
		clusters[i] = c
	}
	payload := make([]byte, max(cfg.BatchBytes, cfg.SingleBytes))
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	phase("%d clusters of 3 voters up: %s", len(clusters), names(cfg.Variants))
	for _, c := range clusters {
		if err := (&workloadRun{}).run(ctx, c, max(cfg.Batches/10, 5), cfg.BatchEntries, cfg.BatchBytes, payload); err != nil {
			return rep, fmt.Errorf("warm-up: %w", err)
		}
	}
	batch := make([]workloadRun, len(clusters))
	single := make([]workloadRun, len(clusters))
	topics := make([][]float64, len(clusters))
	for r := 1; r <= cfg.Rounds; r++ {
		for i, c := range clusters {
			if err := batch[i].run(ctx, c, cfg.Batches, cfg.BatchEntries, cfg.BatchBytes, payload); err != nil {
				return rep, err
			}
			if err := single[i].run(ctx, c, cfg.Singles, 1, cfg.SingleBytes, payload); err != nil {
				return rep, err
			}
			phase("round %d/%d %-8s %d-entry commits p50 %v, single p50 %v", r, cfg.Rounds, c.v.Name, cfg.BatchEntries,
				batch[i].roundP50[r-1].Round(time.Microsecond), single[i].roundP50[r-1].Round(time.Microsecond))
		}
		if !cfg.Topics {
			continue
		}
		for i, v := range cfg.Variants {
			rate, err := topicRate(ctx, cfg.Scenarios, filepath.Join(dir, fmt.Sprintf("topics-%s-%d", v.Name, r)), v, phase)
			if err != nil {
				return rep, fmt.Errorf("%s: topic creation: %w", v.Name, err)
			}
			topics[i] = append(topics[i], rate)
			phase("round %d/%d %-8s %.0f topics/s", r, cfg.Rounds, v.Name, rate)
		}
	}
	for _, c := range clusters {
		c.shutdown()
	}
	clusters = nil
	for i, v := range cfg.Variants {
		rep.Results = append(rep.Results, LogStoreResult{Name: v.Name, Batch: batch[i].result(), Single: single[i].result(), TopicsPerSec: topics[i]})
	}
	if cfg.OpenEntries > 0 {
		if err := openTimes(ctx, cfg, dir, rep.Results, payload, phase); err != nil {
			return rep, err
		}
	}
	rep.Took = time.Since(start)
	return rep, nil
}

func names(vs []LogStoreVariant) string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Name)
	}
	return strings.Join(out, ", ")
}

// PrepareStores creates the data directories of a cluster's three voters
// (voter-1 … under dir) with their logs in v, so that voters started there
// asking for no store in particular keep theirs in v. (Those voters open
// raft-wal with its default segment size: a WALSegmentBytes of v holds
// for the first segment only.)
func PrepareStores(dir string, v LogStoreVariant) error {
	for i := 1; i <= 3; i++ {
		s, err := rl.OpenStores(filepath.Join(dir, fmt.Sprintf("voter-%d", i)), v.options(nil))
		if err != nil {
			return err
		}
		if err := s.Close(); err != nil {
			return err
		}
	}
	return nil
}

// topicRate runs the topic creation scenario on a fresh cluster whose
// voters keep their logs in v.
func topicRate(ctx context.Context, cfg Config, dir string, v LogStoreVariant, phase func(string, ...any)) (float64, error) {
	if err := PrepareStores(dir, v); err != nil {
		return 0, err
	}
	var col collector
	quiet := func(string, ...any) {}
	if err := topicCreation(ctx, cfg, dir, &col, quiet); err != nil {
		return 0, err
	}
	res := col.results()
	if len(res) != 1 {
		return 0, errors.New("no topic creation figure")
	}
	return res[0].Value, nil
}

// openTimes fills one store of each variant with a full log, then opens
// each in turn, warm and cold, cfg.OpenRounds times.
func openTimes(ctx context.Context, cfg LogStoreConfig, dir string, results []LogStoreResult, payload []byte, phase func(string, ...any)) error {
	const fillBatch = 1000
	dirs := make([]string, len(cfg.Variants))
	for i, v := range cfg.Variants {
		dirs[i] = filepath.Join(dir, "open-"+v.Name)
		t0 := time.Now()
		s, err := rl.OpenStores(dirs[i], v.options(nil))
		if err != nil {
			return err
		}
		batch := make([]*raft.Log, 0, fillBatch)
		for idx := 1; idx <= cfg.OpenEntries; idx++ {
			batch = append(batch, &raft.Log{Index: uint64(idx), Term: 1, Type: raft.LogCommand, Data: payload[:cfg.BatchBytes]})
			if len(batch) == fillBatch || idx == cfg.OpenEntries {
				if err := s.Log.StoreLogs(batch); err != nil {
					_ = s.Close()
					return fmt.Errorf("%s: fill: %w", v.Name, err)
				}
				batch = batch[:0]
			}
			if ctx.Err() != nil {
				_ = s.Close()
				return ctx.Err()
			}
		}
		if err := errors.Join(s.Stable.SetUint64([]byte("CurrentTerm"), 1), s.Close()); err != nil {
			return err
		}
		results[i].OpenBytes = diskUsage(dirs[i])
		phase("%-8s full log of %d entries written in %v (%d MiB on disk)", v.Name, cfg.OpenEntries, time.Since(t0).Round(time.Millisecond), results[i].OpenBytes>>20)
	}
	warm := make([][]time.Duration, len(cfg.Variants))
	cold := make([][]time.Duration, len(cfg.Variants))
	for r := 0; r < cfg.OpenRounds; r++ {
		for i, v := range cfg.Variants {
			for _, evict := range []bool{false, true} {
				if evict {
					if err := evictDir(dirs[i]); err != nil {
						return err
					}
				}
				d, err := openOnce(dirs[i], v, cfg.OpenEntries)
				if err != nil {
					return err
				}
				if evict {
					cold[i] = append(cold[i], d)
				} else {
					warm[i] = append(warm[i], d)
				}
			}
		}
	}
	for i := range cfg.Variants {
		results[i].OpenWarm, results[i].OpenCold = percentile(warm[i], 50), percentile(cold[i], 50)
		phase("%-8s open of the full log: warm %v, cold %v", cfg.Variants[i].Name, results[i].OpenWarm.Round(time.Microsecond), results[i].OpenCold.Round(time.Microsecond))
	}
	return nil
}

// openOnce opens the stores in dir as a voter starts: OpenStores, the first
// and last index, the last entry.
func openOnce(dir string, v LogStoreVariant, want int) (time.Duration, error) {
	t0 := time.Now()
	s, err := rl.OpenStores(dir, v.options(nil))
	if err != nil {
		return 0, err
	}
	first, err1 := s.Log.FirstIndex()
	last, err2 := s.Log.LastIndex()
	var l raft.Log
	err3 := s.Log.GetLog(last, &l)
	d := time.Since(t0)
	if err := errors.Join(err1, err2, err3, s.Close()); err != nil {
		return 0, fmt.Errorf("%s: open: %w", v.Name, err)
	}
	if first != 1 || last != uint64(want) {
		return 0, fmt.Errorf("%s: open found [%d, %d], want [1, %d]", v.Name, first, last, want)
	}
	return d, nil
}

// evictDir drops the files under dir from the page cache.
func evictDir(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			return err
		}
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	})
}

// diskUsage is the space the files under dir take on disk.
func diskUsage(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		var st unix.Stat_t
		if unix.Stat(p, &st) == nil {
			n += st.Blocks * 512
		}
		return nil
	})
	return n
}

// WriteTable prints the comparison as a table.
func (r LogStoreReport) WriteTable(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "raft log stores compared in one run (took %v): per store three voters in this process sharing %d CPUs, raft over loopback TCP, voter's raft settings, bolt for term and vote, raft.NewLogCache in front of the log, files under %s; rounds %s × %d\n",
		r.Took.Round(time.Second), r.CPUs, r.Dir, strings.Join(func() []string {
			var s []string
			for _, x := range r.Results {
				s = append(s, x.Name)
			}
			return s
		}(), " "), c.Rounds)
	fmt.Fprintln(w, "per commit: CPU of the whole process (getrusage); syncs (fsync/fdatasync) and bytes written by that store's three voters, counted where logstore and raft-wal make them and from bolt's statistics (two syncs per bolt write transaction); the disk's own counts of bytes written and flushes, from every process on it")
	fmt.Fprintln(w)
	base := slices.IndexFunc(r.Results, func(x LogStoreResult) bool { return x.Name == "segments" })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STORE\tCOMMIT\tCOMMITS\tP50\tP99\tROUND P50s\tVS SEGMENTS\tCPU/COMMIT\tSYNCS/COMMIT\tWRITTEN/COMMIT\tDISK/COMMIT\tDISK FLUSHES\tENTRIES/APPEND")
	for _, kind := range []string{"batch", "single"} {
		for _, x := range r.Results {
			wl, what := x.Batch, fmt.Sprintf("%d×%d B", c.BatchEntries, c.BatchBytes)
			if kind == "single" {
				wl, what = x.Single, fmt.Sprintf("1×%d B", c.SingleBytes)
			}
			vs := "-"
			if base >= 0 {
				b := r.Results[base].Batch
				if kind == "single" {
					b = r.Results[base].Single
				}
				if b.P50 > 0 {
					vs = fmt.Sprintf("%+.0f%%", 100*(float64(wl.P50)/float64(b.P50)-1))
				}
			}
			var rounds []string
			for _, p := range wl.RoundP50 {
				rounds = append(rounds, fmt.Sprintf("%.2f", float64(p.Microseconds())/1000))
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f ms\t%.2f ms\t%s\t%s\t%.0f µs\t%.2f\t%.1f KiB\t%.1f KiB\t%.2f\t%.1f\n", x.Name, what, wl.Commits,
				float64(wl.P50.Microseconds())/1000, float64(wl.P99.Microseconds())/1000, strings.Join(rounds, " "), vs,
				float64(wl.CPU.Nanoseconds())/1000, wl.Syncs, wl.Bytes/1024, wl.DiskBytes/1024, wl.DiskFlushes, wl.EntriesPerAppend)
		}
	}
	_ = tw.Flush()
	if len(r.Results) > 0 && len(r.Results[0].TopicsPerSec) > 0 {
		fmt.Fprintf(w, "\ntopic creation through the Kafka listener (%d topics, %d per request, %d in flight; a fresh cluster per store and round):\n",
			c.Scenarios.Topics, c.Scenarios.TopicsPerRequest, c.Scenarios.InFlight)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "STORE\tMEDIAN\tROUNDS\tVS SEGMENTS")
		for _, x := range r.Results {
			vs := "-"
			if base >= 0 && len(r.Results[base].TopicsPerSec) > 0 {
				vs = fmt.Sprintf("%+.0f%%", 100*(medianF(x.TopicsPerSec)/medianF(r.Results[base].TopicsPerSec)-1))
			}
			var rounds []string
			for _, t := range x.TopicsPerSec {
				rounds = append(rounds, fmt.Sprintf("%.0f", t))
			}
			fmt.Fprintf(tw, "%s\t%.0f topics/s\t%s\t%s\n", x.Name, medianF(x.TopicsPerSec), strings.Join(rounds, " "), vs)
		}
		_ = tw.Flush()
	}
	if r.OpenEntries > 0 {
		fmt.Fprintf(w, "\nopen of a full log (%d entries of %d B, written straight to the store; OpenStores, first and last index, last entry; median of %d, warm: files in the page cache, cold: evicted with fadvise):\n",
			r.OpenEntries, c.BatchBytes, c.OpenRounds)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "STORE\tWARM\tCOLD\tON DISK")
		for _, x := range r.Results {
			fmt.Fprintf(tw, "%s\t%.1f ms\t%.1f ms\t%d MiB\n", x.Name, float64(x.OpenWarm.Microseconds())/1000, float64(x.OpenCold.Microseconds())/1000, x.OpenBytes>>20)
		}
		_ = tw.Flush()
	}
}
