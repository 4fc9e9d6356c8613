package broker

// DeleteAcls (key 31), v0–3 (v1 adds pattern types, KIP-290; v2 is
// flexible). Each filter deletes the stored bindings it selects and
// answers them; a binding deleted meanwhile by someone else is not
// reported. Filters are applied in order against one listing. While the
// metadata store is unreachable every filter is refused with
// REQUEST_TIMED_OUT before anything is listed or deleted
// (beginStoreWrite).

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/acl"
	"github.com/vltava/vltava/core/wire"
	"github.com/vltava/vltava/plugins/sdk"
)

func handleDeleteACLs(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.DeleteACLsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	var bindings []acl.Binding
	wctx, cancel, listErr := b.beginStoreWrite(ctx)
	defer cancel()
	if b.authz != nil && listErr == nil {
		bindings, listErr = b.storedACLs(wctx)
	}
	deleted := map[string]bool{}
	for _, in := range r.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		f := acl.Filter{
			ResourceType: in.ResourceType, ResourceName: in.ResourceName, PatternType: in.ResourcePatternType,
			Principal: in.Principal, Host: in.Host, Operation: in.Operation, Permission: in.PermissionType,
		}
		if r.Version == 0 {
			f.PatternType = kmsg.ACLResourcePatternTypeLiteral
		}
		switch err := f.Validate(); {
		case b.authz == nil:
			res.ErrorCode = kerr.SecurityDisabled.Code
		case err != nil:
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
		case listErr != nil:
			res.ErrorCode, res.ErrorMessage = storeErrorCode(listErr), kmsg.StringPtr(listErr.Error())
		default:
			for _, bd := range bindings {
				if !f.Matches(bd) || deleted[bd.Key()] {
					continue
				}
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName, m.ResourcePatternType = bd.ResourceType, bd.ResourceName, bd.PatternType
				m.Principal, m.Host, m.Operation, m.PermissionType = bd.Principal, bd.Host, bd.Operation, bd.Permission
				_, err := b.store.Delete(wctx, &sdk.DeleteRequest{Key: bd.Key(), ExpectVersion: sdk.AnyVersion})
				switch {
				case errors.Is(err, sdk.ErrNotFound):
					continue // deleted meanwhile
				case err != nil:
					m.ErrorCode, m.ErrorMessage = storeErrorCode(err), kmsg.StringPtr(err.Error())
				default:
					deleted[bd.Key()] = true
					b.logger.Info("broker: ACL deleted", "acl", bd.String(), "by", whoOf(req).p.String())
				}
				res.MatchingACLs = append(res.MatchingACLs, m)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	if len(deleted) > 0 {
		b.awaitLocalACLs(ctx, nil, slices.Collect(maps.Keys(deleted)))
	}
	return reply(resp)
}
