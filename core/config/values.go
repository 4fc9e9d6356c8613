package config

import (
	"fmt"
	"reflect"
	"sort"
)

// Value is one broker config as a key and its value in text.
type Value struct {
	Name  string
	Value string
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
		out = append(out, Value{Name: key, Value: fmt.Sprint(v.Field(i).Interface())})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
