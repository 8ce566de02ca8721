package controller

import (
	"context"
	"errors"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ctrlquorum/ctrlquorum/authz"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// securityManager owns the credentials and authorization rules (Kafka's
// SCRAM credential handling and AclControlManager): SCRAM verifiers per
// user and mechanism, and ACL rules. Everything it decides from is in the
// image.
type securityManager struct{}

// ScramUpsert sets one user's verifier for one mechanism. The keys are
// derived from the salted password by the caller (the listener, from an
// AlterUserScramCredentials request); the password never reaches the
// controller.
type ScramUpsert struct {
	User       string
	Mechanism  rl.ScramMechanism
	Iterations int32
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
}

// ScramDeletion removes one user's verifier for one mechanism.
type ScramDeletion struct {
	User      string
	Mechanism rl.ScramMechanism
}

// AlterScramCredentials applies deletions and upserts user by user: each
// user's changes commit together or not at all, and the result maps every
// user named to its outcome (nil for success). Errors carry Kafka's codes:
// RESOURCE_NOT_FOUND for a deletion of a credential that does not exist,
// DUPLICATE_RESOURCE for a user and mechanism named twice,
// UNSUPPORTED_SASL_MECHANISM and UNACCEPTABLE_CREDENTIAL for bad values.
func (c *Controller) AlterScramCredentials(ctx context.Context, deletions []ScramDeletion, upserts []ScramUpsert) map[string]error {
	type userChanges struct {
		dels []ScramDeletion
		ups  []ScramUpsert
		err  error
	}
	byUser := map[string]*userChanges{}
	get := func(u string) *userChanges {
		if byUser[u] == nil {
			byUser[u] = &userChanges{}
		}
		return byUser[u]
	}
	seen := map[ScramDeletion]bool{}
	check := func(u string, m rl.ScramMechanism) error {
		switch {
		case u == "":
			return kafkaErr(kerr.UnacceptableCredential, "user name is empty")
		case m.KeySize() == 0:
			return kafkaErr(kerr.UnsupportedSaslMechanism, "SCRAM mechanism %d for user %q", m, u)
		case seen[ScramDeletion{u, m}]:
			return kafkaErr(kerr.DuplicateResource, "user %q and %s appear more than once", u, m)
		}
		seen[ScramDeletion{u, m}] = true
		return nil
	}
	for _, d := range deletions {
		uc := get(d.User)
		if err := check(d.User, d.Mechanism); err != nil && uc.err == nil {
			uc.err = err
		}
		uc.dels = append(uc.dels, d)
	}
	for _, u := range upserts {
		uc := get(u.User)
		if err := check(u.User, u.Mechanism); err != nil && uc.err == nil {
			uc.err = err
		}
		if uc.err == nil && (u.Iterations < fsm.ScramMinIterations || u.Iterations > fsm.ScramMaxIterations) {
			uc.err = kafkaErr(kerr.UnacceptableCredential, "iterations %d for user %q outside %d..%d",
				u.Iterations, u.User, fsm.ScramMinIterations, fsm.ScramMaxIterations)
		}
		uc.ups = append(uc.ups, u)
	}

	out := make(map[string]error, len(byUser))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for user, uc := range byUser {
		if uc.err != nil {
			out[user] = uc.err
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := c.submit(ctx, "alter-scram-credentials", func(m *managers, w *work) (eventOutcome, error) {
				return answer(nil, m.security.alterScram(w, user, uc.dels, uc.ups))
			}, nil)
			mu.Lock()
			out[user] = err
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func (m *securityManager) alterScram(w *work, user string, dels []ScramDeletion, ups []ScramUpsert) error {
	have := map[rl.ScramMechanism]bool{}
	for _, cr := range w.img().Security().ScramCredentials(user) {
		have[cr.Mechanism] = true
	}
	var recs []rl.Record
	for _, d := range dels {
		if !have[d.Mechanism] {
			return kafkaErr(kerr.ResourceNotFound, "user %q has no %s credential", user, d.Mechanism)
		}
		recs = append(recs, &rl.DeleteScramCredential{User: user, Mechanism: d.Mechanism})
	}
	for _, u := range ups {
		recs = append(recs, &rl.ScramCredential{User: user, Mechanism: u.Mechanism, Iterations: u.Iterations,
			Salt: u.Salt, StoredKey: u.StoredKey, ServerKey: u.ServerKey})
	}
	if len(recs) == 0 {
		return nil
	}
	if err := w.stage(recs...); err != nil {
		return kafkaErr(kerr.UnacceptableCredential, "user %q: %v", user, errors.Unwrap(err))
	}
	w.log.Info("SCRAM credentials changed", "user", user, "set", len(ups), "deleted", len(dels))
	return nil
}

// CreateAcls adds rules, all valid ones in one record. The result holds
// one error per rule, in order: INVALID_REQUEST naming the field for a
// rule that cannot be stored, nil otherwise. A rule that already exists is
// a success that changes nothing, as in Kafka.
func (c *Controller) CreateAcls(ctx context.Context, rules []rl.AclRule) ([]error, error) {
	res, _, err := c.submit(ctx, "create-acls", func(m *managers, w *work) (eventOutcome, error) {
		return answer(m.security.createAcls(w, rules))
	}, nil)
	if err != nil {
		return nil, err
	}
	return res.([]error), nil
}

func (m *securityManager) createAcls(w *work, rules []rl.AclRule) ([]error, error) {
	errs := make([]error, len(rules))
	sec := w.img().Security()
	var add []rl.AclRule
	adding := map[rl.AclRule]bool{}
	for i, r := range rules {
		if err := fsm.CheckAclRule(r); err != nil {
			errs[i] = kafkaErr(kerr.InvalidRequest, "ACL rule %d: %v", i, err)
			continue
		}
		if sec.HasRule(r) || adding[r] {
			continue
		}
		adding[r] = true
		add = append(add, r)
	}
	if len(add) == 0 {
		return errs, nil
	}
	if err := w.stage(&rl.AclChange{Add: add}); err != nil {
		return nil, err
	}
	for _, r := range add {
		w.log.Info("ACL rule added", "rule", r.String())
	}
	// Brokers authorize produce and fetch with the rules: they read them
	// again from the controller when told something changed.
	w.plan.updateMetadataToAll = true
	return errs, nil
}

// DeleteAclsResult is the outcome of one filter: the rules it removed, or
// an error (INVALID_REQUEST for a filter Kafka would refuse).
type DeleteAclsResult struct {
	Removed []rl.AclRule
	Err     error
}

// DeleteAcls removes every rule any of the filters matches, in one
// record, and reports per filter what it matched.
func (c *Controller) DeleteAcls(ctx context.Context, filters []authz.Filter) ([]DeleteAclsResult, error) {
	res, _, err := c.submit(ctx, "delete-acls", func(m *managers, w *work) (eventOutcome, error) {
		return answer(m.security.deleteAcls(w, filters))
	}, nil)
	if err != nil {
		return nil, err
	}
	return res.([]DeleteAclsResult), nil
}

func (m *securityManager) deleteAcls(w *work, filters []authz.Filter) ([]DeleteAclsResult, error) {
	out := make([]DeleteAclsResult, len(filters))
	rules := w.img().Security().Rules()
	removing := map[rl.AclRule]bool{}
	for i, f := range filters {
		if err := f.Check(); err != nil {
			out[i].Err = kafkaErr(kerr.InvalidRequest, "ACL filter %d: %v", i, err)
			continue
		}
		out[i].Removed = f.Select(rules)
		for _, r := range out[i].Removed {
			removing[r] = true
		}
	}
	if len(removing) == 0 {
		return out, nil
	}
	remove := make([]rl.AclRule, 0, len(removing))
	for r := range removing {
		remove = append(remove, r)
	}
	// The record must not depend on map order.
	sort.Slice(remove, func(i, j int) bool { return remove[i].String() < remove[j].String() })
	if err := w.stage(&rl.AclChange{Remove: remove}); err != nil {
		return nil, err
	}
	for _, r := range remove {
		w.log.Info("ACL rule removed", "rule", r.String())
	}
	w.plan.updateMetadataToAll = true
	return out, nil
}
