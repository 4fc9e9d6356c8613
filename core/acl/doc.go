// Package acl is Kafka's authorization model (KIP-11, KIP-290): ACL
// bindings, how they match a request, and an Authorizer that answers
// "may this principal do this operation on this resource" without a
// plugin call or an allocation once the principal's ACLs are compiled.
//
// # Model
//
// A Binding allows or denies one principal ("User:alice", or "User:*" for
// every principal) from one host ("*" or an IP address) one Operation on
// the resources one pattern names: a LITERAL name ("orders", or "*" for
// every resource of the type) or a PREFIXED one ("orders-" names every
// resource whose name starts with it). A decision for (principal, host,
// resource, operation):
//
//  1. a super user (super.users) is allowed everything;
//  2. a DENY binding that matches, for the operation or ALL, denies;
//  3. an ALLOW binding that matches, for the operation or one implying
//     it, allows: ALL implies every operation; READ, WRITE, DELETE and
//     ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS;
//  4. when no binding of any principal names the resource and
//     allow.everyone.if.no.acl.found is set, the request is allowed;
//  5. otherwise it is denied.
//
// DENY wins: implications apply to ALLOW only, so DENY DESCRIBE does not
// deny READ.
//
// # Cache
//
// The Authorizer holds an immutable snapshot of every binding. A decision
// looks the principal up in the snapshot's copy-on-write map of compiled
// ACLs (built on the principal's first request, from the bindings naming
// the principal or User:*), then the resource name in the compiled ACLs
// of its type: a map for literal names, a list for prefixes. Set replaces
// the snapshot, dropping every compiled entry.
//
// # Storage
//
// Bindings live in the metadata store, one key per binding:
//
//	/acls/<resource type>/<pattern type>/<name>/<principal>/<host>/<operation>/<permission>
//
// the numeric kinds as Kafka's protocol numbers them, the strings
// path-escaped (net/url PathEscape); the value is the binding as JSON.
// Two identical bindings are one key, as in Kafka. Follow keeps an
// Authorizer equal to the store with a watch on the prefix.
//
// # Locks
//
// Authorizer.mu serializes the compilation of a principal's ACLs into the
// snapshot's cache; decisions take no lock.
package acl
