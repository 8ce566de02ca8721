package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/ops"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
)

func runTopics(args []string, stdout, stderr io.Writer) int {
	return dispatch("topics", "Manage topics over the Kafka protocol, like kafka-topics.sh.", []subcommand{
		{"create", "create a topic", topicsCreate},
		{"list", "list the topics", topicsList},
		{"describe", "partitions, leaders, replicas, ISR and configs of topics", topicsDescribe},
		{"delete", "delete topics", topicsDelete},
		{"add-partitions", "raise a topic's partition count", topicsAddPartitions},
		{"alter-config", "set or delete topic configs", topicsAlterConfig},
	}, args, stdout, stderr)
}

// topicResult is one topic's outcome in JSON output.
type topicResult struct {
	Topic  string `json:"topic"`
	ID     string `json:"id,omitempty"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

func printTopicResults(c *cli, results []topicResult) int {
	failed := 0
	for _, r := range results {
		if r.Error != "" {
			failed++
		}
	}
	if c.json {
		c.printJSON(map[string]any{"results": results})
	} else {
		var rows [][]string
		for _, r := range results {
			rows = append(rows, []string{r.Topic, r.Status, orDash(r.ID), orDash(r.Error)})
		}
		c.table([]string{"TOPIC", "RESULT", "ID", "ERROR"}, rows)
	}
	if failed > 0 {
		fmt.Fprintf(c.stderr, "ctrlnode %s: %d of %d failed\n", c.name, failed, len(results))
		return exitFailed
	}
	return exitOK
}

func parseConfigs(kvs []string) (map[string]*string, error) {
	out := map[string]*string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErr("--config %q is not key=value", kv)
		}
		out[k] = &v
	}
	return out, nil
}

func topicsCreate(args []string, stdout, stderr io.Writer) int {
	c := newCLI("topics create", "--topic NAME [--partitions N] [--replication-factor R] [flags]",
		"Creates topics. --replica-assignment gives the replicas of each partition\nexplicitly (partitions separated by commas, brokers by colons: 1:2:3,2:3:1)\nand replaces --partitions and --replication-factor.", stdout, stderr)
	var topics, configs listFlag
	c.fs.Var(&topics, "topic", "topic to create (repeat or comma-separate for several)")
	partitions := c.fs.Int("partitions", 1, "number of partitions")
	rf := c.fs.Int("replication-factor", 3, "replicas per partition")
	c.fs.Var(&configs, "config", "topic config key=value (repeatable)")
	assignment := c.fs.String("replica-assignment", "", "explicit replicas: 1:2:3,2:3:1 (partition 0 on 1,2,3, partition 1 on 2,3,1)")
	ifNotExists := c.fs.Bool("if-not-exists", false, "a topic that already exists is not an error")
	validate := c.fs.Bool("validate-only", false, "check the request without creating anything")
	if code, done := c.parse(args); done {
		return code
	}
	if len(topics) == 0 {
		return c.fail(usageErr("--topic is required"))
	}
	if *partitions < 1 || *partitions > 1<<20 {
		return c.fail(usageErr("--partitions %d: want 1 or more", *partitions))
	}
	if *rf < 1 || *rf > 32767 {
		return c.fail(usageErr("--replication-factor %d: want 1 or more", *rf))
	}
	cfgs, err := parseConfigs(configs)
	if err != nil {
		return c.fail(err)
	}
	var assign [][]int32
	if *assignment != "" {
		for i, part := range strings.Split(*assignment, ",") {
			var reps []int32
			for _, b := range strings.Split(part, ":") {
				v, err := strconv.ParseInt(strings.TrimSpace(b), 10, 32)
				if err != nil || v < 0 {
					return c.fail(usageErr("--replica-assignment: partition %d: %q is not a broker id", i, b))
				}
				reps = append(reps, int32(v))
			}
			assign = append(assign, reps)
		}
	}
	ctx, cancel := c.context()
	defer cancel()

	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(c.timeout.Milliseconds())
	req.ValidateOnly = *validate
	for _, t := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = t
		if assign != nil {
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			for p, reps := range assign {
				ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
				ra.Partition, ra.Replicas = int32(p), reps
				rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
			}
		} else {
			rt.NumPartitions, rt.ReplicationFactor = int32(*partitions), int16(*rf)
		}
		for _, k := range sortedKeys(cfgs) {
			rc := kmsg.NewCreateTopicsRequestTopicConfig()
			rc.Name, rc.Value = k, cfgs[k]
			rt.Configs = append(rt.Configs, rc)
		}
		req.Topics = append(req.Topics, rt)
	}
	answer, err := c.toController(ctx, req, nil)
	if err != nil {
		return c.fail(err)
	}
	resp := answer.(*kmsg.CreateTopicsResponse)
	byName := map[string]kmsg.CreateTopicsResponseTopic{}
	for _, t := range resp.Topics {
		byName[t.Topic] = t
	}
	var results []topicResult
	for _, name := range topics {
		t, ok := byName[name]
		r := topicResult{Topic: name, Status: "created"}
		if *validate {
			r.Status = "valid"
		}
		switch {
		case !ok:
			r.Status, r.Error = "failed", "no answer for this topic"
		default:
			err := kerr.ErrorForCode(t.ErrorCode)
			if t.TopicID != [16]byte{} {
				r.ID = topicID(t.TopicID).String()
			}
			switch {
			case err == nil:
			case *ifNotExists && isCode(err, kerr.TopicAlreadyExists):
				r.Status = "exists"
			default:
				msg := ""
				if t.ErrorMessage != nil {
					msg = *t.ErrorMessage
				}
				r.Status, r.Error = "failed", itemError(err, msg)
			}
		}
		results = append(results, r)
	}
	return printTopicResults(c, results)
}

// topicSummary is one topic in `topics list`.
type topicSummary struct {
	Name              string `json:"name"`
	ID                string `json:"id"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
}

func topicsList(args []string, stdout, stderr io.Writer) int {
	c := newCLI("topics list", "[flags]", "Lists the topics with their partition count and replication factor.", stdout, stderr)
	if code, done := c.parse(args); done {
		return code
	}
	ctx, cancel := c.context()
	defer cancel()
	details, err := c.fetchMetadata(ctx, nil)
	if err != nil {
		return c.fail(err)
	}
	out := []topicSummary{}
	for _, name := range metaNames(details) {
		d := details[name]
		s := topicSummary{Name: d.Name, ID: d.ID.String(), Partitions: len(d.Partitions)}
		for _, p := range d.Partitions {
			s.ReplicationFactor = max(s.ReplicationFactor, len(p.Replicas))
		}
		out = append(out, s)
	}
	if c.json {
		c.printJSON(map[string]any{"topics": out})
		return exitOK
	}
	var rows [][]string
	for _, s := range out {
		rows = append(rows, []string{s.Name, strconv.Itoa(s.Partitions), strconv.Itoa(s.ReplicationFactor), s.ID})
	}
	c.table([]string{"TOPIC", "PARTITIONS", "RF", "ID"}, rows)
	return exitOK
}

type partitionDescription struct {
	Partition       int32   `json:"partition"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	OfflineReplicas []int32 `json:"offline_replicas"`
	// State and ReplicaStates are the controller's partition and replica
	// states, empty when no voter's HTTP endpoint answered.
	State         string         `json:"state,omitempty"`
	ReplicaStates []replicaState `json:"replica_states,omitempty"`
	Error         string         `json:"error,omitempty"`
}

type replicaState struct {
	Broker int32  `json:"broker"`
	State  string `json:"state"`
}

type topicPartition struct {
	topic     string
	partition int32
}

// partitionStates reads the partition and replica states of the topics
// (all without any) from the first voter HTTP endpoint that answers; nil
// when none does.
func (c *cli) partitionStates(ctx context.Context, httpFlag listFlag, topics []string) map[topicPartition]ops.Partition {
	for _, addr := range c.httpAddrs(httpFlag) {
		var all []ops.Partition
		ok := true
		paths := []string{"/partitions"}
		if len(topics) > 0 {
			paths = nil
			for _, t := range topics {
				paths = append(paths, "/partitions?topic="+url.QueryEscape(t))
			}
		}
		for _, path := range paths {
			var ps ops.Partitions
			if err := httpGetJSON(ctx, addr, path, &ps); err != nil {
				ok = false
				break
			}
			all = append(all, ps.Partitions...)
		}
		if !ok {
			continue
		}
		out := make(map[topicPartition]ops.Partition, len(all))
		for _, p := range all {
			out[topicPartition{p.Topic, p.Partition}] = p
		}
		return out
	}
	return nil
}

type topicDescription struct {
	Name       string                 `json:"name"`
	ID         string                 `json:"id,omitempty"`
	Partitions []partitionDescription `json:"partitions"`
	Configs    map[string]string      `json:"configs"`
	Error      string                 `json:"error,omitempty"`
}

func topicsDescribe(args []string, stdout, stderr io.Writer) int {
	c := newCLI("topics describe", "[--topic NAME]... [flags]",
		"Describes topics (all without --topic): each partition's leader, leader epoch,\nreplicas, ISR and offline replicas, and the topic's configs set on it; and\neach partition's state and each replica's state in the controller's state\nmachines, which no Kafka API reports, read from a voter's HTTP endpoint\n(--http; dev mode's with dev mode's bootstrap address).", stdout, stderr)
	var topics listFlag
	var httpFlag listFlag
	c.fs.Var(&httpFlag, "http", "host:port of voters' HTTP endpoints (repeatable) for the partition and replica states; the first that answers is used")
	c.fs.Var(&topics, "topic", "topic to describe (repeatable; default all)")
	noConfigs := c.fs.Bool("no-configs", false, "do not fetch the topics' configs")
	underReplicated := c.fs.Bool("under-replicated-partitions", false, "only partitions whose ISR is smaller than their replicas")
	unavailable := c.fs.Bool("unavailable-partitions", false, "only partitions without a leader")
	if code, done := c.parse(args); done {
		return code
	}
	ctx, cancel := c.context()
	defer cancel()
	details, err := c.fetchMetadata(ctx, topics)
	if err != nil {
		return c.fail(err)
	}
	cfgOf := map[string]map[string]string{}
	if !*noConfigs {
		var names []string
		for _, n := range metaNames(details) {
			if details[n].Err == nil {
				names = append(names, n)
			}
		}
		if cfgOf, err = c.topicConfigs(ctx, names); err != nil {
			return c.fail(err)
		}
	}
	states := c.partitionStates(ctx, httpFlag, topics)
	names := metaNames(details)
	if len(topics) > 0 {
		names = topics
	}
	var out []topicDescription
	failed := 0
	for _, name := range names {
		d, ok := details[name]
		td := topicDescription{Name: name, Partitions: []partitionDescription{}, Configs: cfgOf[name]}
		if td.Configs == nil {
			td.Configs = map[string]string{}
		}
		switch {
		case !ok:
			td.Error = kerr.UnknownTopicOrPartition.Error()
		case d.Err != nil:
			td.Error = d.Err.Error()
		}
		if td.Error != "" {
			failed++
			out = append(out, td)
			continue
		}
		td.ID = d.ID.String()
		for _, p := range d.Partitions {
			if *underReplicated && len(p.ISR) >= len(p.Replicas) {
				continue
			}
			if *unavailable && p.Leader >= 0 {
				continue
			}
			pd := partitionDescription{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR), OfflineReplicas: nonNil(p.OfflineReplicas)}
			if p.Err != nil && !isCode(p.Err, kerr.LeaderNotAvailable) {
				pd.Error = p.Err.Error()
			}
			if st, ok := states[topicPartition{name, p.Partition}]; ok {
				pd.State = st.State
				for _, r := range st.Replicas {
					pd.ReplicaStates = append(pd.ReplicaStates, replicaState{Broker: r.Broker, State: r.State})
				}
			}
			td.Partitions = append(td.Partitions, pd)
		}
		out = append(out, td)
	}
	if c.json {
		if out == nil {
			out = []topicDescription{}
		}
		c.printJSON(map[string]any{"topics": out})
	} else {
		for i, td := range out {
			if i > 0 {
				fmt.Fprintln(c.stdout)
			}
			if td.Error != "" {
				fmt.Fprintf(c.stdout, "Topic: %s\tError: %s\n", td.Name, td.Error)
				continue
			}
			var cfg []string
			for _, k := range sortedKeys(td.Configs) {
				cfg = append(cfg, k+"="+td.Configs[k])
			}
			fmt.Fprintf(c.stdout, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tConfigs: %s\n", td.Name, td.ID, len(details[td.Name].Partitions), strings.Join(cfg, ","))
			var rows [][]string
			for _, p := range td.Partitions {
				leader := strconv.Itoa(int(p.Leader))
				if p.Leader < 0 {
					leader = "none"
				}
				var rs []string
				for _, r := range p.ReplicaStates {
					rs = append(rs, strconv.Itoa(int(r.Broker))+":"+r.State)
				}
				rows = append(rows, []string{"", strconv.Itoa(int(p.Partition)), leader, strconv.Itoa(int(p.LeaderEpoch)),
					ints(p.Replicas), ints(p.ISR), orDash(ints(p.OfflineReplicas)), orDash(p.State), orDash(strings.Join(rs, ","))})
			}
			c.table([]string{"", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE", "STATE", "REPLICA STATES"}, rows)
		}
	}
	if states == nil {
		fmt.Fprintf(c.stderr, "note: no voter HTTP endpoint answered (--http): partition and replica states unknown\n")
	}
	if failed > 0 {
		fmt.Fprintf(c.stderr, "ctrlnode %s: %d of %d topics could not be described\n", c.name, failed, len(names))
		return exitFailed
	}
	return exitOK
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	out := append([]int32(nil), s...)
	return out
}

func topicsDelete(args []string, stdout, stderr io.Writer) int {
	c := newCLI("topics delete", "--topic NAME... [flags]", "Deletes topics.", stdout, stderr)
	var topics listFlag
	c.fs.Var(&topics, "topic", "topic to delete (repeat or comma-separate for several)")
	ifExists := c.fs.Bool("if-exists", false, "a topic that does not exist is not an error")
	if code, done := c.parse(args); done {
		return code
	}
	if len(topics) == 0 {
		return c.fail(usageErr("--topic is required"))
	}
	ctx, cancel := c.context()
	defer cancel()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = c.timeoutMillis()
	req.TopicNames = topics
	for _, t := range topics {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	answer, err := c.toController(ctx, req, nil)
	if err != nil {
		return c.fail(err)
	}
	byName := map[string]kmsg.DeleteTopicsResponseTopic{}
	for _, t := range answer.(*kmsg.DeleteTopicsResponse).Topics {
		if t.Topic != nil {
			byName[*t.Topic] = t
		}
	}
	var results []topicResult
	for _, name := range topics {
		r := topicResult{Topic: name, Status: "deleted"}
		t, ok := byName[name]
		err := kerr.ErrorForCode(t.ErrorCode)
		switch {
		case !ok:
			r.Status, r.Error = "failed", "no answer for this topic"
		case err == nil:
			r.ID = topicID(t.TopicID).String()
		case *ifExists && isCode(err, kerr.UnknownTopicOrPartition):
			r.Status = "absent"
		default:
			r.Status, r.Error = "failed", itemError(err, deref(t.ErrorMessage))
		}
		results = append(results, r)
	}
	return printTopicResults(c, results)
}

func topicsAddPartitions(args []string, stdout, stderr io.Writer) int {
	c := newCLI("topics add-partitions", "--topic NAME --partitions TOTAL [flags]",
		"Raises the partition count of topics to TOTAL (as kafka-topics --alter --partitions).", stdout, stderr)
	var topics listFlag
	c.fs.Var(&topics, "topic", "topic to grow (repeatable)")
	total := c.fs.Int("partitions", 0, "the new total number of partitions")
	validate := c.fs.Bool("validate-only", false, "check the request without changing anything")
	if code, done := c.parse(args); done {
		return code
	}
	if len(topics) == 0 {
		return c.fail(usageErr("--topic is required"))
	}
	if *total < 1 {
		return c.fail(usageErr("--partitions is required: the new total"))
	}
	ctx, cancel := c.context()
	defer cancel()
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = c.timeoutMillis()
	req.ValidateOnly = *validate
	for _, t := range topics {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = t, int32(*total)
		req.Topics = append(req.Topics, rt)
	}
	answer, err := c.toController(ctx, req, nil)
	if err != nil {
		return c.fail(err)
	}
	byName := map[string]kmsg.CreatePartitionsResponseTopic{}
	for _, t := range answer.(*kmsg.CreatePartitionsResponse).Topics {
		byName[t.Topic] = t
	}
	var results []topicResult
	for _, name := range topics {
		r := topicResult{Topic: name, Status: fmt.Sprintf("%d partitions", *total)}
		t, ok := byName[name]
		switch err := kerr.ErrorForCode(t.ErrorCode); {
		case !ok:
			r.Status, r.Error = "failed", "no answer for this topic"
		case err != nil:
			r.Status, r.Error = "failed", itemError(err, deref(t.ErrorMessage))
		}
		results = append(results, r)
	}
	return printTopicResults(c, results)
}

func topicsAlterConfig(args []string, stdout, stderr io.Writer) int {
	c := newCLI("topics alter-config", "--topic NAME [--set key=value]... [--delete key]... [flags]",
		"Sets or deletes configs of topics (IncrementalAlterConfigs).", stdout, stderr)
	var topics, sets, dels listFlag
	c.fs.Var(&topics, "topic", "topic to change (repeatable)")
	c.fs.Var(&sets, "set", "config to set, key=value (repeatable)")
	c.fs.Var(&dels, "delete", "config to delete, back to its default (repeatable)")
	validate := c.fs.Bool("validate-only", false, "check the request without changing anything")
	if code, done := c.parse(args); done {
		return code
	}
	if len(topics) == 0 {
		return c.fail(usageErr("--topic is required"))
	}
	if len(sets)+len(dels) == 0 {
		return c.fail(usageErr("nothing to change: give --set or --delete"))
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = *validate
	for _, t := range topics {
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType = kmsg.ConfigResourceTypeTopic
		rr.ResourceName = t
		for _, kv := range sets {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return c.fail(usageErr("--set %q is not key=value", kv))
			}
			rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			rc.Name, rc.Value, rc.Op = k, &v, kmsg.IncrementalAlterConfigOpSet
			rr.Configs = append(rr.Configs, rc)
		}
		for _, k := range dels {
			rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			rc.Name, rc.Op = k, kmsg.IncrementalAlterConfigOpDelete
			rr.Configs = append(rr.Configs, rc)
		}
		req.Resources = append(req.Resources, rr)
	}
	ctx, cancel := c.context()
	defer cancel()
	r, err := c.toController(ctx, req, func(r kmsg.Response) error {
		for _, rr := range r.(*kmsg.IncrementalAlterConfigsResponse).Resources {
			if err := kafkaclient.NotController(rr.ErrorCode); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return c.fail(err)
	}
	byName := map[string]kmsg.IncrementalAlterConfigsResponseResource{}
	for _, rr := range r.(*kmsg.IncrementalAlterConfigsResponse).Resources {
		byName[rr.ResourceName] = rr
	}
	var results []topicResult
	for _, name := range topics {
		r := topicResult{Topic: name, Status: "altered"}
		if *validate {
			r.Status = "valid"
		}
		resp, ok := byName[name]
		switch {
		case !ok:
			r.Status, r.Error = "failed", "no answer for this topic"
		case resp.ErrorCode != 0:
			msg := ""
			if resp.ErrorMessage != nil {
				msg = *resp.ErrorMessage
			}
			r.Status, r.Error = "failed", itemError(kerr.ErrorForCode(resp.ErrorCode), msg)
		}
		results = append(results, r)
	}
	return printTopicResults(c, results)
}

// topicConfigs returns the configs set on each topic (DescribeConfigs,
// dynamic topic configs only), from the active controller.
func (c *cli) topicConfigs(ctx context.Context, topics []string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	if len(topics) == 0 {
		return out, nil
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, t := range topics {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType = kmsg.ConfigResourceTypeTopic
		rr.ResourceName = t
		req.Resources = append(req.Resources, rr)
	}
	r, err := c.toController(ctx, req, nil)
	if err != nil {
		return nil, err
	}
	for _, rr := range r.(*kmsg.DescribeConfigsResponse).Resources {
		m := map[string]string{}
		for _, e := range rr.Configs {
			if e.Source == kmsg.ConfigSourceDynamicTopicConfig && e.Value != nil {
				m[e.Name] = *e.Value
			}
		}
		out[rr.ResourceName] = m
	}
	return out, nil
}
