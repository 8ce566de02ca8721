package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ctrlquorum/ctrlquorum/server"
)

func runMigrate(args []string, stdout, stderr io.Writer) int {
	c := newCLI("migrate", "--zookeeper host:port[/chroot] [--dry-run] [--http host:port]... [flags]", `
Imports a ZooKeeper-mode Kafka cluster's metadata (brokers, topics and
assignments, partition states, topic configs, pending deletions and
reassignments, controller epoch) into the quorum, as log records committed by
the active controller. Running it again imports nothing new: what the image
already has is skipped. --dry-run prints what would be imported and commits
nothing. The import runs on the active voter, reached through the voters' HTTP
endpoints (--http, default dev mode's); --bootstrap is not used. Exit code 0
when done, 1 when the import was refused (the plan says why), 3 when no voter
could be reached.`, stdout, stderr)
	zk := c.fs.String("zookeeper", "", "the ZooKeeper ensemble, as Kafka's zookeeper.connect (required)")
	dry := c.fs.Bool("dry-run", false, "print the plan, commit nothing")
	var httpFlag listFlag
	c.fs.Var(&httpFlag, "http", "host:port of a voter's HTTP endpoint (repeatable; default dev mode's three)")
	if code, done := c.parse(args); done {
		return code
	}
	if *zk == "" {
		return c.fail(usageErr("--zookeeper is required"))
	}
	addrs := []string(httpFlag)
	if len(addrs) == 0 {
		addrs = defaultHTTP
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(c.timeout, 10*time.Minute))
	defer cancel()
	var lastErr error
	for _, a := range addrs {
		ans, err := postMigrate(ctx, a, *zk, *dry)
		if err != nil {
			lastErr = err
			continue
		}
		if !ans.Active {
			continue // a standby: try the next voter
		}
		if c.json {
			c.printJSON(ans)
		} else {
			fmt.Fprintf(stdout, "voter %d:\n%s", ans.Node, ans.Text)
			if !strings.HasSuffix(ans.Text, "\n") {
				fmt.Fprintln(stdout)
			}
		}
		if ans.Error != "" {
			fmt.Fprintf(stderr, "ctrlnode migrate: %s\n", ans.Error)
			return exitFailed
		}
		return exitOK
	}
	if lastErr == nil {
		lastErr = fmt.Errorf("none of %s is the active controller", strings.Join(addrs, ", "))
	}
	fmt.Fprintf(stderr, "ctrlnode migrate: %v\n", lastErr)
	return exitUnreachable
}

func postMigrate(ctx context.Context, addr, zk string, dry bool) (server.MigrateAnswer, error) {
	var ans server.MigrateAnswer
	q := url.Values{"zookeeper": {zk}}
	if dry {
		q.Set("dry_run", "true")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/migrate?"+q.Encode(), nil)
	if err != nil {
		return ans, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ans, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		return ans, fmt.Errorf("POST http://%s/migrate: %s", addr, resp.Status)
	}
	return ans, nil
}
