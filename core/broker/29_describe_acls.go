package broker

// DescribeAcls (key 29), v0–3 (v1 adds pattern types, KIP-290; v2 is
// flexible). The filter selects bindings as core/acl's Filter does; the
// answer groups them by resource pattern. It reads the metadata store, so
// a binding this broker just created is listed even before its watch
// delivered it.

import (
	"context"
	"sort"

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
	bindings, err := b.storedACLs(ctx)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = storeErrorCode(err), kmsg.StringPtr(err.Error())
		return reply(resp)
	}
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
