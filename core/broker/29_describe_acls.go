package broker

// DescribeAcls (key 29), v0–3 (v1 adds pattern types, KIP-290; v2 is
// flexible). The filter selects bindings as core/acl's Filter does; the
// answer groups them by resource pattern. As in Kafka it answers from
// this broker's own copy of the ACLs, the one it authorizes with, so a
// binding it lists is one it enforces; CreateAcls and DeleteAcls answer
// only once their change is in the copy of the broker that made it
// (awaitLocalACLs), so a client sees its own change here at once.

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/acl"
	"github.com/vltava/vltava/core/wire"
	"github.com/vltava/vltava/plugins/sdk"
)

func handleDescribeACLs(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.DescribeACLsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
	if b.authz == nil {
		resp.ErrorCode = kerr.SecurityDisabled.Code
		return reply(resp)
	}
	f := acl.Filter{
		ResourceType: r.ResourceType, ResourceName: r.ResourceName, PatternType: r.ResourcePatternType,
		Principal: r.Principal, Host: r.Host, Operation: r.Operation, Permission: r.PermissionType,
	}
	if r.Version == 0 {
		f.PatternType = kmsg.ACLResourcePatternTypeLiteral
	}
	if err := f.Validate(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
		return reply(resp)
	}
	bindings := b.authz.Bindings()
	type pattern struct {
		rt   acl.ResourceType
		name string
		pt   acl.PatternType
	}
	byPattern := map[pattern]int{}
	for _, bd := range bindings {
		if !f.Matches(bd) {
			continue
		}
		k := pattern{bd.ResourceType, bd.ResourceName, bd.PatternType}
		i, ok := byPattern[k]
		if !ok {
			i = len(resp.Resources)
			byPattern[k] = i
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = k.rt, k.name, k.pt
			resp.Resources = append(resp.Resources, res)
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = bd.Principal, bd.Host, bd.Operation, bd.Permission
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, a)
	}
	return reply(resp)
}

// awaitLocalACLs waits (at most 5 s, or until ctx ends) until this
// broker's authorizer has followed the store to the change just made:
// every key of present is in force and none of absent is. A late copy
// only delays the answer; the change is made either way.
func (b *Broker) awaitLocalACLs(ctx context.Context, present, absent []string) {
	if len(present)+len(absent) == 0 {
		return
	}
	awaitLocal(ctx, func() bool {
		keys := map[string]bool{}
		for _, bd := range b.authz.Bindings() {
			keys[bd.Key()] = true
		}
		return !slices.ContainsFunc(present, func(k string) bool { return !keys[k] }) &&
			!slices.ContainsFunc(absent, func(k string) bool { return keys[k] })
	})
}

// awaitLocal polls done every 5 ms until it holds, 5 s pass or ctx ends:
// the wait of a metadata change for this broker's own copy of it.
func awaitLocal(ctx context.Context, done func() bool) {
	deadline := time.Now().Add(5 * time.Second)
	for !done() && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// storedACLs lists the bindings in the metadata store, sorted by key;
// an undecodable value is skipped (Follow logs it).
func (b *Broker) storedACLs(ctx context.Context) ([]acl.Binding, error) {
	lr, err := b.store.List(ctx, &sdk.ListRequest{Prefix: acl.Prefix})
	if err != nil {
		return nil, err
	}
	sort.Slice(lr.KVs, func(i, j int) bool { return lr.KVs[i].Key < lr.KVs[j].Key })
	out := make([]acl.Binding, 0, len(lr.KVs))
	for _, kv := range lr.KVs {
		if bd, err := acl.Decode(kv.Value); err == nil {
			out = append(out, bd)
		}
	}
	return out, nil
}
