package controller

import (
	"bytes"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/authz"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

func smUpsert(user string, m rl.ScramMechanism, iterations int32) ScramUpsert {
	n := m.KeySize()
	return ScramUpsert{User: user, Mechanism: m, Iterations: iterations, Salt: []byte("salt-" + user),
		StoredKey: bytes.Repeat([]byte{1}, n), ServerKey: bytes.Repeat([]byte{2}, n)}
}

func smMechanisms(e *managerEnv, user string) []rl.ScramMechanism {
	var out []rl.ScramMechanism
	e.image(func(im *fsm.Image) {
		for _, c := range im.Security().ScramCredentials(user) {
			out = append(out, c.Mechanism)
		}
	})
	slices.Sort(out)
	return out
}

// TestSecurityManagerScram: a user's credentials are set and deleted,
// all of a user's changes in one record set; deleting one that does not
// exist is refused and stages nothing.
func TestSecurityManagerScram(t *testing.T) {
	e := newManagerEnv(t)
	sm := e.m.security
	w := e.run(func(w *work) error {
		return sm.alterScram(w, "alice", nil, []ScramUpsert{smUpsert("alice", rl.ScramSHA256, 4096), smUpsert("alice", rl.ScramSHA512, 8192)})
	})
	if got := recordTypes(w); got != "ScramCredential ScramCredential" {
		t.Fatalf("upserts staged %s", got)
	}
	if got := smMechanisms(e, "alice"); !slices.Equal(got, []rl.ScramMechanism{rl.ScramSHA256, rl.ScramSHA512}) {
		t.Fatalf("alice's mechanisms %v", got)
	}
	w = e.run(func(w *work) error {
		return sm.alterScram(w, "alice", []ScramDeletion{{User: "alice", Mechanism: rl.ScramSHA256}}, nil)
	})
	if got := recordTypes(w); got != "DeleteScramCredential" {
		t.Fatalf("deletion staged %s", got)
	}
	if got := smMechanisms(e, "alice"); !slices.Equal(got, []rl.ScramMechanism{rl.ScramSHA512}) {
		t.Fatalf("alice's mechanisms after the deletion %v", got)
	}
	w, err := e.call(func(w *work) error {
		return sm.alterScram(w, "alice", []ScramDeletion{{User: "alice", Mechanism: rl.ScramSHA256}}, []ScramUpsert{smUpsert("alice", rl.ScramSHA512, 4096)})
	})
	if ErrorCode(err) != kerr.ResourceNotFound.Code || len(w.records()) != 0 {
		t.Fatalf("deleting a credential that is not there: %v, staged %s", err, recordTypes(w))
	}
}

// TestSecurityManagerAcls: rules are added in one record (a duplicate, or
// one already stored, changes nothing; an invalid one is answered alone),
// and removed by filter.
func TestSecurityManagerAcls(t *testing.T) {
	e := newManagerEnv(t)
	sm := e.m.security
	rule := func(principal string, op rl.AclOperation) rl.AclRule {
		return rl.AclRule{Principal: principal, Host: "*", ResourceType: rl.ResourceTopic, ResourceName: "orders",
			PatternType: rl.PatternLiteral, Operation: op, Permission: rl.PermissionAllow}
	}
	read, write := rule("User:alice", rl.OpRead), rule("User:bob", rl.OpWrite)
	bad := read
	bad.PatternType = rl.PatternAny // a filter value, not a rule's

	var errs []error
	w := e.run(func(w *work) (err error) {
		errs, err = sm.createAcls(w, []rl.AclRule{read, write, read, bad})
		return err
	})
	if recordTypes(w) != "AclChange" || errs[0] != nil || errs[1] != nil || errs[2] != nil || ErrorCode(errs[3]) != kerr.InvalidRequest.Code {
		t.Fatalf("create: staged %s, errors %v", recordTypes(w), errs)
	}
	if add := w.records()[0].(*rl.AclChange).Add; !slices.Equal(add, []rl.AclRule{read, write}) {
		t.Fatalf("AclChange adds %v", add)
	}
	w, err := e.call(func(w *work) (err error) { errs, err = sm.createAcls(w, []rl.AclRule{write}); return err })
	if err != nil || errs[0] != nil || len(w.records()) != 0 {
		t.Fatalf("adding a stored rule: %v %v, staged %s", err, errs, recordTypes(w))
	}

	bob := "User:bob"
	var removed []DeleteAclsResult
	w = e.run(func(w *work) (err error) {
		removed, err = sm.deleteAcls(w, []authz.Filter{{ResourceType: rl.ResourceAny, PatternType: rl.PatternAny, Principal: &bob,
			Operation: rl.OpAny, Permission: rl.PermissionAny}})
		return err
	})
	if recordTypes(w) != "AclChange" || removed[0].Err != nil || !slices.Equal(removed[0].Removed, []rl.AclRule{write}) {
		t.Fatalf("delete: staged %s, %+v", recordTypes(w), removed)
	}
	var rules []rl.AclRule
	e.image(func(im *fsm.Image) { rules = slices.Clone(im.Security().Rules()) })
	if !slices.Equal(rules, []rl.AclRule{read}) {
		t.Fatalf("rules after the deletion: %v", rules)
	}
}
