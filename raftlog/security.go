package raftlog

// Security records: client credentials and authorization rules live in the
// log like every other piece of metadata, so every voter authenticates and
// authorizes against the same state and a new active controller has
// nothing to load from elsewhere.
//
// The enumerations use Kafka's own numbers (AclOperation, ResourceType,
// PatternType, AclPermissionType), so the CreateAcls / DescribeAcls /
// DeleteAcls wire requests map onto rules without a translation table.

// ScramMechanism names a SCRAM hash.
type ScramMechanism uint8

const (
	ScramSHA256 ScramMechanism = 1 // Kafka's ScramMechanism SCRAM_SHA_256
	ScramSHA512 ScramMechanism = 2 // SCRAM_SHA_512
)

func (m ScramMechanism) String() string {
	switch m {
	case ScramSHA256:
		return "SCRAM-SHA-256"
	case ScramSHA512:
		return "SCRAM-SHA-512"
	}
	return "unknown"
}

// KeySize is the length of the mechanism's StoredKey and ServerKey, 0 for
// an unknown mechanism.
func (m ScramMechanism) KeySize() int {
	switch m {
	case ScramSHA256:
		return 32
	case ScramSHA512:
		return 64
	}
	return 0
}

// ScramCredential sets (creates or replaces) one user's verifier for one
// mechanism. The password itself is never in the log: only the salt and
// the keys derived from the salted password (RFC 5802).
type ScramCredential struct {
	_msgpack   struct{} `msgpack:",as_array"`
	User       string
	Mechanism  ScramMechanism
	Iterations int32
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
}

// DeleteScramCredential removes one user's verifier for one mechanism.
type DeleteScramCredential struct {
	_msgpack  struct{} `msgpack:",as_array"`
	User      string
	Mechanism ScramMechanism
}

// ResourceType is the kind of resource an ACL rule protects.
type ResourceType uint8

// PatternType says how a rule's resource name matches.
type PatternType uint8

// AclOperation is what a rule allows or denies.
type AclOperation uint8

// AclPermission is allow or deny.
type AclPermission uint8

const (
	ResourceAny             ResourceType = 1 // filters only
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7

	PatternAny      PatternType = 1 // filters only
	PatternMatch    PatternType = 2 // filters only
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4

	OpAny             AclOperation = 1 // filters only
	OpAll             AclOperation = 2
	OpRead            AclOperation = 3
	OpWrite           AclOperation = 4
	OpCreate          AclOperation = 5
	OpDelete          AclOperation = 6
	OpAlter           AclOperation = 7
	OpDescribe        AclOperation = 8
	OpClusterAction   AclOperation = 9
	OpDescribeConfigs AclOperation = 10
	OpAlterConfigs    AclOperation = 11
	OpIdempotentWrite AclOperation = 12
	OpCreateTokens    AclOperation = 13
	OpDescribeTokens  AclOperation = 14

	PermissionAny   AclPermission = 1 // filters only
	PermissionDeny  AclPermission = 2
	PermissionAllow AclPermission = 3
)

// ClusterResourceName is the one name a cluster resource has.
const ClusterResourceName = "kafka-cluster"

// WildcardName matches every resource of its type in a literal rule, and
// WildcardPrincipal / WildcardHost every principal and host.
const (
	WildcardName      = "*"
	WildcardPrincipal = "User:*"
	WildcardHost      = "*"
)

var resourceTypeNames = map[ResourceType]string{
	ResourceAny: "Any", ResourceTopic: "Topic", ResourceGroup: "Group", ResourceCluster: "Cluster",
	ResourceTransactionalID: "TransactionalId", ResourceDelegationToken: "DelegationToken", ResourceUser: "User",
}

var patternTypeNames = map[PatternType]string{
	PatternAny: "Any", PatternMatch: "Match", PatternLiteral: "Literal", PatternPrefixed: "Prefixed",
}

var operationNames = map[AclOperation]string{
	OpAny: "Any", OpAll: "All", OpRead: "Read", OpWrite: "Write", OpCreate: "Create", OpDelete: "Delete",
	OpAlter: "Alter", OpDescribe: "Describe", OpClusterAction: "ClusterAction",
	OpDescribeConfigs: "DescribeConfigs", OpAlterConfigs: "AlterConfigs", OpIdempotentWrite: "IdempotentWrite",
	OpCreateTokens: "CreateTokens", OpDescribeTokens: "DescribeTokens",
}

var permissionNames = map[AclPermission]string{PermissionAny: "Any", PermissionDeny: "Deny", PermissionAllow: "Allow"}

func enumName[K comparable](m map[K]string, k K, n uint8) string {
	if s, ok := m[k]; ok {
		return s
	}
	return "Unknown(" + itoa(int(n)) + ")"
}

func (t ResourceType) String() string  { return enumName(resourceTypeNames, t, uint8(t)) }
func (t PatternType) String() string   { return enumName(patternTypeNames, t, uint8(t)) }
func (o AclOperation) String() string  { return enumName(operationNames, o, uint8(o)) }
func (p AclPermission) String() string { return enumName(permissionNames, p, uint8(p)) }

// Concrete reports whether t can appear in a stored rule (not a filter
// value).
func (t ResourceType) Concrete() bool { return t >= ResourceTopic && t <= ResourceUser }
func (t PatternType) Concrete() bool  { return t == PatternLiteral || t == PatternPrefixed }
func (o AclOperation) Concrete() bool { return o >= OpAll && o <= OpDescribeTokens }
func (p AclPermission) Concrete() bool {
	return p == PermissionDeny || p == PermissionAllow
}

// ParseResourceType, ParsePatternType, ParseOperation and ParsePermission
// read the names String prints, case-insensitively.
func ParseResourceType(s string) (ResourceType, bool) { return parseEnum(resourceTypeNames, s) }
func ParsePatternType(s string) (PatternType, bool)   { return parseEnum(patternTypeNames, s) }
func ParseOperation(s string) (AclOperation, bool)    { return parseEnum(operationNames, s) }
func ParsePermission(s string) (AclPermission, bool)  { return parseEnum(permissionNames, s) }

func parseEnum[K comparable](m map[K]string, s string) (K, bool) {
	for k, name := range m {
		if equalFold(name, s) {
			return k, true
		}
	}
	var zero K
	return zero, false
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	neg := n < 0
	if neg {
		n = -n
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// AclRule is one authorization rule, as Kafka's AclBinding: Principal
// ("User:alice", or "User:*") may do Operation on the resources the
// pattern names, from Host ("*" for any), or, with PermissionDeny, may not.
type AclRule struct {
	_msgpack     struct{} `msgpack:",as_array"`
	Principal    string
	Host         string
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType
	Operation    AclOperation
	Permission   AclPermission
}

func (r AclRule) String() string {
	return r.Permission.String() + " " + r.Principal + " from " + r.Host + " " + r.Operation.String() + " on " +
		r.ResourceType.String() + ":" + r.PatternType.String() + ":" + r.ResourceName
}

// AclChange adds and removes rules in one step. Every rule it removes must
// exist and every rule it adds must not, so a change applies exactly as
// the controller computed it.
type AclChange struct {
	_msgpack struct{} `msgpack:",as_array"`
	Add      []AclRule
	Remove   []AclRule
}
