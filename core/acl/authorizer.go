package acl

import (
	"net/netip"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/plugins/sdk"
)

// Config is the authorizer's configuration (Kafka's super.users and
// allow.everyone.if.no.acl.found).
type Config struct {
	SuperUsers        []string // "User:admin"
	AllowIfNoACLFound bool
}

// Authorizer decides requests against the bindings it was last Set to.
// Its methods are safe for concurrent use.
type Authorizer struct {
	super        map[sdk.Principal]bool
	allowIfNoACL bool

	snap atomic.Pointer[snapshot]
	mu   sync.Mutex // serializes compilation into snap's cache
}

// maxCached bounds the compiled principals of one snapshot; past it the
// cache starts over (a principal is recompiled on its next request).
const maxCached = 4096

// snapshot is one immutable set of bindings and the ACLs compiled from it.
type snapshot struct {
	bindings []Binding
	// named indexes, for allow.everyone.if.no.acl.found, whether any
	// binding of any principal names a resource.
	named [numTypes]index
	// cache maps a principal to its compiled ACLs; replaced (copy on
	// write) under Authorizer.mu, read without a lock.
	cache atomic.Pointer[map[sdk.Principal]*compiled]
}

const numTypes = int(kmsg.ACLResourceTypeDelegationToken) + 1

// opMask is a set of operations, bit i for kmsg.ACLOperation i.
type opMask uint32

const allOps opMask = 1<<(kmsg.ACLOperationIdempotentWrite+1) - 1

func bit(op Operation) opMask { return 1 << op }

// grants is the set of operations an ALLOW of op grants.
func grants(op Operation) opMask {
	switch op {
	case kmsg.ACLOperationAll:
		return allOps
	case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
		return bit(op) | bit(kmsg.ACLOperationDescribe)
	case kmsg.ACLOperationAlterConfigs:
		return bit(op) | bit(kmsg.ACLOperationDescribeConfigs)
	}
	return bit(op)
}

// denies is the set of operations a DENY of op denies.
func denies(op Operation) opMask {
	if op == kmsg.ACLOperationAll {
		return allOps
	}
	return bit(op)
}

// rule is what the bindings of one pattern grant and deny from one host.
type rule struct {
	anyHost     bool
	host        netip.Addr
	allow, deny opMask
}

type rules []rule

// add merges a binding into the rules, one rule per host.
func (rs rules) add(b Binding) rules {
	anyHost := b.Host == Wildcard
	var host netip.Addr
	if !anyHost {
		host, _ = netip.ParseAddr(b.Host) // validated
		host = host.Unmap()
	}
	i := 0
	for ; i < len(rs); i++ {
		if rs[i].anyHost == anyHost && rs[i].host == host {
			break
		}
	}
	if i == len(rs) {
		rs = append(rs, rule{anyHost: anyHost, host: host})
	}
	if b.Permission == kmsg.ACLPermissionTypeAllow {
		rs[i].allow |= grants(b.Operation)
	} else {
		rs[i].deny |= denies(b.Operation)
	}
	return rs
}

// eval adds what the rules matching host grant and deny.
func (rs rules) eval(host netip.Addr, allow, deny *opMask) {
	for i := range rs {
		if rs[i].anyHost || rs[i].host == host {
			*allow |= rs[i].allow
			*deny |= rs[i].deny
		}
	}
}

type prefixRules struct {
	prefix string
	rules  rules
}

// typeACLs are one principal's compiled ACLs on one resource type.
type typeACLs struct {
	literal  map[string]rules
	wildcard rules
	prefixed []prefixRules
}

// compiled is one principal's ACLs.
type compiled struct {
	types [numTypes]typeACLs
}

func (t *typeACLs) add(b Binding) {
	switch {
	case b.PatternType == kmsg.ACLResourcePatternTypePrefixed:
		for i := range t.prefixed {
			if t.prefixed[i].prefix == b.ResourceName {
				t.prefixed[i].rules = t.prefixed[i].rules.add(b)
				return
			}
		}
		t.prefixed = append(t.prefixed, prefixRules{prefix: b.ResourceName, rules: rules(nil).add(b)})
	case b.ResourceName == Wildcard:
		t.wildcard = t.wildcard.add(b)
	default:
		if t.literal == nil {
			t.literal = map[string]rules{}
		}
		t.literal[b.ResourceName] = t.literal[b.ResourceName].add(b)
	}
}

func (t *typeACLs) eval(name string, host netip.Addr) (allow, deny opMask) {
	t.wildcard.eval(host, &allow, &deny)
	if rs, ok := t.literal[name]; ok {
		rs.eval(host, &allow, &deny)
	}
	for i := range t.prefixed {
		if strings.HasPrefix(name, t.prefixed[i].prefix) {
			t.prefixed[i].rules.eval(host, &allow, &deny)
		}
	}
	return allow, deny
}

// index records which resources some binding names.
type index struct {
	literal  map[string]bool
	wildcard bool
	prefixes []string
}

func (x *index) names(name string) bool {
	if x.wildcard || x.literal[name] {
		return true
	}
	for _, p := range x.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// New returns an authorizer with no bindings. A super user that does not
// parse as Type:name is ignored (Validate the config first).
func New(cfg Config) *Authorizer {
	a := &Authorizer{super: map[sdk.Principal]bool{}, allowIfNoACL: cfg.AllowIfNoACLFound}
	for _, s := range cfg.SuperUsers {
		if p, ok := parsePrincipal(s); ok {
			a.super[p] = true
		}
	}
	a.Set(nil)
	return a
}

func parsePrincipal(s string) (sdk.Principal, bool) {
	typ, name, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || typ == "" || name == "" {
		return sdk.Principal{}, false
	}
	return sdk.Principal{Type: typ, Name: name}, true
}

// Set replaces every binding; compiled ACLs are dropped.
func (a *Authorizer) Set(bindings []Binding) {
	s := &snapshot{bindings: append([]Binding(nil), bindings...)}
	for _, b := range s.bindings {
		if int(b.ResourceType) >= numTypes {
			continue
		}
		x := &s.named[b.ResourceType]
		switch {
		case b.PatternType == kmsg.ACLResourcePatternTypePrefixed:
			x.prefixes = append(x.prefixes, b.ResourceName)
		case b.ResourceName == Wildcard:
			x.wildcard = true
		default:
			if x.literal == nil {
				x.literal = map[string]bool{}
			}
			x.literal[b.ResourceName] = true
		}
	}
	empty := map[sdk.Principal]*compiled{}
	s.cache.Store(&empty)
	a.mu.Lock()
	a.snap.Store(s)
	a.mu.Unlock()
}

// Bindings returns the bindings in force, sorted by key.
func (a *Authorizer) Bindings() []Binding {
	out := append([]Binding(nil), a.snap.Load().bindings...)
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

// SuperUser reports whether p is in super.users.
func (a *Authorizer) SuperUser(p sdk.Principal) bool { return a.super[p] }

// Authorize reports whether p, connected from host, may do op on the
// resource of type rt named name. host is the client's address (the zero
// netip.Addr matches only "*" hosts). It takes no lock and allocates
// nothing once p's ACLs are compiled.
func (a *Authorizer) Authorize(p sdk.Principal, host netip.Addr, rt ResourceType, name string, op Operation) bool {
	if a.super[p] {
		return true
	}
	if int(rt) >= numTypes || rt < kmsg.ACLResourceTypeTopic {
		return false
	}
	s := a.snap.Load()
	c := a.compiledFor(s, p)
	allow, deny := c.types[rt].eval(name, host)
	if deny&bit(op) != 0 {
		return false
	}
	if allow&bit(op) != 0 {
		return true
	}
	return a.allowIfNoACL && !s.named[rt].names(name)
}

// AuthorizeAny reports whether p may do op on some resource of type rt:
// it holds an ALLOW for op (or one implying it) on a pattern of the type
// and no DENY of op on every resource of the type (literal "*"). Kafka
// uses it for InitProducerId without a transactional ID (KIP-679:
// WRITE on any topic stands for IDEMPOTENT_WRITE on the cluster).
func (a *Authorizer) AuthorizeAny(p sdk.Principal, host netip.Addr, rt ResourceType, op Operation) bool {
	if a.super[p] {
		return true
	}
	if int(rt) >= numTypes || rt < kmsg.ACLResourceTypeTopic {
		return false
	}
	t := &a.compiledFor(a.snap.Load(), p).types[rt]
	var wa, wd opMask
	t.wildcard.eval(host, &wa, &wd)
	if wd&bit(op) != 0 {
		return false
	}
	if wa&bit(op) != 0 {
		return true
	}
	for _, rs := range t.literal {
		var al, de opMask
		rs.eval(host, &al, &de)
		if al&bit(op) != 0 && de&bit(op) == 0 {
			return true
		}
	}
	for i := range t.prefixed {
		var al, de opMask
		t.prefixed[i].rules.eval(host, &al, &de)
		if al&bit(op) != 0 && de&bit(op) == 0 {
			return true
		}
	}
	return false
}

// compiledFor returns p's compiled ACLs in s, compiling them on a miss.
func (a *Authorizer) compiledFor(s *snapshot, p sdk.Principal) *compiled {
	if c, ok := (*s.cache.Load())[p]; ok {
		return c
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := *s.cache.Load()
	if c, ok := cur[p]; ok {
		return c
	}
	c := compile(s.bindings, p)
	next := make(map[sdk.Principal]*compiled, len(cur)+1)
	if len(cur) < maxCached {
		for k, v := range cur {
			next[k] = v
		}
	}
	next[p] = c
	s.cache.Store(&next)
	return c
}

// compile gathers the bindings naming p or p's type's wildcard ("User:*").
func compile(bindings []Binding, p sdk.Principal) *compiled {
	name := p.String()
	wild := p.Type + ":" + Wildcard
	c := &compiled{}
	for _, b := range bindings {
		if (b.Principal != name && b.Principal != wild) || int(b.ResourceType) >= numTypes {
			continue
		}
		c.types[b.ResourceType].add(b)
	}
	return c
}
