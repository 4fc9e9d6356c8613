package acl

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The kinds are Kafka's protocol enums, numbered as on the wire.
type (
	ResourceType = kmsg.ACLResourceType
	PatternType  = kmsg.ACLResourcePatternType
	Operation    = kmsg.ACLOperation
	Permission   = kmsg.ACLPermissionType
)

// ClusterName is the name of the one CLUSTER resource.
const ClusterName = "kafka-cluster"

// Wildcard is the literal resource name, principal and host that match
// every one.
const Wildcard = "*"

// ErrInvalid marks a binding or filter Kafka would refuse (INVALID_REQUEST
// or a per-entry error); test with errors.Is.
var ErrInvalid = errors.New("acl: invalid")

// Binding is one ACL: Permission of Principal from Host to do Operation on
// the resources the pattern (ResourceType, PatternType, ResourceName)
// names.
type Binding struct {
	ResourceType ResourceType `json:"resourceType"`
	ResourceName string       `json:"resourceName"`
	PatternType  PatternType  `json:"patternType"`
	Principal    string       `json:"principal"`
	Host         string       `json:"host"`
	Operation    Operation    `json:"operation"`
	Permission   Permission   `json:"permission"`
}

func (b Binding) String() string {
	return fmt.Sprintf("%s %s:%s:%s %s from %s %s", b.Permission, b.ResourceType, b.PatternType, b.ResourceName,
		b.Principal, b.Host, b.Operation)
}

// Validate reports whether b may be stored: concrete kinds (no ANY,
// MATCH or UNKNOWN), a "Type:name" principal, a host that is "*" or an IP
// address, and a CLUSTER resource named kafka-cluster.
func (b Binding) Validate() error {
	switch b.ResourceType {
	case kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeCluster,
		kmsg.ACLResourceTypeTransactionalId, kmsg.ACLResourceTypeDelegationToken:
	default:
		return fmt.Errorf("%w: resource type %s", ErrInvalid, b.ResourceType)
	}
	switch b.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed:
	default:
		return fmt.Errorf("%w: pattern type %s", ErrInvalid, b.PatternType)
	}
	if b.ResourceName == "" {
		return fmt.Errorf("%w: empty resource name", ErrInvalid)
	}
	if b.PatternType == kmsg.ACLResourcePatternTypePrefixed && b.ResourceName == Wildcard {
		return fmt.Errorf("%w: a PREFIXED pattern may not be %q", ErrInvalid, Wildcard)
	}
	if b.ResourceType == kmsg.ACLResourceTypeCluster &&
		(b.PatternType != kmsg.ACLResourcePatternTypeLiteral || b.ResourceName != ClusterName) {
		return fmt.Errorf("%w: the CLUSTER resource is LITERAL %s", ErrInvalid, ClusterName)
	}
	if i := strings.IndexByte(b.Principal, ':'); i <= 0 || i == len(b.Principal)-1 {
		return fmt.Errorf("%w: principal %q is not Type:name", ErrInvalid, b.Principal)
	}
	if b.Host != Wildcard {
		if _, err := netip.ParseAddr(b.Host); err != nil {
			return fmt.Errorf("%w: host %q is neither * nor an IP address", ErrInvalid, b.Host)
		}
	}
	if b.Operation < kmsg.ACLOperationAll || b.Operation > kmsg.ACLOperationIdempotentWrite {
		return fmt.Errorf("%w: operation %s", ErrInvalid, b.Operation)
	}
	if b.Permission != kmsg.ACLPermissionTypeAllow && b.Permission != kmsg.ACLPermissionTypeDeny {
		return fmt.Errorf("%w: permission %s", ErrInvalid, b.Permission)
	}
	return nil
}

// Prefix is the metadata store prefix of every binding.
const Prefix = "/acls/"

// Key is b's metadata store key (see the package doc).
func (b Binding) Key() string {
	return fmt.Sprintf("%s%d/%d/%s/%s/%s/%d/%d", Prefix, b.ResourceType, b.PatternType,
		url.PathEscape(b.ResourceName), url.PathEscape(b.Principal), url.PathEscape(b.Host),
		b.Operation, b.Permission)
}

// Encode renders b as its store value.
func Encode(b Binding) []byte {
	out, _ := json.Marshal(b) // plain fields: cannot fail
	return out
}

// Decode parses a store value and validates it.
func Decode(v []byte) (Binding, error) {
	var b Binding
	if err := json.Unmarshal(v, &b); err != nil {
		return Binding{}, fmt.Errorf("acl: bad stored binding: %w", err)
	}
	return b, b.Validate()
}

// Filter selects bindings, as DescribeAcls and DeleteAcls do: a nil string
// and the ANY kinds match everything; PatternType MATCH selects the
// bindings that would apply to the named resource (literal equal, literal
// "*", prefixes of the name).
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// ValidateFilter refuses a filter of UNKNOWN kinds.
func (f Filter) Validate() error {
	if f.ResourceType == kmsg.ACLResourceTypeUnknown || f.ResourceType > kmsg.ACLResourceTypeDelegationToken {
		return fmt.Errorf("%w: filter resource type %s", ErrInvalid, f.ResourceType)
	}
	if f.PatternType == kmsg.ACLResourcePatternTypeUnknown || f.PatternType > kmsg.ACLResourcePatternTypePrefixed {
		return fmt.Errorf("%w: filter pattern type %s", ErrInvalid, f.PatternType)
	}
	if f.Operation == kmsg.ACLOperationUnknown || f.Operation > kmsg.ACLOperationIdempotentWrite {
		return fmt.Errorf("%w: filter operation %s", ErrInvalid, f.Operation)
	}
	if f.Permission == kmsg.ACLPermissionTypeUnknown || f.Permission > kmsg.ACLPermissionTypeAllow {
		return fmt.Errorf("%w: filter permission %s", ErrInvalid, f.Permission)
	}
	return nil
}

// Matches reports whether the filter selects b.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != kmsg.ACLOperationAny && f.Operation != b.Operation {
		return false
	}
	if f.Permission != kmsg.ACLPermissionTypeAny && f.Permission != b.Permission {
		return false
	}
	switch f.PatternType {
	case kmsg.ACLResourcePatternTypeAny:
		return f.ResourceName == nil || *f.ResourceName == b.ResourceName
	case kmsg.ACLResourcePatternTypeMatch:
		if f.ResourceName == nil {
			return true
		}
		return patternMatches(b.PatternType, b.ResourceName, *f.ResourceName)
	default:
		return f.PatternType == b.PatternType && (f.ResourceName == nil || *f.ResourceName == b.ResourceName)
	}
}

// patternMatches reports whether a pattern names the resource name.
func patternMatches(pt PatternType, pattern, name string) bool {
	if pt == kmsg.ACLResourcePatternTypePrefixed {
		return strings.HasPrefix(name, pattern)
	}
	return pattern == Wildcard || pattern == name
}

// ParsePrincipals parses super.users: "User:admin;User:broker".
func ParsePrincipals(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if i := strings.IndexByte(p, ':'); i <= 0 || i == len(p)-1 {
			return nil, fmt.Errorf("acl: super.users: %q is not Type:name", p)
		}
		out = append(out, p)
	}
	return out, nil
}
