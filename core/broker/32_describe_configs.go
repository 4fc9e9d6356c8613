package broker

// DescribeConfigs v0-v4. v1 adds synonyms and config sources; v3 config
// types and documentation; v4 is flexible. Topic resources report every
// topic config with its effective value; broker resources report the
// broker's configs, which are read-only while it runs.

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/core/wire"
)

func handleDescribeConfigs(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.DescribeConfigsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range r.Resources {
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		entries, code, msg := b.configEntries(rr.ResourceType, rr.ResourceName)
		res.ErrorCode = code
		if code != 0 {
			res.ErrorMessage = kmsg.StringPtr(msg)
		}
		for _, e := range entries {
			if rr.ConfigNames != nil && !slices.Contains(rr.ConfigNames, e.name) {
				continue
			}
			res.Configs = append(res.Configs, e.describeConfig(r.Version, r.IncludeSynonyms, r.IncludeDocumentation))
		}
		resp.Resources = append(resp.Resources, res)
	}
	return reply(resp)
}

// configEntries lists a resource's configs, or the Kafka error for a
// resource that does not exist here.
func (b *Broker) configEntries(typ kmsg.ConfigResourceType, name string) ([]configEntry, errorCode, string) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		t := b.topic(name)
		if t == nil {
			return nil, kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %q does not exist", name)
		}
		return b.topicConfigEntries(t.overrides), 0, ""
	case kmsg.ConfigResourceTypeBroker:
		if code, msg := b.checkBrokerResource(name); code != 0 {
			return nil, code, msg
		}
		defaults := map[string]string{}
		for _, v := range config.BrokerValues(config.DefaultBroker()) {
			defaults[v.Name] = v.Value
		}
		var out []configEntry
		for _, v := range config.BrokerValues(b.cfg) {
			src := kmsg.ConfigSourceStaticBrokerConfig
			if defaults[v.Name] == v.Value {
				src = kmsg.ConfigSourceDefaultConfig
			}
			out = append(out, configEntry{name: v.Name, value: v.Value, sensitive: v.Sensitive, source: src, readOnly: true, typ: config.TypeString})
		}
		return out, 0, ""
	default:
		return nil, kerr.InvalidRequest.Code, fmt.Sprintf("config resource type %d is not supported", typ)
	}
}

// checkBrokerResource accepts this broker's ID, or the empty name (the
// cluster-wide default).
func (b *Broker) checkBrokerResource(name string) (errorCode, string) {
	if name == "" {
		return 0, ""
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return kerr.InvalidRequest.Code, fmt.Sprintf("broker resource name %q is not a node ID", name)
	}
	if int32(id) != b.cfg.NodeID {
		return kerr.InvalidRequest.Code, fmt.Sprintf("broker %d is not this broker (%d)", id, b.cfg.NodeID)
	}
	return 0, ""
}
