package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/admin"
)

func runReassign(args []string, stdout, stderr io.Writer) int {
	return dispatch("reassign", `Move partition replicas between brokers, like kafka-reassign-partitions.sh.
A plan is Kafka's JSON: {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}`, []subcommand{
		{"execute", "start the reassignments of a plan", reassignExecute},
		{"list", "the reassignments in progress", reassignList},
		{"cancel", "cancel the reassignments of a plan, or all", reassignCancel},
		{"verify", "whether a plan's reassignments completed", reassignVerify},
		{"generate", "a plan that moves every replica off a broker", reassignGenerate},
	}, args, stdout, stderr)
}

func readPlanFile(path string) (admin.Plan, error) {
	if path == "" {
		return admin.Plan{}, usageErr("--plan is required (a JSON file, or - for standard input)")
	}
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return admin.Plan{}, usageErr("--plan: %v", err)
		}
		defer f.Close()
		r = f
	}
	p, err := admin.ReadPlan(r)
	if err != nil {
		return admin.Plan{}, usageErr("--plan %s: %v", path, err)
	}
	return p, nil
}

type reassignResult struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas,omitempty"`
	Status    string  `json:"status"`
	Error     string  `json:"error,omitempty"`
}

func printReassignResults(c *cli, results []reassignResult, extra map[string]any) int {
	failed := 0
	for _, r := range results {
		if r.Error != "" {
			failed++
		}
	}
	if c.json {
		out := map[string]any{"results": results}
		for k, v := range extra {
			out[k] = v
		}
		c.printJSON(out)
	} else {
		var rows [][]string
		for _, r := range results {
			rows = append(rows, []string{r.Topic, strconv.Itoa(int(r.Partition)), orDash(ints(r.Replicas)), r.Status, orDash(r.Error)})
		}
		c.table([]string{"TOPIC", "PARTITION", "REPLICAS", "RESULT", "ERROR"}, rows)
	}
	if failed > 0 {
		fmt.Fprintf(c.stderr, "ctrlnode %s: %d of %d partitions failed\n", c.name, failed, len(results))
		return exitFailed
	}
	return exitOK
}

// currentAssignments reads the replicas of every partition of topics (all
// topics when empty).
func (c *cli) currentAssignments(ctx context.Context, topics ...string) (map[string]topicMeta, error) {
	return c.fetchMetadata(ctx, topics)
}

// alter sends AlterPartitionReassignments: replicas nil cancels.
func alter(c *cli, plan admin.Plan, cancelIt bool) ([]reassignResult, error) {
	ctx, cancel := c.context()
	defer cancel()
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = int32(c.timeout.Milliseconds())
	idx := map[string]int{}
	for _, p := range plan.Partitions {
		i, ok := idx[p.Topic]
		if !ok {
			i = len(req.Topics)
			idx[p.Topic] = i
			rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			rt.Topic = p.Topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition = p.Partition
		if !cancelIt {
			rp.Replicas = p.Replicas
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	answer, err := c.toController(ctx, req, nil)
	if err != nil {
		return nil, err
	}
	resp := answer.(*kmsg.AlterPartitionAssignmentsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		return nil, fmt.Errorf("refused: %s", itemError(err, msg))
	}
	type key struct {
		t string
		p int32
	}
	got := map[key]kmsg.AlterPartitionAssignmentsResponseTopicPartition{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			got[key{t.Topic, p.Partition}] = p
		}
	}
	var out []reassignResult
	for _, p := range plan.Partitions {
		r := reassignResult{Topic: p.Topic, Partition: p.Partition, Status: "started"}
		if cancelIt {
			r.Status = "cancelled"
		} else {
			r.Replicas = p.Replicas
		}
		rp, ok := got[key{p.Topic, p.Partition}]
		switch {
		case !ok:
			r.Status, r.Error = "failed", "no answer for this partition"
		default:
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				msg := ""
				if rp.ErrorMessage != nil {
					msg = *rp.ErrorMessage
				}
				r.Status, r.Error = "failed", itemError(err, msg)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

func reassignExecute(args []string, stdout, stderr io.Writer) int {
	c := newCLI("reassign execute", "--plan FILE [flags]", `
Starts the reassignments of a plan. The current assignment of the plan's
partitions is printed first (on standard error, or under "previous" with
--json): keep it to roll back.`, stdout, stderr)
	planPath := c.fs.String("plan", "", "the plan: a JSON file, or - for standard input")
	if code, done := c.parse(args); done {
		return code
	}
	plan, err := readPlanFile(*planPath)
	if err != nil {
		return c.fail(err)
	}
	prev, err := previousAssignment(c, plan)
	if err != nil {
		return c.fail(err)
	}
	if !c.json {
		b, _ := json.Marshal(prev)
		fmt.Fprintf(c.stderr, "Current assignment (save it to roll back):\n%s\n\n", b)
	}
	results, err := alter(c, plan, false)
	if err != nil {
		return c.fail(err)
	}
	return printReassignResults(c, results, map[string]any{"previous": prev})
}

func previousAssignment(c *cli, plan admin.Plan) (admin.Plan, error) {
	ctx, cancel := c.context()
	defer cancel()
	var topics []string
	for _, p := range plan.Partitions {
		if !slices.Contains(topics, p.Topic) {
			topics = append(topics, p.Topic)
		}
	}
	details, err := c.currentAssignments(ctx, topics...)
	if err != nil {
		return admin.Plan{}, err
	}
	prev := admin.Plan{Version: 1, Partitions: []admin.PlanPartition{}}
	for _, p := range plan.Partitions {
		if d, ok := details[p.Topic].partition(p.Partition); ok {
			prev.Partitions = append(prev.Partitions, admin.PlanPartition{Topic: p.Topic, Partition: p.Partition, Replicas: nonNil(d.Replicas)})
		}
	}
	return prev, nil
}

type reassignment struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
	Adding    []int32 `json:"adding"`
	Removing  []int32 `json:"removing"`
}

func listReassignments(c *cli, topics []string) ([]reassignment, error) {
	ctx, cancel := c.context()
	defer cancel()
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = c.timeoutMillis()
	if len(topics) > 0 {
		details, err := c.fetchMetadata(ctx, topics)
		if err != nil {
			return nil, err
		}
		req.Topics = []kmsg.ListPartitionReassignmentsRequestTopic{}
		for _, name := range metaNames(details) {
			rt := kmsg.NewListPartitionReassignmentsRequestTopic()
			rt.Topic = name
			for _, p := range details[name].Partitions {
				rt.Partitions = append(rt.Partitions, p.Partition)
			}
			if len(rt.Partitions) > 0 {
				req.Topics = append(req.Topics, rt)
			}
		}
		if len(req.Topics) == 0 {
			return []reassignment{}, nil
		}
	} // else null: every reassignment in progress
	answer, err := c.toController(ctx, req, nil)
	if err != nil {
		return nil, err
	}
	resp := answer.(*kmsg.ListPartitionReassignmentsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		if msg := deref(resp.ErrorMessage); msg != "" && !errors.Is(err, kerr.ClusterAuthorizationFailed) && !errors.Is(err, kerr.TopicAuthorizationFailed) {
			return nil, fmt.Errorf("%w: %s", err, msg)
		}
		return nil, err
	}
	out := []reassignment{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, reassignment{Topic: t.Topic, Partition: p.Partition, Replicas: nonNil(p.Replicas),
				Adding: nonNil(p.AddingReplicas), Removing: nonNil(p.RemovingReplicas)})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return out, nil
}

func reassignList(args []string, stdout, stderr io.Writer) int {
	c := newCLI("reassign list", "[--topic NAME]... [flags]", "Lists the reassignments in progress.", stdout, stderr)
	var topics listFlag
	c.fs.Var(&topics, "topic", "only these topics (repeatable)")
	if code, done := c.parse(args); done {
		return code
	}
	rs, err := listReassignments(c, topics)
	if err != nil {
		return c.fail(err)
	}
	if c.json {
		c.printJSON(map[string]any{"reassignments": rs})
		return exitOK
	}
	if len(rs) == 0 {
		fmt.Fprintln(c.stdout, "no reassignment in progress")
		return exitOK
	}
	var rows [][]string
	for _, r := range rs {
		rows = append(rows, []string{r.Topic, strconv.Itoa(int(r.Partition)), ints(r.Replicas), orDash(ints(r.Adding)), orDash(ints(r.Removing))})
	}
	c.table([]string{"TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"}, rows)
	return exitOK
}

func reassignCancel(args []string, stdout, stderr io.Writer) int {
	c := newCLI("reassign cancel", "(--plan FILE | --all) [flags]", "Cancels the reassignments of a plan's partitions, or all in progress.", stdout, stderr)
	planPath := c.fs.String("plan", "", "the plan whose partitions to cancel")
	all := c.fs.Bool("all", false, "cancel every reassignment in progress")
	if code, done := c.parse(args); done {
		return code
	}
	if (*planPath == "") == !*all {
		return c.fail(usageErr("give exactly one of --plan and --all"))
	}
	var plan admin.Plan
	if *all {
		rs, err := listReassignments(c, nil)
		if err != nil {
			return c.fail(err)
		}
		if len(rs) == 0 {
			if c.json {
				c.printJSON(map[string]any{"results": []reassignResult{}})
			} else {
				fmt.Fprintln(c.stdout, "no reassignment in progress")
			}
			return exitOK
		}
		plan = admin.Plan{Version: 1}
		for _, r := range rs {
			plan.Partitions = append(plan.Partitions, admin.PlanPartition{Topic: r.Topic, Partition: r.Partition, Replicas: r.Replicas})
		}
	} else {
		var err error
		if plan, err = readPlanFile(*planPath); err != nil {
			return c.fail(err)
		}
	}
	results, err := alter(c, plan, true)
	if err != nil {
		return c.fail(err)
	}
	return printReassignResults(c, results, nil)
}

func reassignVerify(args []string, stdout, stderr io.Writer) int {
	c := newCLI("reassign verify", "--plan FILE [flags]", `
Checks each partition of a plan: "complete" when no reassignment is in
progress and its replicas are the plan's, "in progress", or "differs"
when none is in progress but its replicas are not the plan's. Exit code 0
when all are complete, 4 when some are still in progress, 1 when some
differ.`, stdout, stderr)
	planPath := c.fs.String("plan", "", "the plan: a JSON file, or - for standard input")
	if code, done := c.parse(args); done {
		return code
	}
	plan, err := readPlanFile(*planPath)
	if err != nil {
		return c.fail(err)
	}
	var topics []string
	for _, p := range plan.Partitions {
		if !slices.Contains(topics, p.Topic) {
			topics = append(topics, p.Topic)
		}
	}
	inProgress, err := listReassignments(c, nil)
	if err != nil {
		return c.fail(err)
	}
	ctx, cancel := c.context()
	defer cancel()
	details, err := c.currentAssignments(ctx, topics...)
	if err != nil {
		return c.fail(err)
	}
	var results []reassignResult
	pending, differ := 0, 0
	for _, p := range plan.Partitions {
		r := reassignResult{Topic: p.Topic, Partition: p.Partition, Status: "complete"}
		moving := slices.ContainsFunc(inProgress, func(x reassignment) bool { return x.Topic == p.Topic && x.Partition == p.Partition })
		d, ok := details[p.Topic].partition(p.Partition)
		switch {
		case moving:
			r.Status = "in progress"
			pending++
		case !ok:
			r.Status, r.Error = "differs", "partition not found"
			differ++
		case !slices.Equal(d.Replicas, p.Replicas) && reassigning(d.Replicas, p.Replicas):
			// During a reassignment the replicas are the target plus the
			// ones being removed (KIP-455).
			r.Status = "in progress"
			pending++
		case !slices.Equal(d.Replicas, p.Replicas):
			r.Status, r.Error = "differs", fmt.Sprintf("replicas are %v, the plan has %v", d.Replicas, p.Replicas)
			differ++
		}
		if ok {
			r.Replicas = nonNil(d.Replicas)
		}
		results = append(results, r)
	}
	code := printReassignResults(c, results, map[string]any{"complete": pending == 0 && differ == 0})
	switch {
	case differ > 0:
		return exitFailed
	case pending > 0:
		fmt.Fprintf(c.stderr, "ctrlnode reassign verify: %d of %d partitions still moving\n", pending, len(results))
		return exitNotYet
	}
	return code
}

func reassignGenerate(args []string, stdout, stderr io.Writer) int {
	c := newCLI("reassign generate", "--remove-broker ID [--topic NAME]... [--brokers IDS] [--output FILE] [flags]", `
Proposes a plan that moves every replica off a broker (to drain it before
decommissioning). Each replica on it is replaced, in the same position, by
the target broker with the fewest replicas that is not already a replica
of the partition. Targets default to every registered, unfenced broker.
The plan is written to --output (or printed with --json); the table shows
each move. Nothing is changed: run 'reassign execute' with the plan.`, stdout, stderr)
	remove := c.fs.Int("remove-broker", -1, "the broker to move replicas off")
	var topics, brokers listFlag
	c.fs.Var(&topics, "topic", "only these topics (repeatable; default all)")
	c.fs.Var(&brokers, "brokers", "target broker ids (default: the registered, unfenced brokers)")
	output := c.fs.String("output", "", "write the plan to this file")
	if code, done := c.parse(args); done {
		return code
	}
	if *remove < 0 {
		return c.fail(usageErr("--remove-broker is required"))
	}
	var targets []int32
	for _, b := range brokers {
		v, err := strconv.ParseInt(b, 10, 32)
		if err != nil || v < 0 {
			return c.fail(usageErr("--brokers: %q is not a broker id", b))
		}
		targets = append(targets, int32(v))
	}
	ctx, cancel := c.context()
	defer cancel()
	if len(targets) == 0 {
		view, err := c.cluster(ctx)
		if err != nil {
			return c.fail(err)
		}
		for _, b := range view.brokers {
			if !b.Fenced {
				targets = append(targets, b.ID)
			}
		}
	}
	details, err := c.fetchMetadata(ctx, topics)
	if err != nil {
		return c.fail(err)
	}
	var cur []admin.Assignment
	for _, name := range metaNames(details) {
		t := details[name]
		if t.Err != nil {
			return c.fail(fmt.Errorf("topic %s: %w", t.Name, t.Err))
		}
		for _, p := range t.Partitions {
			cur = append(cur, admin.Assignment{Topic: t.Name, Partition: p.Partition, Replicas: p.Replicas})
		}
	}
	plan, moves, err := admin.GenerateDrain(cur, targets, int32(*remove))
	if err != nil {
		return c.fail(err)
	}
	if *output != "" {
		b, _ := json.MarshalIndent(plan, "", "  ")
		if err := os.WriteFile(*output, append(b, '\n'), 0o644); err != nil {
			return c.fail(err)
		}
	}
	if c.json {
		c.printJSON(map[string]any{"plan": plan, "moves": nonNilMoves(moves)})
		return exitOK
	}
	if len(moves) == 0 {
		fmt.Fprintf(c.stdout, "broker %d holds no replica: nothing to move\n", *remove)
		return exitOK
	}
	var rows [][]string
	for _, m := range moves {
		rows = append(rows, []string{m.Topic, strconv.Itoa(int(m.Partition)), ints(m.Current), ints(m.Proposed)})
	}
	c.table([]string{"TOPIC", "PARTITION", "CURRENT", "PROPOSED"}, rows)
	if *output != "" {
		fmt.Fprintf(c.stdout, "\nplan written to %s; apply it with: ctrlnode reassign execute --plan %s\n", *output, *output)
	} else {
		b, _ := json.Marshal(plan)
		fmt.Fprintf(c.stdout, "\nProposed plan:\n%s\n", b)
	}
	return exitOK
}

func nonNilMoves(m []admin.Move) []admin.Move {
	if m == nil {
		return []admin.Move{}
	}
	return m
}

// reassigning reports whether replicas hold every target replica and
// more: the shape of a partition in the middle of a reassignment.
func reassigning(replicas, target []int32) bool {
	if len(replicas) <= len(target) {
		return false
	}
	for _, t := range target {
		if !slices.Contains(replicas, t) {
			return false
		}
	}
	return true
}
