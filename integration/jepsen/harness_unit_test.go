package jepsen

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
	"github.com/ctrlquorum/ctrlquorum/server"
)

// TestAmbiguous: a refusal answered to a retried mutation is unknown; a
// first answer, a success, or a refusal of a read is not.
func TestAmbiguous(t *testing.T) {
	exists := kerr.TopicAlreadyExists
	cases := []struct {
		kind history.Kind
		n    int
		err  error
		want bool
	}{
		{history.Create, 2, exists, true},
		{history.Create, 1, exists, false},
		{history.Create, 3, nil, false},
		{history.Delete, 2, kerr.UnknownTopicOrPartition, true},
		{history.CreatePartitions, 2, kerr.UnknownTopicOrPartition, true},
		{history.Create, 2, context.DeadlineExceeded, false}, // unknown anyway
		{history.Elect, 2, kerr.ElectionNotNeeded, true},
		{history.CancelReassign, 2, kerr.NoReassignmentInProgress, true},
		{history.Reassign, 1, kerr.ReassignmentInProgress, false},
		{history.Describe, 2, kerr.UnknownTopicOrPartition, false},
	}
	for _, c := range cases {
		if got := ambiguous(c.kind, c.n, c.err); got != c.want {
			t.Errorf("ambiguous(%s, %d, %v) = %v", c.kind, c.n, c.err, got)
		}
	}
}

// TestTopicNames: six names in use at a time, two new ones every period.
func TestTopicNames(t *testing.T) {
	start := time.Unix(1000, 0)
	n := topicNames{Start: start, Every: 10 * time.Second, Width: 6, Step: 2}
	seen := func(at time.Time) map[string]bool {
		out := map[string]bool{}
		for i := 0; i < 6; i++ {
			out[n.pick(at, func(int) int { return i })] = true
		}
		return out
	}
	first, later := seen(start.Add(-time.Second)), seen(start.Add(25*time.Second))
	if len(first) != 6 || !first["jt-0000"] || !first["jt-0005"] {
		t.Errorf("first window %v", first)
	}
	if len(later) != 6 || !later["jt-0004"] || !later["jt-0009"] || later["jt-0003"] {
		t.Errorf("window after 25s %v", later)
	}
}

// TestCollector: records are read once each, across polls and a restart
// of the agent (a new incarnation numbering from 1), and a hole in the
// numbering is noted.
func TestCollector(t *testing.T) {
	var mu sync.Mutex
	inc, recs := "aaaa", []uint64{1, 2, 3}
	var queries []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		queries = append(queries, r.URL.RawQuery)
		var after uint64
		if r.URL.Query().Get("incarnation") == inc {
			fmt.Sscan(r.URL.Query().Get("after"), &after)
		}
		for _, s := range recs {
			if s > after {
				_ = json.NewEncoder(w).Encode(server.ControlLogEntry{Broker: 4, Incarnation: inc, Seq: s, Partition: -1, Accepted: true})
			}
		}
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.Start()
	defer srv.Close()

	c := newCollector([]nodeSpec{{name: "broker-4", http: strings.TrimPrefix(srv.URL, "http://")}})
	collect := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.collect(ctx, "broker-4"); err != nil {
			t.Fatal(err)
		}
	}
	collect()
	mu.Lock()
	recs = []uint64{1, 2, 3, 4, 5}
	mu.Unlock()
	collect()
	mu.Lock()
	inc, recs = "bbbb", []uint64{1, 2, 4}
	mu.Unlock()
	collect()

	var got []string
	for _, o := range c.observations() {
		got = append(got, fmt.Sprintf("%s/%d", o.Incarnation, o.Seq))
	}
	want := "aaaa/1 aaaa/2 aaaa/3 aaaa/4 aaaa/5 bbbb/1 bbbb/2 bbbb/4"
	if strings.Join(got, " ") != want {
		t.Errorf("observations %v, want %s", got, want)
	}
	if q := strings.Join(queries, " | "); q != " | after=3&incarnation=aaaa | after=5&incarnation=aaaa" {
		t.Errorf("queries %q", q)
	}
	if n := c.notes(); len(n) != 1 || !strings.Contains(n[0], "records 3–3 were not read") {
		t.Errorf("notes %q", n)
	}
	if c.lifetimes() != 2 {
		t.Errorf("lifetimes %d, want 2", c.lifetimes())
	}
	if err := c.collect(context.Background(), "broker-4"); err != nil {
		t.Fatal(err)
	}
	if len(c.observations()) != 8 {
		t.Error("a read with nothing new added observations")
	}
}

// TestProcs: a process killed by the run is not a failure; one that exits
// on its own, or whose log reports a data race, is.
func TestProcs(t *testing.T) {
	specs := []nodeSpec{
		{name: "dies", args: []string{"-c", "echo 'WARNING: DATA RACE'; exit 66"}},
		{name: "killed", args: []string{"-c", "echo up; exec sleep 60"}},
	}
	ps, err := newProcs("/bin/sh", t.TempDir(), specs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.stopAll()
	for _, p := range ps.all {
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
	}
	dies, killed := ps.get("dies"), ps.get("killed")
	if err := killed.start(); err == nil {
		t.Error("a running process was started again")
	}
	deadline := time.Now().Add(10 * time.Second)
	readLog := func() string { b, _ := os.ReadFile(ps.logPath("killed")); return string(b) }
	for (dies.running() || strings.Count(readLog(), "up\n") < 1) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := killed.signal(syscall.SIGSTOP); err != nil || !killed.isPaused() {
		t.Fatalf("SIGSTOP: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := killed.kill(ctx); err != nil || killed.running() {
		t.Fatalf("kill a stopped process: %v", err)
	}
	if err := killed.kill(ctx); err != nil {
		t.Errorf("a second kill: %v", err)
	}
	if err := killed.signal(syscall.SIGCONT); err == nil {
		t.Error("a signal to a process that is gone succeeded")
	}
	if err := killed.start(); err != nil || !killed.running() {
		t.Fatalf("restart: %v", err)
	}
	for strings.Count(readLog(), "up\n") < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	ps.stopAll()
	u := ps.unexpectedExits()
	if len(u) != 1 || !strings.Contains(u[0], "dies") || !strings.Contains(u[0], "exit status 66") {
		t.Errorf("unexpected exits %q", u)
	}
	if r := ps.races(); len(r) != 1 || !strings.HasPrefix(r[0], "dies:") {
		t.Errorf("races %q", r)
	}
	if log := readLog(); strings.Count(log, "=== start") != 2 || strings.Count(log, "up\n") != 2 {
		t.Errorf("log of the restarted process:\n%s", log)
	}
}
