package acl

import (
	"errors"
	"net/netip"
	"strconv"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/plugins/sdk"
)

var (
	alice = sdk.Principal{Type: "User", Name: "alice"}
	bob   = sdk.Principal{Type: "User", Name: "bob"}
	admin = sdk.Principal{Type: "User", Name: "admin"}
	local = netip.MustParseAddr("127.0.0.1")
	other = netip.MustParseAddr("10.0.0.7")
)

const (
	topic   = kmsg.ACLResourceTypeTopic
	group   = kmsg.ACLResourceTypeGroup
	cluster = kmsg.ACLResourceTypeCluster
	literal = kmsg.ACLResourcePatternTypeLiteral
	prefix  = kmsg.ACLResourcePatternTypePrefixed
	allow   = kmsg.ACLPermissionTypeAllow
	deny    = kmsg.ACLPermissionTypeDeny
)

func bind(rt ResourceType, pt PatternType, name, principal, host string, op Operation, perm Permission) Binding {
	return Binding{ResourceType: rt, PatternType: pt, ResourceName: name, Principal: principal, Host: host, Operation: op, Permission: perm}
}

func TestAuthorize(t *testing.T) {
	a := New(Config{SuperUsers: []string{"User:admin"}})
	a.Set([]Binding{
		bind(topic, literal, "orders", "User:alice", "*", kmsg.ACLOperationRead, allow),
		bind(topic, prefix, "pay-", "User:alice", "*", kmsg.ACLOperationWrite, allow),
		bind(topic, prefix, "pay-secret", "User:alice", "*", kmsg.ACLOperationAll, deny),
		bind(topic, literal, "*", "User:*", "*", kmsg.ACLOperationDescribeConfigs, allow),
		bind(topic, literal, "local-only", "User:alice", "127.0.0.1", kmsg.ACLOperationAll, allow),
		bind(group, literal, "g", "User:alice", "*", kmsg.ACLOperationRead, allow),
		bind(group, literal, "g", "User:alice", "*", kmsg.ACLOperationDescribe, deny),
		bind(cluster, literal, ClusterName, "User:bob", "*", kmsg.ACLOperationAlterConfigs, allow),
	})
	for _, c := range []struct {
		p    sdk.Principal
		host netip.Addr
		rt   ResourceType
		name string
		op   Operation
		want bool
	}{
		{alice, local, topic, "orders", kmsg.ACLOperationRead, true},
		{alice, local, topic, "orders", kmsg.ACLOperationDescribe, true}, // READ implies DESCRIBE
		{alice, local, topic, "orders", kmsg.ACLOperationWrite, false},
		{alice, local, topic, "orders2", kmsg.ACLOperationRead, false}, // literal is exact
		{alice, local, topic, "pay-in", kmsg.ACLOperationWrite, true},  // prefixed
		{alice, local, topic, "pay-in", kmsg.ACLOperationDescribe, true},
		{alice, local, topic, "pay-secret-1", kmsg.ACLOperationWrite, false}, // DENY ALL wins
		{alice, local, topic, "pay", kmsg.ACLOperationWrite, false},
		{bob, local, topic, "anything", kmsg.ACLOperationDescribeConfigs, true}, // User:* and literal *
		{bob, local, topic, "anything", kmsg.ACLOperationAlterConfigs, false},
		{alice, local, topic, "local-only", kmsg.ACLOperationDelete, true},
		{alice, other, topic, "local-only", kmsg.ACLOperationDelete, false}, // host filter
		{alice, netip.Addr{}, topic, "local-only", kmsg.ACLOperationDelete, false},
		{alice, local, group, "g", kmsg.ACLOperationRead, true},
		{alice, local, group, "g", kmsg.ACLOperationDescribe, false},               // DENY DESCRIBE beats READ's implication
		{bob, local, cluster, ClusterName, kmsg.ACLOperationDescribeConfigs, true}, // ALTER_CONFIGS implies DESCRIBE_CONFIGS
		{bob, local, cluster, ClusterName, kmsg.ACLOperationDescribe, false},
		{bob, local, cluster, ClusterName, kmsg.ACLOperationClusterAction, false},
		{admin, other, cluster, ClusterName, kmsg.ACLOperationClusterAction, true}, // super user
		{admin, other, topic, "pay-secret", kmsg.ACLOperationWrite, true},
		{bob, local, topic, "unnamed", kmsg.ACLOperationRead, false}, // allow.everyone.if.no.acl.found off
	} {
		if got := a.Authorize(c.p, c.host, c.rt, c.name, c.op); got != c.want {
			t.Errorf("Authorize(%s, %s, %s %q, %s) = %v, want %v", c.p, c.host, c.rt, c.name, c.op, got, c.want)
		}
	}
	if !a.AuthorizeAny(alice, local, topic, kmsg.ACLOperationWrite) || a.AuthorizeAny(bob, local, topic, kmsg.ACLOperationWrite) {
		t.Error("AuthorizeAny(WRITE on some topic): want alice yes, bob no")
	}
}

func TestAllowEveryoneIfNoACLFound(t *testing.T) {
	a := New(Config{AllowIfNoACLFound: true})
	a.Set([]Binding{bind(topic, prefix, "kept-", "User:alice", "*", kmsg.ACLOperationRead, allow)})
	if !a.Authorize(bob, local, topic, "free", kmsg.ACLOperationWrite) {
		t.Error("a topic no ACL names is open to everyone")
	}
	if a.Authorize(bob, local, topic, "kept-1", kmsg.ACLOperationRead) {
		t.Error("a topic an ACL names is closed to those the ACLs do not allow")
	}
	if !a.Authorize(alice, local, topic, "kept-1", kmsg.ACLOperationRead) {
		t.Error("alice is allowed")
	}
}

func TestSetInvalidatesCache(t *testing.T) {
	a := New(Config{})
	b := bind(topic, literal, "t", "User:alice", "*", kmsg.ACLOperationWrite, allow)
	a.Set([]Binding{b})
	if !a.Authorize(alice, local, topic, "t", kmsg.ACLOperationWrite) {
		t.Fatal("allowed before removal")
	}
	a.Set(nil)
	if a.Authorize(alice, local, topic, "t", kmsg.ACLOperationWrite) {
		t.Fatal("a removed ACL still allows: the compiled cache was not invalidated")
	}
}

func TestValidateAndFilter(t *testing.T) {
	good := bind(topic, prefix, "a", "User:alice", "*", kmsg.ACLOperationRead, allow)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, b := range []Binding{
		bind(kmsg.ACLResourceTypeAny, literal, "a", "User:alice", "*", kmsg.ACLOperationRead, allow),
		bind(topic, kmsg.ACLResourcePatternTypeMatch, "a", "User:alice", "*", kmsg.ACLOperationRead, allow),
		bind(topic, literal, "a", "alice", "*", kmsg.ACLOperationRead, allow),
		bind(topic, literal, "a", "User:alice", "host.example", kmsg.ACLOperationRead, allow),
		bind(topic, literal, "a", "User:alice", "*", kmsg.ACLOperationAny, allow),
		bind(topic, literal, "a", "User:alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAny),
		bind(cluster, literal, "other", "User:alice", "*", kmsg.ACLOperationAlter, allow),
		bind(topic, prefix, "*", "User:alice", "*", kmsg.ACLOperationRead, allow),
	} {
		if err := b.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", b, err)
		}
	}
	name := "abc"
	match := Filter{ResourceType: topic, ResourceName: &name, PatternType: kmsg.ACLResourcePatternTypeMatch,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	if !match.Matches(good) {
		t.Error("MATCH abc selects PREFIXED a")
	}
	exact := match
	exact.PatternType = literal
	if exact.Matches(good) {
		t.Error("LITERAL abc does not select PREFIXED a")
	}
	got, err := Decode(Encode(good))
	if err != nil || got != good {
		t.Errorf("Decode(Encode) = %v, %v", got, err)
	}
}

func BenchmarkAuthorize(b *testing.B) {
	a := New(Config{SuperUsers: []string{"User:admin"}})
	var bs []Binding
	for i := range 200 {
		bs = append(bs, bind(topic, literal, "t"+string(rune('a'+i%26))+string(rune('a'+i/26)), "User:alice", "*", kmsg.ACLOperationWrite, allow))
	}
	bs = append(bs, bind(topic, prefix, "logs-", "User:alice", "*", kmsg.ACLOperationRead, allow),
		bind(topic, literal, "orders", "User:alice", "*", kmsg.ACLOperationWrite, allow))
	a.Set(bs)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if !a.Authorize(alice, local, topic, "orders", kmsg.ACLOperationWrite) ||
			!a.Authorize(alice, local, topic, "logs-7", kmsg.ACLOperationRead) {
			b.Fatal("denied")
		}
	}
}

// TestAuthorizeAllocatesNothing: a decision for a compiled principal
// allocates nothing (the produce/fetch path makes one per topic).
func TestAuthorizeAllocatesNothing(t *testing.T) {
	a := New(Config{})
	a.Set([]Binding{bind(topic, prefix, "logs-", "User:alice", "*", kmsg.ACLOperationRead, allow)})
	a.Authorize(alice, local, topic, "logs-1", kmsg.ACLOperationRead) // compile
	if n := testing.AllocsPerRun(100, func() {
		a.Authorize(alice, local, topic, "logs-1", kmsg.ACLOperationRead)
		a.Authorize(alice, local, topic, "other", kmsg.ACLOperationWrite)
	}); n != 0 {
		t.Errorf("Authorize allocates %v times per call pair", n)
	}
}

// TestConcurrentSetAndAuthorize: decisions for many principals race with
// Set (run with -race); after the last Set every decision follows it.
func TestConcurrentSetAndAuthorize(t *testing.T) {
	a := New(Config{})
	grant := []Binding{bind(topic, literal, "t", "User:*", "*", kmsg.ACLOperationRead, allow)}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				p := sdk.Principal{Type: "User", Name: strconv.Itoa(g*1000 + i%50)}
				a.Authorize(p, local, topic, "t", kmsg.ACLOperationRead)
			}
		}()
	}
	for i := range 200 {
		if i%2 == 0 {
			a.Set(grant)
		} else {
			a.Set(nil)
		}
	}
	a.Set(grant)
	close(done)
	wg.Wait()
	for i := range 50 {
		if !a.Authorize(sdk.Principal{Type: "User", Name: strconv.Itoa(i)}, local, topic, "t", kmsg.ACLOperationRead) {
			t.Fatalf("principal %d denied after the final Set allowed everyone", i)
		}
	}
}
