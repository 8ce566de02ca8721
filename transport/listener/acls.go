package listener

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/authz"
	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkawire"
)

// ACL management: CreateAcls, DescribeAcls and DeleteAcls over the rules
// in the log. Clients send the mutations to any broker, so, like config
// changes, a standby forwards them to the active voter (atActive).

// ruleOf turns a CreateAcls entry into a rule. Before v1 there was no
// pattern type: every rule was literal.
func ruleOf(c kmsg.CreateACLsRequestCreation, version int16) rl.AclRule {
	pt := rl.PatternType(c.ResourcePatternType)
	if version < 1 {
		pt = rl.PatternLiteral
	}
	return rl.AclRule{Principal: c.Principal, Host: c.Host, ResourceType: rl.ResourceType(c.ResourceType),
		ResourceName: c.ResourceName, PatternType: pt, Operation: rl.AclOperation(c.Operation),
		Permission: rl.AclPermission(c.PermissionType)}
}

func (l *Listener) createAcls(ctx context.Context, c *kafkawire.Conn, req *kmsg.CreateACLsRequest) *kmsg.CreateACLsResponse {
	resp := l.atActive(ctx, c, req, func(ctx context.Context) kmsg.Response {
		return l.createAclsHere(ctx, req)
	})
	return resp.(*kmsg.CreateACLsResponse)
}

func (l *Listener) createAclsHere(ctx context.Context, req *kmsg.CreateACLsRequest) *kmsg.CreateACLsResponse {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	rules := make([]rl.AclRule, len(req.Creations))
	for i, cr := range req.Creations {
		rules[i] = ruleOf(cr, req.GetVersion())
	}
	ctx, cancel := l.requestContext(ctx, 0)
	defer cancel()
	errs, err := l.node.Controller.CreateAcls(ctx, rules)
	for i := range rules {
		e := err
		if e == nil {
			e = errs[i]
		}
		res := kmsg.NewCreateACLsResponseResult()
		res.ErrorCode, res.ErrorMessage = errorCode(e), errorMessage(e)
		resp.Results = append(resp.Results, res)
	}
	return resp
}

func filterOf(rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType, version int16) authz.Filter {
	f := authz.Filter{ResourceType: rl.ResourceType(rt), ResourceName: name, PatternType: rl.PatternType(pt),
		Principal: principal, Host: host, Operation: rl.AclOperation(op), Permission: rl.AclPermission(perm)}
	if version < 1 {
		f.PatternType = rl.PatternLiteral
	}
	return f
}

func (l *Listener) describeAcls(req *kmsg.DescribeACLsRequest) *kmsg.DescribeACLsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := filterOf(req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host,
		req.Operation, req.PermissionType, req.GetVersion())
	if err := f.Check(); err != nil {
		msg := err.Error()
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, &msg
		return resp
	}
	var rules []rl.AclRule
	l.node.FSM.View(func(im *fsm.Image) { rules = f.Select(im.Security().Rules()) })
	// Rules are in canonical order, resource first: consecutive rules on
	// one resource pattern form one response resource.
	for _, r := range rules {
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != kmsg.ACLResourceType(r.ResourceType) ||
			resp.Resources[n-1].ResourceName != r.ResourceName ||
			resp.Resources[n-1].ResourcePatternType != kmsg.ACLResourcePatternType(r.PatternType) {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName = kmsg.ACLResourceType(r.ResourceType), r.ResourceName
			res.ResourcePatternType = kmsg.ACLResourcePatternType(r.PatternType)
			resp.Resources = append(resp.Resources, res)
			n++
		}
		acl := kmsg.NewDescribeACLsResponseResourceACL()
		acl.Principal, acl.Host = r.Principal, r.Host
		acl.Operation, acl.PermissionType = kmsg.ACLOperation(r.Operation), kmsg.ACLPermissionType(r.Permission)
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, acl)
	}
	return resp
}

func (l *Listener) deleteAcls(ctx context.Context, c *kafkawire.Conn, req *kmsg.DeleteACLsRequest) *kmsg.DeleteACLsResponse {
	resp := l.atActive(ctx, c, req, func(ctx context.Context) kmsg.Response {
		return l.deleteAclsHere(ctx, req)
	})
	return resp.(*kmsg.DeleteACLsResponse)
}

func (l *Listener) deleteAclsHere(ctx context.Context, req *kmsg.DeleteACLsRequest) *kmsg.DeleteACLsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	filters := make([]authz.Filter, len(req.Filters))
	for i, f := range req.Filters {
		filters[i] = filterOf(f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal, f.Host,
			f.Operation, f.PermissionType, req.GetVersion())
	}
	ctx, cancel := l.requestContext(ctx, 0)
	defer cancel()
	results, err := l.node.Controller.DeleteAcls(ctx, filters)
	for i := range filters {
		res := kmsg.NewDeleteACLsResponseResult()
		var r controller.DeleteAclsResult
		if err != nil {
			r.Err = err
		} else {
			r = results[i]
		}
		res.ErrorCode, res.ErrorMessage = errorCode(r.Err), errorMessage(r.Err)
		for _, rule := range r.Removed {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName = kmsg.ACLResourceType(rule.ResourceType), rule.ResourceName
			m.ResourcePatternType = kmsg.ACLResourcePatternType(rule.PatternType)
			m.Principal, m.Host = rule.Principal, rule.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(rule.Operation), kmsg.ACLPermissionType(rule.Permission)
			res.MatchingACLs = append(res.MatchingACLs, m)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp
}
