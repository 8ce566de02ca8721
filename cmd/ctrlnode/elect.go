package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type electResult struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Status    string `json:"status"`
	Error     string `json:"error,omitempty"`
}

func runElect(args []string, stdout, stderr io.Writer) int {
	c := newCLI("elect", "--type preferred|unclean (--all | --topic NAME [--partition N]... | --partitions t:p,...) [flags]", `
Runs a leader election, like kafka-leader-election.sh. preferred moves
leadership back to each partition's first replica; unclean elects any live
replica for partitions that have no leader and no live ISR member (data
written only to the old leader can be lost). A partition whose leader is
already the one the election would pick counts as done, not failed.`, stdout, stderr)
	typ := c.fs.String("type", "preferred", "election type: preferred or unclean")
	all := c.fs.Bool("all", false, "every partition of every topic")
	topic := c.fs.String("topic", "", "the topic whose partitions to elect (all of them without --partition)")
	var parts, specs listFlag
	c.fs.Var(&parts, "partition", "partition of --topic (repeatable)")
	c.fs.Var(&specs, "partitions", "topic:partition list (repeatable)")
	if code, done := c.parse(args); done {
		return code
	}
	var et int8
	switch *typ {
	case "preferred":
		et = 0
	case "unclean":
		et = 1
	default:
		return c.fail(usageErr("--type %q: want preferred or unclean", *typ))
	}
	given := 0
	for _, b := range []bool{*all, *topic != "", len(specs) > 0} {
		if b {
			given++
		}
	}
	if given != 1 {
		return c.fail(usageErr("give exactly one of --all, --topic, --partitions"))
	}
	if len(parts) > 0 && *topic == "" {
		return c.fail(usageErr("--partition needs --topic"))
	}
	sp, err := parsePartitionSpecs(specs)
	if err != nil {
		return c.fail(err)
	}
	for _, p := range parts {
		v, err := strconv.ParseInt(p, 10, 32)
		if err != nil || v < 0 {
			return c.fail(usageErr("--partition %q is not a non-negative integer", p))
		}
		sp = append(sp, partitionSpec{*topic, int32(v)})
	}
	ctx, cancel := c.context()
	defer cancel()
	if *topic != "" && len(parts) == 0 {
		details, err := c.fetchMetadata(ctx, []string{*topic})
		if err != nil {
			return c.fail(err)
		}
		d, ok := details[*topic]
		if !ok || d.Err != nil {
			fmt.Fprintf(c.stderr, "ctrlnode elect: topic %s: %v\n", *topic, kerr.UnknownTopicOrPartition)
			return exitFailed
		}
		for _, p := range d.Partitions {
			sp = append(sp, partitionSpec{*topic, p.Partition})
		}
	}
	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType = et
	req.TimeoutMillis = int32(c.timeout.Milliseconds())
	if !*all {
		idx := map[string]int{}
		for _, s := range sp {
			i, ok := idx[s.Topic]
			if !ok {
				i = len(req.Topics)
				idx[s.Topic] = i
				rt := kmsg.NewElectLeadersRequestTopic()
				rt.Topic = s.Topic
				req.Topics = append(req.Topics, rt)
			}
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, s.Partition)
		}
	}
	r, err := c.toController(ctx, req, nil)
	if err != nil {
		return c.fail(err)
	}
	resp := r.(*kmsg.ElectLeadersResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return c.fail(fmt.Errorf("election refused: %w", err))
	}
	var results []electResult
	failed := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			r := electResult{Topic: t.Topic, Partition: p.Partition, Status: "elected"}
			switch err := kerr.ErrorForCode(p.ErrorCode); {
			case err == nil:
			case isCode(err, kerr.ElectionNotNeeded):
				r.Status = "already elected"
			default:
				msg := ""
				if p.ErrorMessage != nil {
					msg = *p.ErrorMessage
				}
				r.Status, r.Error = "failed", itemError(err, msg)
				failed++
			}
			results = append(results, r)
		}
	}
	sort.Slice(results, func(i, j int) bool {
		a, b := results[i], results[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	if c.json {
		if results == nil {
			results = []electResult{}
		}
		c.printJSON(map[string]any{"type": *typ, "results": results})
	} else if len(results) == 0 {
		fmt.Fprintln(c.stdout, "no partition needed an election")
	} else {
		var rows [][]string
		for _, r := range results {
			rows = append(rows, []string{r.Topic, strconv.Itoa(int(r.Partition)), r.Status, orDash(r.Error)})
		}
		c.table([]string{"TOPIC", "PARTITION", "RESULT", "ERROR"}, rows)
	}
	if failed > 0 {
		fmt.Fprintf(c.stderr, "ctrlnode elect: %d of %d partitions failed\n", failed, len(results))
		return exitFailed
	}
	return exitOK
}
