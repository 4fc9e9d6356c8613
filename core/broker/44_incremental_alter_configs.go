package broker

// IncrementalAlterConfigs v0-v1 (KIP-339). v1 is flexible. Each config is
// set, deleted (back to its default), or for list configs appended to or
// subtracted from.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/core/wire"
)

func handleIncrementalAlterConfigs(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.IncrementalAlterConfigsRequest)
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range r.Resources {
		res := kmsg.NewIncrementalAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		ops := rr.Configs
		code, msg := b.alterConfigs(ctx, rr.ResourceType, rr.ResourceName, r.ValidateOnly, func(cur map[string]string) (map[string]string, errorCode, string) {
			return applyIncremental(b, cur, ops)
		})
		res.ErrorCode = code
		if code != 0 {
			res.ErrorMessage = kmsg.StringPtr(msg)
		}
		resp.Resources = append(resp.Resources, res)
	}
	return reply(resp)
}

func applyIncremental(b *Broker, cur map[string]string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) (map[string]string, errorCode, string) {
	out := map[string]string{}
	for k, v := range cur {
		out[k] = v
	}
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Name] {
			return nil, kerr.InvalidRequest.Code, fmt.Sprintf("config %q appears more than once", op.Name)
		}
		seen[op.Name] = true
		key, ok := config.LookupTopicKey(op.Name)
		if !ok {
			return nil, kerr.InvalidConfig.Code, fmt.Sprintf("unknown topic config %q", op.Name)
		}
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if op.Value == nil {
				return nil, kerr.InvalidConfig.Code, fmt.Sprintf("config %q: null value", op.Name)
			}
			out[op.Name] = *op.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(out, op.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if key.Type != config.TypeList {
				return nil, kerr.InvalidConfig.Code, fmt.Sprintf("config %q is not a list; append and subtract apply to lists", op.Name)
			}
			if op.Value == nil {
				return nil, kerr.InvalidConfig.Code, fmt.Sprintf("config %q: null value", op.Name)
			}
			base, ok := out[op.Name]
			if !ok {
				base = key.BrokerDefault(b.cfg)
			}
			out[op.Name] = editList(base, *op.Value, op.Op == kmsg.IncrementalAlterConfigOpAppend)
		default:
			return nil, kerr.InvalidRequest.Code, fmt.Sprintf("config %q: unknown operation %d", op.Name, op.Op)
		}
	}
	return out, 0, ""
}

func editList(base, change string, add bool) string {
	var list []string
	for _, e := range strings.Split(base, ",") {
		if e = strings.TrimSpace(e); e != "" {
			list = append(list, e)
		}
	}
	for _, e := range strings.Split(change, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if add && !slices.Contains(list, e) {
			list = append(list, e)
		}
		if !add {
			list = slices.DeleteFunc(list, func(x string) bool { return x == e })
		}
	}
	return strings.Join(list, ",")
}

// alterConfigs applies edit to a resource's overrides, validates the
// result and stores it. Broker configs are read-only while it runs.
func (b *Broker) alterConfigs(ctx context.Context, typ kmsg.ConfigResourceType, name string, validateOnly bool, edit func(cur map[string]string) (map[string]string, errorCode, string)) (errorCode, string) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
	case kmsg.ConfigResourceTypeBroker:
		if code, msg := b.checkBrokerResource(name); code != 0 {
			return code, msg
		}
		return kerr.InvalidConfig.Code, "broker configs cannot be changed while the broker runs yet; set them in the config file and restart"
	default:
		return kerr.InvalidRequest.Code, fmt.Sprintf("config resource type %d is not supported", typ)
	}
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	t := b.topic(name)
	if t == nil {
		return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %q does not exist", name)
	}
	if !validateOnly {
		// Through the cluster, so every replica hears it (clusterconfigs.go).
		b.metaMu.Unlock()
		defer b.metaMu.Lock()
		return b.alterClusterTopicConfigs(ctx, name, edit)
	}
	next, code, msg := edit(t.overrides)
	if code != 0 {
		return code, msg
	}
	for k, v := range next {
		if err := config.CheckTopicValue(k, v); err != nil {
			return kerr.InvalidConfig.Code, err.Error()
		}
	}
	return 0, ""
}
