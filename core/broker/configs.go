package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vltava/vltava/core/config"
)

// configEntry is one config as DescribeConfigs and CreateTopics report it.
type configEntry struct {
	name     string
	value    string
	source   kmsg.ConfigSource
	readOnly bool
	// sensitive hides the value (a password, a private key): Kafka
	// answers it null with IsSensitive.
	sensitive bool
	typ       config.Type
	doc       string
	synonyms  []configSynonym
}

type configSynonym struct {
	name   string
	value  string
	source kmsg.ConfigSource
}

// topicConfigEntries describes every topic config of a topic with the given
// overrides: the override if set, else the broker's value, with Kafka's
// sources and synonyms (topic override, then broker key, then default).
func (b *Broker) topicConfigEntries(overrides map[string]string) []configEntry {
	defaults := config.DefaultBroker()
	var out []configEntry
	for _, k := range config.TopicKeys() {
		brokerVal := k.BrokerDefault(b.cfg)
		brokerSource := kmsg.ConfigSourceDefaultConfig
		if brokerVal != k.BrokerDefault(defaults) {
			brokerSource = kmsg.ConfigSourceStaticBrokerConfig
		}
		e := configEntry{name: k.Name, value: brokerVal, source: brokerSource, typ: k.Type, doc: k.Doc}
		if v, ok := overrides[k.Name]; ok {
			e.value, e.source = v, kmsg.ConfigSourceDynamicTopicConfig
			e.synonyms = append(e.synonyms, configSynonym{k.Name, v, kmsg.ConfigSourceDynamicTopicConfig})
		}
		if brokerSource == kmsg.ConfigSourceStaticBrokerConfig {
			e.synonyms = append(e.synonyms, configSynonym{k.BrokerKey, brokerVal, brokerSource})
		}
		e.synonyms = append(e.synonyms, configSynonym{k.BrokerKey, k.BrokerDefault(defaults), kmsg.ConfigSourceDefaultConfig})
		out = append(out, e)
	}
	return out
}

// describeConfig turns an entry into the DescribeConfigs form for version v.
func (e configEntry) describeConfig(v int16, synonyms, docs bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = e.name
	c.Value = kmsg.StringPtr(e.value)
	if e.sensitive {
		c.Value, c.IsSensitive = nil, true
	}
	c.ReadOnly = e.readOnly
	c.Source = e.source
	c.IsDefault = e.source == kmsg.ConfigSourceDefaultConfig
	if v >= 3 {
		c.ConfigType = kmsg.ConfigType(e.typ)
		if docs {
			c.Documentation = kmsg.StringPtr(e.doc)
		}
	}
	if v >= 1 && synonyms {
		for _, s := range e.synonyms {
			cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			cs.Name, cs.Value, cs.Source = s.name, kmsg.StringPtr(s.value), s.source
			c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
		}
	}
	return c
}
