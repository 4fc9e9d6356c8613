package broker

// ApiVersions v0-v4. v3 adds client software name and version (KIP-511)
// and flexible encoding; a request newer than we serve gets
// UNSUPPORTED_VERSION in a v0 response so the client can retry lower.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vltava/vltava/core/wire"
)

func handleAPIVersions(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	resp := kmsg.NewPtrApiVersionsResponse()
	a := apiByKey[18]
	resp.Version = req.Version
	if req.Version > a.max || req.Body == nil {
		resp.Version = 0
		resp.ErrorCode = kerr.UnsupportedVersion.Code
	} else if r := req.Body.(*kmsg.ApiVersionsRequest); r.Version >= 3 && !validSoftware(r.ClientSoftwareName, r.ClientSoftwareVersion) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply(resp)
	}
	for _, a := range apis {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return reply(resp)
}

// validSoftware applies KIP-511's rule for client software name and
// version: letters, digits, '.', '-' and must start and end with a letter
// or digit.
func validSoftware(name, version string) bool {
	ok := func(s string) bool {
		if s == "" {
			return false
		}
		for i, c := range s {
			alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
			if !alnum && (c != '.' && c != '-' || i == 0 || i == len(s)-1) {
				return false
			}
		}
		return true
	}
	return ok(name) && ok(version)
}
