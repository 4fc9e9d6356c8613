package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/vltava/vltava/core/config"
)

func isPluginConfigKey(key string) bool {
	for _, k := range config.PluginConfigKeys {
		if k.Key == key {
			return true
		}
	}
	return false
}

// nestPluginConfigs gathers flat keys under a plugin config key into its
// map, so .properties files (and YAML written with dotted keys) can set
// them: "metadata.store.config.path=/x" becomes
// metadata.store.config: {path: /x}, and
// "group.consumer.assignor.config.sticky.max.moves=3" becomes
// group.consumer.assignor.config: {sticky: {max.moves: 3}} (the plugin
// name ends at the first dot, so a name with dots needs YAML).
//
// A plugin config key given as a string holds JSON, as `vltavad config`
// prints it ("" is an empty map).
func nestPluginConfigs(m map[string]any) error {
	for _, pk := range config.PluginConfigKeys {
		if s, ok := m[pk.Key].(string); ok {
			if strings.TrimSpace(s) == "" {
				delete(m, pk.Key)
			} else {
				var v map[string]any
				if err := json.Unmarshal([]byte(s), &v); err != nil {
					return fmt.Errorf("%s: not a JSON object: %v", pk.Key, err)
				}
				m[pk.Key] = v
			}
		}
		for key, v := range m {
			rest, ok := strings.CutPrefix(key, pk.Key+".")
			if !ok {
				continue
			}
			delete(m, key)
			top, err := mapAt(m, pk.Key)
			if err != nil {
				return err
			}
			if pk.Depth == 1 {
				top[rest] = v
				continue
			}
			name, sub, ok := strings.Cut(rest, ".")
			if !ok {
				return fmt.Errorf("%s: want %s.<plugin>.<key>", key, pk.Key)
			}
			inner, err := mapAt(top, name)
			if err != nil {
				return fmt.Errorf("%s: %w", pk.Key, err)
			}
			inner[sub] = v
		}
	}
	return nil
}

// mapAt returns m[key] as a map, creating it if absent.
func mapAt(m map[string]any, key string) (map[string]any, error) {
	switch v := m[key].(type) {
	case nil:
		sub := map[string]any{}
		m[key] = sub
		return sub, nil
	case map[string]any:
		return v, nil
	}
	return nil, fmt.Errorf("%s: not a map", key)
}
