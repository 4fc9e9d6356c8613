package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/quota"
	"github.com/vltava/vltava/core/wire"
)

// DescribeClientQuotas (key 48), v0–1 (v1 is flexible). KIP-546.
//
// Each filter component names an entity type (user, client-id) and
// matches an exact name (0), the type's default (1), or any entity of
// the type (2); an entity matches when every component does, and with
// Strict it may have no other types. The answer is read from the metadata
// store, so it shows what AlterClientQuotas wrote even before this
// broker's enforcement has caught up.

func handleDescribeClientQuotas(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.DescribeClientQuotasRequest)
	resp := r.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	fail := func(code int16, msg string) (*wire.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return reply(resp)
	}
	seen := map[string]bool{}
	for _, c := range r.Components {
		if c.EntityType != quota.TypeUser && c.EntityType != quota.TypeClientID {
			return fail(kerr.InvalidRequest.Code, fmt.Sprintf("entity type %q is not supported (user, client-id are)", c.EntityType))
		}
		if seen[c.EntityType] {
			return fail(kerr.InvalidRequest.Code, fmt.Sprintf("entity type %q appears twice in the filter", c.EntityType))
		}
		seen[c.EntityType] = true
		if c.MatchType == kmsg.QuotasMatchTypeExact && c.Match == nil {
			return fail(kerr.InvalidRequest.Code, "an exact match needs a name")
		}
		if c.MatchType < kmsg.QuotasMatchTypeExact || c.MatchType > kmsg.QuotasMatchTypeAny {
			return fail(kerr.InvalidRequest.Code, fmt.Sprintf("unknown match type %d", c.MatchType))
		}
	}
	// As in Kafka, the answer is this broker's own copy, the quotas it
	// enforces (AlterClientQuotas answers once its change is in it).
	all := b.quotas.Quotas()
	entities := slices.SortedFunc(maps.Keys(all), func(x, y quota.Entity) int { return strings.Compare(x.Key(), y.Key()) })
	for _, e := range entities {
		vs := all[e]
		if !quotaFilterMatches(r, e) {
			continue
		}
		entry := kmsg.DescribeClientQuotasResponseEntry{Entity: describeEntity(e)}
		for _, k := range quota.Kinds {
			if v, ok := vs[k]; ok {
				entry.Values = append(entry.Values, kmsg.DescribeClientQuotasResponseEntryValue{Key: string(k), Value: v})
			}
		}
		resp.Entries = append(resp.Entries, entry)
	}
	sort.SliceStable(resp.Entries, func(i, j int) bool { return len(resp.Entries[i].Entity) < len(resp.Entries[j].Entity) })
	return reply(resp)
}

func quotaFilterMatches(r *kmsg.DescribeClientQuotasRequest, e quota.Entity) bool {
	typed := map[string]quota.Part{quota.TypeUser: e.User, quota.TypeClientID: e.Client}
	for _, c := range r.Components {
		p := typed[c.EntityType]
		if !p.Set {
			return false
		}
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if p.Default || p.Name != *c.Match {
				return false
			}
		case kmsg.QuotasMatchTypeDefault:
			if !p.Default {
				return false
			}
		}
	}
	if r.Strict {
		n := 0
		if e.User.Set {
			n++
		}
		if e.Client.Set {
			n++
		}
		return n == len(r.Components)
	}
	return true
}

func entityName(p quota.Part) *string {
	if p.Default {
		return nil
	}
	n := p.Name
	return &n
}

func describeEntity(e quota.Entity) []kmsg.DescribeClientQuotasResponseEntryEntity {
	var out []kmsg.DescribeClientQuotasResponseEntryEntity
	if e.User.Set {
		out = append(out, kmsg.DescribeClientQuotasResponseEntryEntity{Type: quota.TypeUser, Name: entityName(e.User)})
	}
	if e.Client.Set {
		out = append(out, kmsg.DescribeClientQuotasResponseEntryEntity{Type: quota.TypeClientID, Name: entityName(e.Client)})
	}
	return out
}
