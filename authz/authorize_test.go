package authz

import (
	"testing"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

func allow(principal string, rt rl.ResourceType, pt rl.PatternType, name string, op rl.AclOperation) rl.AclRule {
	return rl.AclRule{Principal: principal, Host: "*", ResourceType: rt, ResourceName: name, PatternType: pt,
		Operation: op, Permission: rl.PermissionAllow}
}

func deny(principal string, rt rl.ResourceType, pt rl.PatternType, name string, op rl.AclOperation) rl.AclRule {
	r := allow(principal, rt, pt, name, op)
	r.Permission = rl.PermissionDeny
	return r
}

func TestAuthorize(t *testing.T) {
	const (
		topic   = rl.ResourceTopic
		cluster = rl.ResourceCluster
		lit     = rl.PatternLiteral
		pre     = rl.PatternPrefixed
	)
	fromHost := allow("User:hosty", topic, lit, "orders", rl.OpRead)
	fromHost.Host = "127.0.0.7"
	rules := []rl.AclRule{
		allow("User:alice", topic, lit, "orders", rl.OpCreate),
		allow("User:alice", topic, pre, "logs-", rl.OpAll),
		deny("User:alice", topic, lit, "logs-secret", rl.OpDelete),
		allow("User:bob", topic, lit, "*", rl.OpRead),
		allow("User:*", topic, lit, "public", rl.OpDescribe),
		allow("User:ops", cluster, lit, rl.ClusterResourceName, rl.OpAlter),
		allow("User:ops", topic, lit, "orders", rl.OpAlterConfigs),
		deny("User:*", topic, lit, "locked", rl.OpAll),
		allow("User:carol", topic, lit, "locked", rl.OpAll),
		fromHost,
	}
	supers := map[string]bool{"User:admin": true}
	cases := []struct {
		name      string
		principal string
		host      string
		op        rl.AclOperation
		rt        rl.ResourceType
		res       string
		want      bool
	}{
		{"literal allow", "User:alice", "127.0.0.1", rl.OpCreate, topic, "orders", true},
		{"literal other op", "User:alice", "127.0.0.1", rl.OpDelete, topic, "orders", false},
		{"literal other name", "User:alice", "127.0.0.1", rl.OpCreate, topic, "orders2", false},
		{"prefixed all", "User:alice", "127.0.0.1", rl.OpDelete, topic, "logs-app", true},
		{"prefixed is not a suffix", "User:alice", "127.0.0.1", rl.OpDelete, topic, "app-logs-", false},
		{"deny beats prefixed allow", "User:alice", "127.0.0.1", rl.OpDelete, topic, "logs-secret", false},
		{"deny only its op", "User:alice", "127.0.0.1", rl.OpAlter, topic, "logs-secret", true},
		{"wildcard resource", "User:bob", "127.0.0.1", rl.OpRead, topic, "anything", true},
		{"read implies describe", "User:bob", "127.0.0.1", rl.OpDescribe, topic, "anything", true},
		{"read does not imply write", "User:bob", "127.0.0.1", rl.OpWrite, topic, "anything", false},
		{"wildcard principal", "User:zed", "127.0.0.1", rl.OpDescribe, topic, "public", true},
		{"wildcard principal other op", "User:zed", "127.0.0.1", rl.OpCreate, topic, "public", false},
		{"cluster alter", "User:ops", "127.0.0.1", rl.OpAlter, cluster, rl.ClusterResourceName, true},
		{"cluster rule is not a topic rule", "User:ops", "127.0.0.1", rl.OpAlter, topic, rl.ClusterResourceName, false},
		{"alter configs implies describe configs", "User:ops", "127.0.0.1", rl.OpDescribeConfigs, topic, "orders", true},
		{"describe configs does not imply alter configs", "User:ops", "127.0.0.1", rl.OpAlterConfigs, topic, "other", false},
		{"wildcard deny beats named allow", "User:carol", "127.0.0.1", rl.OpRead, topic, "locked", false},
		{"host rule from its host", "User:hosty", "127.0.0.7", rl.OpRead, topic, "orders", true},
		{"host rule from another host", "User:hosty", "127.0.0.8", rl.OpRead, topic, "orders", false},
		{"super user beats deny", "User:admin", "127.0.0.1", rl.OpDelete, topic, "locked", true},
		{"anonymous gets nothing", "User:ANONYMOUS", "127.0.0.1", rl.OpCreate, topic, "orders", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Authorize(rules, supers, Request{Principal: c.principal, Host: c.host, Operation: c.op, ResourceType: c.rt, ResourceName: c.res})
			if d.Allowed != c.want {
				t.Fatalf("allowed = %v (%s), want %v", d.Allowed, d.Reason, c.want)
			}
			if d.Reason == "" {
				t.Fatal("decision without a reason")
			}
		})
	}
}

func TestFilter(t *testing.T) {
	str := func(s string) *string { return &s }
	rules := []rl.AclRule{
		allow("User:alice", rl.ResourceTopic, rl.PatternLiteral, "orders", rl.OpCreate),
		allow("User:alice", rl.ResourceTopic, rl.PatternPrefixed, "ord", rl.OpRead),
		allow("User:bob", rl.ResourceTopic, rl.PatternLiteral, "*", rl.OpRead),
		deny("User:bob", rl.ResourceCluster, rl.PatternLiteral, rl.ClusterResourceName, rl.OpAlter),
	}
	any := Filter{ResourceType: rl.ResourceAny, PatternType: rl.PatternAny, Operation: rl.OpAny, Permission: rl.PermissionAny}
	cases := []struct {
		name string
		f    func(Filter) Filter
		want int
	}{
		{"everything", func(f Filter) Filter { return f }, 4},
		{"by principal", func(f Filter) Filter { f.Principal = str("User:bob"); return f }, 2},
		{"by resource type", func(f Filter) Filter { f.ResourceType = rl.ResourceCluster; return f }, 1},
		{"by exact name, any pattern", func(f Filter) Filter { f.ResourceName = str("orders"); return f }, 1},
		{"match: literal, wildcard and prefix", func(f Filter) Filter { f.PatternType = rl.PatternMatch; f.ResourceName = str("orders"); return f }, 3},
		{"literal only", func(f Filter) Filter { f.PatternType = rl.PatternLiteral; return f }, 3},
		{"by operation", func(f Filter) Filter { f.Operation = rl.OpRead; return f }, 2},
		{"by permission", func(f Filter) Filter { f.Permission = rl.PermissionDeny; return f }, 1},
		{"by host", func(f Filter) Filter { f.Host = str("127.0.0.1"); return f }, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := c.f(any)
			if err := f.Check(); err != nil {
				t.Fatal(err)
			}
			if got := len(f.Select(rules)); got != c.want {
				t.Fatalf("selected %d, want %d", got, c.want)
			}
		})
	}
	if err := (Filter{}).Check(); err == nil {
		t.Fatal("a filter of Unknown values passed the check")
	}
}
