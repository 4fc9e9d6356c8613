package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
)

// Value is one broker config as a key and its value in text.
type Value struct {
	Name  string
	Value string
	// Sensitive marks a secret (a password, a private key): Value is
	// empty, as Kafka hides such values from DescribeConfigs.
	Sensitive bool
}

// BrokerValues lists every broker config key with its value, sorted by key.
func BrokerValues(b Broker) []Value {
	v := reflect.ValueOf(b)
	t := v.Type()
	var out []Value
	for i := 0; i < t.NumField(); i++ {
		key := t.Field(i).Tag.Get("mapstructure")
		if key == "" || key == "-" {
			continue
		}
		if t.Field(i).Tag.Get("sensitive") == "true" {
			out = append(out, Value{Name: key, Sensitive: true})
			continue
		}
		out = append(out, Value{Name: key, Value: formatValue(v.Field(i))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// formatValue renders a config value; maps (plugin configs) as JSON, an
// empty one as "".
func formatValue(v reflect.Value) string {
	if v.Kind() == reflect.Map {
		if v.Len() == 0 {
			return ""
		}
		if b, err := json.Marshal(v.Interface()); err == nil {
			return string(b)
		}
	}
	return fmt.Sprint(v.Interface())
}
