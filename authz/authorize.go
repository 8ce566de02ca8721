package authz

import (
	"strings"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Request is one authorization question.
type Request struct {
	Principal    string // "User:alice"
	Host         string // the client's IP address
	Operation    rl.AclOperation
	ResourceType rl.ResourceType
	ResourceName string
}

// Decision is the answer, with the rule that decided it (zero for a super
// user or no matching rule) for the log line.
type Decision struct {
	Allowed bool
	// Reason says why, in words: "super user", "allowed by <rule>",
	// "denied by <rule>", "no rule allows it".
	Reason string
	Rule   rl.AclRule
}

// Authorize answers req from rules. superUsers are allowed everything.
func Authorize(rules []rl.AclRule, superUsers map[string]bool, req Request) Decision {
	if superUsers[req.Principal] {
		return Decision{Allowed: true, Reason: "super user"}
	}
	var allow *rl.AclRule
	for i := range rules {
		r := &rules[i]
		if r.ResourceType != req.ResourceType || !resourceMatches(r, req.ResourceName) ||
			!principalMatches(r.Principal, req.Principal) || !hostMatches(r.Host, req.Host) {
			continue
		}
		if r.Permission == rl.PermissionDeny && operationMatches(r.Operation, req.Operation, false) {
			return Decision{Allowed: false, Reason: "denied by " + r.String(), Rule: *r}
		}
		if allow == nil && r.Permission == rl.PermissionAllow && operationMatches(r.Operation, req.Operation, true) {
			allow = r
		}
	}
	if allow != nil {
		return Decision{Allowed: true, Reason: "allowed by " + allow.String(), Rule: *allow}
	}
	return Decision{Allowed: false, Reason: "no rule allows it"}
}

func resourceMatches(r *rl.AclRule, name string) bool {
	switch r.PatternType {
	case rl.PatternLiteral:
		return r.ResourceName == name || r.ResourceName == rl.WildcardName
	case rl.PatternPrefixed:
		return strings.HasPrefix(name, r.ResourceName)
	}
	return false
}

func principalMatches(rule, p string) bool { return rule == p || rule == rl.WildcardPrincipal }

func hostMatches(rule, h string) bool { return rule == rl.WildcardHost || rule == h }

// operationMatches reports whether a rule for ruleOp covers op. For allow
// rules (implied true) the rule also covers the operations its own
// implies: Describe by Read, Write, Delete or Alter, DescribeConfigs by
// AlterConfigs. A deny rule denies only what it names (or All).
func operationMatches(ruleOp, op rl.AclOperation, implied bool) bool {
	if ruleOp == rl.OpAll || ruleOp == op {
		return true
	}
	if !implied {
		return false
	}
	switch op {
	case rl.OpDescribe:
		return ruleOp == rl.OpRead || ruleOp == rl.OpWrite || ruleOp == rl.OpDelete || ruleOp == rl.OpAlter
	case rl.OpDescribeConfigs:
		return ruleOp == rl.OpAlterConfigs
	}
	return false
}
