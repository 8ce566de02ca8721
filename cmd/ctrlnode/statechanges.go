package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/ctrlquorum/ctrlquorum/fsm/statelog"
	"github.com/ctrlquorum/ctrlquorum/ops"
)

func runStateChanges(args []string, stdout, stderr io.Writer) int {
	c := newCLI("state-changes", "[flags]", `
Prints the committed replica, partition, topic and broker transitions, in
log order, from a voter's state-change log: for each, the raft index and
term, the time the leader appended it, the controller (node and epoch)
that wrote it, and what changed from what to what (a partition's state,
leader, leader epoch and ISR; a replica's state). Every voter applies the
same log and writes the same lines, so any voter answers alike; a voter
that installed a snapshot holds the history after it only, and the first
line printed says where the retained history starts.

The voter is read through its HTTP endpoint (--http; dev mode's by
default with dev mode's bootstrap address). --follow keeps printing
transitions as they commit until interrupted.`, stdout, stderr)
	var httpFlag listFlag
	c.fs.Var(&httpFlag, "http", "host:port of a voter's HTTP endpoint (repeatable); the first that answers is used")
	topic := c.fs.String("topic", "", "only this topic's transitions")
	partition := c.fs.Int("partition", -1, "only this partition's transitions (with --topic)")
	brokerID := c.fs.Int("broker", -1, "only transitions of replicas on this broker, and this broker's own")
	since := c.fs.Uint64("since", 0, "only transitions at or after this raft index")
	follow := c.fs.Bool("follow", false, "keep printing transitions as they commit")
	if code, done := c.parse(args); done {
		return code
	}
	if *partition >= 0 && *topic == "" {
		return c.fail(usageErr("--partition needs --topic"))
	}
	addrs := c.httpAddrs(httpFlag)
	if len(addrs) == 0 {
		return c.fail(usageErr("no voter HTTP endpoint: give --http host:port"))
	}
	q := url.Values{}
	if *topic != "" {
		q.Set("topic", *topic)
	}
	if *partition >= 0 {
		q.Set("partition", strconv.Itoa(*partition))
	}
	if *brokerID >= 0 {
		q.Set("broker", strconv.Itoa(*brokerID))
	}
	if *since > 0 {
		q.Set("since", strconv.FormatUint(*since, 10))
	}
	ctx, cancel := c.context()
	if *follow {
		q.Set("follow", "1")
		ctx, cancel = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	}
	defer cancel()
	var lastErr error
	for _, addr := range addrs {
		resp, err := getStream(ctx, addr, "/state-changes?"+q.Encode())
		if err != nil {
			lastErr = err
			continue
		}
		defer resp.Body.Close()
		return c.printStateChanges(resp, *follow)
	}
	return c.fail(lastErr)
}

func getStream(ctx context.Context, addr, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		return nil, fmt.Errorf("GET http://%s%s: %s: %s", addr, path, resp.Status, e.Error)
	}
	return resp, nil
}

func (c *cli) printStateChanges(resp *http.Response, follow bool) int {
	start := resp.Header.Get(ops.HistoryStartHeader)
	if !c.json {
		if start == "" || start == "0" {
			fmt.Fprintln(c.stdout, "# no transitions retained yet")
		} else {
			fmt.Fprintf(c.stdout, "# history retained from index %s\n", start)
		}
	}
	out := bufio.NewWriter(c.stdout)
	defer out.Flush()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if c.json {
			fmt.Fprintln(out, sc.Text())
		} else {
			var line statelog.Line
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				out.Flush()
				return c.fail(fmt.Errorf("a line of the state-change log does not parse: %w", err))
			}
			fmt.Fprintln(out, line.String())
		}
		if follow {
			out.Flush()
		}
	}
	if err := sc.Err(); err != nil && !follow {
		out.Flush()
		return c.fail(err)
	}
	return exitOK
}
