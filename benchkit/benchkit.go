// Package benchkit runs the controller's benchmark scenarios against three
// voters in this process, and reports each figure next to the raw raft
// floor measured on the same cluster in the same run:
//
//   - topic creation rate through the Kafka listener (CreateTopics from a
//     Kafka client, one-partition topics of replication factor 3);
//   - controlled shutdown of a broker that leads a tenth of N partitions:
//     from the broker's request to the controller's answer that it may
//     stop (every record committed, every control request handed over);
//   - broker failure at N partitions: the round that fences a broker
//     whose session expired, from its start to its commit;
//   - failover against N: from raft reporting the new leader to the new
//     controller being ready (ControllerEpoch committed, catch-up queued).
//     Raft's own election time is reported on a line of its own: its
//     randomized timeout would swamp any comparison between sizes.
//
// The voters share the machine's cores with the benchmark and with each
// other; the report says how many there are. Figures are medians over
// Config.Runs fresh clusters (and, for failover, over several failovers
// per cluster).
package benchkit

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/controller"
)

// Config sets the sizes of a run. Zero values take the defaults.
type Config struct {
	// Partitions are the image sizes N of the per-size scenarios.
	// Default 10 000 and 100 000.
	Partitions []int
	// Brokers in the cluster (replication factor 3). Default 10.
	Brokers int
	// BrokersPerSize, if set, gives the brokers of each size of
	// Partitions in turn (a zero or missing entry: Brokers), so that one
	// run compares a broker leading the same share at two sizes: 1M
	// partitions over 10 brokers and 10M over 100.
	BrokersPerSize []int
	// Topics created in the topic-creation scenario. Default 2000.
	Topics int
	// TopicsPerRequest and InFlight shape the CreateTopics traffic.
	// Defaults 50 and 8.
	TopicsPerRequest, InFlight int
	// FailoverRounds per cluster. Default 5.
	FailoverRounds int
	// FloorSamples is how many sequential raw raft commits the floor is
	// the median of. Default 50.
	FloorSamples int
	// Runs is how many fresh clusters each per-size scenario runs on.
	// Default 1.
	Runs int
	// SessionTimeout of the brokers. Default 3 s.
	SessionTimeout time.Duration
	// Dir holds the voters' data; default a temporary folder, removed
	// afterwards.
	Dir string
	// LogStore, when set, is where every cluster's voters keep their raft
	// logs; default a new data directory's store.
	LogStore *LogStoreVariant
	// Progress, if set, receives a line when a phase starts and at
	// least every ProgressEvery during long phases.
	Progress      func(string)
	ProgressEvery time.Duration
	Logger        hclog.Logger
}

func (c *Config) defaults() {
	if len(c.Partitions) == 0 {
		c.Partitions = []int{10_000, 100_000}
	}
	if c.Brokers <= 0 {
		c.Brokers = 10
	}
	if c.Topics <= 0 {
		c.Topics = 2000
	}
	if c.TopicsPerRequest <= 0 {
		c.TopicsPerRequest = 50
	}
	if c.InFlight <= 0 {
		c.InFlight = 8
	}
	if c.FailoverRounds <= 0 {
		c.FailoverRounds = 5
	}
	if c.FloorSamples <= 0 {
		c.FloorSamples = 50
	}
	if c.Runs <= 0 {
		c.Runs = 1
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 3 * time.Second
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Progress == nil {
		c.Progress = func(string) {}
	}
}

// Result is one line of the report.
type Result struct {
	Scenario   string  `json:"scenario"`
	Partitions int     `json:"partitions,omitempty"`
	Brokers    int     `json:"brokers,omitempty"`
	Value      float64 `json:"value"`
	Unit       string  `json:"unit"` // "ms" or "topics/s"
	// Samples are the individual measurements the value is the median of.
	Samples []float64 `json:"samples"`
	// FloorMs is the raw raft floor of the clusters the samples come from
	// (median), and Ratio the value over it: for a time, how many floor
	// commits it lasts; for a rate, how many items per floor commit.
	FloorMs float64 `json:"raft_floor_ms"`
	Ratio   float64 `json:"floor_ratio"`
	Note    string  `json:"note,omitempty"`
	// Min and Max are the spread of Samples; LoadAvg the machine's
	// one-minute load average when each sample was taken.
	Min     float64   `json:"min"`
	Max     float64   `json:"max"`
	LoadAvg []float64 `json:"load_avg"`
	// For the broker events, the event's own floor (see floor.go),
	// medians over the samples: its entries decoded and applied on one
	// image with no raft, and the same bytes committed by raft with a
	// no-op FSM; EventRatio is Value over their sum. HashMatched counts
	// the samples whose replayed image had the state hash of the active
	// voter after the event, of HashChecked.
	ApplyFloorMs  float64 `json:"apply_floor_ms,omitempty"`
	CommitFloorMs float64 `json:"commit_floor_ms,omitempty"`
	EventRatio    float64 `json:"event_floor_ratio,omitempty"`
	HashChecked   int     `json:"hash_checked,omitempty"`
	HashMatched   int     `json:"hash_matched,omitempty"`
}

// ImageResult is what an image of N partitions costs, medians over the
// runs: live heap per partition per voter (the process's live heap
// after loading, less before, over three voters), snapshot bytes per
// partition, and the time to write a snapshot into memory and to
// restore it into a fresh image.
type ImageResult struct {
	Partitions       int     `json:"partitions"`
	Brokers          int     `json:"brokers"`
	HeapPerPartition float64 `json:"heap_bytes_per_partition"`
	// ImagePerPartition is the heap of the image alone, restored from
	// its snapshot into a fresh FSM, per partition.
	ImagePerPartition float64   `json:"image_heap_bytes_per_partition"`
	SnapshotPerPart   float64   `json:"snapshot_bytes_per_partition"`
	SnapshotWriteMs   float64   `json:"snapshot_write_ms"`
	SnapshotRestoreMs float64   `json:"snapshot_restore_ms"`
	HeapSamples       []float64 `json:"heap_samples"`
	RestoreSamples    []float64 `json:"restore_samples"`
	SnapshotBytes     int       `json:"snapshot_bytes"`
	LoadAvg           []float64 `json:"load_avg"`
}

// Report is the outcome of a run.
type Report struct {
	CPUs       int `json:"cpus"`
	GOMAXPROCS int `json:"gomaxprocs"`
	Voters     int `json:"voters"`
	Brokers    int `json:"brokers"`
	// BrokersPerSize is Config.BrokersPerSize, when set.
	BrokersPerSize []int         `json:"brokers_per_size,omitempty"`
	Runs           int           `json:"runs"`
	LogStore       string        `json:"log_store,omitempty"`
	Took           time.Duration `json:"took_ns"`
	Results        []Result      `json:"results"`
	Images         []ImageResult `json:"images,omitempty"`
	Targets        []Target      `json:"targets,omitempty"`
}

type sample struct {
	v, floorMs float64
	note       string
	load       float64
	floor      *eventFloor // broker events only
}

type imageSample struct {
	heapPerPart, imagePerPart, snapPerPart, writeMs, restoreMs, load float64
	snapBytes, brokers                                               int
}

type collector struct {
	mu     sync.Mutex
	order  []string
	data   map[string][]sample
	meta   map[string]Result
	images map[[2]int][]imageSample // by partitions, brokers
	sizes  [][2]int
}

func (c *collector) addImage(n int, s imageSample) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.images == nil {
		c.images = map[[2]int][]imageSample{}
	}
	k := [2]int{n, s.brokers}
	if _, ok := c.images[k]; !ok {
		c.sizes = append(c.sizes, k)
	}
	c.images[k] = append(c.images[k], s)
}

func (c *collector) imageResults() []ImageResult {
	var out []ImageResult
	for _, n := range c.sizes {
		r := ImageResult{Partitions: n[0]}
		var heap, image, snap, write, restore []float64
		for _, s := range c.images[n] {
			heap, snap = append(heap, s.heapPerPart), append(snap, s.snapPerPart)
			image = append(image, s.imagePerPart)
			write, restore = append(write, s.writeMs), append(restore, s.restoreMs)
			r.LoadAvg = append(r.LoadAvg, s.load)
			r.SnapshotBytes, r.Brokers = s.snapBytes, s.brokers
		}
		r.HeapPerPartition, r.SnapshotPerPart = medianF(heap), medianF(snap)
		r.ImagePerPartition = medianF(image)
		r.SnapshotWriteMs, r.SnapshotRestoreMs = medianF(write), medianF(restore)
		r.HeapSamples, r.RestoreSamples = heap, restore
		out = append(out, r)
	}
	return out
}

func (c *collector) add(key string, meta Result, s sample) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.data == nil {
		c.data, c.meta = map[string][]sample{}, map[string]Result{}
	}
	if _, ok := c.data[key]; !ok {
		c.order = append(c.order, key)
		c.meta[key] = meta
	}
	c.data[key] = append(c.data[key], s)
}

func medianF(s []float64) float64 {
	s = append([]float64(nil), s...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func (c *collector) results() []Result {
	var out []Result
	for _, k := range c.order {
		r := c.meta[k]
		var vals, floors, applies, commits []float64
		for _, s := range c.data[k] {
			vals = append(vals, s.v)
			floors = append(floors, s.floorMs)
			r.LoadAvg = append(r.LoadAvg, s.load)
			if s.note != "" {
				r.Note = s.note
			}
			if f := s.floor; f != nil {
				applies, commits = append(applies, ms(f.apply)), append(commits, ms(f.commit))
				if f.hashChecked {
					r.HashChecked++
					if f.sameHash {
						r.HashMatched++
					}
				}
			}
		}
		r.Samples = vals
		r.Value = medianF(vals)
		r.Min, r.Max = slices.Min(vals), slices.Max(vals)
		r.FloorMs = medianF(floors)
		if len(applies) > 0 {
			r.ApplyFloorMs, r.CommitFloorMs = medianF(applies), medianF(commits)
			if sum := r.ApplyFloorMs + r.CommitFloorMs; sum > 0 {
				r.EventRatio = r.Value / sum
			}
		}
		if r.FloorMs > 0 {
			if r.Unit == "topics/s" {
				r.Ratio = r.Value * r.FloorMs / 1000
			} else {
				r.Ratio = r.Value / r.FloorMs
			}
		}
		out = append(out, r)
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Run runs every scenario.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg.defaults()
	start := time.Now()
	rep := Report{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Voters: 3, Brokers: cfg.Brokers, BrokersPerSize: cfg.BrokersPerSize, Runs: cfg.Runs}
	if cfg.LogStore != nil {
		rep.LogStore = cfg.LogStore.Name
	}
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
	total := cfg.Runs * (1 + len(cfg.Partitions))
	step := 0
	phase := func(format string, args ...any) {
		cfg.Progress(fmt.Sprintf("[%s] ", time.Since(start).Round(time.Second)) + fmt.Sprintf(format, args...))
	}
	for run := 1; run <= cfg.Runs; run++ {
		step++
		phase("(%d/%d) run %d: topic creation through the listener, %d topics", step, total, run, cfg.Topics)
		if err := cfg.prepare(fmt.Sprintf("%s/run%d-topics", dir, run)); err != nil {
			return rep, err
		}
		if err := topicCreation(ctx, cfg, fmt.Sprintf("%s/run%d-topics", dir, run), &col, phase); err != nil {
			return rep, fmt.Errorf("topic creation: %w", err)
		}
		for i, n := range cfg.Partitions {
			step++
			scfg := cfg
			if i < len(cfg.BrokersPerSize) && cfg.BrokersPerSize[i] > 0 {
				scfg.Brokers = cfg.BrokersPerSize[i]
			}
			phase("(%d/%d) run %d: %d partitions, %d brokers", step, total, run, n, scfg.Brokers)
			sdir := fmt.Sprintf("%s/run%d-%d-%d", dir, run, n, scfg.Brokers)
			if err := cfg.prepare(sdir); err != nil {
				return rep, err
			}
			if err := perSize(ctx, scfg, sdir, n, &col, phase); err != nil {
				return rep, fmt.Errorf("%d partitions: %w", n, err)
			}
		}
	}
	rep.Results = col.results()
	rep.Images = col.imageResults()
	rep.Targets = targets(rep)
	rep.Took = time.Since(start)
	return rep, nil
}

// prepare gives the voters of a cluster in dir their log store.
func (c *Config) prepare(dir string) error {
	if c.LogStore == nil {
		return nil
	}
	return PrepareStores(dir, *c.LogStore)
}

// perSize runs the scenarios that depend on the image size on a fresh
// cluster: controlled shutdown, broker failure, failover.
func perSize(ctx context.Context, cfg Config, dir string, n int, col *collector, phase func(string, ...any)) error {
	obs := &roundObserver{}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c, err := startWithBrokers(wctx, cfg, dir, obs)
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
	phase("  raw raft floor %v", floor.Round(time.Microsecond))

	lctx, lcancel := context.WithTimeout(ctx, 30*time.Minute)
	defer lcancel()
	heapBefore := heapInUse()
	if err := loadWithProgress(lctx, c, cfg, n, phase); err != nil {
		return err
	}
	heapAfter := heapInUse()

	// Controlled shutdown of broker 1.
	_, node, err = activeWithin(ctx, c)
	if err != nil {
		return err
	}
	// The image before the event, for its floor; written and restored
	// once for the image's own figures.
	snapShutdown, err := snapshotImage(node)
	if err != nil {
		return err
	}
	beforeRestore := heapInUse()
	restored, restoreTook, err := snapShutdown.restore()
	if err != nil {
		return err
	}
	imageHeap := float64(int64(heapInUse())-int64(beforeRestore)) / float64(n)
	runtime.KeepAlive(restored)
	img := imageSample{heapPerPart: float64(int64(heapAfter)-int64(heapBefore)) / float64(3*n), imagePerPart: imageHeap,
		snapPerPart: float64(len(snapShutdown.data)) / float64(n),
		writeMs:     ms(snapShutdown.write), restoreMs: ms(restoreTook), snapBytes: len(snapShutdown.data), brokers: cfg.Brokers, load: loadAverage()}
	col.addImage(n, img)
	phase("  image: %.0f B heap per partition per voter (the image alone, restored: %.0f B); snapshot %.1f B per partition, written in %v, restored in %v",
		img.heapPerPart, imageHeap, img.snapPerPart, snapShutdown.write.Round(time.Millisecond), restoreTook.Round(time.Millisecond))
	runtime.GC() // the restored copy is garbage: not the event's to collect

	b1 := c.brokers[1]
	b1.stop()
	led := ledBy(node, 1)
	shutdownFrom := node.FSM.AppliedIndex() + 1
	var smu sync.Mutex
	var shutdownRound controller.RoundStats // the event's largest round
	obs.set(func(st controller.RoundStats) {
		smu.Lock()
		if st.Records > shutdownRound.Records {
			shutdownRound = controller.RoundStats{Records: st.Records, Entries: st.Entries, Compute: st.Compute, Commit: st.Commit}
		}
		smu.Unlock()
	})
	t0 := time.Now()
	for {
		resp, err := node.Controller.Heartbeat(ctx, controller.Heartbeat{BrokerID: 1, BrokerEpoch: b1.brokerEpoch(), MetadataOffset: node.FSM.AppliedIndex(), WantShutDown: true})
		if err != nil {
			return fmt.Errorf("controlled shutdown: %w", err)
		}
		if resp.ShouldShutDown {
			break
		}
		if time.Since(t0) > time.Minute {
			return fmt.Errorf("controlled shutdown of broker 1 not granted within a minute")
		}
	}
	shutdown := time.Since(t0)
	shutdownLoad := loadAverage()
	shutdownTo := node.FSM.AppliedIndex()
	shutdownHash := stateHash(node)
	if left := ledBy(node, 1); left != 0 {
		return fmt.Errorf("after its controlled shutdown broker 1 still leads %d partitions", left)
	}
	obs.set(nil)
	smu.Lock()
	phase("  controlled shutdown of a leader of %d partitions: %v (its largest round: %d records; compute %v, commit %v)", led, shutdown.Round(time.Microsecond),
		shutdownRound.Records, shutdownRound.Compute.Round(time.Microsecond), shutdownRound.Commit.Round(time.Microsecond))
	smu.Unlock()
	shutdownLed := led

	// Broker failure: a broker the shutdown left alone stops
	// heartbeating; its session expires. The image puts each partition's
	// replicas on consecutive brokers, so broker 2 took over all of
	// broker 1's leadership: the one failed here, half way round, leads a
	// tenth of the partitions as on a balanced cluster.
	failed := int32(cfg.Brokers/2 + 1)
	var rmu sync.Mutex
	var rounds []controller.RoundStats
	obs.set(func(st controller.RoundStats) {
		rmu.Lock()
		rounds = append(rounds, controller.RoundStats{Events: st.Events, Records: st.Records, Entries: st.Entries, Compute: st.Compute, Commit: st.Commit,
			FirstIndex: st.FirstIndex, LastIndex: st.LastIndex})
		rmu.Unlock()
	})
	led = ledBy(node, failed)
	snapFence, err := snapshotImage(node)
	if err != nil {
		return err
	}
	runtime.GC()
	c.brokers[failed].stop()
	fctx, fcancel := context.WithTimeout(ctx, cfg.SessionTimeout*3+time.Minute)
	defer fcancel()
	for {
		if _, fenced := brokerState(node, failed); fenced {
			break
		}
		select {
		case <-fctx.Done():
			return fmt.Errorf("broker %d was not fenced: %w", failed, fctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	// The image shows the fence once the round's first entry applied; on
	// a large image its elections fill later entries, and the loop
	// reports the round once all of them have committed. The fencing
	// round is the one whose entries hold the broker's FenceBroker
	// record (another round, fencing the broker stopped for the
	// controlled shutdown, may be as large): wait for its report, then
	// check the image once (a scan of a 10M image holds the read lock for
	// a second, which apply would wait for).
	var fence controller.RoundStats
	checked := 0
	for fence.Records == 0 {
		rmu.Lock()
		list := append([]controller.RoundStats(nil), rounds[checked:]...)
		rmu.Unlock()
		for _, r := range list {
			checked++
			if r.Records == 0 || r.FirstIndex == 0 {
				continue
			}
			fences, err := fencesBroker(node, r.FirstIndex, r.LastIndex, failed)
			if err != nil {
				return err
			}
			if fences {
				fence = r
				break
			}
		}
		if fence.Records > 0 {
			break
		}
		select {
		case <-fctx.Done():
			return fmt.Errorf("the round fencing broker %d was not reported: %w", failed, fctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	obs.set(nil)
	if left := ledBy(node, failed); left != 0 {
		return fmt.Errorf("fenced broker %d still leads %d partitions after its fencing round", failed, left)
	}
	fenceLoad := loadAverage()
	fenceHash := stateHash(node)
	fenceTime := fence.Compute + fence.Commit
	phase("  fence of a leader of %d partitions: %v (%d records; compute %v, commit %v)", led, fenceTime.Round(time.Microsecond), fence.Records,
		fence.Compute.Round(time.Microsecond), fence.Commit.Round(time.Microsecond))

	// The floors of both events, on a raft cluster of their own.
	phase("  floors: replaying both events on one image, and committing their entries with a no-op FSM")
	variant := LogStoreVariant{Name: "floor"}
	if cfg.LogStore != nil {
		variant = *cfg.LogStore
	}
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	floorRaft, err := startStoreCluster(sctx, filepath.Join(dir, "floor"), variant, cfg.Logger)
	if err != nil {
		return err
	}
	defer floorRaft.shutdown()
	shutdownFloor, err := measureFloor(ctx, node, snapShutdown, shutdownFrom, shutdownTo, shutdownHash, floorRaft)
	if err != nil {
		return fmt.Errorf("controlled shutdown: %w", err)
	}
	fenceFloor, err := measureFloor(ctx, node, snapFence, fence.FirstIndex, fence.LastIndex, fenceHash, floorRaft)
	if err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	floorRaft.shutdown()
	for _, f := range []struct {
		what  string
		took  time.Duration
		floor eventFloor
	}{{"controlled shutdown", shutdown, shutdownFloor}, {"fence", fenceTime, fenceFloor}} {
		phase("  %s floor: apply %v + commit %v (%d entries, %d bytes; replayed hash %s): event %.1fx its floor",
			f.what, f.floor.apply.Round(time.Microsecond), f.floor.commit.Round(time.Microsecond), f.floor.entries, f.floor.bytes,
			hashWord(f.floor), float64(f.took)/float64(max(f.floor.total(), 1)))
	}
	col.add(fmt.Sprintf("shutdown-%d-%d", n, cfg.Brokers), Result{Scenario: "controlled shutdown", Partitions: n, Brokers: cfg.Brokers, Unit: "ms"},
		sample{v: ms(shutdown), floorMs: ms(floor), load: shutdownLoad, floor: &shutdownFloor,
			note: fmt.Sprintf("broker leading %d partitions; %d entries, %d bytes", shutdownLed, shutdownFloor.entries, shutdownFloor.bytes)})
	col.add(fmt.Sprintf("fence-%d-%d", n, cfg.Brokers), Result{Scenario: "broker failure (fence round)", Partitions: n, Brokers: cfg.Brokers, Unit: "ms"},
		sample{v: ms(fenceTime), floorMs: ms(floor), load: fenceLoad, floor: &fenceFloor,
			note: fmt.Sprintf("broker leading %d; %d records in %d entries, %d bytes", led, fence.Records, fence.Entries, fenceFloor.bytes)})

	// Failover.
	var act, elect []float64
	for r := 0; r < cfg.FailoverRounds; r++ {
		idx, _, err := activeWithin(ctx, c)
		if err != nil {
			return err
		}
		stopped := time.Now()
		c.stop(idx)
		actx, acancel := context.WithTimeout(ctx, time.Minute)
		_, nn, err := c.active(actx)
		acancel()
		if err != nil {
			return err
		}
		st := nn.Controller.LastActivation()
		act = append(act, ms(st.Ready.Sub(st.Started)))
		elect = append(elect, ms(st.Started.Sub(stopped)))
		if err := c.start(idx); err != nil {
			return err
		}
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Minute)
		err = c.converged(cctx)
		ccancel()
		if err != nil {
			return err
		}
		phase("  failover %d/%d: ready %.2f ms after the new leader was known (election %.0f ms)", r+1, cfg.FailoverRounds, act[len(act)-1], elect[len(elect)-1])
	}
	load := loadAverage()
	col.add(fmt.Sprintf("failover-%d-%d", n, cfg.Brokers), Result{Scenario: "failover: new leader known -> ready", Partitions: n, Brokers: cfg.Brokers, Unit: "ms"},
		sample{v: medianF(act), floorMs: ms(floor), load: load, note: fmt.Sprintf("median of %d failovers", len(act))})
	col.add(fmt.Sprintf("election-%d-%d", n, cfg.Brokers), Result{Scenario: "  raft election (apart)", Partitions: n, Brokers: cfg.Brokers, Unit: "ms"},
		sample{v: medianF(elect), floorMs: ms(floor), load: load, note: "leader stopped -> new leader known; randomized timeout"})
	return nil
}

// hashWord says whether a replay's image matched the active voter's.
func hashWord(f eventFloor) string {
	switch {
	case !f.hashChecked:
		return "not compared"
	case f.sameHash:
		return "equal"
	}
	return "DIFFERENT"
}

// spread is a result's samples as "min-max", or "-" for one sample.
func spread(res Result, unit func(float64) string) string {
	if len(res.Samples) < 2 {
		return "-"
	}
	return unit(res.Min) + "-" + unit(res.Max)
}

// loads is the load averages of a figure's samples.
func loads(l []float64) string {
	if len(l) == 0 {
		return "-"
	}
	lo, hi := slices.Min(l), slices.Max(l)
	if lo == hi {
		return fmt.Sprintf("%.2f", lo)
	}
	return fmt.Sprintf("%.2f-%.2f", lo, hi)
}

// activeWithin is c.active within a minute from now: each wait of a scenario
// gets its own, since loading a 10M image alone takes minutes.
func activeWithin(ctx context.Context, c *cluster) (int, *controller.Node, error) {
	actx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return c.active(actx)
}

// WriteTable prints the report as a table.
func (r Report) WriteTable(w io.Writer) {
	brokers := fmt.Sprint(r.Brokers)
	if len(r.BrokersPerSize) > 0 {
		brokers = strings.Trim(strings.Join(strings.Fields(fmt.Sprint(r.BrokersPerSize)), ","), "[]")
	}
	fmt.Fprintf(w, "ctrlnode bench: 3 voters in this process sharing %d CPUs (GOMAXPROCS %d) with the benchmark; %s brokers, RF 3; %d run(s); took %v\n",
		r.CPUs, r.GOMAXPROCS, brokers, r.Runs, r.Took.Round(time.Second))
	if r.LogStore != "" {
		fmt.Fprintf(w, "raft log store: %s\n", r.LogStore)
	}
	fmt.Fprintln(w, "raw raft floor: one ~100-byte entry committed sequentially on the same cluster, median; ratio = figure / floor (for a rate: items per floor commit)")
	fmt.Fprintln(w, "event floor (broker events): the event's entries decoded and applied on one image with no raft, plus the same bytes committed by raft with a no-op FSM; LOAD: the machine's 1-minute load average at each sample")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tPARTITIONS\tRESULT\tSPREAD\tLOAD\tRAFT FLOOR\tRATIO\tNOTE")
	msUnit := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	for _, res := range r.Results {
		parts := "-"
		if res.Partitions > 0 {
			parts = fmt.Sprint(res.Partitions)
			if len(r.BrokersPerSize) > 0 {
				parts += fmt.Sprintf(" / %d brokers", res.Brokers)
			}
		}
		val := fmt.Sprintf("%.2f ms", res.Value)
		ratio := fmt.Sprintf("%.1fx", res.Ratio)
		spr := spread(res, msUnit)
		if res.Unit == "topics/s" {
			val = fmt.Sprintf("%.0f topics/s", res.Value)
			ratio = fmt.Sprintf("%.1f/floor", res.Ratio)
			spr = spread(res, func(v float64) string { return fmt.Sprintf("%.0f", v) })
		}
		if strings.HasPrefix(res.Scenario, "  raft election") {
			ratio = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2f ms\t%s\t%s\n", res.Scenario, parts, val, spr, loads(res.LoadAvg), res.FloorMs, ratio, res.Note)
		if res.ApplyFloorMs > 0 || res.CommitFloorMs > 0 {
			fmt.Fprintf(tw, "  event floor: apply %.2f ms + commit %.2f ms\t%s\t%.2f ms\t\t\t\t%.2fx\treplayed image's state hash equal to the voter's in %d of %d\n",
				res.ApplyFloorMs, res.CommitFloorMs, parts, res.ApplyFloorMs+res.CommitFloorMs, res.EventRatio, res.HashMatched, res.HashChecked)
		}
	}
	_ = tw.Flush()
	defer writeTargets(w, r.Targets)
	if len(r.Images) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tHEAP/PARTITION/VOTER\tIMAGE ALONE/PARTITION\tSNAPSHOT/PARTITION\tSNAPSHOT\tWRITE\tRESTORE\tLOAD")
	for _, im := range r.Images {
		fmt.Fprintf(tw, "%d partitions, %d brokers\t%.0f B\t%.0f B\t%.1f B\t%.1f MiB\t%.0f ms\t%.0f ms\t%s\n", im.Partitions, im.Brokers, im.HeapPerPartition, im.ImagePerPartition, im.SnapshotPerPart,
			float64(im.SnapshotBytes)/(1<<20), im.SnapshotWriteMs, im.SnapshotRestoreMs, loads(im.LoadAvg))
	}
	_ = tw.Flush()
}
