package broker

// AlterConfigs v0-v2. v2 is flexible. AlterConfigs replaces a resource's
// whole set of overrides: keys not named return to their defaults.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vltava/vltava/core/wire"
)

func handleAlterConfigs(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.AlterConfigsRequest)
	resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range r.Resources {
		res := kmsg.NewAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		set := map[string]*string{}
		for _, c := range rr.Configs {
			set[c.Name] = c.Value
		}
		code, msg := b.alterConfigs(ctx, rr.ResourceType, rr.ResourceName, r.ValidateOnly, func(map[string]string) (map[string]string, errorCode, string) {
			out := map[string]string{}
			for k, v := range set {
				if v == nil {
					return nil, errInvalidConfig, "config " + k + " has a null value"
				}
				out[k] = *v
			}
			return out, 0, ""
		})
		res.ErrorCode = code
		if code != 0 {
			res.ErrorMessage = kmsg.StringPtr(msg)
		}
		resp.Resources = append(resp.Resources, res)
	}
	return reply(resp)
}
