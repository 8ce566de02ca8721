// Package authz decides whether a principal may do an operation on a
// resource, from the authorization rules in the replicated log. It is a
// pure function of its inputs — rules, super users, the request — so every
// voter that holds the same rules gives the same answer, and it is tested
// as a table.
//
// The semantics are Kafka's (AclAuthorizer / StandardAuthorizer):
//   - a matching Deny rule wins over any Allow rule;
//   - a rule matches a principal when it names it or "User:*", a host when
//     it names the client's address or "*", an operation when it names it
//     or All, and a resource when it is a literal rule for the name or for
//     "*", or a prefixed rule whose name starts the resource's name;
//   - Describe is implied by Read, Write, Delete and Alter, and
//     DescribeConfigs by AlterConfigs;
//   - with no matching rule the answer is deny; super users are allowed
//     everything, Deny rules included.
//
// Filters (DescribeAcls, DeleteAcls) follow Kafka's AclBindingFilter: Any
// values match everything, and the Match pattern selects every rule that
// would apply to the named resource.
package authz
