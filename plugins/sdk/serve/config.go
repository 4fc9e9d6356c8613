package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/go-viper/mapstructure/v2"

	"github.com/vltava/vltava/plugins/sdk"
)

// Configurer is implemented by a plugin that takes configuration. The
// host calls Configure once, right after the process starts and before
// any other call, with the map the broker config gives the plugin (nil
// when it gives none). A returned error fails the broker's startup; it
// should name the offending key, as DecodeConfig's errors do.
type Configurer interface {
	Configure(ctx context.Context, raw map[string]any) error
}

// DecodeConfig decodes a plugin's raw config map into the struct cfg
// points to, matching keys to `mapstructure:"key"` tags (or field names,
// case-insensitively). Numbers and booleans may be given as strings.
// Keys the struct does not have are an error, as are values of the wrong
// type; the error names the key and wraps sdk.ErrInvalidArgument.
//
//	type config struct {
//		Tokens []string `mapstructure:"tokens"`
//		Realm  string   `mapstructure:"realm"`
//	}
//	func (a *auth) Configure(ctx context.Context, raw map[string]any) error {
//		return serve.DecodeConfig(raw, &a.cfg)
//	}
func DecodeConfig(raw map[string]any, cfg any) error {
	var md mapstructure.Metadata
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result:           cfg,
		Metadata:         &md,
		WeaklyTypedInput: true,
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.StringToSliceHookFunc(","),
		),
	})
	if err != nil {
		return fmt.Errorf("config: %v: %w", err, sdk.ErrInvalidArgument)
	}
	if err := dec.Decode(raw); err != nil {
		return fmt.Errorf("config: %s: %w", describeDecodeError(err), sdk.ErrInvalidArgument)
	}
	if len(md.Unused) > 0 {
		sort.Strings(md.Unused)
		return fmt.Errorf("config: unknown key(s) %s: %w", quoteAll(md.Unused), sdk.ErrInvalidArgument)
	}
	return nil
}

// describeDecodeError lists mapstructure's per-key errors as
// `key "k": message`, sorted.
func describeDecodeError(err error) string {
	var msgs []string
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, c := range j.Unwrap() {
				walk(c)
			}
			return
		}
		var de *mapstructure.DecodeError
		if errors.As(e, &de) {
			msgs = append(msgs, fmt.Sprintf("key %q: %v", de.Name(), de.Unwrap()))
			return
		}
		msgs = append(msgs, e.Error())
	}
	walk(err)
	sort.Strings(msgs)
	return strings.Join(msgs, "; ")
}

func quoteAll(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, ", ")
}

// encodeConfig turns a config map into the Configure payload.
func encodeConfig(raw map[string]any) ([]byte, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(normalizeConfig(raw))
	if err != nil {
		return nil, fmt.Errorf("serve: config is not JSON-encodable: %w", err)
	}
	return b, nil
}

// decodeConfigPayload is encodeConfig's inverse. Numbers arrive as
// json.Number, which DecodeConfig turns into any numeric field.
func decodeConfigPayload(b []byte) (map[string]any, error) {
	if len(b) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("config payload: %v: %w", err, sdk.ErrInvalidArgument)
	}
	return m, nil
}

// normalizeConfig converts map[any]any (from some YAML decoders) into
// map[string]any, recursively, so it can be JSON encoded.
func normalizeConfig(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalizeConfig(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = normalizeConfig(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeConfig(e)
		}
		return out
	}
	return v
}
