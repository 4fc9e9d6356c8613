package broker

// DescribeUserScramCredentials (key 50), v0 (flexible). KIP-554.
//
// Lists the SCRAM mechanisms and iteration counts stored for users (the
// simple authenticator's credentials, plugins/authn/scram), never salts
// or keys. No user list (null or empty) describes every user with a
// credential; a named user without one gets RESOURCE_NOT_FOUND, a user
// named twice DUPLICATE_RESOURCE, as Kafka answers. Results are sorted
// by user name, credential infos by mechanism.

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/wire"
	"github.com/vltava/vltava/plugins/authn/scram"
	"github.com/vltava/vltava/plugins/sdk"
)

func handleDescribeUserSCRAMCredentials(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	list, err := b.store.List(ctx, &sdk.ListRequest{Prefix: scram.Prefix})
	if err != nil {
		resp.ErrorCode = storeErrorCode(err)
		resp.ErrorMessage = kmsg.StringPtr("reading credentials: " + err.Error())
		return reply(resp)
	}
	creds := map[string][]kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo{}
	var users []string
	for _, kv := range list.KVs {
		user, mech, ok := scram.ParseKey(kv.Key)
		if !ok {
			continue
		}
		c, err := scram.Decode(mech, kv.Value)
		if err != nil {
			b.logger.Warn("broker: unreadable SCRAM credential", "user", user, "mechanism", mech, "err", err)
			continue
		}
		if _, seen := creds[user]; !seen {
			users = append(users, user)
		}
		creds[user] = append(creds[user], kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo{
			Mechanism: scram.KafkaType(mech), Iterations: int32(c.Iterations),
		})
	}
	if len(r.Users) > 0 {
		users = users[:0]
		count := map[string]int{}
		for _, u := range r.Users {
			if count[u.Name]++; count[u.Name] == 1 {
				users = append(users, u.Name)
			}
		}
		for _, u := range users {
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.User = u
			switch {
			case count[u] > 1:
				res.ErrorCode = kerr.DuplicateResource.Code
				res.ErrorMessage = kmsg.StringPtr("user " + u + " is named more than once")
			case len(creds[u]) == 0:
				res.ErrorCode = kerr.ResourceNotFound.Code
				res.ErrorMessage = kmsg.StringPtr("attempt to describe a user credential that does not exist")
			default:
				res.CredentialInfos = sortedInfos(creds[u])
			}
			resp.Results = append(resp.Results, res)
		}
		return reply(resp)
	}
	slices.Sort(users)
	for _, u := range users {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User, res.CredentialInfos = u, sortedInfos(creds[u])
		resp.Results = append(resp.Results, res)
	}
	return reply(resp)
}

func sortedInfos(in []kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo) []kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo {
	slices.SortFunc(in, func(a, b kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo) int {
		return strings.Compare(scram.MechanismOf(a.Mechanism), scram.MechanismOf(b.Mechanism))
	})
	return in
}
