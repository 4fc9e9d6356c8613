package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/quota"
	"github.com/vltava/vltava/core/wire"
	"github.com/vltava/vltava/plugins/sdk"
)

// AlterClientQuotas (key 49), v0–1 (v1 is flexible). KIP-546.
//
// Each entry sets or removes quota values of one entity (user, client-id
// or both; a nil name is the type's default). The entity's key in the
// metadata store is read, changed and written with compare-and-set, so
// two concurrent changes to one entity both take effect; a key left with
// no values is deleted. Every broker follows the keys (core/quota), so a
// change is enforced cluster-wide within a watch round trip. Entries
// succeed or fail independently. While the metadata store is unreachable
// every entry is refused with REQUEST_TIMED_OUT before any is written
// (beginStoreWrite).

func handleAlterClientQuotas(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.AlterClientQuotasRequest)
	resp := r.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	wctx, cancel, refused := b.beginStoreWrite(ctx)
	defer cancel()
	for _, in := range r.Entries {
		out := kmsg.AlterClientQuotasResponseEntry{}
		for _, e := range in.Entity {
			out.Entity = append(out.Entity, kmsg.AlterClientQuotasResponseEntryEntity{Type: e.Type, Name: e.Name})
		}
		e, ops, err := parseQuotaAlteration(in)
		switch {
		case err != nil || r.ValidateOnly:
		case refused != nil:
			err = refused
		default:
			var now quota.Values
			if now, err = b.alterQuota(wctx, e, ops); err == nil {
				b.awaitLocalQuota(ctx, e, now)
			}
		}
		if err != nil {
			var ke *kerr.Error
			if errors.As(err, &ke) {
				out.ErrorCode = ke.Code
			} else {
				out.ErrorCode = storeErrorCode(err)
			}
			msg := err.Error()
			out.ErrorMessage = &msg
		}
		resp.Entries = append(resp.Entries, out)
	}
	return reply(resp)
}

// quotaOp is one validated change: set Kind to Value, or remove it.
type quotaOp struct {
	kind   quota.Kind
	value  float64
	remove bool
}

func parseQuotaAlteration(in kmsg.AlterClientQuotasRequestEntry) (quota.Entity, []quotaOp, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{kerr.InvalidRequest}, args...)...)
	}
	var e quota.Entity
	for _, c := range in.Entity {
		p := quota.DefaultPart
		if c.Name != nil {
			if *c.Name == "" {
				return e, nil, invalid("an empty %s name (a nil name is the default)", c.Type)
			}
			p = quota.Named(*c.Name)
		}
		var dst *quota.Part
		switch c.Type {
		case quota.TypeUser:
			dst = &e.User
		case quota.TypeClientID:
			dst = &e.Client
		default:
			return e, nil, invalid("entity type %q is not supported (user, client-id are)", c.Type)
		}
		if dst.Set {
			return e, nil, invalid("entity type %q appears twice", c.Type)
		}
		*dst = p
	}
	if !e.User.Set && !e.Client.Set {
		return e, nil, invalid("no entity")
	}
	seen := map[string]bool{}
	var ops []quotaOp
	for _, op := range in.Ops {
		if !quota.ValidKind(op.Key) {
			return e, nil, invalid("unknown quota %q (producer_byte_rate, consumer_byte_rate, request_percentage are known)", op.Key)
		}
		if seen[op.Key] {
			return e, nil, invalid("quota %q changed twice", op.Key)
		}
		seen[op.Key] = true
		if !op.Remove && (op.Value <= 0 || math.IsNaN(op.Value) || math.IsInf(op.Value, 0)) {
			return e, nil, invalid("quota %s must be a positive number, not %v", op.Key, op.Value)
		}
		ops = append(ops, quotaOp{kind: quota.Kind(op.Key), value: op.Value, remove: op.Remove})
	}
	return e, ops, nil
}

// alterQuota applies ops to the entity's stored values with
// compare-and-set, retrying a few times against concurrent writers, and
// returns the values stored (empty: none).
func (b *Broker) alterQuota(ctx context.Context, e quota.Entity, ops []quotaOp) (quota.Values, error) {
	key := e.Key()
	for attempt := 0; ; attempt++ {
		cur := quota.Values{}
		version := sdk.MustNotExist
		got, err := b.store.Get(ctx, &sdk.GetRequest{Key: key})
		switch {
		case err == nil:
			if cur, err = quota.Decode(got.Value); err != nil {
				cur = quota.Values{} // unreadable: overwrite it
			}
			version = got.Version
		case !errors.Is(err, sdk.ErrNotFound):
			return nil, err
		}
		for _, op := range ops {
			if op.remove {
				delete(cur, op.kind)
			} else {
				cur[op.kind] = op.value
			}
		}
		switch {
		case len(cur) == 0 && version == sdk.MustNotExist:
			return cur, nil
		case len(cur) == 0:
			_, err = b.store.Delete(ctx, &sdk.DeleteRequest{Key: key, ExpectVersion: version})
		default:
			_, err = b.store.Put(ctx, &sdk.PutRequest{Key: key, Value: quota.Encode(cur), ExpectVersion: version})
		}
		if err == nil || !errors.Is(err, sdk.ErrVersionMismatch) || attempt >= 5 {
			return cur, err
		}
	}
}

// awaitLocalQuota waits (at most 5 s, or until ctx ends) until this
// broker's quota manager has followed the store to want for e, so the
// change is in force here, and listed by DescribeClientQuotas, when the
// client gets its answer. Other brokers follow asynchronously, as in
// Kafka.
func (b *Broker) awaitLocalQuota(ctx context.Context, e quota.Entity, want quota.Values) {
	awaitLocal(ctx, func() bool { return maps.Equal(b.quotas.Quotas()[e], want) })
}
