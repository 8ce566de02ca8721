package benchkit

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestRunLogStoresSmall runs the comparison at a tiny size: every store
// yields its figures and the table names them.
func TestRunLogStoresSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four clusters of three voters")
	}
	rep, err := RunLogStores(context.Background(), LogStoreConfig{Rounds: 1, Batches: 5, Singles: 5, OpenEntries: 3000, OpenRounds: 1,
		Topics: true, Scenarios: Config{Brokers: 3, Topics: 20, TopicsPerRequest: 10, InFlight: 2, FloorSamples: 3}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(logStoreVariants) {
		t.Fatalf("%d results, want %d", len(rep.Results), len(logStoreVariants))
	}
	for _, r := range rep.Results {
		for _, w := range []Workload{r.Batch, r.Single} {
			if w.Commits != 5 || w.P50 <= 0 || w.P99 < w.P50 || len(w.RoundP50) != 1 || w.Syncs <= 0 || w.EntriesPerAppend < 1 {
				t.Errorf("%s: %+v", r.Name, w)
			}
		}
		if len(r.TopicsPerSec) != 1 || r.OpenWarm <= 0 || r.OpenCold <= 0 || r.OpenBytes <= 0 {
			t.Errorf("%s: %+v", r.Name, r)
		}
	}
	var b bytes.Buffer
	rep.WriteTable(&b)
	for _, w := range []string{"wal-16m", "segments", "bolt", "topics/s", "open of a full log"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, b.String())
		}
	}
}

func TestLogStoreVariants(t *testing.T) {
	all, err := LogStoreVariants("all")
	if err != nil || len(all) != 4 {
		t.Fatalf("all: %v, %v", all, err)
	}
	two, err := LogStoreVariants("segments, wal,segments")
	if err != nil || len(two) != 2 || two[0].Name != "segments" || two[1].Name != "wal" {
		t.Fatalf("segments, wal: %v, %v", two, err)
	}
	if _, err := LogStoreVariants("leveldb"); err == nil {
		t.Fatal("leveldb accepted")
	}
}

// BenchmarkLogStores commits b.N batches of 27 entries of 700 bytes (about
// one CreateTopics round) and b.N single entries of 100 bytes on a
// three-voter cluster of each log store, the clusters all running for the
// whole benchmark. go test repeats each sub-benchmark -count times in a
// row; ctrlnode bench --log-store all loads the stores in turn instead,
// A B C D A B C D:
//
//	go test -run '^$' -bench LogStores -benchtime 300x -count 5 ./benchkit
func BenchmarkLogStores(b *testing.B) {
	ctx := context.Background()
	var clusters []*storeCluster
	defer func() {
		for _, c := range clusters {
			c.shutdown()
		}
	}()
	for _, v := range logStoreVariants {
		c, err := startStoreCluster(ctx, b.TempDir(), v, hclog.NewNullLogger())
		if err != nil {
			b.Fatal(err)
		}
		clusters = append(clusters, c)
	}
	payload := bytes.Repeat([]byte("x"), 700)
	for _, c := range clusters {
		for _, w := range []struct {
			name          string
			entries, size int
		}{{"batch27x700B", 27, 700}, {"single100B", 1, 100}} {
			b.Run(fmt.Sprintf("%s/%s", c.v.Name, w.name), func(b *testing.B) {
				var run workloadRun
				b.ResetTimer()
				if err := run.run(ctx, c, b.N, w.entries, w.size, payload); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				res := run.result()
				b.ReportMetric(float64(res.P50.Nanoseconds())/1e3, "p50-us")
				b.ReportMetric(float64(res.P99.Nanoseconds())/1e3, "p99-us")
				b.ReportMetric(float64(res.CPU.Nanoseconds())/1e3, "cpu-us/commit")
				b.ReportMetric(res.Syncs, "syncs/commit")
				b.ReportMetric(res.Bytes, "written-B/commit")
				b.ReportMetric(res.DiskBytes, "disk-B/commit")
				b.ReportMetric(res.EntriesPerAppend, "entries/append")
			})
		}
	}
}
