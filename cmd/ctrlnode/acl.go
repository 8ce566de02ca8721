package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
)

// ACL rules (CreateAcls, DescribeAcls, DeleteAcls) are read and changed
// on the active controller, like the other admin requests: a data
// broker's agent does not serve them, and a standby's image may be
// behind.

func runACL(args []string, stdout, stderr io.Writer) int {
	return dispatch("acl", "Manage the authorization rules (ACLs) over the Kafka protocol, like kafka-acls.sh.", []subcommand{
		{"add", "allow (or deny) principals operations on a resource", aclAdd},
		{"list", "list the rules, all or those a filter selects", aclList},
		{"remove", "remove the rules a filter selects", aclRemove},
	}, args, stdout, stderr)
}

// aclOperations is the operation names the help texts list.
const aclOperations = "all, read, write, create, delete, alter, describe, cluster-action, describe-configs,\n" +
	"alter-configs, idempotent-write, create-tokens, describe-tokens"

// parseOperation reads an operation name as raftlog spells it, compared
// case-insensitively and without dashes or underscores ("cluster-action"
// and "ClusterAction" are one). filter allows "any", the filter value.
func parseOperation(s string, filter bool) (rl.AclOperation, error) {
	norm := strings.NewReplacer("-", "", "_", "", " ", "").Replace(strings.TrimSpace(s))
	op, ok := rl.ParseOperation(norm)
	if !ok || (!filter && !op.Concrete()) {
		return 0, usageErr("--operation %q: want one of %s", s, strings.ReplaceAll(aclOperations, "\n", " "))
	}
	return op, nil
}

// checkPrincipal checks that p is "Type:name", e.g. "User:alice".
func checkPrincipal(p string) error {
	typ, name, ok := strings.Cut(p, ":")
	if !ok || typ == "" || name == "" {
		return usageErr("--principal %q is not Type:name (e.g. User:alice, or User:* for everyone)", p)
	}
	return nil
}

// aclRule is one rule in the output.
type aclRule struct {
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Permission   string `json:"permission"`
	Operation    string `json:"operation"`
	ResourceType string `json:"resource_type"`
	Pattern      string `json:"pattern"`
	Name         string `json:"name"`
}

func ruleOut(principal, host string, perm kmsg.ACLPermissionType, op kmsg.ACLOperation,
	rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, name string) aclRule {
	return aclRule{Principal: principal, Host: host, Permission: rl.AclPermission(perm).String(),
		Operation: rl.AclOperation(op).String(), ResourceType: rl.ResourceType(rt).String(),
		Pattern: rl.PatternType(pt).String(), Name: name}
}

func (r aclRule) row() []string {
	return []string{r.Principal, r.Host, r.Permission, r.Operation, r.ResourceType, r.Pattern, r.Name}
}

var aclHeader = []string{"PRINCIPAL", "HOST", "PERMISSION", "OPERATION", "RESOURCE", "PATTERN", "NAME"}

func sortRules(rules []aclRule) {
	slices.SortFunc(rules, func(a, b aclRule) int { return slices.Compare(a.row(), b.row()) })
}

// resourceFlags are the resource selectors of the acl commands.
type resourceFlags struct {
	topic, group string
	cluster      bool
	prefixed     bool
	literal      bool // list and remove only
	match        bool // list and remove only
}

func (r *resourceFlags) add(c *cli, filter bool) {
	c.fs.StringVar(&r.topic, "topic", "", "topic name (or name prefix, with --prefixed)")
	c.fs.StringVar(&r.group, "group", "", "consumer group name (or name prefix, with --prefixed)")
	c.fs.BoolVar(&r.cluster, "cluster", false, "the cluster resource (kafka-cluster)")
	if !filter {
		c.fs.BoolVar(&r.prefixed, "prefixed", false, "the rule covers every name starting with --topic/--group (default: that name only; * is every name)")
		return
	}
	c.fs.BoolVar(&r.prefixed, "prefixed", false, "only prefixed rules (default: literal and prefixed rules of exactly the name given)")
	c.fs.BoolVar(&r.literal, "literal", false, "only literal rules")
	c.fs.BoolVar(&r.match, "match", false, "every rule that applies to the --topic/--group named: literal, * and matching prefixes")
}

// resource returns the resource type and name; none is (ResourceAny, nil)
// and only allowed for a filter.
func (r *resourceFlags) resource(filter bool) (rl.ResourceType, *string, error) {
	n := 0
	for _, set := range []bool{r.topic != "", r.group != "", r.cluster} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return 0, nil, usageErr("give one of --topic, --group and --cluster")
	case r.topic != "":
		return rl.ResourceTopic, &r.topic, nil
	case r.group != "":
		return rl.ResourceGroup, &r.group, nil
	case r.cluster:
		name := rl.ClusterResourceName
		return rl.ResourceCluster, &name, nil
	case filter:
		return rl.ResourceAny, nil, nil
	}
	return 0, nil, usageErr("--topic, --group or --cluster is required")
}

// pattern returns the pattern type of a rule (filter false) or of a
// filter over rules of resource type rt.
func (r *resourceFlags) pattern(filter bool, rt rl.ResourceType) (rl.PatternType, error) {
	n := 0
	for _, set := range []bool{r.prefixed, r.literal, r.match} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return 0, usageErr("give at most one of --prefixed, --literal and --match")
	case r.prefixed && rt == rl.ResourceCluster:
		return 0, usageErr("--prefixed does not go with --cluster: the cluster has one name")
	case r.match && rt == rl.ResourceAny:
		return 0, usageErr("--match needs --topic, --group or --cluster")
	case r.prefixed:
		return rl.PatternPrefixed, nil
	case r.literal:
		return rl.PatternLiteral, nil
	case r.match:
		return rl.PatternMatch, nil
	case filter:
		return rl.PatternAny, nil
	}
	return rl.PatternLiteral, nil
}

// parseACLAdd returns the rules `acl add` creates: one per principal,
// host and operation.
func parseACLAdd(principals, hosts, ops []string, res *resourceFlags, deny bool) ([]rl.AclRule, error) {
	if len(principals) == 0 {
		return nil, usageErr("--principal is required (e.g. User:alice)")
	}
	for _, p := range principals {
		if err := checkPrincipal(p); err != nil {
			return nil, err
		}
	}
	if len(ops) == 0 {
		return nil, usageErr("--operation is required (%s)", strings.ReplaceAll(aclOperations, "\n", " "))
	}
	var operations []rl.AclOperation
	for _, o := range ops {
		op, err := parseOperation(o, false)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(operations, op) {
			operations = append(operations, op)
		}
	}
	rt, name, err := res.resource(false)
	if err != nil {
		return nil, err
	}
	pt, err := res.pattern(false, rt)
	if err != nil {
		return nil, err
	}
	if len(hosts) == 0 {
		hosts = []string{rl.WildcardHost}
	}
	perm := rl.PermissionAllow
	if deny {
		perm = rl.PermissionDeny
	}
	var rules []rl.AclRule
	for _, p := range principals {
		for _, h := range hosts {
			for _, op := range operations {
				rules = append(rules, rl.AclRule{Principal: p, Host: h, ResourceType: rt, ResourceName: *name,
					PatternType: pt, Operation: op, Permission: perm})
			}
		}
	}
	return rules, nil
}

// aclResult is one rule's outcome of `acl add`.
type aclResult struct {
	aclRule
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

func aclAdd(args []string, stdout, stderr io.Writer) int {
	c := newCLI("acl add", "--principal User:NAME (--topic NAME | --group NAME | --cluster) --operation OP [flags]",
		"Adds rules: each --principal may (or, with --deny, may not) do each --operation\n"+
			"on the resource, from each --host. A deny rule wins over any allow rule.\n\n"+
			"Operations: "+aclOperations+"\n(case-insensitive, with or without dashes).", stdout, stderr)
	var principals, hosts, ops listFlag
	var res resourceFlags
	c.fs.Var(&principals, "principal", "principal, Type:name (User:alice; User:* for everyone); repeatable")
	c.fs.Var(&hosts, "host", "client host the rule applies to (default *, every host); repeatable")
	c.fs.Var(&ops, "operation", "operation to allow or deny; repeatable")
	res.add(c, false)
	deny := c.fs.Bool("deny", false, "deny instead of allow")
	if code, done := c.parse(args); done {
		return code
	}
	rules, err := parseACLAdd(principals, hosts, ops, &res, *deny)
	if err != nil {
		return c.fail(err)
	}
	ctx, cancel := c.context()
	defer cancel()

	req := kmsg.NewPtrCreateACLsRequest()
	for _, r := range rules {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName = kmsg.ACLResourceType(r.ResourceType), r.ResourceName
		cr.ResourcePatternType = kmsg.ACLResourcePatternType(r.PatternType)
		cr.Principal, cr.Host = r.Principal, r.Host
		cr.Operation, cr.PermissionType = kmsg.ACLOperation(r.Operation), kmsg.ACLPermissionType(r.Permission)
		req.Creations = append(req.Creations, cr)
	}
	answer, err := c.toController(ctx, req, func(r kmsg.Response) error {
		for _, x := range r.(*kmsg.CreateACLsResponse).Results {
			if err := kafkaclient.NotController(x.ErrorCode); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return c.fail(err)
	}
	resp := answer.(*kmsg.CreateACLsResponse)
	var results []aclResult
	failed := 0
	for i, cr := range req.Creations {
		out := aclResult{aclRule: ruleOut(cr.Principal, cr.Host, cr.PermissionType, cr.Operation, cr.ResourceType,
			cr.ResourcePatternType, cr.ResourceName), Status: "created"}
		switch {
		case i >= len(resp.Results):
			out.Status, out.Error = "failed", "no answer for this rule"
		default:
			if err := kerr.ErrorForCode(resp.Results[i].ErrorCode); err != nil {
				msg := ""
				if resp.Results[i].ErrorMessage != nil {
					msg = *resp.Results[i].ErrorMessage
				}
				out.Status, out.Error = "failed", itemError(err, msg)
			}
		}
		if out.Error != "" {
			failed++
		}
		results = append(results, out)
	}
	if c.json {
		c.printJSON(map[string]any{"results": results})
	} else {
		var rows [][]string
		for _, r := range results {
			rows = append(rows, append(r.row(), r.Status, orDash(r.Error)))
		}
		c.table(append(slices.Clone(aclHeader), "RESULT", "ERROR"), rows)
	}
	if failed > 0 {
		fmt.Fprintf(c.stderr, "ctrlnode %s: %d of %d failed\n", c.name, failed, len(results))
		return exitFailed
	}
	return exitOK
}

// aclFilterFlags are the filter flags of `acl list` and `acl remove`.
type aclFilterFlags struct {
	principal, host, operation, permission string
	res                                    resourceFlags
}

func (f *aclFilterFlags) add(c *cli) {
	c.fs.StringVar(&f.principal, "principal", "", "only rules of this principal (User:alice)")
	c.fs.StringVar(&f.host, "host", "", "only rules for this host (* is the rules for every host)")
	c.fs.StringVar(&f.operation, "operation", "", "only rules of this operation")
	c.fs.StringVar(&f.permission, "permission", "", "only allow or only deny rules")
	f.res.add(c, true)
}

// given reports whether any filter flag was given.
func (f *aclFilterFlags) given() bool {
	r := f.res
	return f.principal != "" || f.host != "" || f.operation != "" || f.permission != "" ||
		r.topic != "" || r.group != "" || r.cluster || r.prefixed || r.literal || r.match
}

// aclFilter is a parsed filter, in wire terms.
type aclFilter struct {
	resourceType kmsg.ACLResourceType
	name         *string
	pattern      kmsg.ACLResourcePatternType
	principal    *string
	host         *string
	operation    kmsg.ACLOperation
	permission   kmsg.ACLPermissionType
}

func (f *aclFilterFlags) parse() (aclFilter, error) {
	var out aclFilter
	rt, name, err := f.res.resource(true)
	if err != nil {
		return out, err
	}
	pt, err := f.res.pattern(true, rt)
	if err != nil {
		return out, err
	}
	out.resourceType, out.name, out.pattern = kmsg.ACLResourceType(rt), name, kmsg.ACLResourcePatternType(pt)
	if f.principal != "" {
		if err := checkPrincipal(f.principal); err != nil {
			return out, err
		}
		out.principal = &f.principal
	}
	if f.host != "" {
		out.host = &f.host
	}
	out.operation = kmsg.ACLOperation(rl.OpAny)
	if f.operation != "" {
		op, err := parseOperation(f.operation, true)
		if err != nil {
			return out, err
		}
		out.operation = kmsg.ACLOperation(op)
	}
	out.permission = kmsg.ACLPermissionType(rl.PermissionAny)
	if f.permission != "" {
		p, ok := rl.ParsePermission(strings.TrimSpace(f.permission))
		if !ok {
			return out, usageErr("--permission %q: want allow or deny", f.permission)
		}
		out.permission = kmsg.ACLPermissionType(p)
	}
	return out, nil
}

func aclList(args []string, stdout, stderr io.Writer) int {
	c := newCLI("acl list", "[--principal P] [--topic NAME | --group NAME | --cluster] [--prefixed | --literal | --match] [flags]",
		"Lists the rules the filter selects (all without one), sorted.", stdout, stderr)
	var ff aclFilterFlags
	ff.add(c)
	if code, done := c.parse(args); done {
		return code
	}
	f, err := ff.parse()
	if err != nil {
		return c.fail(err)
	}
	ctx, cancel := c.context()
	defer cancel()
	rules, err := c.describeACLs(ctx, f)
	if err != nil {
		return c.fail(err)
	}
	if c.json {
		c.printJSON(map[string]any{"acls": rules})
		return exitOK
	}
	var rows [][]string
	for _, r := range rules {
		rows = append(rows, r.row())
	}
	c.table(aclHeader, rows)
	return exitOK
}

// describeACLs returns the rules f selects, sorted.
func (c *cli) describeACLs(ctx context.Context, f aclFilter) ([]aclRule, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourceName, req.ResourcePatternType = f.resourceType, f.name, f.pattern
	req.Principal, req.Host, req.Operation, req.PermissionType = f.principal, f.host, f.operation, f.permission
	r, err := c.toController(ctx, req, func(r kmsg.Response) error {
		return kafkaclient.NotController(r.(*kmsg.DescribeACLsResponse).ErrorCode)
	})
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.DescribeACLsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		return nil, fmt.Errorf("DescribeAcls: %s", itemError(err, msg))
	}
	rules := []aclRule{}
	for _, res := range resp.Resources {
		for _, a := range res.ACLs {
			rules = append(rules, ruleOut(a.Principal, a.Host, a.PermissionType, a.Operation, res.ResourceType,
				res.ResourcePatternType, res.ResourceName))
		}
	}
	sortRules(rules)
	return rules, nil
}

func aclRemove(args []string, stdout, stderr io.Writer) int {
	c := newCLI("acl remove", "(--principal P | --topic NAME | --cluster | ... | --all) [flags]",
		"Removes the rules the filter selects and prints them. At least one filter flag\n"+
			"is required; --all removes every rule.", stdout, stderr)
	var ff aclFilterFlags
	ff.add(c)
	all := c.fs.Bool("all", false, "remove every rule")
	if code, done := c.parse(args); done {
		return code
	}
	f, err := parseACLRemove(&ff, *all)
	if err != nil {
		return c.fail(err)
	}
	ctx, cancel := c.context()
	defer cancel()
	req := kmsg.NewPtrDeleteACLsRequest()
	df := kmsg.NewDeleteACLsRequestFilter()
	df.ResourceType, df.ResourceName, df.ResourcePatternType = f.resourceType, f.name, f.pattern
	df.Principal, df.Host, df.Operation, df.PermissionType = f.principal, f.host, f.operation, f.permission
	req.Filters = append(req.Filters, df)
	r, err := c.toController(ctx, req, func(r kmsg.Response) error {
		for _, res := range r.(*kmsg.DeleteACLsResponse).Results {
			if err := kafkaclient.NotController(res.ErrorCode); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return c.fail(err)
	}
	resp := r.(*kmsg.DeleteACLsResponse)
	removed := []aclRule{}
	var errs []string
	for _, res := range resp.Results {
		if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
			msg := ""
			if res.ErrorMessage != nil {
				msg = *res.ErrorMessage
			}
			errs = append(errs, itemError(err, msg))
			continue
		}
		for _, m := range res.MatchingACLs {
			if kerr.ErrorForCode(m.ErrorCode) != nil {
				msg := ""
				if m.ErrorMessage != nil {
					msg = *m.ErrorMessage
				}
				errs = append(errs, itemError(kerr.ErrorForCode(m.ErrorCode), msg))
				continue
			}
			removed = append(removed, ruleOut(m.Principal, m.Host, m.PermissionType, m.Operation, m.ResourceType,
				m.ResourcePatternType, m.ResourceName))
		}
	}
	if len(resp.Results) == 0 {
		errs = append(errs, "no answer for the filter")
	}
	sortRules(removed)
	if c.json {
		out := map[string]any{"removed": removed}
		if len(errs) > 0 {
			out["errors"] = errs
		}
		c.printJSON(out)
	} else {
		var rows [][]string
		for _, r := range removed {
			rows = append(rows, r.row())
		}
		c.table(aclHeader, rows)
	}
	for _, e := range errs {
		fmt.Fprintf(c.stderr, "ctrlnode %s: %s\n", c.name, e)
	}
	if len(errs) > 0 {
		return exitFailed
	}
	if len(removed) == 0 {
		fmt.Fprintf(c.stderr, "ctrlnode %s: no rule matched\n", c.name)
	}
	return exitOK
}

// parseACLRemove checks that a removal is narrowed by a filter, or is
// --all, never both nor neither.
func parseACLRemove(ff *aclFilterFlags, all bool) (aclFilter, error) {
	switch {
	case all && ff.given():
		return aclFilter{}, usageErr("--all removes every rule: give it without filter flags")
	case !all && !ff.given():
		return aclFilter{}, usageErr("give a filter (--principal, --topic, --cluster, ...), or --all to remove every rule")
	}
	return ff.parse()
}
