package jepsen

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/nemesis"
	"github.com/ctrlquorum/ctrlquorum/internal/plantedbug"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
)

var flagPlantedBugs = flag.String("planted-bugs", "", "TestJepsenPlantedBugs: the planted bugs to run, comma-separated (no-truncation, early-ack, unclean-election) or all; empty skips it (make jepsen-bugs sets it)")

// plantedRun is one planted bug's run: the nemeses that make it bite and
// the data checker that must then report a violation.
type plantedRun struct {
	bug     plantedbug.Bug
	nemesis string
	checker string
}

// plantedRuns: a follower that does not truncate keeps the tail its
// leader wrote while cut off from the controller (partitions), beside the
// new leader's records at the same offsets; a leader that acknowledges
// before the ISR has the record loses it when it is cut off and replaced
// (partitions); an unclean election of a broker back from a crash (broker
// crash, kill) makes its followers drop what was acknowledged while it
// was away.
var plantedRuns = []plantedRun{
	{plantedbug.NoTruncation, "partition", "data-replicas-agree"},
	{plantedbug.EarlyAck, "partition", "data-acknowledged"},
	{plantedbug.UncleanElection, "broker-crash,kill", "data-acknowledged"},
}

func selectPlanted(flag string) ([]plantedRun, error) {
	if flag == "all" {
		return plantedRuns, nil
	}
	var out []plantedRun
	for _, name := range strings.Split(flag, ",") {
		found := false
		for _, r := range plantedRuns {
			if string(r.bug) == strings.TrimSpace(name) {
				out, found = append(out, r), true
			}
		}
		if !found {
			return nil, fmt.Errorf("-planted-bugs: unknown bug %q", name)
		}
	}
	return out, nil
}

// TestJepsenPlantedBugs shows that the data checkers catch the bugs they
// are for: ctrlnode built with -tags plantedbugs, one run per bug with the
// bug switched on in every process (plantedbug.Env) under nemeses that
// make it bite, each of which must end with a violation of its checker.
// Each run happens in a network namespace of its own (the partitions need
// it), as TestJepsen's does. `make jepsen-bugs` runs it; plain `go test`
// skips it (three runs of about a minute).
func TestJepsenPlantedBugs(t *testing.T) {
	if *flagPlantedBugs == "" {
		t.Skip("run by make jepsen-bugs (-planted-bugs=all)")
	}
	if testing.Short() {
		t.Skip("skipping: builds and runs the ctrlnode binary")
	}
	runs, err := selectPlanted(*flagPlantedBugs)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Need(t, "network faults for the partition nemeses the planted bugs need (root, ip and iptables)", nemesis.Available())
	bin := os.Getenv(envBin)
	if bin == "" {
		bin = buildCtrlnode(t, "plantedbugs")
	}
	if inside := os.Getenv(envNetns); inside != "" {
		if err := inNamespace(inside); err != nil {
			t.Fatal(err)
		}
		if len(runs) != 1 {
			t.Fatalf("inside a namespace the test runs one planted bug, not %d", len(runs))
		}
		runPlanted(t, runs[0], bin, &nemesis.Namespace{Name: inside})
		return
	}
	for _, run := range runs {
		t.Run(string(run.bug), func(t *testing.T) {
			cfg, err := NewConfig(*flagDuration, *flagSeed, run.nemesis, nil)
			if err != nil {
				t.Fatal(err)
			}
			ns, err := nemesis.Create()
			if err != nil {
				t.Fatalf("a network namespace for the planted bug's run: %v", err)
			}
			t.Cleanup(func() {
				if err := ns.Close(); err != nil {
					t.Errorf("deleting network namespace %s: %v", ns.Name, err)
				}
			})
			t.Logf("planted bug %s, nemesis %s, seed %d", run.bug, run.nemesis, cfg.Seed)
			runInNamespace(t, ns, "TestJepsenPlantedBugs", cfg, bin, "-planted-bugs="+string(run.bug))
		})
	}
}

// runPlanted runs the cluster with the bug on and requires its checker to
// report a violation; what the other checkers found is logged only (a
// planted bug may break more than the one property).
func runPlanted(t *testing.T, run plantedRun, bin string, ns *nemesis.Namespace) {
	cfg, err := NewConfig(*flagDuration, *flagSeed, run.nemesis, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg = withSoloBrokers(cfg)
	schedule, err := cfg.Schedule()
	if err != nil {
		t.Fatal(err)
	}
	rs := runSettings{reportBase: *flagReport, workers: numWorkers, opTimeout: opTimeout, bin: bin, ns: ns,
		env: []string{plantedbug.Env + "=" + string(run.bug)}}
	out := runCluster(t, cfg, schedule, rs)
	for _, u := range out.unexpected {
		t.Logf("process failure (the planted bug's run): %s", u)
	}
	for _, r := range out.checked.Results {
		if !r.Valid && r.Checker != run.checker {
			t.Logf("planted bug %s: %s also failed (%d violations)", run.bug, r.Checker, len(r.Violations))
		}
	}
	r, ok := out.checked.Result(run.checker)
	switch {
	case !ok:
		t.Errorf("planted bug %s: the run has no %s checker (report in %s)", run.bug, run.checker, out.dir)
	case r.Valid:
		t.Errorf("planted bug %s: %s found no violation under %s (report in %s)", run.bug, run.checker, run.nemesis, out.dir)
	default:
		t.Logf("planted bug %s caught: %s found %d violations, the first: %s (report in %s)",
			run.bug, run.checker, len(r.Violations), r.Violations[0].Description, out.dir)
	}
}

func TestSelectPlanted(t *testing.T) {
	all, err := selectPlanted("all")
	if err != nil || len(all) != len(plantedbug.Bugs) {
		t.Fatalf("all: %v, %v", all, err)
	}
	for i, b := range plantedbug.Bugs {
		if all[i].bug != b || all[i].nemesis == "" || !strings.HasPrefix(all[i].checker, "data-") {
			t.Errorf("run %d: %+v", i, all[i])
		}
	}
	two, err := selectPlanted("early-ack, no-truncation")
	if err != nil || len(two) != 2 || two[0].bug != plantedbug.EarlyAck || two[1].bug != plantedbug.NoTruncation {
		t.Errorf("two: %v, %v", two, err)
	}
	if _, err := selectPlanted("early-ack,typo"); err == nil || !strings.Contains(err.Error(), `unknown bug "typo"`) {
		t.Errorf("typo: %v", err)
	}
}
