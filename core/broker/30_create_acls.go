package broker

// CreateAcls (key 30), v0–3 (v1 adds pattern types, KIP-290; v2 is
// flexible). Each creation is one key in the metadata store (core/acl's
// layout), written unconditionally: creating a binding that exists
// succeeds and changes nothing, as in Kafka. Every broker follows the
// keys (acl.Authorizer.Follow), so a binding is enforced cluster-wide
// within a watch round trip. Without an authorizer the API answers
// SECURITY_DISABLED, as Kafka's does. While the metadata store is
// unreachable every creation is refused with REQUEST_TIMED_OUT before
// any is written (beginStoreWrite).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/acl"
	"github.com/vltava/vltava/core/wire"
	"github.com/vltava/vltava/plugins/sdk"
)

func handleCreateACLs(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.CreateACLsRequest)
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	var created []string
	wctx, cancel, refused := b.beginStoreWrite(ctx)
	defer cancel()
	for _, c := range r.Creations {
		res := kmsg.NewCreateACLsResponseResult()
		bd := acl.Binding{
			ResourceType: c.ResourceType, ResourceName: c.ResourceName, PatternType: c.ResourcePatternType,
			Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType,
		}
		if r.Version == 0 {
			bd.PatternType = kmsg.ACLResourcePatternTypeLiteral
		}
		switch err := bd.Validate(); {
		case b.authz == nil:
			res.ErrorCode = kerr.SecurityDisabled.Code
		case err != nil:
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
		case refused != nil:
			res.ErrorCode, res.ErrorMessage = storeErrorCode(refused), kmsg.StringPtr(refused.Error())
		default:
			if _, err := b.store.Put(wctx, &sdk.PutRequest{Key: bd.Key(), Value: acl.Encode(bd), ExpectVersion: sdk.AnyVersion}); err != nil {
				res.ErrorCode, res.ErrorMessage = storeErrorCode(err), kmsg.StringPtr(err.Error())
			} else {
				b.logger.Info("broker: ACL created", "acl", bd.String(), "by", whoOf(req).p.String())
				created = append(created, bd.Key())
			}
		}
		resp.Results = append(resp.Results, res)
	}
	b.awaitLocalACLs(ctx, created, nil)
	return reply(resp)
}
