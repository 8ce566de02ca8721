package fsm

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// Security is the image's client credentials (salted SCRAM verifiers) and
// authorization rules. A Security is never changed once installed: apply
// builds a new one, so a snapshot, a Txn and the listener's readers share
// it without copying or locking. Both parts are small next to the
// partitions (users and rules, not millions), so rebuilding per record
// costs little.
type Security struct {
	// scram holds each user's verifiers sorted by mechanism.
	scram map[string][]rl.ScramCredential
	// rules are kept in canonical order (see lessRule), so that the
	// snapshot body, the state hash and DescribeAcls answers do not
	// depend on the order rules were added in.
	rules []rl.AclRule
}

var emptySecurity = &Security{scram: map[string][]rl.ScramCredential{}}

// ScramCredentials returns the user's verifiers, sorted by mechanism. The
// slice must not be changed.
func (s *Security) ScramCredentials(user string) []rl.ScramCredential { return s.scram[user] }

// Users returns the users with at least one verifier, sorted.
func (s *Security) Users() []string {
	out := make([]string, 0, len(s.scram))
	for u := range s.scram {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// Rules returns every authorization rule in canonical order. The slice
// must not be changed.
func (s *Security) Rules() []rl.AclRule { return s.rules }

// HasRule reports whether exactly this rule exists.
func (s *Security) HasRule(r rl.AclRule) bool {
	i := sort.Search(len(s.rules), func(i int) bool { return !lessRule(s.rules[i], r) })
	return i < len(s.rules) && s.rules[i] == r
}

func lessRule(a, b rl.AclRule) bool {
	if a.ResourceType != b.ResourceType {
		return a.ResourceType < b.ResourceType
	}
	if a.PatternType != b.PatternType {
		return a.PatternType < b.PatternType
	}
	if a.ResourceName != b.ResourceName {
		return a.ResourceName < b.ResourceName
	}
	if a.Principal != b.Principal {
		return a.Principal < b.Principal
	}
	if a.Host != b.Host {
		return a.Host < b.Host
	}
	if a.Operation != b.Operation {
		return a.Operation < b.Operation
	}
	return a.Permission < b.Permission
}

// Security implements Reader.
func (im *Image) Security() *Security { return im.sec }

func (im *Image) security() *Security     { return im.sec }
func (im *Image) setSecurity(s *Security) { im.sec = s }

// Security implements Reader.
func (tx *Txn) Security() *Security { return tx.security() }

func (tx *Txn) security() *Security {
	if tx.sec != nil {
		return tx.sec
	}
	return tx.base.security()
}

func (tx *Txn) setSecurity(s *Security) { tx.sec = s }

// MaxScramUserBytes bounds a SCRAM user name, as Kafka's own limit on
// entity names keeps them reasonable.
const MaxScramUserBytes = 1024

// MaxScramSaltBytes bounds a salt.
const MaxScramSaltBytes = 1024

func applyScramCredential(im store, r *rl.ScramCredential) error {
	if err := checkScramCredential(r); err != nil {
		return err
	}
	old := im.security()
	creds := make([]rl.ScramCredential, 0, len(old.scram[r.User])+1)
	for _, c := range old.scram[r.User] {
		if c.Mechanism != r.Mechanism {
			creds = append(creds, c)
		}
	}
	creds = append(creds, rl.ScramCredential{User: r.User, Mechanism: r.Mechanism, Iterations: r.Iterations,
		Salt: bytes.Clone(r.Salt), StoredKey: bytes.Clone(r.StoredKey), ServerKey: bytes.Clone(r.ServerKey)})
	sort.Slice(creds, func(i, j int) bool { return creds[i].Mechanism < creds[j].Mechanism })
	im.setSecurity(old.withUser(r.User, creds))
	return nil
}

func checkScramCredential(r *rl.ScramCredential) error {
	if err := checkScramUser(r.User); err != nil {
		return err
	}
	n := r.Mechanism.KeySize()
	switch {
	case n == 0:
		return fmt.Errorf("%w: SCRAM mechanism %d is unknown", ErrInvalidRecord, r.Mechanism)
	case r.Iterations < ScramMinIterations || r.Iterations > ScramMaxIterations:
		return fmt.Errorf("%w: SCRAM iterations %d outside %d..%d", ErrInvalidRecord, r.Iterations, ScramMinIterations, ScramMaxIterations)
	case len(r.Salt) == 0 || len(r.Salt) > MaxScramSaltBytes:
		return fmt.Errorf("%w: SCRAM salt of %d bytes (want 1..%d)", ErrInvalidRecord, len(r.Salt), MaxScramSaltBytes)
	case len(r.StoredKey) != n || len(r.ServerKey) != n:
		return fmt.Errorf("%w: %s keys must be %d bytes, have %d and %d", ErrInvalidRecord, r.Mechanism, n, len(r.StoredKey), len(r.ServerKey))
	}
	return nil
}

func applyDeleteScramCredential(im store, r *rl.DeleteScramCredential) error {
	old := im.security()
	var creds []rl.ScramCredential
	found := false
	for _, c := range old.scram[r.User] {
		if c.Mechanism == r.Mechanism {
			found = true
			continue
		}
		creds = append(creds, c)
	}
	if !found {
		return fmt.Errorf("%w: user %q has no %s credential", ErrUnknownCredential, r.User, r.Mechanism)
	}
	im.setSecurity(old.withUser(r.User, creds))
	return nil
}

// ScramMinIterations and ScramMaxIterations are Kafka's bounds.
const (
	ScramMinIterations = 4096
	ScramMaxIterations = 16384
)

func checkScramUser(u string) error {
	if u == "" || len(u) > MaxScramUserBytes {
		return fmt.Errorf("%w: SCRAM user name of %d bytes (want 1..%d)", ErrInvalidRecord, len(u), MaxScramUserBytes)
	}
	return nil
}

// withUser returns a copy of s with the user's verifiers replaced (removed
// when creds is empty).
func (s *Security) withUser(user string, creds []rl.ScramCredential) *Security {
	scram := make(map[string][]rl.ScramCredential, len(s.scram)+1)
	for u, c := range s.scram {
		scram[u] = c
	}
	if len(creds) == 0 {
		delete(scram, user)
	} else {
		scram[user] = creds
	}
	return &Security{scram: scram, rules: s.rules}
}

// CheckAclRule reports what is wrong with a rule that is to be stored, or
// nil. The listener uses it to answer bad CreateAcls entries with a
// message naming the field, before anything is proposed.
func CheckAclRule(r rl.AclRule) error {
	switch {
	case !r.ResourceType.Concrete():
		return fmt.Errorf("resource type %s cannot be stored in a rule", r.ResourceType)
	case !r.PatternType.Concrete():
		return fmt.Errorf("pattern type %s cannot be stored in a rule", r.PatternType)
	case !r.Operation.Concrete():
		return fmt.Errorf("operation %s cannot be stored in a rule", r.Operation)
	case !r.Permission.Concrete():
		return fmt.Errorf("permission %s cannot be stored in a rule", r.Permission)
	case r.ResourceName == "":
		return fmt.Errorf("resource name is empty")
	case r.ResourceType == rl.ResourceCluster && r.ResourceName != rl.ClusterResourceName:
		return fmt.Errorf("a cluster resource is named %q, not %q", rl.ClusterResourceName, r.ResourceName)
	case r.PatternType == rl.PatternPrefixed && r.ResourceName == rl.WildcardName:
		return fmt.Errorf("a prefixed pattern cannot be the wildcard %q", rl.WildcardName)
	case r.Host == "":
		return fmt.Errorf("host is empty (use %q for any host)", rl.WildcardHost)
	}
	typ, name, ok := strings.Cut(r.Principal, ":")
	if !ok || typ == "" || name == "" {
		return fmt.Errorf("principal %q is not of the form Type:name", r.Principal)
	}
	return nil
}

func applyAclChange(im store, r *rl.AclChange) error {
	if len(r.Add) == 0 && len(r.Remove) == 0 {
		return fmt.Errorf("%w: ACL change adds and removes nothing", ErrInvalidRecord)
	}
	old := im.security()
	removing := map[rl.AclRule]bool{}
	for _, rule := range r.Remove {
		if !old.HasRule(rule) {
			return fmt.Errorf("%w: %s", ErrUnknownRule, rule)
		}
		if removing[rule] {
			return fmt.Errorf("%w: rule removed twice: %s", ErrInvalidRecord, rule)
		}
		removing[rule] = true
	}
	adding := map[rl.AclRule]bool{}
	for _, rule := range r.Add {
		if err := CheckAclRule(rule); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidRecord, err)
		}
		if (old.HasRule(rule) && !removing[rule]) || adding[rule] {
			return fmt.Errorf("%w: %s", ErrRuleExists, rule)
		}
		adding[rule] = true
	}
	rules := make([]rl.AclRule, 0, len(old.rules)+len(r.Add)-len(r.Remove))
	for _, rule := range old.rules {
		if !removing[rule] {
			rules = append(rules, rule)
		}
	}
	rules = append(rules, r.Add...)
	sort.Slice(rules, func(i, j int) bool { return lessRule(rules[i], rules[j]) })
	im.setSecurity(&Security{scram: old.scram, rules: rules})
	return nil
}

// writeSecurity appends the security section of a snapshot body: every
// verifier sorted by user and mechanism, then every rule in canonical
// order.
func writeSecurity(c *chunkWriter, s *Security) {
	users := s.Users()
	n := 0
	for _, u := range users {
		n += len(s.scram[u])
	}
	c.uvarint(uint64(n))
	for _, u := range users {
		for i := range s.scram[u] {
			c.msgpack(&s.scram[u][i])
		}
	}
	c.uvarint(uint64(len(s.rules)))
	for i := range s.rules {
		c.msgpack(&s.rules[i])
	}
}

// readSecurity reads what writeSecurity wrote, with the checks apply
// makes, and requires the canonical order (which also rules out
// duplicates).
func readSecurity(r *reader) *Security {
	sec := &Security{scram: map[string][]rl.ScramCredential{}}
	n := r.count("SCRAM credential count", 1)
	var prev *rl.ScramCredential
	for i := 0; i < n && r.err == nil; i++ {
		var c rl.ScramCredential
		r.msgpack("SCRAM credential", &c)
		if r.err != nil {
			break
		}
		if err := checkScramCredential(&c); err != nil {
			r.fail("%v", err)
			break
		}
		if prev != nil && (c.User < prev.User || c.User == prev.User && c.Mechanism <= prev.Mechanism) {
			r.fail("SCRAM credentials out of order at %q %s", c.User, c.Mechanism)
			break
		}
		sec.scram[c.User] = append(sec.scram[c.User], c)
		prev = &c
	}
	n = r.count("ACL rule count", 1)
	for i := 0; i < n && r.err == nil; i++ {
		var rule rl.AclRule
		r.msgpack("ACL rule", &rule)
		if r.err != nil {
			break
		}
		if err := CheckAclRule(rule); err != nil {
			r.fail("ACL rule: %v", err)
			break
		}
		if len(sec.rules) > 0 && !lessRule(sec.rules[len(sec.rules)-1], rule) {
			r.fail("ACL rules out of order at %s", rule)
			break
		}
		sec.rules = append(sec.rules, rule)
	}
	return sec
}
