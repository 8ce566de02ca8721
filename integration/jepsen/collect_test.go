package jepsen

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ctrlquorum/ctrlquorum/integration/jepsen/history"
	"github.com/ctrlquorum/ctrlquorum/ops"
	"github.com/ctrlquorum/ctrlquorum/server"
)

// collector gathers every broker agent's control-request records from
// its node's GET /control-log. An agent keeps its records in memory, so
// a killed process takes the ones not yet read with it: the collector
// polls every agent, and the nemesis has it read an agent once more just
// before it kills the process. What the agent recorded between that read
// and the kill (a few milliseconds) is lost; gaps notes any hole it can
// see (a sequence that skips numbers).
type collector struct {
	mu    sync.Mutex
	nodes map[string]*agentLog
	obs   []history.Observation
	gaps  []string
	fails map[string]int
}

// agentLog is what was read from one node so far. Its mutex serialises
// reads of that node, so a read before a kill and a periodic one never
// return the same records twice.
type agentLog struct {
	mu          sync.Mutex
	url         string
	incarnation string
	last        uint64
	lifetimes   int
}

func newCollector(specs []nodeSpec) *collector {
	c := &collector{nodes: map[string]*agentLog{}, fails: map[string]int{}}
	for _, s := range specs {
		c.nodes[s.name] = &agentLog{url: "http://" + s.http + "/control-log"}
	}
	return c
}

// collect reads what is new from one node.
func (c *collector) collect(ctx context.Context, name string) error {
	a := c.nodes[name]
	a.mu.Lock()
	defer a.mu.Unlock()
	q := url.Values{}
	if a.incarnation != "" {
		q.Set("after", strconv.FormatUint(a.last, 10))
		q.Set("incarnation", a.incarnation)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		c.noteFail(name)
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: GET /control-log: %s: %s", name, resp.Status, b)
	}
	var got []history.Observation
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	inc, last := a.incarnation, a.last
	var gaps []string
	for sc.Scan() {
		var e server.ControlLogEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("%s: /control-log line: %w", name, err)
		}
		if e.Incarnation != inc {
			inc, last = e.Incarnation, 0
			a.lifetimes++
		}
		if e.Seq <= last {
			continue
		}
		if e.Seq != last+1 {
			gaps = append(gaps, fmt.Sprintf("broker %d incarnation %.8s: records %d–%d were not read (dropped by the agent before a read)", e.Broker, e.Incarnation, last+1, e.Seq-1))
		}
		got = append(got, Observation(e.Broker, e.Incarnation, e.Record()))
		last = e.Seq
	}
	if err := sc.Err(); err != nil {
		// A cut-short answer: keep nothing of it, read it again next time.
		c.noteFail(name)
		return fmt.Errorf("%s: reading /control-log: %w", name, err)
	}
	a.incarnation, a.last = inc, last
	c.mu.Lock()
	c.obs = append(c.obs, got...)
	c.gaps = append(c.gaps, gaps...)
	c.mu.Unlock()
	return nil
}

func (c *collector) noteFail(name string) {
	c.mu.Lock()
	c.fails[name]++
	c.mu.Unlock()
}

// observations returns every record read so far.
func (c *collector) observations() []history.Observation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]history.Observation(nil), c.obs...)
}

func (c *collector) notes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]string(nil), c.gaps...)
	for name, n := range c.fails {
		out = append(out, fmt.Sprintf("%s: %d reads of /control-log failed (the process was stopped, killed or cut off; a later read got what it kept)", name, n))
	}
	return out
}

// lifetimes counts the agent lifetimes seen.
func (c *collector) lifetimes() int {
	n := 0
	for _, a := range c.nodes {
		a.mu.Lock()
		n += a.lifetimes
		a.mu.Unlock()
	}
	return n
}

// poll reads every running, unpaused node every interval until stop.
func (c *collector) poll(ps *procs, interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		var wg sync.WaitGroup
		for _, p := range ps.all {
			if !p.running() || p.isPaused() {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				_ = c.collect(ctx, p.spec.name)
			}()
		}
		wg.Wait()
	}
}

// sampler reads the partition leadership from the active controller
// every interval until stop.
type sampler struct {
	mu      sync.Mutex
	samples []history.ClusterSample
	misses  int
}

func (s *sampler) run(cl *kgo.Client, now func() time.Time, intN func(int) int, interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		resp, _, err := controllerMetadata(ctx, cl, nil, intN)
		cancel()
		s.mu.Lock()
		if err != nil {
			s.misses++
		} else {
			s.samples = append(s.samples, clusterSample(now(), resp, ours))
		}
		s.mu.Unlock()
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

func (s *sampler) all() []history.ClusterSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]history.ClusterSample(nil), s.samples...)
}

// last is the newest sample, if any.
func (s *sampler) last() (history.ClusterSample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return history.ClusterSample{}, false
	}
	return s.samples[len(s.samples)-1], true
}

// getJSON GETs a node's HTTP endpoint and decodes its JSON answer.
func getJSON(ctx context.Context, addr, path string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			return resp.StatusCode, err
		}
	}
	return resp.StatusCode, nil
}

// notReady lists the nodes whose /readyz does not answer 200, with why.
func notReady(ctx context.Context, specs []nodeSpec) []string {
	var mu sync.Mutex
	var out []string
	var wg sync.WaitGroup
	for _, s := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rd ops.Readiness
			code, err := getJSON(ctx, s.http, "/readyz", &rd)
			if err == nil && code == http.StatusOK {
				return
			}
			why := fmt.Sprint(rd.Reasons)
			if err != nil {
				why = err.Error()
			}
			mu.Lock()
			out = append(out, fmt.Sprintf("%s: %s", s.name, why))
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// stateHashes reads every voter's /state-hash.
func stateHashes(ctx context.Context, specs []nodeSpec) (map[string]history.VoterHash, []string) {
	out := map[string]history.VoterHash{}
	var errs []string
	for _, s := range specs {
		if s.voter == 0 {
			continue
		}
		var sh ops.StateHash
		code, err := getJSON(ctx, s.http, "/state-hash", &sh)
		if err != nil || code != http.StatusOK {
			errs = append(errs, fmt.Sprintf("%s: %d %v", s.name, code, err))
			continue
		}
		out[strconv.Itoa(int(s.voter))] = history.VoterHash{Index: sh.Index, Hash: sh.Hash}
	}
	return out, errs
}

// agree reports whether every voter answered, at one index.
func agree(hashes map[string]history.VoterHash, voters int) bool {
	if len(hashes) != voters {
		return false
	}
	var first *history.VoterHash
	for _, h := range hashes {
		if first == nil {
			first = &h
			continue
		}
		if h.Index != first.Index {
			return false
		}
	}
	return true
}
