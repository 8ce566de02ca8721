package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ctrlquorum/ctrlquorum/benchkit"
	"github.com/ctrlquorum/ctrlquorum/internal/gcpace"
)

func runBench(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	parts := fs.String("partitions", "10000,100000", "comma-separated image sizes N for the per-size scenarios")
	brokers := fs.String("brokers", "10", "brokers (replication factor 3); or a comma-separated list with one count per --partitions size, e.g. --partitions 1000000,10000000 --brokers 10,100 (a broker leads 100k partitions at both)")
	topics := fs.Int("topics", 2000, "topics created in the topic-creation scenario")
	perReq := fs.Int("topics-per-request", 50, "topics per CreateTopics request")
	inflight := fs.Int("in-flight", 8, "CreateTopics requests in flight")
	rounds := fs.Int("failover-rounds", 5, "failovers per cluster")
	floor := fs.Int("floor-samples", 50, "sequential raw raft commits the floor is the median of")
	runs := fs.Int("runs", 1, "fresh clusters per scenario; figures are medians over them")
	session := fs.Duration("session-timeout", 3*time.Second, "the simulated brokers' session timeout (they heartbeat every tenth of it); the fence scenario waits this long. On a machine loaded by other work a large image's load can starve heartbeats past a short one")
	data := fs.Bool("data", false, "measure the data path instead of the scenarios: three brokers with real data through a controller failover (produces failed), a broker killed (time to the first acks=all produce to each partition it led) and one stopped by a controlled shutdown (produces failed)")
	membership := fs.Bool("membership", false, "measure adding a voter (snapshot install included) and removing one at each --partitions size, instead of the scenarios")
	quick := fs.Bool("quick", false, "a small run for a smoke test: 1000 partitions, 200 topics, 2 failovers")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	dir := fs.String("dir", "", "folder for the voters' data (default: a temporary folder, removed afterwards)")
	logLevel := fs.String("log-level", "off", "log level of the voters: trace, debug, info, warn, error, off")
	logStore := fs.String("log-store", "", "raft log store of the voters: wal, wal-16m (raft-wal with 16 MiB segments), segments or bolt; or all, or a comma-separated list of several, to compare them instead of running the scenarios (default: a new data folder's)")
	storeRounds := fs.Int("store-rounds", 5, "log store comparison: rounds, each loading every store in turn")
	storeCommits := fs.Int("store-commits", 200, "log store comparison: commits of --store-batch entries per store and round (and 1.5 times as many single entries)")
	storeBatch := fs.Int("store-batch", 27, "log store comparison: entries of 700 bytes committed together, about one CreateTopics round")
	openEntries := fs.Int("open-entries", 1_000_000, "log store comparison: entries of the full log whose open time is measured (0: skip)")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, "usage: ctrlnode bench [flags]")
		fmt.Fprint(w, `
Runs the controller's scenarios on three voters in this process and prints
one table: topic creation rate through the Kafka listener; and for each
image size N, the controlled shutdown of a broker, a broker failure (the
fencing round), and failover (new raft leader known -> controller ready,
with raft's election time on a line of its own). The raw raft floor (a
small entry committed sequentially) is measured on each cluster in the same
run and every figure is given as a ratio to it. Progress goes to standard
error. The voters share this machine's cores with the benchmark.

With --membership it measures the quorum's membership changes instead, at
each image size N on a fresh cluster: adding a fourth voter from an empty
directory (the leader has just snapshotted and kept no log, so the node
installs the whole image, then catches up and is promoted), and removing it.

With --data it measures the data path instead, on three voters and three
brokers with real data: the produces that fail while the active
controller's voter goes away, the time from a broker's kill to the first
acks=all produce that succeeds on each partition it led, beside the
session timeout, and the produces that fail while another broker goes
through a controlled shutdown.

With --log-store all (or a list of stores) it compares raft log stores
instead, in one run on one disk: a three-voter cluster per store, loaded in
turn round after round with commits of --store-batch entries and of single
entries (commit p50/p99, CPU, syncs and bytes written per commit), topic
creation through the Kafka listener on each store, and the open time of a
log of --open-entries entries.

`)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	cfg := benchkit.Config{Topics: *topics, TopicsPerRequest: *perReq, InFlight: *inflight,
		FailoverRounds: *rounds, FloorSamples: *floor, Runs: *runs, Dir: *dir, SessionTimeout: *session}
	for _, p := range strings.Split(*parts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 100 {
			fmt.Fprintf(stderr, "ctrlnode bench: --partitions: %q is not a size of at least 100\n", p)
			return exitUsage
		}
		cfg.Partitions = append(cfg.Partitions, n)
	}
	for _, b := range strings.Split(*brokers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(b))
		if err != nil || n < 3 {
			fmt.Fprintf(stderr, "ctrlnode bench: --brokers: %q is not a count of at least 3 (replication factor 3)\n", b)
			return exitUsage
		}
		cfg.BrokersPerSize = append(cfg.BrokersPerSize, n)
	}
	cfg.Brokers = cfg.BrokersPerSize[0]
	switch {
	case len(cfg.BrokersPerSize) == 1:
		cfg.BrokersPerSize = nil
	case len(cfg.BrokersPerSize) != len(cfg.Partitions):
		fmt.Fprintf(stderr, "ctrlnode bench: --brokers lists %d counts for %d --partitions sizes\n", len(cfg.BrokersPerSize), len(cfg.Partitions))
		return exitUsage
	}
	for name, v := range map[string]int{"--topics": *topics, "--topics-per-request": *perReq, "--in-flight": *inflight,
		"--failover-rounds": *rounds, "--floor-samples": *floor, "--runs": *runs} {
		if v < 1 {
			fmt.Fprintf(stderr, "ctrlnode bench: %s %d: want at least 1\n", name, v)
			return exitUsage
		}
	}
	if *quick {
		cfg.Partitions, cfg.Topics, cfg.FailoverRounds, cfg.FloorSamples, cfg.BrokersPerSize = []int{1000}, 200, 2, 20, nil
	}
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "bench", Level: hclog.LevelFromString(*logLevel), Output: stderr})
	cfg.Progress = func(s string) { fmt.Fprintln(stderr, s) }
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	gcpace.Start(ctx, gcpace.Config{Logger: cfg.Logger})
	start := time.Now()
	if *logStore != "" {
		variants, err := benchkit.LogStoreVariants(*logStore)
		if err != nil {
			fmt.Fprintf(stderr, "ctrlnode bench: --log-store: %v\n", err)
			return exitUsage
		}
		if len(variants) > 1 {
			return compareLogStores(ctx, benchkit.LogStoreConfig{Variants: variants, Rounds: *storeRounds, Batches: *storeCommits,
				BatchEntries: *storeBatch, Singles: *storeCommits * 3 / 2, OpenEntries: *openEntries, Topics: true, Scenarios: cfg, Dir: *dir},
				*quick, *jsonOut, start, stdout, stderr)
		}
		cfg.LogStore = &variants[0]
	}
	if *data {
		dc := benchkit.DataConfig{Dir: *dir, Progress: cfg.Progress, Logger: cfg.Logger}
		if *quick {
			dc.SessionTimeout = 3 * time.Second
		}
		rep, err := benchkit.RunData(ctx, dc)
		return printReport(rep, err, *jsonOut, start, stdout, stderr)
	}
	if *membership {
		rep, err := benchkit.RunMembership(ctx, cfg)
		return printReport(rep, err, *jsonOut, start, stdout, stderr)
	}
	rep, err := benchkit.Run(ctx, cfg)
	return printReport(rep, err, *jsonOut, start, stdout, stderr)
}

// printReport prints a benchmark's report as a table or JSON, or the error
// that ended it, and returns the exit code.
func printReport(rep interface{ WriteTable(io.Writer) }, err error, jsonOut bool, start time.Time, stdout, stderr io.Writer) int {
	if err != nil {
		fmt.Fprintf(stderr, "ctrlnode bench: %v (after %v)\n", err, time.Since(start).Round(time.Second))
		return exitFailed
	}
	if jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
		return exitOK
	}
	rep.WriteTable(stdout)
	return exitOK
}

func compareLogStores(ctx context.Context, cfg benchkit.LogStoreConfig, quick, jsonOut bool, start time.Time, stdout, stderr io.Writer) int {
	for name, v := range map[string]int{"--store-rounds": cfg.Rounds, "--store-commits": cfg.Batches, "--store-batch": cfg.BatchEntries} {
		if v < 1 {
			fmt.Fprintf(stderr, "ctrlnode bench: %s %d: want at least 1\n", name, v)
			return exitUsage
		}
	}
	if cfg.OpenEntries <= 0 {
		cfg.OpenEntries = -1
	}
	if quick {
		cfg.Rounds, cfg.Batches, cfg.Singles, cfg.OpenEntries = 2, 20, 30, min(max(cfg.OpenEntries, -1), 20_000)
	}
	rep, err := benchkit.RunLogStores(ctx, cfg)
	return printReport(rep, err, jsonOut, start, stdout, stderr)
}
