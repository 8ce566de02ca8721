package authz

import (
	"fmt"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Filter selects rules, as Kafka's AclBindingFilter: a nil string and the
// Any enumeration values match everything.
type Filter struct {
	ResourceType rl.ResourceType
	ResourceName *string
	PatternType  rl.PatternType
	Principal    *string
	Host         *string
	Operation    rl.AclOperation
	Permission   rl.AclPermission
}

// Matches reports whether the filter selects rule r.
func (f Filter) Matches(r rl.AclRule) bool {
	if f.ResourceType != rl.ResourceAny && f.ResourceType != r.ResourceType {
		return false
	}
	if f.Principal != nil && *f.Principal != r.Principal {
		return false
	}
	if f.Host != nil && *f.Host != r.Host {
		return false
	}
	if f.Operation != rl.OpAny && f.Operation != r.Operation {
		return false
	}
	if f.Permission != rl.PermissionAny && f.Permission != r.Permission {
		return false
	}
	switch f.PatternType {
	case rl.PatternAny:
		return f.ResourceName == nil || *f.ResourceName == r.ResourceName
	case rl.PatternMatch:
		if f.ResourceName == nil {
			return true
		}
		return resourceMatches(&r, *f.ResourceName)
	default:
		return f.PatternType == r.PatternType && (f.ResourceName == nil || *f.ResourceName == r.ResourceName)
	}
}

// Check reports what makes a filter unusable, or nil. Kafka refuses
// filters with the Unknown values.
func (f Filter) Check() error {
	switch {
	case f.ResourceType < rl.ResourceAny || f.ResourceType > rl.ResourceUser:
		return errorf("resource type %s is not a filter value", f.ResourceType)
	case f.PatternType < rl.PatternAny || f.PatternType > rl.PatternPrefixed:
		return errorf("pattern type %s is not a filter value", f.PatternType)
	case f.Operation < rl.OpAny || f.Operation > rl.OpDescribeTokens:
		return errorf("operation %s is not a filter value", f.Operation)
	case f.Permission < rl.PermissionAny || f.Permission > rl.PermissionAllow:
		return errorf("permission %s is not a filter value", f.Permission)
	}
	return nil
}

// Select returns the rules the filter matches, in the order given.
func (f Filter) Select(rules []rl.AclRule) []rl.AclRule {
	var out []rl.AclRule
	for _, r := range rules {
		if f.Matches(r) {
			out = append(out, r)
		}
	}
	return out
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
