package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/ctrlquorum/ctrlquorum/ops"
)

// clusterNode is a node of DescribeCluster.
type clusterNode struct {
	ID     int32
	Host   string
	Port   int32
	Rack   string
	Fenced bool
}

// httpGetJSON reads a JSON answer from a node's HTTP endpoint.
func httpGetJSON(ctx context.Context, addr, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET http://%s%s: %s", addr, path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

type brokerRow struct {
	ID    int32  `json:"id"`
	Host  string `json:"host"`
	Port  int32  `json:"port"`
	Rack  string `json:"rack,omitempty"`
	State string `json:"state"` // active, fenced, shutting-down
	// Epoch is the broker epoch, -1 when no HTTP endpoint was read.
	Epoch        int64 `json:"epoch"`
	Fenced       bool  `json:"fenced"`
	ShuttingDown *bool `json:"shutting_down"` // null when unknown (no --http)
}

func runBrokers(args []string, stdout, stderr io.Writer) int {
	return dispatch("brokers", "Inspect the data brokers.", []subcommand{
		{"list", "the brokers with their state: active, fenced, shutting-down", brokersList},
	}, args, stdout, stderr)
}

func brokersList(args []string, stdout, stderr io.Writer) int {
	c := newCLI("brokers list", "[flags]", `
Lists the registered data brokers (the controller voters are not brokers).
Fenced comes from DescribeCluster over the Kafka protocol; the
controlled-shutdown state and the broker epoch, which no Kafka API
reports, come from a voter's HTTP endpoint (--http; dev mode's are used
with dev mode's bootstrap address). Without one, shutting-down is unknown.`, stdout, stderr)
	var httpFlag listFlag
	c.fs.Var(&httpFlag, "http", "host:port of voters' HTTP endpoints (repeatable); the first that answers is used")
	if code, done := c.parse(args); done {
		return code
	}
	ctx, cancel := c.context()
	defer cancel()
	view, err := c.cluster(ctx)
	if err != nil {
		return c.fail(err)
	}
	brokers := view.brokers
	var image *ops.Brokers
	for _, addr := range c.httpAddrs(httpFlag) {
		var b ops.Brokers
		if err := httpGetJSON(ctx, addr, "/brokers", &b); err == nil {
			image = &b
			break
		}
	}
	rows := []brokerRow{}
	for _, b := range brokers {
		r := brokerRow{ID: b.ID, Host: b.Host, Port: b.Port, Rack: b.Rack, Fenced: b.Fenced, Epoch: -1, State: "active"}
		if b.Fenced {
			r.State = "fenced"
		}
		if image != nil {
			sd := false
			for _, ib := range image.Brokers {
				if ib.ID == b.ID {
					r.Epoch, sd = ib.Epoch, ib.ShuttingDown
				}
			}
			r.ShuttingDown = &sd
			if sd {
				r.State = "shutting-down"
			}
		}
		rows = append(rows, r)
	}
	if c.json {
		c.printJSON(map[string]any{"brokers": rows})
		return exitOK
	}
	var table [][]string
	for _, r := range rows {
		epoch := "?"
		if r.Epoch >= 0 {
			epoch = strconv.FormatInt(r.Epoch, 10)
		}
		table = append(table, []string{strconv.Itoa(int(r.ID)), r.Host + ":" + strconv.Itoa(int(r.Port)), orDash(r.Rack), r.State, epoch})
	}
	c.table([]string{"ID", "ADDRESS", "RACK", "STATE", "EPOCH"}, table)
	if image == nil {
		fmt.Fprintln(c.stderr, "note: no voter HTTP endpoint answered (--http): shutting-down state and epochs unknown")
	}
	return exitOK
}
